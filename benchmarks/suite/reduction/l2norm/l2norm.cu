// Row L2 normalisation y[r, :] = x[r, :] / max(||x[r, :]||, 1e-12) with cooperative groups: 32-thread
// tiles reduce with cg::reduce, tile leaders combine through shared memory, block.sync() as the barrier.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

__global__ void l2_normalize_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  __shared__ float tile_sums[32];
  __shared__ float inv_norm;
  const float* xr = x + (size_t)blockIdx.x * cols;
  float ss = 0.0f;
  for (int c = block.thread_rank(); c < cols; c += block.size()) ss += xr[c] * xr[c];
  ss = cg::reduce(tile, ss, cg::plus<float>());
  if (tile.thread_rank() == 0) tile_sums[tile.meta_group_rank()] = ss;
  block.sync();
  if (block.thread_rank() == 0) {
    float total = 0.0f;
    for (unsigned t = 0; t < tile.meta_group_size(); ++t) total += tile_sums[t];
    inv_norm = 1.0f / fmaxf(sqrtf(total), 1e-12f);
  }
  block.sync();
  for (int c = block.thread_rank(); c < cols; c += block.size()) y[(size_t)blockIdx.x * cols + c] = xr[c] * inv_norm;
}
