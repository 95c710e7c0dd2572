// Index scatter-add (embedding backward): out[idx[i], :] += src[i, :]. Repeated indices collide,
// so the accumulation is an atomicAdd; out is in/out.
__global__ void scatter_add_kernel(const float* __restrict__ src, const int* __restrict__ idx, float* out,
                                   int num_idx, int dim) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= num_idx * dim) return;
  const int i = t / dim;
  const int d = t % dim;
  atomicAdd(&out[(size_t)idx[i] * dim + d], src[t]);
}
