// Stream compaction of the positive elements with warp votes: each warp owns a chunk of 32 elements, writes
// its kept elements in order at the chunk's start, and adds its count to the total; lanes skip the store of
// dropped elements with `continue` after the collectives.
#include <cuda_runtime.h>

__global__ void compact(const float* x, float* out, int* counts, int* total, int n) {
  const unsigned full = 0xffffffffu;
  int lane = threadIdx.x & 31;
  int warps = (gridDim.x * blockDim.x) >> 5;
  for (int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; warp * 32 < n; warp += warps) {
    int i = warp * 32 + lane;
    bool keep = i < n && x[i] > 0.0f;
    unsigned vote = __ballot_sync(full, keep);
    int count = 0;
    if (lane == 0) {
      count = __popc(vote);
      counts[warp] = count;
      atomicAdd(total, count);
    }
    count = __shfl_sync(full, count, 0);
    if (!keep) continue;
    int rank = __popc(vote & ((1u << lane) - 1u));
    out[warp * 32 + rank] = x[i] * (float)count;
  }
}

extern "C" void compact_host(const float* x, float* out, int* counts, int* total, int n) {
  float *dx, *dout; int *dcounts, *dtotal;
  int warps = (n + 31) / 32;
  cudaMalloc(&dx, n * sizeof(float)); cudaMalloc(&dout, n * sizeof(float));
  cudaMalloc(&dcounts, warps * sizeof(int)); cudaMalloc(&dtotal, sizeof(int));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(dout, 0, n * sizeof(float)); cudaMemset(dtotal, 0, sizeof(int));
  compact<<<(n + 127) / 128, 128>>>(dx, dout, dcounts, dtotal, n);
  cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(counts, dcounts, warps * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(total, dtotal, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dout); cudaFree(dcounts); cudaFree(dtotal);
}
