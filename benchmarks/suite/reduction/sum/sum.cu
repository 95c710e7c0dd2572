// Full sum: warp-shuffle reduction per warp, block partials in shared memory, one atomicAdd per block.
// The host entry zeroes the accumulator, launches, and copies the scalar back.
#include <cuda_runtime.h>

#define FULL_MASK 0xffffffffu

__inline__ __device__ float warp_reduce_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(FULL_MASK, v, offset);
  }
  return v;
}

__global__ void sum_kernel(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float warp_sums[32];
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    v += x[i];
  }
  const int lane = threadIdx.x % warpSize;
  const int warp = threadIdx.x / warpSize;
  v = warp_reduce_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int num_warps = (blockDim.x + warpSize - 1) / warpSize;
    v = (lane < num_warps) ? warp_sums[lane] : 0.0f;
    v = warp_reduce_sum(v);
    if (lane == 0) atomicAdd(out, v);
  }
}

extern "C" void sum_forward(const float* x, float* out, int n) {
  const int block = 256;
  int grid = (n + block - 1) / block;
  if (grid > 64) grid = 64;
  float* d_x;
  float* d_out;
  cudaMalloc((void**)&d_x, n * sizeof(float));
  cudaMalloc((void**)&d_out, sizeof(float));
  cudaMemcpy(d_x, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0, sizeof(float));
  sum_kernel<<<grid, block>>>(d_x, d_out, n);
  cudaMemcpy(out, d_out, sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_out);
}
