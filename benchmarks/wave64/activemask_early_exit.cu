// Lanes past the end leave first; the ones that stay count themselves with __activemask and record their
// rank among the active lanes of their warp.
#include <cuda_runtime.h>
__global__ void active_rank(const int* in, int* rank, int* active, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned mask = __activemask();
  int lane = threadIdx.x % warpSize;
  active[i] = __popc(mask);
  rank[i] = __popc(mask & ((1u << lane) - 1u)) + in[i];
}
