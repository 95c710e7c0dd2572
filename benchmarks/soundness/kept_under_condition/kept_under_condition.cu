// A product kept only in the first `keep` columns: the thread sets its result under a condition, and the
// recognizer once took the value as set unconditionally (every column got the product).
__global__ void kept_under_condition(const float* A, const float* B, float* C, int M, int N, int K, int keep) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  float out = 0.0f;
  if (col < keep) out = acc;
  C[row * N + col] = out;
}

extern "C" void run_kept_under_condition(const float* A, const float* B, float* C, int M, int N, int K, int keep) {
  kept_under_condition<<<dim3((N + 7) / 8, (M + 7) / 8), dim3(8, 8)>>>(A, B, C, M, N, K, keep);
}
