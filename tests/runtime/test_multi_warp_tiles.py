"""Tiles wider than a warp (CUDA 11+: ``tiled_partition<64>``/``<128>`` with ``block_tile_memory``): ranks, meta
groups, a sync of the tile's own threads and ``cg::reduce`` over the tile, judged by summing in Python (the
reduce result must reach every thread of the tile: the first and the last thread write it)."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.api import run_program

PROGRAM = r"""
#include <cstdio>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
template <unsigned Size>
__global__ void tile_sums(const int* x, int* out, int* order_ok, int n) {
  __shared__ cg::block_tile_memory<256> scratch;
  auto block = cg::this_thread_block(scratch);
  auto tile = cg::tiled_partition<Size>(block);
  __shared__ int staged[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  staged[threadIdx.x] = i < n ? x[i] : 0;
  tile.sync();  // the tile's threads have staged their values
  int neighbour = staged[tile.meta_group_rank() * Size + (tile.thread_rank() + 1) % Size];
  int s = cg::reduce(tile, neighbour, cg::plus<int>());
  if (tile.thread_rank() == 0) out[blockIdx.x * tile.meta_group_size() + tile.meta_group_rank()] = s;
  if (tile.thread_rank() == Size - 1) order_ok[blockIdx.x * tile.meta_group_size() + tile.meta_group_rank()] = s;
}
int main() {
  const int n = 1000;
  static int h[n]; for (int i = 0; i < n; ++i) h[i] = (i * 37) % 101;
  int *x, *o, *k; cudaMalloc(&x, sizeof h); cudaMalloc(&o, 64 * sizeof(int)); cudaMalloc(&k, 64 * sizeof(int));
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
  tile_sums<64><<<4, 256>>>(x, o, k, n);
  int ho[16], hk[16]; cudaMemcpy(ho, o, sizeof ho, cudaMemcpyDeviceToHost); cudaMemcpy(hk, k, sizeof hk, cudaMemcpyDeviceToHost);
  tile_sums<128><<<4, 256>>>(x, o, k, n);
  int h2[8], k2[8]; cudaMemcpy(h2, o, sizeof h2, cudaMemcpyDeviceToHost); cudaMemcpy(k2, k, sizeof k2, cudaMemcpyDeviceToHost);
  for (int t = 0; t < 16; ++t) printf("%d ", ho[t] == hk[t] ? ho[t] : -1);
  printf("\n");
  for (int t = 0; t < 8; ++t) printf("%d ", h2[t] == k2[t] ? h2[t] : -1);
  printf("\n");
  return 0;
}
"""


def test_multi_warp_tiles_sync_and_reduce_as_python_sums(tmp_path: Path) -> None:
    outcome = run_program(PROGRAM, str(tmp_path / "tiles.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    h = [(i * 37) % 101 for i in range(1000)]
    expected = []
    for size in (64, 128):
        sums = [sum(h[base + j] if base + j < 1000 else 0 for j in range(size))
                for b in range(4) for base in range(b * 256, b * 256 + 256, size)]
        expected.append(" ".join(map(str, sums)))
    assert [line.strip() for line in outcome.stdout.strip().splitlines()] == expected
