// A templated kernel: the block size is a template parameter, checked at compile time, and each thread
// scales float4 vectors; the launch instantiates it.
#include <cuda_runtime.h>

template <int BLOCK>
__global__ void scale4(const float4* x, float4* y, float a, int n4) {
  static_assert(BLOCK % 32 == 0, "the block is a whole number of warps");
  constexpr int kStride = BLOCK;
  int i = blockIdx.x * kStride + threadIdx.x;
  if (i < n4) {
    float4 v = x[i];
    y[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
  }
}

extern "C" void scale4_host(const float* x, float* y, int n4) {
  float4 *dx, *dy;
  cudaMalloc(&dx, n4 * sizeof(float4)); cudaMalloc(&dy, n4 * sizeof(float4));
  cudaMemcpy(dx, x, n4 * sizeof(float4), cudaMemcpyHostToDevice);
  scale4<256><<<(n4 + 255) / 256, 256>>>(dx, dy, 1.5f, n4);
  cudaMemcpy(y, dy, n4 * sizeof(float4), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
