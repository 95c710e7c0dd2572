// One 16x16x16 tile product with tensor-core fragments (half inputs, float accumulator).
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
__global__ void gemm16(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
extern "C" void run(const half* a, const half* b, float* c) {
  half *da, *db; float* dc;
  cudaMalloc(&da, 256 * sizeof(half)); cudaMalloc(&db, 256 * sizeof(half)); cudaMalloc(&dc, 256 * sizeof(float));
  cudaMemcpy(da, a, 256 * sizeof(half), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, 256 * sizeof(half), cudaMemcpyHostToDevice);
  gemm16<<<1, 32>>>(da, db, dc);
  cudaMemcpy(c, dc, 256 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(da); cudaFree(db); cudaFree(dc);
}
