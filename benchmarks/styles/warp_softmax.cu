// Softmax with one warp per row; warps past the last row leave at once.
#include <cuda_runtime.h>

__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* in = x + (size_t)warp * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[c]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.0f;
  for (int c = lane; c < cols; c += 32) s += expf(in[c] - m);
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int c = lane; c < cols; c += 32) y[(size_t)warp * cols + c] = expf(in[c] - m) / s;
}

extern "C" void softmax_host(const float* x, float* y, int rows, int cols) {
  float *dx, *dy;
  cudaMalloc(&dx, rows * cols * sizeof(float)); cudaMalloc(&dy, rows * cols * sizeof(float));
  cudaMemcpy(dx, x, rows * cols * sizeof(float), cudaMemcpyHostToDevice);
  softmax_rows<<<(rows * 32 + 127) / 128, 128>>>(dx, dy, rows, cols);
  cudaMemcpy(y, dy, rows * cols * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
