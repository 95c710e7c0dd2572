// Broadcast add T_add[i, j] = A[i, j] + B[j] with the row length (64) baked in, TVM codegen style.
extern "C" __global__ void __launch_bounds__(256) default_function_kernel(float* __restrict__ T_add, const float* __restrict__ A, const float* __restrict__ B, int m) {
  if (((int)blockIdx.x) * 256 + ((int)threadIdx.x) < m * 64) {
    T_add[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] = (A[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] + B[(((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) & 63)]);
  }
}
