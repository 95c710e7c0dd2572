// Convolution on NHWC data with HWCK (HWIO) weights, no padding, stride s; k is the fastest output index
// so neighbouring threads read the same input pixel and neighbouring weights.
__global__ void conv2d_nhwc_kernel(const float* __restrict__ x, const float* __restrict__ wt, float* __restrict__ y,
                                   int N, int H, int W, int C, int K, int KH, int KW, int stride, int OH, int OW) {
  const long total = (long)N * OH * OW * K;
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int k = idx % K;
  const int ow = (idx / K) % OW;
  const int oh = (idx / ((long)K * OW)) % OH;
  const int n = idx / ((long)K * OW * OH);
  float acc = 0.0f;
  for (int r = 0; r < KH; ++r) {
    const int ih = oh * stride + r;
    for (int s = 0; s < KW; ++s) {
      const int iw = ow * stride + s;
      const float* px = x + (((size_t)n * H + ih) * W + iw) * C;
      const float* pw = wt + ((size_t)r * KW + s) * C * K + k;
      for (int c = 0; c < C; ++c) acc += __ldg(px + c) * __ldg(pw + (size_t)c * K);
    }
  }
  y[idx] = acc;
}
