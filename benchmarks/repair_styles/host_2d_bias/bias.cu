// out[r][c] = relu(x[r][c] + bias[c]) on a 2-D grid of 16 x 8 blocks; the host entry owns device memory.
#include <cuda_runtime.h>

constexpr int kBlockX = 16;
constexpr int kBlockY = 8;

__global__ void bias_relu_2d(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out,
                             int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) {
    const float v = x[(size_t)r * cols + c] + bias[c];
    out[(size_t)r * cols + c] = v > 0.0f ? v : 0.0f;
  }
}

extern "C" void bias_relu(const float* x, const float* bias, float* out, int rows, int cols) {
  float *d_x = nullptr, *d_b = nullptr, *d_out = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(rows) * cols;
  cudaMalloc(reinterpret_cast<void**>(&d_x), bytes);
  cudaMalloc(reinterpret_cast<void**>(&d_b), cols * sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&d_out), bytes);
  cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(d_b, bias, cols * sizeof(float), cudaMemcpyHostToDevice);
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid((cols + kBlockX - 1) / kBlockX, (rows + kBlockY - 1) / kBlockY);
  bias_relu_2d<<<grid, block>>>(d_x, d_b, d_out, rows, cols);
  cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_b);
  cudaFree(d_out);
}
