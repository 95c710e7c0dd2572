// SiLU through a templated kernel; the extern "C" host entry owns device memory and the launch.
#include <cuda_runtime.h>

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) silu_kernel(const T* __restrict__ x, T* __restrict__ y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) {
    T v = x[i];
    y[i] = v / (T(1) + exp(-v));
  }
}

extern "C" void silu_forward(const float* x, float* y, int n) {
  constexpr int kBlock = 256;
  float* d_x = nullptr;
  float* d_y = nullptr;
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaMalloc(&d_x, bytes);
  cudaMalloc(&d_y, bytes);
  cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice);
  int grid = (n + kBlock - 1) / kBlock;
  silu_kernel<float, kBlock><<<grid, kBlock>>>(d_x, d_y, n);
  cudaDeviceSynchronize();
  cudaMemcpy(y, d_y, bytes, cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_y);
}
