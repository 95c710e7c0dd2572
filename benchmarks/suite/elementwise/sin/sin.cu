// sin(x) with float4 vector loads/stores; thread 0 also handles the n % 4 tail.
__global__ void sin_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int n4 = n / 4;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    float4 r;
    r.x = sinf(v.x);
    r.y = sinf(v.y);
    r.z = sinf(v.z);
    r.w = sinf(v.w);
    reinterpret_cast<float4*>(y)[i] = r;
  }
  if (i == 0) {
    for (int j = n4 * 4; j < n; ++j) {
      y[j] = sinf(x[j]);
    }
  }
}
