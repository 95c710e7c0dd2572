"""Comparisons the grammar reads as template arguments: in ``(ih >= 0 && ih < h && iw >= 0 && iw < w)`` tree-sitter
takes ``ih < h && iw >`` for the template arguments of ``ih`` and the rest for an assignment. A compiler decides by
name lookup; the frontend re-reads the file with the ``<`` of a name declared as a variable masked (same offsets),
so the kernel lowers to the comparisons it is — checked here against g++'s reading of the same source (the
translation's output vs numpy) — while a real template call stays a template call."""

from __future__ import annotations

import ctypes

import numpy as np

from tests.conftest import build_shared
from xpiler_core import ast as A
from xpiler_core.frontend.lower import lower_text
from xpiler_core.frontend.source import parse_text
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

SOURCE = """template <int R>
__device__ float tap(const float* x, int i) { return x[i] * (float)R; }

__global__ void stencil(const float* x, float* y, int n, int lo) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int j = i - 1, k = i + 1;
    float left = (j >= lo && j < n && k >= 0) ? x[j] : 0.0f;
    bool inside = i < n && k >= 0;
    y[i] = left + tap<2>(x, i) + (inside ? 1.0f : 0.0f) + ((k >= 0 && k < n && i >= lo) ? x[k] : 0.0f);
  }
}

extern "C" void run(const float* x, float* y, int n, int lo) { stencil<<<(n + 31) / 32, 32>>>(x, y, n, lo); }
"""


def test_no_template_is_read_where_variables_are_compared() -> None:
    parsed = parse_text(SOURCE, "k.cu")
    assert not parsed.diagnostics
    fn = lower_text(SOURCE, "k.cu").function("stencil")
    assert fn is not None
    names = {n.id for n in A.walk(fn.body) if isinstance(n, A.Name)}
    assert not any("<" in name or ">" in name for name in names - {"tap<2>"}), names
    ops = [n.op for n in A.walk(fn.body) if isinstance(n, A.Binary)]
    assert ops.count("<") >= 3 and ops.count(">=") >= 4 and not any(isinstance(n, A.Assign) and n.op == "="
                                                                      and isinstance(n.target, A.Binary)
                                                                      for n in A.walk(fn.body))


def test_translation_computes_what_gcc_reads(tmp_path) -> None:  # noqa: ANN001
    text, _records, _ctx = translate_to_cpu(SOURCE, "k.cu")
    assert text is not None
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    for n, lo in ((1, 0), (37, 3), (64, 70)):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        y = np.full(n, np.nan, np.float32)
        lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int(n), ctypes.c_int(lo))
        i = np.arange(n)
        left = np.where((i - 1 >= lo) & (i - 1 < n), x[np.clip(i - 1, 0, n - 1)], 0.0)
        right = np.where((i + 1 < n) & (i >= lo), x[np.clip(i + 1, 0, n - 1)], 0.0)
        np.testing.assert_allclose(y, left + 2.0 * x + 1.0 + right, rtol=1e-6)
