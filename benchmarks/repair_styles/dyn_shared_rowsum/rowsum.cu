// One block per row: strided per-thread sums, then a tree in dynamic shared memory.
__global__ void row_sum(const float* __restrict__ x, float* __restrict__ out, int cols) {
  extern __shared__ float partial[];
  const int row = blockIdx.x;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    acc += x[row * cols + c];
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[row] = partial[0];
  }
}
