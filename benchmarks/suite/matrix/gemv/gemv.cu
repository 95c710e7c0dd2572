// y = A x (A: rows x cols, row-major), one warp per row, partial dot products combined with __shfl_down_sync.
__global__ void gemv_warp_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y,
                                 int rows, int cols) {
  const int warps_per_block = blockDim.x / 32;
  const int row = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* a = A + (size_t)row * cols;
  float acc = 0.0f;
  for (int c = lane; c < cols; c += 32) acc += a[c] * __ldg(&x[c]);
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffff, acc, offset);
  if (lane == 0) y[row] = acc;
}
