"""``cudaOccupancyMaxPotentialBlockSize`` (and its ``VariableSMem`` form) on the runtime, as documented: a
block size that is a positive multiple of the warp, at most 1024 and at most the caller's limit, and a grid
that is at least one block per multiprocessor; a program that launches with them computes the right result.
(Vendor samples size their launches this way; it was missing from the runtime.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.cli import main

PROGRAM = r"""#include <cstdio>
__global__ void fill(int* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = 3 * i;
}
struct NoShared { __host__ __device__ size_t operator()(int) const { return 0; } };
int main() {
  int grid = 0, block = 0, grid_capped = 0, block_capped = 0, grid_v = 0, block_v = 0, sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaOccupancyMaxPotentialBlockSize(&grid, &block, fill);
  cudaOccupancyMaxPotentialBlockSize(&grid_capped, &block_capped, fill, 0, 200);
  cudaOccupancyMaxPotentialBlockSizeVariableSMem(&grid_v, &block_v, fill, NoShared());
  printf("block %d grid %d capped %d %d variable %d %d sms %d\n", block, grid, block_capped, grid_capped,
         block_v, grid_v, sms);
  int n = 12345; int* d; cudaMalloc(&d, n * sizeof(int));
  fill<<<grid, block>>>(d, n);
  int* h = new int[n]; cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost);
  long bad = 0; for (int i = 0; i < n; ++i) bad += h[i] != 3 * i;
  printf("wrong %ld\n", bad);
  return 0;
}
"""


def test_occupancy_answers_as_documented(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "occupancy.cu"
    source.write_text(PROGRAM)
    assert main(["run", str(source)]) == 0
    words = capsys.readouterr().out.split()
    values = dict(zip(words[0::2], words[1::2], strict=False))
    block, grid, sms = int(values["block"]), int(values["grid"]), int(values["sms"])
    assert 0 < block <= 1024 and block % 32 == 0 and grid >= sms
    capped = int(words[words.index("capped") + 1])
    assert 0 < capped <= 200
    assert int(words[words.index("variable") + 1]) == block
    assert values["wrong"] == "0"
