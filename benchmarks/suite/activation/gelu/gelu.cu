// GELU, tanh approximation, through a __device__ helper; grid-stride loop.
#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.7978845608028654f

__device__ __forceinline__ float gelu_tanh(float x) {
  float inner = SQRT_2_OVER_PI * (x + GELU_COEF_A * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

__global__ void __launch_bounds__(128) gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = gelu_tanh(x[i]);
  }
}
