"""Grid-wide synchronisation on the runtime: a kernel launched with cudaLaunchCooperativeKernel has every block
resident (one OS thread each), so ``grid.sync()`` / ``cg::sync(grid)`` is a barrier over all of them; a block that
has returned counts as arrived. Outputs are computed independently in Python (a ``<<<>>>`` launch, where CUDA
leaves grid.sync() undefined, stops with a message naming the cooperative launch: tests/runtime/test_failures.py)."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.api import run_program

PROGRAM = r"""
#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// partial sums per block, a grid barrier, then each block reads every partial: the total seen by all; a second
// phase after another barrier, in which blocks past the first three have already returned
__global__ void total(const float* x, float* partial, float* seen, float* again, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::grid_group grid = cg::this_grid();
  __shared__ float s[128];
  float v = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
  s[threadIdx.x] = v;
  cg::sync(block);
  for (int w = 64; w > 0; w >>= 1) { if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w]; cg::sync(block); }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
  grid.sync();
  if (threadIdx.x == 0) { float t = 0; for (int b = 0; b < gridDim.x; ++b) t += partial[b]; seen[blockIdx.x] = t; }
  if (blockIdx.x >= 3) return;
  cg::sync(grid);
  if (threadIdx.x == 0) partial[blockIdx.x] = seen[(blockIdx.x + 1) % gridDim.x] * (blockIdx.x + 1);
  cg::sync(grid);
  if (grid.thread_rank() == 0) { float t = 0; for (int b = 0; b < 3; ++b) t += partial[b]; *again = t; }
}
int main() {
  const int n = 10000, blocks = 6;
  static float h[n];
  for (int i = 0; i < n; ++i) h[i] = (i % 7) * 0.5f;
  float *x, *p, *seen, *again;
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&p, blocks * sizeof(float));
  cudaMalloc(&seen, blocks * sizeof(float)); cudaMalloc(&again, sizeof(float));
  cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
  int nn = n;
  void* args[] = {&x, &p, &seen, &again, &nn};
  cudaLaunchCooperativeKernel((void*)total, dim3(blocks), dim3(128), args, 0, 0);
  float hs[blocks], ha = 0;
  cudaMemcpy(hs, seen, sizeof hs, cudaMemcpyDeviceToHost);
  cudaMemcpy(&ha, again, sizeof(float), cudaMemcpyDeviceToHost);
  printf("%.1f %.1f %.1f\n", hs[0], hs[blocks - 1], ha);
  return 0;
}
"""


def test_a_cooperative_launch_synchronises_the_grid(tmp_path: Path) -> None:
    outcome = run_program(PROGRAM, str(tmp_path / "grid.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    total = sum((i % 7) * 0.5 for i in range(10000))
    assert outcome.stdout.strip() == f"{total:.1f} {total:.1f} {total * (1 + 2 + 3):.1f}"
