// Per-block stream compaction of the positive elements (stable): out[block * 128 + rank] = x[i], and the
// block's count. Warp-aggregated: each warp votes, lanes rank themselves with popc(ballot & lanemask_lt),
// per-warp counts are scanned by thread 0.
// Warp-32 assumptions: #define WARP_SIZE 32, the ballot in a 32-bit unsigned, the lane mask built from
// 1u << lane. At warp size 64 the upper half of each wavefront ranks itself against the lower half's votes.
#define WARP_SIZE 32
#define BLOCK 128
#define FULL_MASK 0xffffffffu

__global__ void compact_positive_kernel(const float* __restrict__ x, float* __restrict__ out,
                                        int* __restrict__ counts, int n) {
  __shared__ int warp_counts[BLOCK / WARP_SIZE];
  __shared__ int warp_offsets[BLOCK / WARP_SIZE];
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  const int lane = threadIdx.x % WARP_SIZE;
  const int warp = threadIdx.x / WARP_SIZE;
  const float v = (i < n) ? x[i] : 0.0f;
  const bool keep = v > 0.0f;
  const unsigned int ballot = __ballot_sync(FULL_MASK, keep);
  const unsigned int lanemask_lt = (1u << lane) - 1u;
  const int rank = __popc(ballot & lanemask_lt);
  if (lane == 0) warp_counts[warp] = __popc(ballot);
  __syncthreads();
  if (threadIdx.x == 0) {
    int running = 0;
    for (int w = 0; w < BLOCK / WARP_SIZE; ++w) {
      warp_offsets[w] = running;
      running += warp_counts[w];
    }
    counts[blockIdx.x] = running;
  }
  __syncthreads();
  if (keep) out[blockIdx.x * BLOCK + warp_offsets[warp] + rank] = v;
}
