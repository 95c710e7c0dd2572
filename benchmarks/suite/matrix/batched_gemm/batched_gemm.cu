// Batched C[b] = A[b] * B[b]; blockIdx.z selects the batch, one output element per thread.
template <typename T>
__device__ __forceinline__ T dot_row_col(const T* a, const T* b, int K, int N, int col) {
  T acc = T(0);
  for (int k = 0; k < K; ++k) acc += a[k] * b[(size_t)k * N + col];
  return acc;
}

__global__ void batched_gemm_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                    int M, int N, int K) {
  const int batch = blockIdx.z;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  const float* a = A + (size_t)batch * M * K + (size_t)row * K;
  const float* b = B + (size_t)batch * K * N;
  C[(size_t)batch * M * N + (size_t)row * N + col] = dot_row_col<float>(a, b, K, N, col);
}
