"""Thread-stride interchange: the tiled form computes exactly what the per-thread strided loops computed (each
thread keeps its own order, so float sums agree bit for bit with a sequential numpy model of the threads),
falls back to the original nest where threads could meet, and refuses bodies whose threads share writes."""

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
SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"

# thread nests in the shape loop recovery gives them (one block; bdy/bdz are parameters so the fallback runs)
KERNELS = r"""
void rowsum(float* partial, const float* x, int cols, int bdx, int bdy, int stride) {
    const int xp_bdx = bdx, xp_bdy = bdy, xp_bdz = 1;
    for (int xp_tz = 0; xp_tz < xp_bdz; ++xp_tz)
        for (int xp_ty = 0; xp_ty < xp_bdy; ++xp_ty)
            for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx) {
                const int xp_t = xp_tx + xp_bdx * (xp_ty + xp_bdy * xp_tz);
                float acc = 0.5f;
                float scale = 1.0f + 0.25f * (float)xp_t;
                for (int c = xp_tx; c < cols; c += stride) acc += x[c] * scale;
                partial[xp_t] = acc * 2.0f;
            }
}
void tag(float* y, const float* x, int cols, int bdx, int stride) {
    const int xp_bdx = bdx, xp_bdy = 1, xp_bdz = 1;
    for (int xp_tz = 0; xp_tz < xp_bdz; ++xp_tz)
        for (int xp_ty = 0; xp_ty < xp_bdy; ++xp_ty)
            for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx) {
                const int xp_t = xp_tx + xp_bdx * (xp_ty + xp_bdy * xp_tz);
                for (int c = xp_tx + xp_bdx * (xp_ty + xp_bdy * xp_tz); c < cols; c += stride)
                    y[c] = x[c] * 2.0f + (float)xp_t;
            }
}
void shared_total(float* out, const float* x, int cols, int bdx) {
    const int xp_bdx = bdx, xp_bdy = 1, xp_bdz = 1;
    float total = 0.0f;
    for (int xp_tz = 0; xp_tz < xp_bdz; ++xp_tz)
        for (int xp_ty = 0; xp_ty < xp_bdy; ++xp_ty)
            for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx) {
                for (int c = xp_tx; c < cols; c += xp_bdx) total += x[c];
            }
    out[0] = total;
}
"""


def run_pass(params: dict) -> str:
    module = lower_text(KERNELS, "k.c", Dialect.C)
    mod = get_pass("thread_interchange")
    out = mod.apply(module, {**mod.INFO.defaults(), **params}, PassContext(Dialect.C, Dialect.C))
    return print_module(out, Dialect.C)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    from tests.conftest import build_c

    return {fn: build_c(run_pass({"function": fn}), tmp_path_factory.mktemp(fn), cplusplus=False)
            for fn in ("rowsum", "tag")}


def threads_model_rowsum(x: np.ndarray, cols: int, bdx: int, bdy: int, stride: int) -> np.ndarray:
    """The CUDA threads one after another, in float32 (each thread's own order is what matters)."""
    out = np.zeros(bdx * bdy, dtype=np.float32)
    for ty in range(bdy):
        for tx in range(bdx):
            t = tx + bdx * ty
            acc, scale = np.float32(0.5), np.float32(1.0) + np.float32(0.25) * np.float32(t)
            for c in range(tx, cols, stride):
                acc = np.float32(acc + x[c] * scale)
            out[t] = acc * np.float32(2.0)
    return out


@settings(max_examples=25, deadline=None)
@given(cols=st.integers(0, 90), bdx=st.integers(1, 40), bdy=st.sampled_from([1, 1, 2]), stride=st.integers(1, 50))
def test_tiled_sums_equal_the_threads_bit_for_bit(libs: dict[str, ctypes.CDLL], cols: int, bdx: int, bdy: int,
                                                  stride: int) -> None:
    rng = np.random.default_rng(cols * 7 + bdx)
    x = rng.standard_normal(max(cols, 1)).astype(np.float32)
    partial = np.zeros(bdx * bdy, dtype=np.float32)
    fn = libs["rowsum"].rowsum
    fn.argtypes = [F32P, F32P] + [ctypes.c_int] * 4
    fn.restype = None
    fn(partial, x, cols, bdx, bdy, stride)
    np.testing.assert_array_equal(partial, threads_model_rowsum(x, cols, bdx, bdy, stride))


@pytest.mark.parametrize(("cols", "bdx", "stride"), [(100, 8, 8), (100, 8, 13), (100, 8, 3), (5, 8, 8), (0, 4, 4)])
def test_writes_by_index_keep_the_last_writer_when_threads_meet(libs: dict[str, ctypes.CDLL], cols: int, bdx: int,
                                                                stride: int) -> None:
    """stride < bdx: two threads write the same y[c]; the original nest runs (the last thread's value wins)."""
    x = np.arange(max(cols, 1), dtype=np.float32)
    y = np.full(max(cols, 1), -1.0, dtype=np.float32)
    fn = libs["tag"].tag
    fn.argtypes = [F32P, F32P, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = None
    fn(y, x, cols, bdx, stride)
    expected = np.full(max(cols, 1), -1.0, dtype=np.float32)
    for t in range(bdx):
        for c in range(t, cols, stride):
            expected[c] = x[c] * 2 + t
    np.testing.assert_array_equal(y, expected)


def test_threads_sharing_a_written_scalar_are_refused() -> None:
    with pytest.raises(PassRefused, match="share the scalar 'total'"):
        run_pass({"function": "shared_total"})


def test_row_mean_tuner_action_verifies_against_the_reference(tmp_path: Path) -> None:
    from tests.conftest import tuner_candidate

    problem, text = tuner_candidate(SUITE / "reduction" / "mean" / "spec.toml", "thread_interchange", tmp_path)
    assert "xp_ti_cb" in text
    report = problem._verify(text, ())
    assert report.passed, report.summary()
