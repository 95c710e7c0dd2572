// Row mean of a (rows, cols) matrix: one block per row, shared-memory tree reduction.
#define BLOCK 128

__global__ void row_mean_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float partial[BLOCK];
  const int row = blockIdx.x;
  const float* xr = x + (size_t)row * cols;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    acc += xr[c];
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      partial[threadIdx.x] += partial[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    y[row] = partial[0] / (float)cols;
  }
}
