// Dot product with cooperative groups: 32-thread tiles reduce with cg::reduce, tile leaders add atomically.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
namespace cg = cooperative_groups;

__global__ void dot(const float* a, const float* b, float* out, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += a[i] * b[i];
  float s = cg::reduce(tile, v, cg::plus<float>());
  if (tile.thread_rank() == 0) atomicAdd(out, s);
}

extern "C" void dot_host(const float* a, const float* b, float* out, int n) {
  float *da, *db, *dout;
  cudaMalloc(&da, n * sizeof(float)); cudaMalloc(&db, n * sizeof(float)); cudaMalloc(&dout, sizeof(float));
  cudaMemcpy(da, a, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(dout, 0, sizeof(float));
  dot<<<4, 128>>>(da, db, dout, n);
  cudaMemcpy(out, dout, sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(da); cudaFree(db); cudaFree(dout);
}
