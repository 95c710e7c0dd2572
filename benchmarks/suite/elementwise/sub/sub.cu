// Half-precision elementwise difference, one element per thread.
#include <cuda_fp16.h>

__global__ void sub_half_kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                                __half* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = __hsub(a[i], b[i]);
  }
}
