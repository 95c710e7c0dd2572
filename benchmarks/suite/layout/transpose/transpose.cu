// dst = src^T for a rows x cols matrix; 32x32 tiles through shared memory padded to 33 columns to
// avoid bank conflicts, 32x8 threads, each thread moves 4 elements.
#define TILE_DIM 32
#define BLOCK_ROWS 8

__global__ void transpose_tiled_kernel(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];
  int x = blockIdx.x * TILE_DIM + threadIdx.x;  // column in `src`
  int y = blockIdx.y * TILE_DIM + threadIdx.y;  // row in `src`
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = src[(size_t)(y + j) * cols + x];
  }
  __syncthreads();
  x = blockIdx.y * TILE_DIM + threadIdx.x;  // column in `dst` (= row in `src`)
  y = blockIdx.x * TILE_DIM + threadIdx.y;  // row in `dst`
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < rows && y + j < cols) dst[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
  }
}
