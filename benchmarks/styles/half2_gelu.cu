// GELU (tanh form) on __half data, two elements per thread as __half2, the odd element by a scalar tail.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__device__ float gelu(float x) {
  const float k = 0.7978845608f;
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__global__ void gelu_half2(const __half* x, __half* y, int n) {
  int pair = blockIdx.x * blockDim.x + threadIdx.x;
  int pairs = n / 2;
  if (pair < pairs) {
    __half2 v = reinterpret_cast<const __half2*>(x)[pair];
    float2 f = __half22float2(v);
    reinterpret_cast<__half2*>(y)[pair] = __floats2half2_rn(gelu(f.x), gelu(f.y));
  }
  if (pair == 0 && (n & 1)) y[n - 1] = __float2half(gelu(__half2float(x[n - 1])));
}

extern "C" void gelu_host(const __half* x, __half* y, int n) {
  __half *dx, *dy;
  cudaMalloc(&dx, n * sizeof(__half)); cudaMalloc(&dy, n * sizeof(__half));
  cudaMemcpy(dx, x, n * sizeof(__half), cudaMemcpyHostToDevice);
  gelu_half2<<<(n / 2 + 127) / 128 + 1, 128>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(__half), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
