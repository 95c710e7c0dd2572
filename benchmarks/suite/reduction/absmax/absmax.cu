// max |x| over the whole tensor (the scale of a symmetric int8 quantiser): block max in shared memory, then
// a float atomic max built from atomicCAS on the float's bit pattern.
__device__ float atomic_max_float(float* address, float value) {
  int* address_as_int = reinterpret_cast<int*>(address);
  int old = *address_as_int;
  while (__int_as_float(old) < value) {
    const int assumed = old;
    old = atomicCAS(address_as_int, assumed, __float_as_int(value));
    if (old == assumed) break;
  }
  return __int_as_float(old);
}

__global__ void absmax_kernel(const float* __restrict__ x, float* __restrict__ result, int n) {
  __shared__ float block_max[128];
  float m = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) m = fmaxf(m, fabsf(x[i]));
  block_max[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) block_max[threadIdx.x] = fmaxf(block_max[threadIdx.x], block_max[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) atomic_max_float(result, block_max[0]);
}
