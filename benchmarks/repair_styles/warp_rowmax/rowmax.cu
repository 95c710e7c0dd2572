// A warp per row: lanes stride the row, then a butterfly of shuffles; lane 0 writes the maximum.
#define WARP 32

__global__ void warp_row_max(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
  const int lane = threadIdx.x % WARP;
  if (warp >= rows) return;
  float best = -3.0e38f;
  for (int c = lane; c < cols; c += WARP) {
    best = fmaxf(best, x[warp * cols + c]);
  }
  for (int offset = WARP / 2; offset > 0; offset /= 2) {
    best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, offset));
  }
  if (lane == 0) {
    out[warp] = best;
  }
}
