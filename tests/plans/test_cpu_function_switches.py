"""A project's own preprocessor switches inside function bodies (``#ifndef NO_BOUND_CHECK`` around a kernel's
bounds check, ``#ifdef DEBUG`` around a print, a switch between two arguments of a launch): the CPU plan reads
them as the project's build does (nothing defines the macro, or -D does) instead of leaving code the AST cannot
model. Judged by the source program's own output."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.project import ProjectConfig

SOURCE = r"""#include <cstdio>
__global__ void scale(float* a, int n, float by) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifndef NO_BOUND_CHECK
  if (i >= n) return;
#endif
#ifdef DEBUG_SCALE
  printf("thread %d\n", i);
#else
  a[i] *= by;
#endif
}
int main() {
  const int n = 1000;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = 0.25f * i;
  float* d;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  scale<<<(n + 127) / 128, 128>>>(d, n,
#ifdef HALVE
                                  0.5f
#else
                                  3.0f
#endif
  );
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  double s = 0;
  for (int i = 0; i < n; ++i) s += h[i];
  printf("%.2f\n", s);
  return 0;
}
"""


@pytest.mark.parametrize("defines", [(), ("HALVE",)])
def test_switches_in_function_bodies_are_read_as_the_build_sets_them(tmp_path: Path, defines: tuple[str, ...]) -> None:
    path = tmp_path / "scale.cu"
    path.write_text(SOURCE)
    result = translate(SOURCE, str(path), TranslateOptions(Dialect.C, project=ProjectConfig(defines=defines)))
    assert result.status == "verified", result.summary
    assert "xpiler portable tier" not in result.output_text  # the kernel is code the AST models
    by = 0.5 if defines else 3.0
    expected = f"{sum(0.25 * i * by for i in range(1000)):.2f}"
    assert result.manifest["outcome"]["program"]["source"]["stdout"].split() == [expected]
