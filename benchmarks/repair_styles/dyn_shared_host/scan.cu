// Inclusive prefix sums of independent segments of blockDim.x elements (Hillis-Steele in dynamic shared
// memory, double-buffered); the host sizes the shared memory at launch.
#include <cuda_runtime.h>

__global__ void segment_scan(const float* __restrict__ in, float* __restrict__ out, int n) {
  extern __shared__ float buf[];
  const int t = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + t;
  int src = 0;
  buf[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int d = 1; d < blockDim.x; d *= 2) {
    const int dst = 1 - src;
    buf[dst * blockDim.x + t] = buf[src * blockDim.x + t] + (t >= d ? buf[src * blockDim.x + t - d] : 0.0f);
    __syncthreads();
    src = dst;
  }
  if (i < n) out[i] = buf[src * blockDim.x + t];
}

extern "C" void scan_segments(const float* in, float* out, int n, int seg) {
  float* d_in = nullptr;
  float* d_out = nullptr;
  cudaMalloc((void**)&d_in, n * sizeof(float));
  cudaMalloc((void**)&d_out, n * sizeof(float));
  cudaMemcpy(d_in, in, n * sizeof(float), cudaMemcpyHostToDevice);
  segment_scan<<<(n + seg - 1) / seg, seg, 2 * seg * sizeof(float)>>>(d_in, d_out, n);
  cudaMemcpy(out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d_in);
  cudaFree(d_out);
}
