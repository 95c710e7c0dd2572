// Rotary position embedding, rotate-half (GPT-NeoX) layout, on x of shape (S, H, D) with precomputed
// cos/sin tables of shape (S, D/2). blockIdx.y is the position; threads cover (head, pair).
__global__ void rope_kernel(const float* __restrict__ x, const float* __restrict__ cos_t,
                            const float* __restrict__ sin_t, float* __restrict__ y, int H, int D) {
  const int half = D / 2;
  const int s = blockIdx.y;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= H * half) return;
  const int h = t / half;
  const int i = t % half;
  const size_t base = ((size_t)s * H + h) * D;
  const float c = cos_t[s * half + i];
  const float sn = sin_t[s * half + i];
  const float x1 = x[base + i];
  const float x2 = x[base + i + half];
  y[base + i] = x1 * c - x2 * sn;
  y[base + i + half] = x2 * c + x1 * sn;
}
