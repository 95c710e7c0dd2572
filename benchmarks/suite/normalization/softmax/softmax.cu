// Row softmax, one warp per row: butterfly (__shfl_xor_sync) max and sum, numerically stable.
#define WARPS_PER_BLOCK 4

__device__ __forceinline__ float warp_allreduce_max(float v) {
  for (int mask = 16; mask > 0; mask >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, mask));
  return v;
}

__device__ __forceinline__ float warp_allreduce_sum(float v) {
  for (int mask = 16; mask > 0; mask >>= 1) v += __shfl_xor_sync(0xffffffff, v, mask);
  return v;
}

__global__ void softmax_warp_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warp leaves together
  const float* xr = x + (size_t)row * cols;
  float* yr = y + (size_t)row * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  m = warp_allreduce_max(m);
  float s = 0.0f;
  for (int c = lane; c < cols; c += 32) s += __expf(xr[c] - m);
  s = warp_allreduce_sum(s);
  const float inv = 1.0f / s;
  for (int c = lane; c < cols; c += 32) yr[c] = __expf(xr[c] - m) * inv;
}
