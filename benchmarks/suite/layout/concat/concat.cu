// Concatenation along the last axis: out = [a | b] for a (m x ca) and b (m x cb).
// The host entry copies both inputs to the device and launches one strided copy per input.
#include <cuda_runtime.h>
#include <cstdio>

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));   \
      return;                                                                         \
    }                                                                                 \
  } while (0)

// Copies a (rows x width) block into columns [col_offset, col_offset + width) of a (rows x out_width) matrix.
__global__ void copy_columns_kernel(const float* __restrict__ src, float* __restrict__ dst, int rows, int width,
                                    int out_width, int col_offset) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < rows * width) {
    int r = t / width, c = t % width;
    dst[(size_t)r * out_width + col_offset + c] = src[t];
  }
}

extern "C" void concat_last_axis(const float* a, const float* b, float* out, int m, int ca, int cb) {
  const int cout = ca + cb;
  float *d_a = nullptr, *d_b = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_a, sizeof(float) * m * ca));
  CUDA_CHECK(cudaMalloc(&d_b, sizeof(float) * m * cb));
  CUDA_CHECK(cudaMalloc(&d_out, sizeof(float) * m * cout));
  CUDA_CHECK(cudaMemcpy(d_a, a, sizeof(float) * m * ca, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, b, sizeof(float) * m * cb, cudaMemcpyHostToDevice));
  const int threads = 128;
  copy_columns_kernel<<<(m * ca + threads - 1) / threads, threads>>>(d_a, d_out, m, ca, cout, 0);
  copy_columns_kernel<<<(m * cb + threads - 1) / threads, threads>>>(d_b, d_out, m, cb, cout, ca);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(out, d_out, sizeof(float) * m * cout, cudaMemcpyDeviceToHost));
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_out);
}
