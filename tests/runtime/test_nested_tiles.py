"""``tiled_partition(group, n)`` of a group known only at run time (``thread_group``): a tile of a tile (as a
public training series' exercise nests them: block → 32 → 16) is the block's tile of that size. A reduction
over each 16-lane tile through the generic ``thread_group`` interface must give each tile's sum (computed here
by hand from the inputs); nvcc accepts the program as written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xpiler_core.cli import main

PROGRAM = r"""#include <cstdio>
#include <cooperative_groups.h>
using namespace cooperative_groups;
const int nTPB = 256;
__device__ int reduce(thread_group g, int* x, int val) {
  int lane = g.thread_rank();
  for (int i = g.size() / 2; i > 0; i /= 2) {
    x[lane] = val; g.sync();
    if (lane < i) val += x[lane + i];
    g.sync();
  }
  return g.thread_rank() == 0 ? val : -1;
}
__global__ void tile_sums(const int* data, int* sums) {
  __shared__ int sdata[nTPB];
  auto g1 = this_thread_block();
  size_t gindex = g1.group_index().x * nTPB + g1.thread_index().x;
  auto g2 = tiled_partition(g1, 32);
  auto g3 = tiled_partition(g2, 16);
  thread_group g = g3;
  int offset = (g1.thread_index().x / g.size()) * g.size();
  int r = reduce(g, sdata + offset, data[gindex]);
  if (r >= 0) sums[gindex / 16] = r;
}
int main() {
  const int n = 2 * nTPB;
  int *data, *sums;
  cudaMallocManaged(&data, n * sizeof(int));
  cudaMallocManaged(&sums, n / 16 * sizeof(int));
  for (int i = 0; i < n; ++i) data[i] = (i * 5) % 7;
  tile_sums<<<n / nTPB, nTPB>>>(data, sums);
  cudaDeviceSynchronize();
  for (int t = 0; t < n / 16; ++t) printf("%d\n", sums[t]);
  return 0;
}
"""


def test_tiles_of_tiles_reduce_their_own_lanes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "tiles.cu"
    source.write_text(PROGRAM)
    assert main(["run", str(source)]) == 0
    got = [int(v) for v in capsys.readouterr().out.split()[: 512 // 16]]
    expected = [sum((i * 5) % 7 for i in range(t * 16, t * 16 + 16)) for t in range(512 // 16)]
    assert got == expected


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_program_is_cuda_nvcc_accepts(tmp_path: Path) -> None:
    from xpiler_core.dialect import Dialect
    from xpiler_core.verify.toolchains import compile_check

    assert compile_check(PROGRAM, Dialect.CUDA).ok
