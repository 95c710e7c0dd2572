// 2x2 average pooling, stride 2, no padding (floor mode) on NCHW; 2-D blocks over the output plane,
// blockIdx.z walks the N*C planes.
__global__ void avgpool2x2_kernel(const float* __restrict__ x, float* __restrict__ y, int H, int W) {
  const int OH = H / 2, OW = W / 2;
  const int ow = blockIdx.x * blockDim.x + threadIdx.x;
  const int oh = blockIdx.y * blockDim.y + threadIdx.y;
  if (oh >= OH || ow >= OW) return;
  const float* plane = x + (size_t)blockIdx.z * H * W;
  const float* p = plane + (2 * oh) * W + 2 * ow;
  const float s = p[0] + p[1] + p[W] + p[W + 1];
  y[(size_t)blockIdx.z * OH * OW + oh * OW + ow] = s * 0.25f;
}
