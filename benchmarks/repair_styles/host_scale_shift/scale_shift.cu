// y = x * kScale + SHIFT over a grid-stride loop; the extern "C" host entry owns device memory.
#include <cuda_runtime.h>

#define SHIFT 1.25f
static constexpr float kScale = 0.5f;
static constexpr int kThreads = 128;

__global__ void scale_shift_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = x[i] * kScale + SHIFT;
  }
}

extern "C" void scale_shift(const float* x, float* y, int n) {
  float* d_x = nullptr;
  float* d_y = nullptr;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaMalloc(reinterpret_cast<void**>(&d_x), bytes);
  cudaMalloc(reinterpret_cast<void**>(&d_y), bytes);
  cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice);
  const int blocks = static_cast<int>((n + kThreads - 1) / kThreads) / 2 + 1;  // fewer blocks than elements
  scale_shift_kernel<<<blocks, kThreads>>>(d_x, d_y, n);
  cudaDeviceSynchronize();
  cudaMemcpy(y, d_y, bytes, cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_y);
}
