// Row argmax: one block per row; (value, index) pairs reduced in shared memory, first index wins ties.
template <int BLOCK>
__device__ void argmax_block(float* s_val, int* s_idx) {
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      float a = s_val[threadIdx.x], b = s_val[threadIdx.x + s];
      int ia = s_idx[threadIdx.x], ib = s_idx[threadIdx.x + s];
      if (b > a || (b == a && ib < ia)) {
        s_val[threadIdx.x] = b;
        s_idx[threadIdx.x] = ib;
      }
    }
    __syncthreads();
  }
}

__global__ void row_argmax_kernel(const float* __restrict__ x, int* __restrict__ idx, int cols) {
  __shared__ float s_val[256];
  __shared__ int s_idx[256];
  const float* xr = x + (size_t)blockIdx.x * cols;
  float best = -INFINITY;
  int best_i = 0x7fffffff;
  for (int c = threadIdx.x; c < cols; c += 256) {
    float v = xr[c];
    if (v > best) {
      best = v;
      best_i = c;
    }
  }
  s_val[threadIdx.x] = best;
  s_idx[threadIdx.x] = best_i;
  __syncthreads();
  argmax_block<256>(s_val, s_idx);
  if (threadIdx.x == 0) idx[blockIdx.x] = s_idx[0];
}
