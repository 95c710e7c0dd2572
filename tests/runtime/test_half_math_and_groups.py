"""Half-precision math the runtime had no form of (``hexp2``, ``hlog2``, ``hrint``, … and their ``h2`` pairs),
``cooperative_groups::invoke_one``/``invoke_one_broadcast`` and CUDA 13's memory locations; judged by numpy's
float16 (each function through float, rounded to the nearest half) and by counting in Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xpiler_core.api import run_program

PROGRAM = r"""
#include <cstdio>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void half_math(const float* in, unsigned short* out, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  __half x = __float2half(in[i]);
  __half r[6] = {hexp2(x), hlog2(__habs(x)), hrint(x), htrunc(x), hexp10(__hmul(x, __float2half(0.25f))),
                 hlog10(__habs(x))};
  for (int k = 0; k < 6; ++k) out[6 * i + k] = __half_as_ushort(r[k]);
  __half2 p = h2exp2(__halves2half2(x, __hneg(x)));
  out[6 * n + 2 * i] = __half_as_ushort(__low2half(p));
  out[6 * n + 2 * i + 1] = __half_as_ushort(__high2half(p));
}
__global__ void groups(int* calls, int* broadcast) {
  auto tile = cg::tiled_partition<16>(cg::this_thread_block());
  cg::invoke_one(tile, [&] { atomicAdd(calls, 1); });
  int v = cg::invoke_one_broadcast(tile, [&] { return (int)(threadIdx.x * 3 + 1); });
  broadcast[threadIdx.x] = v;
}
int main() {
  const int n = 40;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = -4.0f + i * 0.23f;
  float* d; unsigned short* o; int *calls, *bc;
  cudaMalloc(&d, sizeof h); cudaMalloc(&o, 8 * n * sizeof(unsigned short));
  cudaMalloc(&calls, sizeof(int)); cudaMalloc(&bc, 64 * sizeof(int)); cudaMemset(calls, 0, sizeof(int));
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  half_math<<<1, 64>>>(d, o, n);
  groups<<<1, 64>>>(calls, bc);
  unsigned short ho[8 * n]; int hc = 0, hb[64];
  cudaMemcpy(ho, o, sizeof ho, cudaMemcpyDeviceToHost);
  cudaMemcpy(&hc, calls, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(hb, bc, sizeof hb, cudaMemcpyDeviceToHost);
  cudaMemLocation where; where.type = cudaMemLocationTypeDevice; where.id = 0;
  float* managed; cudaMallocManaged(&managed, 64);
  cudaError_t advised = cudaMemAdvise(managed, 64, cudaMemAdviseSetPreferredLocation, where);
  cudaError_t prefetched = cudaMemPrefetchAsync(managed, 64, where, 0, 0);
  for (int i = 0; i < 8 * n; ++i) printf("%u ", ho[i]);
  printf("\n%d %d %d %d %d\n", hc, hb[0], hb[17], hb[63], (int)advised + (int)prefetched);
  return 0;
}
"""


def _half_bits(values: np.ndarray) -> list[int]:
    return [int(b) for b in values.astype(np.float16).view(np.uint16)]


def test_half_math_pairs_invoke_one_and_memory_locations(tmp_path: Path) -> None:
    outcome = run_program(PROGRAM, str(tmp_path / "halves.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    lines = outcome.stdout.strip().splitlines()
    got = [int(v) for v in lines[0].split()]
    n = 40
    x = np.array([-4.0 + i * 0.23 for i in range(n)], dtype=np.float32).astype(np.float16).astype(np.float32)
    with np.errstate(divide="ignore"):
        quarter = (x.astype(np.float16) * np.float16(0.25)).astype(np.float32)
        columns = [np.exp2(x), np.log2(np.abs(x)), np.rint(x), np.trunc(x), np.power(np.float32(10), quarter),
                   np.log10(np.abs(x))]
    expected = [bit for i in range(n) for bit in _half_bits(np.array([c[i] for c in columns], dtype=np.float32))]
    expected += [bit for i in range(n) for bit in _half_bits(np.exp2(np.array([x[i], -x[i]], dtype=np.float32)))]
    assert got == expected
    # four tiles of 16 call once each; each tile's rank 0 (threads 0, 16, 32, 48) computed the broadcast value
    assert lines[1].split() == ["4", "1", str(16 * 3 + 1), str(48 * 3 + 1), "0"]
