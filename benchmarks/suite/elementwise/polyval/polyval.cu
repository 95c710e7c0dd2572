// y = c0 + c1 x + ... + c7 x^7 by Horner's rule, coefficients in __constant__ memory uploaded by the host
// entry with cudaMemcpyToSymbol.
#include <cuda_runtime.h>

#define DEGREE 7

__constant__ float c_coeffs[DEGREE + 1];

__global__ void polyval_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float acc = c_coeffs[DEGREE];
#pragma unroll
  for (int k = DEGREE - 1; k >= 0; --k) acc = fmaf(acc, v, c_coeffs[k]);
  y[i] = acc;
}

extern "C" int polyval_forward(const float* coeffs, const float* x, float* y, int n) {
  float *d_x = nullptr, *d_y = nullptr;
  if (cudaMemcpyToSymbol(c_coeffs, coeffs, sizeof(float) * (DEGREE + 1)) != cudaSuccess) return 1;
  cudaMalloc(&d_x, n * sizeof(float));
  cudaMalloc(&d_y, n * sizeof(float));
  cudaMemcpy(d_x, x, n * sizeof(float), cudaMemcpyHostToDevice);
  polyval_kernel<<<(n + 127) / 128, 128>>>(d_x, d_y, n);
  cudaError_t err = cudaDeviceSynchronize();
  cudaMemcpy(y, d_y, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_y);
  return err == cudaSuccess ? 0 : 1;
}
