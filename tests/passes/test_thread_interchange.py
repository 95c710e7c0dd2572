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
void tvm_sum(float* out, const float* x, int n, int outer, int bdx, int bdy, int coef) {
    const int xp_bdx = bdx, xp_bdy = bdy, xp_bdz = 1;
    float red[64][1];
    for (int xp_tz = 0; xp_tz < xp_bdz; ++xp_tz)
        for (int xp_ty = 0; xp_ty < xp_bdy; ++xp_ty)
            for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx) {
                const int xp_t = xp_tx + xp_bdx * (xp_ty + xp_bdy * xp_tz);
                float acc[1];
                acc[0] = 0.25f;
                for (int o = 0; o < outer; ++o) {
                    if (o * 4 + (xp_tx >> 1) < n) acc[0] = acc[0] + x[o * 2 * coef + xp_tx];
                }
                red[xp_t][0] = acc[0];
            }
    for (int t = 0; t < xp_bdx * xp_bdy; ++t) out[t] = red[t][0];
}
void tvm_pool(float* out, const float* x, int w, int bdx, int base) {
    const int xp_bdx = bdx, xp_bdy = 1, xp_bdz = 1;
    for (int xp_tz = 0; xp_tz < xp_bdz; ++xp_tz)
        for (int xp_ty = 0; xp_ty < xp_bdy; ++xp_ty)
            for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx) {
                const int xp_t = xp_tx + xp_bdx * (xp_ty + xp_bdy * xp_tz);
                out[base + xp_tx] = -3.0e38f;
                for (int r0 = 0; r0 < 3; ++r0)
                    for (int r1 = 0; r1 < 2; ++r1)
                        out[base + xp_tx] = fmaxf(out[base + xp_tx],
                            (1 <= xp_tx * 2 + r1 && xp_tx * 2 + r1 <= w) ? x[r0 * (w + 2) + xp_tx * 2 + r1 - 1] : -3.0e38f);
            }
}
void shifted(float* out, const float* x, int bdx) {
    const int xp_bdx = bdx, xp_bdy = 1, xp_bdz = 1;
    for (int xp_tz = 0; xp_tz < xp_bdz; ++xp_tz)
        for (int xp_ty = 0; xp_ty < xp_bdy; ++xp_ty)
            for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx)
                for (int r = 0; r < 3; ++r) out[xp_tx + r] = out[xp_tx + r] + x[xp_tx];
}
void row_argmax(int* at, const float* x, int cols, int bdx) {
    const int xp_bdx = bdx, xp_bdy = 1, xp_bdz = 1;
    for (int xp_tz = 0; xp_tz < xp_bdz; ++xp_tz)
        for (int xp_ty = 0; xp_ty < xp_bdy; ++xp_ty)
            for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx) {
                const int xp_t = xp_tx + xp_bdx * (xp_ty + xp_bdy * xp_tz);
                float best = -3.0e38f;
                int best_i = 0;
                for (int c = xp_tx; c < cols; c += xp_bdx) {
                    if (x[c] > best) { best = x[c]; best_i = c; }
                }
                at[xp_t] = best_i;
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

    return {fn: build_c(run_pass({"function": fn, "form": "any"}), tmp_path_factory.mktemp(fn), cplusplus=False)
            for fn in ("rowsum", "tag", "tvm_sum", "tvm_pool")}


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


def test_the_default_tiles_block_strided_loops_unless_their_body_branches(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The plan's default form (auto) tiles a straight-line block-strided loop; a branching one (an arg-max's
    conditional update, which would become masked stores) keeps its per-thread loop, and the explicit ``any``
    still tiles it — and the tiled arg-max finds, per thread, the index numpy's model of that thread finds."""
    from tests.conftest import build_c

    assert "xp_ti_cb" in run_pass({"function": "rowsum"})
    with pytest.raises(PassRefused):
        run_pass({"function": "row_argmax"})
    tiled = run_pass({"function": "row_argmax", "form": "any"})
    assert "xp_ti_cb" in tiled
    lib = build_c(tiled, tmp_path_factory.mktemp("row_argmax"), cplusplus=False)
    I32P = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")
    lib.row_argmax.argtypes = [I32P, F32P, ctypes.c_int, ctypes.c_int]
    x = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
    at = np.zeros(64, dtype=np.int32)
    lib.row_argmax(at, x, 1000, 64)
    expected = [t + 64 * int(np.argmax(x[t::64])) for t in range(64)]
    np.testing.assert_array_equal(at, expected)


def test_threads_sharing_a_written_scalar_are_refused() -> None:
    with pytest.raises(PassRefused, match="share the scalar 'total'"):
        run_pass({"function": "shared_total", "form": "any"})


def test_row_mean_tuner_action_verifies_against_the_reference(tmp_path: Path) -> None:
    from xpiler_core.tune.cpu_problem import CpuTuningProblem
    from xpiler_core.verify.spec import load_spec

    # the plan runs the pass on uniform loops; the tuner's plan space turns block-strided loops on
    spec = load_spec(SUITE / "reduction" / "mean" / "spec.toml")
    problem = CpuTuningProblem(spec.source.read_text(), str(spec.source), spec, tmp_path)
    assert "any" in problem.plan_space()["thread_interchange.form"]
    text = problem.render(problem.config_for({**problem.plan_defaults(), "thread_interchange.form": "any"}))
    assert text is not None and "xp_ti_cb" in text
    report = problem._verify(text, ())
    assert report.passed, report.summary()


def threads_model_tvm_sum(x: np.ndarray, n: int, outer: int, bdx: int, bdy: int, coef: int) -> np.ndarray:
    out = np.zeros(bdx * bdy, dtype=np.float32)
    for ty in range(bdy):
        for tx in range(bdx):
            acc = np.float32(0.25)
            for o in range(outer):
                if o * 4 + (tx >> 1) < n:
                    acc = np.float32(acc + x[o * 2 * coef + tx])
            out[tx + bdx * ty] = acc
    return out


@settings(max_examples=30, deadline=None)
@given(n=st.integers(-5, 400), outer=st.integers(0, 40), bdx=st.integers(1, 32), bdy=st.sampled_from([1, 1, 2]),
       coef=st.integers(1, 9))
def test_uniform_loop_sums_equal_the_threads_bit_for_bit(libs: dict[str, ctypes.CDLL], n: int, outer: int, bdx: int,
                                                          bdy: int, coef: int) -> None:
    """TVM's cross-thread sums: the loop every thread runs alike goes outside the threads and its guarded tail
    is split off; each thread's own order is kept, so the float sums match bit for bit."""
    x = np.random.default_rng(n + 10 + 1000 * outer).standard_normal(outer * 2 * coef + 64).astype(np.float32)
    out = np.zeros(bdx * bdy, dtype=np.float32)
    fn = libs["tvm_sum"].tvm_sum
    fn.argtypes = [F32P, F32P] + [ctypes.c_int] * 5
    fn.restype = None
    fn(out, x, n, outer, bdx, bdy, coef)
    np.testing.assert_array_equal(out, threads_model_tvm_sum(x, n, outer, bdx, bdy, coef))


def test_uniform_loop_goes_outside_and_splits_its_guard() -> None:
    text = run_pass({"function": "tvm_sum", "form": "uniform"})
    assert "xp_ti_cut" in text and "acc_x" in text  # the guard-free range, the private array expanded per thread
    with pytest.raises(PassRefused):
        run_pass({"function": "rowsum", "form": "uniform"})  # block-strided: not a uniform loop


@settings(max_examples=25, deadline=None)
@given(w=st.integers(1, 70), base=st.integers(0, 5))
def test_pool_nest_goes_outside_the_threads_and_matches_numpy(libs: dict[str, ctypes.CDLL], w: int,
                                                               base: int) -> None:
    """TVM's pools write ``out[base + tx]``: one location per thread, so the whole window nest goes outside
    and the threads become the vector loop (a padded max pool, numpy reference)."""
    text = run_pass({"function": "tvm_pool", "form": "uniform"})
    pool = text[text.index("void tvm_pool"):text.index("void shifted")]
    assert pool.index("for (int r1") < pool.index("for (int xp_tx = 0; xp_tx < xp_bdx; ++xp_tx) {\n", pool.index(
        "for (int r0")), pool  # r0 and r1 both outside the thread loop
    bdx = (w + 1) // 2
    rng = np.random.default_rng(w * 10 + base)
    x = rng.standard_normal(3 * (w + 2)).astype(np.float32)
    out = np.full(base + bdx + 2, 7.0, dtype=np.float32)
    fn = libs["tvm_pool"].tvm_pool
    fn.argtypes = [F32P, F32P] + [ctypes.c_int] * 3
    fn.restype = None
    fn(out, x, w, bdx, base)
    padded = np.full((3, 2 * bdx + 2), -3.0e38, dtype=np.float32)
    rows = x.reshape(3, w + 2)
    padded[:, 1:w + 1] = rows[:, :w]
    windows = np.stack([padded[:, 2 * t:2 * t + 2].max() for t in range(bdx)])
    np.testing.assert_array_equal(out[base:base + bdx], windows)
    assert np.all(out[:base] == 7.0) and np.all(out[base + bdx:] == 7.0)


def test_an_index_that_moves_with_the_loop_is_not_the_threads_own() -> None:
    with pytest.raises(PassRefused, match="not its own"):
        run_pass({"function": "shifted", "form": "uniform"})
