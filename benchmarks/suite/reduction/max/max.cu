// Global max of an int32 array: warp max by __shfl_xor_sync, one atomicMax per warp into *out.
// *out is in/out: it holds the running maximum before the launch.
__global__ void max_atomic_kernel(const int* __restrict__ x, int* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = (i < n) ? x[i] : INT_MIN;
  for (int mask = 16; mask > 0; mask >>= 1) {
    int other = __shfl_xor_sync(0xffffffff, v, mask);
    v = other > v ? other : v;
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMax(out, v);
  }
}
