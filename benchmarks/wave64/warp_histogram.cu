// Per-warp private histograms in shared memory, sized and indexed by the warp index (tid / 32); each bin is
// counted with one ballot per warp, then the block adds its warps' histograms into the global one.
#include <cuda_runtime.h>
#define BLOCK 256
#define BINS 16
__global__ void __launch_bounds__(BLOCK) histogram16(const int* keys, int* hist, int n) {
  __shared__ int local[BLOCK / 32][BINS];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int b = lane; b < BINS; b += 32) local[warp][b] = 0;
  __syncwarp();
  int i = blockIdx.x * BLOCK + threadIdx.x;
  int key = i < n ? (keys[i] & (BINS - 1)) : -1;
  for (int b = 0; b < BINS; ++b) {
    unsigned m = __ballot_sync(0xffffffffu, key == b);
    if (lane == 0) local[warp][b] += __popc(m);
  }
  __syncthreads();
  if (threadIdx.x < BINS) {
    int sum = 0;
    for (int w = 0; w < BLOCK / 32; ++w) sum += local[w][threadIdx.x];
    atomicAdd(&hist[threadIdx.x], sum);
  }
}
