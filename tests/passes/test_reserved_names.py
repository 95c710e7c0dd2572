"""User declarations of names the target declares (``int dim3``, ``typedef … half``, a ``float2`` variable, a
macro that uses one) are renamed consistently in a C → CUDA translation: nvcc accepts the output and it
computes what the C source computes (the automatic test runs both); names nobody reserves are left alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.passes.support.reserved_names import RESERVED, rename_reserved
from xpiler_core.pipeline import TranslateOptions, translate

SOURCES = {
    "a local dim3": """
extern "C" void add(float *a, float *b, float *out) {
  int dim1 = 3;
  int dim3 = 64;
  for (int i = 0; i < dim1; i++) {
    for (int k = 0; k < dim3; k++) {
      int index = i * dim3 + k;
      out[index] = a[index] + b[index];
    }
  }
}
""",
    "a typedef half and a float2 variable": """
typedef unsigned short half;
extern "C" void widen(float *in, float *out) {
  int n = 96;
  for (int i = 0; i < n; i++) {
    half bits = (half)(i * 7);
    float float2 = in[i] * 2.0f;
    out[i] = float2 + (float)bits;
  }
}
""",
    "a macro that uses the name": """
#define SCALE(x) ((x) * dim3)
extern "C" void scale(float *in, float *out) {
  int rows = 8;
  const int dim3 = 5;
  for (int i = 0; i < rows; i++) {
    for (int j = 0; j < 16; j++) {
      out[i * 16 + j] = SCALE(in[i * 16 + j]);
    }
  }
}
""",
}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("case", sorted(SOURCES))
def test_reserved_user_names_translate_and_verify(case: str, tmp_path: Path) -> None:
    result = translate(SOURCES[case], str(tmp_path / "user.c"), TranslateOptions(Dialect.CUDA))
    assert result.status == "verified", result.summary
    assert "<<<" in result.output_text
    if case == "a local dim3":
        assert "dim3(" in result.output_text  # the 2-D launch still means CUDA's dim3


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: n not in RESERVED[Dialect.CUDA])


@settings(max_examples=40, deadline=None)
@given(st.lists(NAMES, min_size=1, max_size=4, unique=True))
def test_unreserved_names_are_left_alone(names: list[str]) -> None:
    decls = "".join(f"  int {n} = {i};\n" for i, n in enumerate(names))
    text = f"void f(int* p) {{\n{decls}  p[0] = {' + '.join(names)};\n}}\n"
    assert rename_reserved(text, "f.c", Dialect.C, Dialect.CUDA) == (text, {})


def test_the_sources_own_vocabulary_is_not_renamed() -> None:
    text = "__global__ void k(float* p) { dim3 g(1); p[threadIdx.x] = g.x; }\n"
    assert rename_reserved(text, "k.cu", Dialect.CUDA, Dialect.HIP) == (text, {})
