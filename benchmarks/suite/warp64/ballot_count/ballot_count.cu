// Per-block count of positive elements with a warp vote.
// Warp-32 assumptions: the ballot is kept in a 32-bit unsigned, the mask is 0xffffffff and the warp leader
// is lane == (threadIdx.x & 31) == 0. At warp size 64 the 64-bit ballot is truncated to lanes 0..31 and
// both "leaders" of a 64-wide warp add that same half, so lanes 32..63 are never counted.
__global__ void count_positive_kernel(const float* __restrict__ x, int* __restrict__ block_counts, int n) {
  __shared__ int s_count;
  if (threadIdx.x == 0) s_count = 0;
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool pred = (i < n) && (x[i] > 0.0f);
  unsigned int votes = __ballot_sync(0xffffffff, pred);
  if ((threadIdx.x & 31) == 0) atomicAdd(&s_count, __popc(votes));
  __syncthreads();
  if (threadIdx.x == 0) block_counts[blockIdx.x] = s_count;
}
