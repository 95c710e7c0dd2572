// One warp per row of 32: rows with no element below -0.9 are copied, rows with one are flagged
// and skipped with `continue` (a warp-uniform decision taken by __any_sync / __all_sync).
#include <cuda_runtime.h>
__global__ void filter_rows(const float* x, float* y, int* flags, int rows) {
  int lane = threadIdx.x & 31;
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int warps = (gridDim.x * blockDim.x) >> 5;
  for (int row = warp; row < rows; row += warps) {
    float v = x[row * 32 + lane];
    int negative = __any_sync(0xffffffffu, v < -0.9f);
    int positive = __all_sync(0xffffffffu, v > -0.95f);
    if (lane == 0) flags[row] = negative * 2 + positive;
    if (negative) continue;
    y[row * 32 + lane] = v;
  }
}
extern "C" void run_filter_rows(const float* x, float* y, int* flags, int rows) {
  float *dx, *dy;
  int* dflags;
  cudaMalloc(&dx, rows * 32 * sizeof(float));
  cudaMalloc(&dy, rows * 32 * sizeof(float));
  cudaMalloc(&dflags, rows * sizeof(int));
  cudaMemcpy(dx, x, rows * 32 * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y, rows * 32 * sizeof(float), cudaMemcpyHostToDevice);
  filter_rows<<<4, 128>>>(dx, dy, dflags, rows);
  cudaMemcpy(y, dy, rows * 32 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(flags, dflags, rows * sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy); cudaFree(dflags);
}
