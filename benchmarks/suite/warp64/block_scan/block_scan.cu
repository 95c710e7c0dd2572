// Per-block inclusive prefix sum: Kogge-Stone warp scan with __shfl_up_sync, the warp aggregate read from
// the last lane with __shfl_sync(FULL_MASK, v, WARP_SIZE - 1), warp aggregates scanned in shared memory.
// Warp-32 assumption: #define WARP_SIZE 32 and srcLane 31 is "the last lane of my warp". At warp size 64 the
// upper half of a wavefront reads lane 31 (the lower half's aggregate), so later warps get wrong offsets.
#define WARP_SIZE 32
#define BLOCK 256
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_inclusive_scan(float v, int lane) {
#pragma unroll
  for (int offset = 1; offset < WARP_SIZE; offset <<= 1) {
    float up = __shfl_up_sync(FULL_MASK, v, offset);
    if (lane >= offset) v += up;
  }
  return v;
}

__global__ void block_inclusive_scan_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ float warp_aggregates[BLOCK / WARP_SIZE];
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  const int lane = threadIdx.x & (WARP_SIZE - 1);
  const int warp = threadIdx.x / WARP_SIZE;
  float v = (i < n) ? x[i] : 0.0f;
  v = warp_inclusive_scan(v, lane);
  const float aggregate = __shfl_sync(FULL_MASK, v, WARP_SIZE - 1);
  if (lane == 0) warp_aggregates[warp] = aggregate;
  __syncthreads();
  float offset = 0.0f;
  for (int w = 0; w < warp; ++w) offset += warp_aggregates[w];
  if (i < n) y[i] = v + offset;
}
