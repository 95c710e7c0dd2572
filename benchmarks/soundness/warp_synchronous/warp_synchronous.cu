// Block sums whose last 64 partial sums one warp adds through a volatile pointer with no __syncwarp: each
// statement is taken by the warp's lanes in step (the legacy warp-synchronous idiom), so every step reads its
// partner's sum of the step before.
__global__ void warp_synchronous(const float* in, float* out, int n) {
  __shared__ float s[128];
  unsigned tid = threadIdx.x, i = blockIdx.x * 128 + tid;
  s[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  if (tid < 64) s[tid] += s[tid + 64];
  __syncthreads();
  if (tid < 32) {
    volatile float* v = s;
    v[tid] += v[tid + 32];
    v[tid] += v[tid + 16];
    v[tid] += v[tid + 8];
    v[tid] += v[tid + 4];
    v[tid] += v[tid + 2];
    v[tid] += v[tid + 1];
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
