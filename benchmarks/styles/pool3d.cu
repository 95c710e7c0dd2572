// 2x2 max pooling of an NCHW tensor on a 3-D grid: x and y cover the output plane, z runs over n*C + c.
#include <cuda_runtime.h>

__global__ void maxpool2x2(const float* x, float* y, int C, int H, int W) {
  int ow = blockIdx.x * blockDim.x + threadIdx.x;
  int oh = blockIdx.y * blockDim.y + threadIdx.y;
  int plane = blockIdx.z;  // n * C + c
  int OH = H / 2, OW = W / 2;
  if (ow >= OW || oh >= OH) return;
  const float* in = x + (size_t)plane * H * W;
  float m = in[(2 * oh) * W + 2 * ow];
  m = fmaxf(m, in[(2 * oh) * W + 2 * ow + 1]);
  m = fmaxf(m, in[(2 * oh + 1) * W + 2 * ow]);
  m = fmaxf(m, in[(2 * oh + 1) * W + 2 * ow + 1]);
  y[(size_t)plane * OH * OW + oh * OW + ow] = m;
}

extern "C" void maxpool_host(const float* x, float* y, int N, int C, int H, int W) {
  float *dx, *dy;
  size_t in_n = (size_t)N * C * H * W, out_n = (size_t)N * C * (H / 2) * (W / 2);
  cudaMalloc(&dx, in_n * sizeof(float)); cudaMalloc(&dy, out_n * sizeof(float));
  cudaMemcpy(dx, x, in_n * sizeof(float), cudaMemcpyHostToDevice);
  dim3 block(16, 16);
  dim3 grid((W / 2 + 15) / 16, (H / 2 + 15) / 16, N * C);
  maxpool2x2<<<grid, block>>>(dx, dy, C, H, W);
  cudaMemcpy(y, dy, out_n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
