// Scaled dot-product attention O = softmax(Q K^T / sqrt(D)) V for (batch*heads, S, D) tensors.
// One block per (query row, batch-head); the score row lives in dynamic shared memory,
// followed by blockDim.x floats of reduction scratch.
__device__ float block_reduce(float v, float* red, bool is_max) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      float o = red[threadIdx.x + s];
      red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], o) : red[threadIdx.x] + o;
    }
    __syncthreads();
  }
  float r = red[0];
  __syncthreads();
  return r;
}

__global__ void attention_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                                 const float* __restrict__ V, float* __restrict__ O, int S, int D) {
  extern __shared__ float smem[];
  float* scores = smem;
  float* red = smem + S;
  const int q = blockIdx.x;
  const int bh = blockIdx.y;
  const float* qv = Q + ((size_t)bh * S + q) * D;
  const float* kb = K + (size_t)bh * S * D;
  const float* vb = V + (size_t)bh * S * D;
  const float scale = rsqrtf((float)D);

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < S; j += blockDim.x) {
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += qv[d] * kb[(size_t)j * D + d];
    scores[j] = dot * scale;
    local_max = fmaxf(local_max, scores[j]);
  }
  const float row_max = block_reduce(local_max, red, true);

  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < S; j += blockDim.x) {
    float e = __expf(scores[j] - row_max);
    scores[j] = e;
    local_sum += e;
  }
  const float inv_sum = 1.0f / block_reduce(local_sum, red, false);  // also orders the scores writes

  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < S; ++j) acc += scores[j] * vb[(size_t)j * D + d];
    O[((size_t)bh * S + q) * D + d] = acc * inv_sum;
  }
}
