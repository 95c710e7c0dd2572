// 64-bin histogram of int32 values in [0, 64): per-block privatised bins in shared memory updated with
// shared-memory atomicAdd, then merged into the global bins with one atomicAdd per non-empty bin.
#define NUM_BINS 64

__global__ void histogram64_kernel(const int* __restrict__ values, unsigned int* __restrict__ bins, int n) {
  __shared__ unsigned int local_bins[NUM_BINS];
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) local_bins[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&local_bins[values[i]], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
    if (local_bins[b] != 0) atomicAdd(&bins[b], local_bins[b]);
  }
}
