"""CUDA unroll pragmas → GCC's: the mapping follows CUDA's meaning (full unroll only for compile-time trip
counts, ``unroll N`` by N), and the translated kernel still computes the numpy reference."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu
from xpiler_core.printer import print_module

KERNEL = r"""
template <int TAPS>
__device__ float window(const float* x, int i, int n) {
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < TAPS; ++k) {
    if (i + k < n) acc += x[i + k] * (float)(k + 1);
  }
  return acc;
}
__global__ void taps(const float* x, float* y, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float extra = 0.0f;
#pragma unroll 4
  for (int r = 0; r < reps; ++r) extra += 0.5f;
#pragma unroll
  for (int r = 0; r < reps; ++r) extra -= 0.25f;
  y[i] = window<3>(x, i, n) + extra;
}
extern "C" void run(const float* x, float* y, int n, int reps) { taps<<<(n + 63) / 64, 64>>>(x, y, n, reps); }
"""


def test_pragmas_follow_cuda_meaning() -> None:
    module = lower_text(KERNEL, "t.cu")
    ctx = PassContext(source_dialect=Dialect.CUDA, target=Dialect.C, file="t.cu")
    text = print_module(get_pass("unroll_pragmas").apply(module, {}, ctx), Dialect.C)
    pragmas = re.findall(r"#pragma (.*)", text)
    assert pragmas == ["GCC unroll 64", "GCC unroll 4"], pragmas  # the run-time bare one is left to g++
    assert "1 left to the compiler" in " ".join(ctx.notes)


def test_no_pragma_is_refused() -> None:
    module = lower_text(KERNEL.replace("#pragma unroll 4", "").replace("#pragma unroll", ""), "t.cu")
    with pytest.raises(PassRefused, match="no #pragma unroll"):
        get_pass("unroll_pragmas").apply(module, {}, PassContext(Dialect.CUDA, Dialect.C))


@pytest.mark.parametrize(("n", "reps"), [(1, 0), (70, 3), (129, 9)])
def test_translation_matches_numpy(cbuild, n: int, reps: int) -> None:  # noqa: ANN001 - fixture
    text, records, _ctx = translate_to_cpu(KERNEL, "t.cu", None, {"loop_recovery": {"wrapper": False}}, None)
    assert text is not None
    assert next(r for r in records if r["name"] == "unroll_pragmas")["changed"]
    lib = cbuild(text)
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    y = np.zeros(n, dtype=np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.run(x.ctypes.data_as(ptr), y.ctypes.data_as(ptr), ctypes.c_int(n), ctypes.c_int(reps))
    padded = np.concatenate([x, np.zeros(2, dtype=np.float32)])
    expected = padded[:n] + 2 * padded[1:n + 1] + 3 * padded[2:n + 2] + reps * 0.25
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
