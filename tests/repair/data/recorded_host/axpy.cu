#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#define AXPY_CHECK(call)                                                   \
  do {                                                                     \
    cudaError_t err_ = (call);                                             \
    if (err_ != cudaSuccess) {                                             \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

__constant__ float c_weights[3];

__global__ void weighted_axpy(const float* x, float* y, const int* flags, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float w = flags[i] != 0 ? c_weights[i % 3] : 0.0f;
    y[i] = w * x[i] + y[i];
  }
}

template <int Threads>
static void run_scale(const float* dx, float* dy, const int* dflags, int n) {
  weighted_axpy<<<(n + Threads - 1) / Threads, Threads>>>(dx, dy, dflags, n);
}

extern "C" void axpy_entry(const float* x, float* y, int n) {
  const float weights[3] = {0.5f, 2.0f, -1.0f};
  float *dx = nullptr, *dy = nullptr;
  int* dflags = nullptr;
  AXPY_CHECK(cudaMalloc(&dx, n * sizeof *dx));
  AXPY_CHECK(cudaMalloc(&dy, n * sizeof(*dy)));
  AXPY_CHECK(cudaMalloc(&dflags, n * sizeof(int)));
  AXPY_CHECK(cudaMemset(dflags, 0xFF, n * sizeof(int)));
  AXPY_CHECK(cudaMemcpyToSymbol(c_weights, weights, sizeof weights));
  AXPY_CHECK(cudaMemcpy(dx, x, n * sizeof *dx, cudaMemcpyHostToDevice));
  AXPY_CHECK(cudaMemcpy(dy, y, n * sizeof *dy, cudaMemcpyHostToDevice));
  run_scale<128>(dx, dy, dflags, n);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    fprintf(stderr, "launch failed: %s\n", cudaGetErrorString(err));
    return;
  }
  AXPY_CHECK(cudaMemcpy(y, dy, n * sizeof *dy, cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dflags);
}
