"""``__shared__ __align__(N) float s[...]``: the grammar read the alignment as a declarator and swallowed the
statements after it (the kernel fell to the portable tier). The alignment parses, stays on the declaration in
every output, and the aligned tile computes the source's result on the CPU."""

from __future__ import annotations

from pathlib import Path

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.frontend.source import parse_text
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.verify.toolchains import compile_check

SOURCE = """#include <cstdio>
__global__ void reverse(float* a, int n) {
  constexpr int TILE = 8 * 8;
  __shared__ __align__(16 * 16) float s[TILE];
  int i = blockIdx.x * TILE + threadIdx.x;
  s[threadIdx.x] = i < n ? a[i] : 0.0f;
  __syncthreads();
  if (i < n) a[i] = s[TILE - 1 - threadIdx.x] + (float)((size_t)s % 256);
}
int main() {
  const int n = 128;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = 0.5f * i;
  float* d;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  reverse<<<n / 64, 64>>>(d, n);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i += 9) printf("%g\\n", h[i]);
  return 0;
}
"""


def test_an_aligned_shared_array_parses_and_keeps_its_alignment() -> None:
    assert not parse_text(SOURCE, "k.cu").diagnostics
    fn = lower_text(SOURCE, "k.cu", Dialect.CUDA).function("reverse")
    assert fn is not None
    [tile] = [n for n in A.walk(fn.body) if isinstance(n, A.VarDecl) and n.name == "s"]
    assert "__align__(16 * 16)" in tile.storage
    assert not [n for n in A.walk(fn.body) if isinstance(n, A.Opaque)]


def test_the_aligned_tile_translates_structurally_and_verifies(tmp_path: Path) -> None:
    """The address of the tile modulo 256 is 0 where the alignment holds: the source, the HIP output (hipcc) and
    the CPU output (the structural tier, not the portable one) print the same numbers."""
    (tmp_path / "k.cu").write_text(SOURCE)
    cpu = translate(SOURCE, str(tmp_path / "k.cu"), TranslateOptions(Dialect.C))
    assert cpu.status == "verified", cpu.summary
    assert "__align__(16 * 16) float s[" in cpu.output_text and "xpiler portable tier" not in cpu.output_text
    hip = translate(SOURCE, str(tmp_path / "k.cu"), TranslateOptions(Dialect.HIP, verify=False))
    assert "__shared__ __align__(16 * 16) float s[TILE];" in hip.output_text
    verdict = compile_check(hip.output_text, Dialect.HIP)
    assert verdict.ok, verdict.stderr
