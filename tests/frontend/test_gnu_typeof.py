"""``__typeof__(e) v = e;`` (GNU C/C++; the CPU passes write it for hoisted values): the C++ grammar read it as a
call followed by a stray name and the whole enclosing statement became opaque text — a CPU output of ours could not
go back to CUDA. It parses as a declaration whose type keeps its spelling, in user code as in ours."""

from __future__ import annotations

from pathlib import Path

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.frontend.source import parse_text
from xpiler_core.pipeline import TranslateOptions, translate

SOURCE = """#include <cstdio>
__global__ void shift(const float* x, float* y, int n, int w) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __typeof__(i % w) col = i % w;
    __typeof(x[0]) v = x[i];
    y[i] = v * (float)(col + 1);
  }
}
int main() {
  const int n = 300, w = 7;
  float h[n], out[n];
  for (int i = 0; i < n; ++i) h[i] = 0.25f * i;
  float *dx, *dy;
  cudaMalloc(&dx, sizeof h);
  cudaMalloc(&dy, sizeof h);
  cudaMemcpy(dx, h, sizeof h, cudaMemcpyHostToDevice);
  shift<<<(n + 127) / 128, 128>>>(dx, dy, n, w);
  cudaMemcpy(out, dy, sizeof out, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i += 13) printf("%g\\n", out[i]);
  return 0;
}
"""


def test_typeof_declarations_parse_and_keep_their_spelling() -> None:
    assert not parse_text(SOURCE, "k.cu").diagnostics
    fn = lower_text(SOURCE, "k.cu", Dialect.CUDA).function("shift")
    assert fn is not None
    types = {n.name: n.type.base for n in A.walk(fn.body) if isinstance(n, A.VarDecl)}
    assert types["col"] == "__typeof__(i % w)" and types["v"] == "__typeof(x[0])"
    assert not [n for n in A.walk(fn.body) if isinstance(n, A.Opaque)]


def test_a_kernel_declaring_with_typeof_verifies_on_the_cpu(tmp_path: Path) -> None:
    """The structural CPU translation (not the portable tier) prints what the source prints."""
    (tmp_path / "k.cu").write_text(SOURCE)
    cpu = translate(SOURCE, str(tmp_path / "k.cu"), TranslateOptions(Dialect.C))
    assert cpu.status == "verified", cpu.summary
    assert "xpiler portable tier" not in cpu.output_text and "__typeof__(i % w) col" in cpu.output_text
