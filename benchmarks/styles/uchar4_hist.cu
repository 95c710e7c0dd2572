// A 64-bin histogram of RGBA pixels (uchar4): per-block bins in shared memory, then added to the global ones.
#include <cuda_runtime.h>

__global__ void hist64(const uchar4* pixels, unsigned int* bins, int n) {
  __shared__ unsigned int local[64];
  for (int b = threadIdx.x; b < 64; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uchar4 p = pixels[i];
    atomicAdd(&local[p.x >> 2], 1u);
    atomicAdd(&local[p.y >> 2], 1u);
    atomicAdd(&local[p.z >> 2], 1u);
    atomicAdd(&local[p.w >> 2], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 64; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

extern "C" void hist_host(const unsigned char* rgba, unsigned int* bins, int n) {
  uchar4* dp; unsigned int* db;
  cudaMalloc(&dp, n * sizeof(uchar4)); cudaMalloc(&db, 64 * sizeof(unsigned int));
  cudaMemcpy(dp, rgba, n * sizeof(uchar4), cudaMemcpyHostToDevice);
  cudaMemset(db, 0, 64 * sizeof(unsigned int));
  hist64<<<8, 128>>>(dp, db, n);
  cudaMemcpy(bins, db, 64 * sizeof(unsigned int), cudaMemcpyDeviceToHost);
  cudaFree(dp); cudaFree(db);
}
