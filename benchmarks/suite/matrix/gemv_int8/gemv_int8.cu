// Quantised GEMV y[r] = sum_k A[r, k] * x[k] on int8 data with int32 accumulation: four int8 products per
// __dp4a on packed 32-bit words, one warp per row, __shfl_xor_sync to combine lanes. cols % 4 == 0
// (rows are padded to whole words), as int8 inference kernels require.
#include <cstdint>

__global__ void gemv_int8_dp4a_kernel(const int8_t* __restrict__ A, const int8_t* __restrict__ x,
                                      int32_t* __restrict__ y, int rows, int cols) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int words = cols / 4;
  const int* a4 = reinterpret_cast<const int*>(A + (size_t)row * cols);
  const int* x4 = reinterpret_cast<const int*>(x);
  int acc = 0;
  for (int w = lane; w < words; w += 32) acc = __dp4a(a4[w], x4[w], acc);
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, m);
  if (lane == 0) y[row] = acc;
}
