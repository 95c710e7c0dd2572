// ReLU as emitted by TVM for a symbolic length n.
extern "C" __global__ void __launch_bounds__(1024) default_function_kernel(float* __restrict__ compute, const float* __restrict__ data, int n) {
  if (((int)blockIdx.x) < (n >> 10)) {
    compute[((((int)blockIdx.x) * 1024) + ((int)threadIdx.x))] = max(data[((((int)blockIdx.x) * 1024) + ((int)threadIdx.x))], 0.000000e+00f);
  } else {
    if (((((int)blockIdx.x) * 1024) + ((int)threadIdx.x)) < n) {
      compute[((((int)blockIdx.x) * 1024) + ((int)threadIdx.x))] = max(data[((((int)blockIdx.x) * 1024) + ((int)threadIdx.x))], 0.000000e+00f);
    }
  }
}
