// Tensor-core GEMM C(float) = A(half, M x K) * B(half, K x N), row-major, one warp per 16x16 tile of C.
// Tiles are staged through shared memory with zero padding so any M, N, K works.
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#define WMMA_M 16
#define WMMA_N 16
#define WMMA_K 16

__global__ void gemm_wmma_kernel(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C,
                                 int M, int N, int K) {
  __shared__ __half a_tile[WMMA_M * WMMA_K];
  __shared__ __half b_tile[WMMA_K * WMMA_N];
  __shared__ float c_tile[WMMA_M * WMMA_N];
  const int tile_row = blockIdx.y * WMMA_M;
  const int tile_col = blockIdx.x * WMMA_N;
  const int lane = threadIdx.x;  // blockDim.x == 32: one warp

  wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, __half, wmma::row_major> a_frag;
  wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, __half, wmma::row_major> b_frag;
  wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> c_frag;
  wmma::fill_fragment(c_frag, 0.0f);

  for (int k0 = 0; k0 < K; k0 += WMMA_K) {
    for (int e = lane; e < WMMA_M * WMMA_K; e += 32) {
      int r = e / WMMA_K, c = e % WMMA_K;
      int gr = tile_row + r, gc = k0 + c;
      a_tile[e] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : __float2half(0.0f);
    }
    for (int e = lane; e < WMMA_K * WMMA_N; e += 32) {
      int r = e / WMMA_N, c = e % WMMA_N;
      int gr = k0 + r, gc = tile_col + c;
      b_tile[e] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : __float2half(0.0f);
    }
    __syncthreads();
    wmma::load_matrix_sync(a_frag, a_tile, WMMA_K);
    wmma::load_matrix_sync(b_frag, b_tile, WMMA_N);
    wmma::mma_sync(c_frag, a_frag, b_frag, c_frag);
    __syncthreads();
  }
  wmma::store_matrix_sync(c_tile, c_frag, WMMA_N, wmma::mem_row_major);
  __syncthreads();
  for (int e = lane; e < WMMA_M * WMMA_N; e += 32) {
    int gr = tile_row + e / WMMA_N, gc = tile_col + e % WMMA_N;
    if (gr < M && gc < N) C[(size_t)gr * N + gc] = c_tile[e];
  }
}
