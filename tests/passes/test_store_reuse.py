"""Store reuse: the earlier loop stores the value the later loop recomputed; results are bit-identical to the
original program and match numpy's softmax; loops where the stored value could differ are refused."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.printer import print_module

F32P = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
F64P = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"

KERNELS = r"""
#include <math.h>
void softmax_rows(float* y, const float* x, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -1e30f;
        for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
        float s = 0.0f;
        for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
        const float inv = 1.0f / s;
        for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) * inv;
    }
}
void shifted_between(float* y, const float* x, int n) {
    float m = 0.5f, s = 0.0f;
    for (int c = 0; c < n; ++c) s += expf(x[c] - m);
    m = m + 1.0f;
    for (int c = 0; c < n; ++c) y[c] = expf(x[c] - m) / s;
}
void reads_output(float* y, const float* x, int n) {
    float s = 0.0f;
    for (int c = 0; c < n; ++c) s += expf(x[c]) + y[c];
    for (int c = 0; c < n; ++c) y[c] = expf(x[c]) / s;
}
void double_out(double* y, const float* x, int n) {
    float s = 0.0f;
    for (int c = 0; c < n; ++c) s += expf(x[c]);
    for (int c = 0; c < n; ++c) y[c] = expf(x[c]) / s;
}
"""


def transformed(fn: str) -> str:
    module = lower_text(KERNELS, "k.c", Dialect.C)
    mod = get_pass("store_reuse")
    out = mod.apply(module, {**mod.INFO.defaults(), "function": fn}, PassContext(Dialect.C, Dialect.C))
    return print_module(out, Dialect.C)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, ctypes.CDLL]:
    from tests.conftest import build_c

    text = transformed("softmax_rows")
    assert text.count("expf(") == KERNELS.count("expf(") - 1  # one exponential per element in softmax_rows
    return (build_c(text, tmp_path_factory.mktemp("reuse"), cplusplus=False),
            build_c(KERNELS, tmp_path_factory.mktemp("orig"), cplusplus=False))


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 70), seed=st.integers(0, 999))
def test_softmax_is_bit_identical_to_the_original_and_matches_numpy(
        libs: tuple[ctypes.CDLL, ctypes.CDLL], rows: int, cols: int, seed: int) -> None:
    x = (np.random.default_rng(seed).standard_normal((rows, cols)) * 4).astype(np.float32)
    outs = []
    for lib in libs:
        y = np.zeros_like(x)
        lib.softmax_rows.argtypes = [F32P, F32P, ctypes.c_int, ctypes.c_int]
        lib.softmax_rows.restype = None
        lib.softmax_rows(y, x, rows, cols)
        outs.append(y)
    np.testing.assert_array_equal(outs[0], outs[1])
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(outs[0], e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize(("fn", "why"), [("shifted_between", "changes between the loops"),
                                         ("reads_output", "used before the later loop"),
                                         ("double_out", "recomputes")])
def test_refuses_when_the_stored_value_could_differ(fn: str, why: str) -> None:
    with pytest.raises(PassRefused, match=why):
        transformed(fn)


def test_softmax_suite_kernel_through_the_tuner_verifies(tmp_path: Path) -> None:
    from tests.conftest import tuner_candidate

    problem, text = tuner_candidate(SUITE / "normalization" / "softmax" / "spec.toml", "store_reuse", tmp_path)
    from xpiler_core.passes.support.ast_support import SERIAL_MARK

    # one exponential fewer in each copy of the block nest (the parallel one and the serial one)
    assert problem.baseline_text.count("__expf(") - text.count("__expf(") == 1 + text.count(SERIAL_MARK)
    report = problem._verify(text, ())
    assert report.passed, report.summary()
