// Grouped-query attention, decode step: HQ query heads share HKV key/value heads (group = HQ / HKV).
// q: (B, HQ, D); k, v: (B, HKV, S, D); out: (B, HQ, D). One block of 4 warps per (batch, query head):
// each warp scores keys j = warp, warp + 4, ... with lanes over D and a __shfl_xor_sync sum, the score
// row sits in dynamic shared memory, softmax statistics are block reductions over warp partials.
#define WARPS 4
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(FULL_MASK, v, m);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, m));
  return v;
}

__global__ void gqa_decode_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                  const float* __restrict__ v, float* __restrict__ out, int HQ, int HKV, int S,
                                  int D) {
  extern __shared__ float scores[];
  __shared__ float red[WARPS];
  const int b = blockIdx.y;
  const int hq = blockIdx.x;
  const int hkv = hq / (HQ / HKV);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const float* qv = q + ((size_t)b * HQ + hq) * D;
  const float* kb = k + ((size_t)b * HKV + hkv) * S * D;
  const float* vb = v + ((size_t)b * HKV + hkv) * S * D;
  const float scale = rsqrtf((float)D);

  for (int j = warp; j < S; j += WARPS) {
    float part = 0.0f;
    for (int d = lane; d < D; d += 32) part += qv[d] * kb[(size_t)j * D + d];
    part = warp_sum(part);
    if (lane == 0) scores[j] = part * scale;
  }
  __syncthreads();

  float m = -INFINITY;
  for (int j = threadIdx.x; j < S; j += blockDim.x) m = fmaxf(m, scores[j]);
  m = warp_max(m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < WARPS; ++w) m = fmaxf(m, red[w]);
  __syncthreads();

  float s = 0.0f;
  for (int j = threadIdx.x; j < S; j += blockDim.x) {
    float e = __expf(scores[j] - m);
    scores[j] = e;
    s += e;
  }
  s = warp_sum(s);
  if (lane == 0) red[warp] = s;
  __syncthreads();
  s = 0.0f;
  for (int w = 0; w < WARPS; ++w) s += red[w];
  const float inv = 1.0f / s;

  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < S; ++j) acc += scores[j] * vb[(size_t)j * D + d];
    out[((size_t)b * HQ + hq) * D + d] = acc * inv;
  }
}
