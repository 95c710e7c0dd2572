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


def test_an_include_guard_after_non_ascii_text_is_not_read_as_a_switch_in_a_function() -> None:
    """Where the text holds characters of several bytes (comments in Chinese), a directive's character offset is
    not its byte offset: the include guard of a header inlined after such text fell "inside" a function body,
    was decided (the project defines the guard) and the whole header blanked (CHECK_CUDA undeclared in nine
    PMPP programs). Only directives in function bodies are read; the guard stays."""
    from xpiler_core.frontend.source import parse_text
    from xpiler_core.passes.support.cst import fold_decided_branches_in_functions

    text = ("// 错误检查宏 — 打印设备信息\nvoid first() {\n  int x = 0; // 检查最后的错误\n  (void)x;\n}\n"
            "#ifndef UTILS_CUH\n#define UTILS_CUH\n#define CHECK(c) (c)\n#endif\n"
            "void second(int n) {\n#ifndef NO_CHECK\n  CHECK(n);\n#endif\n}\n")
    folded = fold_decided_branches_in_functions(parse_text(text, "u.cu", Dialect.CUDA), frozenset({"UTILS_CUH"}))
    assert "#ifndef UTILS_CUH" in folded and "#define CHECK(c) (c)" in folded
    assert "#ifndef NO_CHECK" not in folded and "CHECK(n);" in folded  # the switch in a body: read as built
    assert folded.count("\n") == text.count("\n")
