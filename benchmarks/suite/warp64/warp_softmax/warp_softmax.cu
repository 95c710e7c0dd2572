// Row softmax, one 32-thread warp per row: tree reductions with __shfl_down_sync from offset 16, then the
// row statistic is broadcast from lane 0 with __shfl_sync(0xffffffff, v, 0).
// Warp-32 assumption: srcLane 0 is absolute within the hardware warp. At warp size 64 the rows handled by
// threads 32..63 of each wavefront receive the max and sum of the row handled by threads 0..31.
#define ROWS_PER_BLOCK 4

__device__ __forceinline__ float warp_max_bcast(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, offset));
  return __shfl_sync(0xffffffff, v, 0);
}

__device__ __forceinline__ float warp_sum_bcast(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
  return __shfl_sync(0xffffffff, v, 0);
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const bool valid = row < rows;  // every lane reaches the shuffles
  const float* xr = x + (size_t)row * cols;
  float m = -INFINITY;
  if (valid)
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  m = warp_max_bcast(m);
  float s = 0.0f;
  if (valid)
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
  s = warp_sum_bcast(s);
  if (valid)
    for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = expf(xr[c] - m) / s;
}
