// RMSNorm on half tensors with float accumulation: y = x / sqrt(mean(x^2) + eps) * w.
// One block per row; warp sums by __shfl_down_sync, per-warp partials in shared memory.
#include <cuda_fp16.h>

#define RMS_EPS 1e-6f

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
  return v;
}

__global__ void rmsnorm_half_kernel(const __half* __restrict__ x, const __half* __restrict__ w,
                                    __half* __restrict__ y, int cols) {
  __shared__ float partial[32];
  __shared__ float s_scale;
  const __half* xr = x + (size_t)blockIdx.x * cols;
  __half* yr = y + (size_t)blockIdx.x * cols;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = __half2float(xr[c]);
    ss += v * v;
  }
  ss = warp_sum(ss);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int i = 0; i < (int)(blockDim.x / 32); ++i) total += partial[i];
    s_scale = rsqrtf(total / cols + RMS_EPS);
  }
  __syncthreads();
  const float scale = s_scale;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = __float2half(__half2float(xr[c]) * scale * __half2float(w[c]));
  }
}
