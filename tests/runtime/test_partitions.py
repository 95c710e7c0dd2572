"""``cg::binary_partition`` and ``cg::labeled_partition`` (collective over the parent group): the parent's lanes that
give the same predicate or label form one coalesced group, ranked in lane order. Each lane prints its group's size,
its rank in it, a shuffle from the group's rank 0 (the lowest lane with its label) and ``cg::reduce`` over the
group (every member gets the sum); the expected values are computed here from the documented semantics. nvcc
accepts the program as written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core.cli import main

PROGRAM = r"""#include <cstdio>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void parts(const int* data, int* out) {
  auto warp = cg::tiled_partition<32>(cg::this_thread_block());
  const int i = threadIdx.x;
  const int v = data[i];
  cg::coalesced_group odd = cg::binary_partition(warp, v % 2 == 1);
  out[5 * i] = odd.size();
  out[5 * i + 1] = odd.thread_rank();
  out[5 * i + 2] = odd.shfl(i, 0);
  out[5 * i + 4] = cg::reduce(odd, v, cg::plus<int>());
  if (i % 4 != 3) {  // a coalesced parent: the lanes that reach here, split again by a label
    cg::coalesced_group active = cg::coalesced_threads();
    cg::coalesced_group same = cg::labeled_partition(active, v % 3);
    out[5 * i + 3] = same.size() * 100 + same.thread_rank();
  } else {
    out[5 * i + 3] = -1;
  }
}
int main() {
  int *data, *out;
  cudaMallocManaged(&data, 64 * sizeof(int));
  cudaMallocManaged(&out, 5 * 64 * sizeof(int));
  for (int i = 0; i < 64; ++i) data[i] = (i * 7 + 3) % 11;
  parts<<<1, 64>>>(data, out);
  cudaDeviceSynchronize();
  for (int i = 0; i < 5 * 64; ++i) printf("%d\n", out[i]);
  return 0;
}
"""


def _expected() -> list[int]:
    data = [(i * 7 + 3) % 11 for i in range(64)]
    out: list[int] = []
    for i in range(64):
        warp = range(i // 32 * 32, i // 32 * 32 + 32)
        odd = [j for j in warp if data[j] % 2 == data[i] % 2]
        out += [len(odd), odd.index(i), odd[0]]
        if i % 4 == 3:
            out.append(-1)
        else:
            same = [j for j in warp if j % 4 != 3 and data[j] % 3 == data[i] % 3]
            out.append(len(same) * 100 + same.index(i))
        out.append(sum(data[j] for j in odd))
    return out


def test_partitions_group_the_lanes_by_predicate_and_label(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "parts.cu"
    source.write_text(PROGRAM)
    assert main(["run", str(source)]) == 0
    got = [int(v) for v in capsys.readouterr().out.split()[: 5 * 64]]
    assert got == _expected()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_accepts_the_program(tmp_path: Path) -> None:
    source = tmp_path / "parts.cu"
    source.write_text(PROGRAM)
    done = subprocess.run(["nvcc", "-c", str(source), "-o", str(tmp_path / "parts.o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
