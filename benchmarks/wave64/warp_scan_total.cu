// Inclusive scan within each warp with __shfl_up_sync, then every lane subtracts its warp's mean, read by a
// broadcast from the warp's last lane.
#include <cuda_runtime.h>
__global__ void scan_centered(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  float v = i < n ? x[i] : 0.0f;
  for (int d = 1; d < 32; d <<= 1) {
    float up = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += up;
  }
  float total = __shfl_sync(0xffffffffu, v, 31);
  if (i < n) y[i] = v - total / 32.0f;
}
