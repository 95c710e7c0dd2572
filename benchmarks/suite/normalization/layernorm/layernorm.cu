// LayerNorm over the last dimension: one block per row, dynamic shared memory for the block reductions.
#define LN_EPS 1e-5f

__device__ float block_sum(float v, float* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  float total = smem[0];
  __syncthreads();  // smem is reused by the next call
  return total;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int cols) {
  extern __shared__ float smem[];
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += xr[c];
  const float mean = block_sum(acc, smem) / cols;
  float sq = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = xr[c] - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(block_sum(sq, smem) / cols + LN_EPS);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  }
}
