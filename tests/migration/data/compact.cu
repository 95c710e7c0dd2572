#include <cuda_runtime.h>
// stream compaction: each warp's leader reserves room with one atomicAdd (warp-aggregated); the output order
// depends on which warp wins the counter
__global__ void compact_positive(const float* x, float* out, int* count, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool keep = i < n && x[i] > 0.0f;
  unsigned mask = __ballot_sync(0xffffffffu, keep);
  int lane = threadIdx.x & 31;
  int base = 0;
  if (lane == 0 && mask) base = atomicAdd(count, __popc(mask));
  base = __shfl_sync(0xffffffffu, base, 0);
  if (keep) out[base + __popc(mask & ((1u << lane) - 1))] = x[i];
}

extern "C" void compact_host(const float* x, float* out, int* count, int n) {
  float *dx, *dout; int* dcount;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dout, n * sizeof(float));
  cudaMalloc(&dcount, sizeof(int));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(dout, 0, n * sizeof(float));
  cudaMemset(dcount, 0, sizeof(int));
  compact_positive<<<(n + 127) / 128, 128>>>(dx, dout, dcount, n);
  cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(count, dcount, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dout); cudaFree(dcount);
}
