// Per-block sums: warp tree reduction with __shfl_down_sync starting at a hard-coded offset of 16, lane and
// warp index taken from the warpSize builtin, per-warp partials in shared memory sized blockDim/32.
// Warp-32 assumption: the offsets 16..1 cover the whole warp. At warp size 64 lane 0 of each wavefront
// only gathers lanes 0..31, so lanes 32..63 drop out of the sum.
#define BLOCK 256

__global__ void block_sum_kernel(const float* __restrict__ x, float* __restrict__ block_sums, int n) {
  __shared__ float partials[BLOCK / 32];
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  float v = (i < n) ? x[i] : 0.0f;
  const int lane = threadIdx.x % warpSize;
  const int warp = threadIdx.x / warpSize;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < BLOCK / warpSize; ++w) total += partials[w];
    block_sums[blockIdx.x] = total;
  }
}
