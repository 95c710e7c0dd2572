"""Delinearize: the split-by-divisor loop computes what the flat loop computed (numpy references), hoists only
what is evaluated on every iteration, falls back to the flat loop where the floor identity does not hold, and
refuses loops it cannot split."""

from __future__ import annotations

import ctypes
import re
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

KERNELS = r"""
void chan(float* y, const float* x, const float* w, const float* b, int s, int n, int d) {
    for (int i = s; i < n; ++i) y[i] = x[i] * w[i / d % 4] + b[i / d % 4] * (float)(i % d);
}
void guarded(float* y, const float* x, const float* t, int n, int d, int m) {
    for (int i = 0; i < n; ++i) {
        if (i / d < m) y[i] = x[i] + t[i / d];
    }
}
void quot(float* y, const float* x, int n, int d) {
    for (int i = 0; i < n; ++i) y[i] = x[i] + (float)(i / d) + 0.5f * (float)(i % d);
}
void bcast(float* y, const float* x, const float* b, int n) {
    for (int i = 0; i < n; ++i) y[i] = x[i] + b[i & 7] * (float)(i >> 3);
}
void fdiv(float* y, const float* x, int n, float d) {
    for (int i = 0; i < n; ++i) y[i] = x[i] * (i / d) + x[i] / 2.5f;
}
void plain(float* y, const float* x, int n) {
    for (int i = 0; i < n; ++i) y[i] = x[i] * 2.0f;
}
void levels(float* y, const float* x, const float* t, int s, int n) {
    for (int i = s; i < n; ++i)
        y[i] = x[i] + t[i / 100 % 7] * (float)(i / 10 % 10) + (float)(i % 100) - 0.25f * (float)(i % 1000 / 10)
               + (float)(i >> 4);
}
void planes(float* y, const float* x, const float* t, int n, int h, int w) {
    for (int i = 0; i < n; ++i) y[i] = x[i] * t[i / (h * w)] + (float)(i / w % h) - (float)(i % (h * w));
}
void moving(float* y, const float* x, int n, int d) {
    for (int i = 0; i < n; ++i) { y[i] = x[i / d]; d += 1; }
}
"""


def run_pass(params: dict) -> str:
    module = lower_text(KERNELS, "k.c", Dialect.C)
    mod = get_pass("delinearize")
    out = mod.apply(module, {**mod.INFO.defaults(), **params}, PassContext(Dialect.C, Dialect.C))
    return print_module(out, Dialect.C)


def bind(lib: ctypes.CDLL, name: str, argtypes: list) -> object:
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = argtypes, None
    return fn


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    from tests.conftest import build_c

    out = {}
    for fn in ("chan", "guarded", "quot", "bcast", "levels", "planes"):
        # every divisor split (the default leaves divisors below 8 to the flat loop)
        out[fn] = build_c(run_pass({"function": fn, "min_divisor": 1, "short_loop": 0}), tmp_path_factory.mktemp(fn),
                          cplusplus=False)
    return out


@settings(max_examples=25, deadline=None)
@given(s=st.integers(0, 7), n=st.integers(0, 70), d=st.integers(1, 11))
def test_split_by_divisor_matches_numpy(libs: dict[str, ctypes.CDLL], s: int, n: int, d: int) -> None:
    rng = np.random.default_rng(n * 100 + d)
    size = max(n, 1)
    x = rng.standard_normal(size).astype(np.float32)
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    y = np.full(size, 7.0, dtype=np.float32)
    bind(libs["chan"], "chan", [F32P, F32P, F32P, F32P, ctypes.c_int, ctypes.c_int, ctypes.c_int])(
        y, x, w, b, s, n, d)
    expected = np.full(size, 7.0, dtype=np.float32)
    i = np.arange(s, n)
    expected[s:n] = x[s:n] * w[(i // d) % 4] + b[(i // d) % 4] * (i % d).astype(np.float32)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 100])
def test_shift_and_mask_count_as_division_by_a_power_of_two(libs: dict[str, ctypes.CDLL], n: int) -> None:
    text = run_pass({"function": "bcast", "short_loop": 0})
    assert "& 7" not in text.split("else")[0]  # the split form indexes b contiguously
    x = np.linspace(-2, 2, max(n, 1)).astype(np.float32)
    b = np.arange(1, 9, dtype=np.float32)
    y = np.zeros(max(n, 1), dtype=np.float32)
    bind(libs["bcast"], "bcast", [F32P, F32P, F32P, ctypes.c_int])(y, x, b, n)
    i = np.arange(n)
    expected = np.zeros(max(n, 1), dtype=np.float32)
    expected[:n] = x[:n] + b[i & 7] * (i >> 3).astype(np.float32)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("d", [-3, -1, 1, 4])
def test_non_positive_divisor_runs_the_flat_loop_with_c_semantics(libs: dict[str, ctypes.CDLL], d: int) -> None:
    n = 23
    x = np.linspace(-1, 1, n).astype(np.float32)
    y = np.zeros(n, dtype=np.float32)
    bind(libs["quot"], "quot", [F32P, F32P, ctypes.c_int, ctypes.c_int])(y, x, n, d)
    i = np.arange(n)
    q = np.trunc(i / d).astype(np.int64)  # C division truncates toward zero
    r = i - q * d
    np.testing.assert_allclose(y, x + q.astype(np.float32) + np.float32(0.5) * r.astype(np.float32), rtol=1e-6)


def test_reads_under_a_condition_are_not_hoisted(libs: dict[str, ctypes.CDLL]) -> None:
    text = run_pass({"function": "guarded"})
    hoisted = re.findall(r"xp_h\d+ = ([^;]*);", text)
    assert not any("t[" in h for h in hoisted), hoisted
    n, d, m = 50, 6, 5  # quotients reach 8: t has only m entries, read only where i / d < m
    x = np.arange(n, dtype=np.float32)
    t = np.arange(10, 10 + m, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    bind(libs["guarded"], "guarded", [F32P, F32P, F32P, ctypes.c_int, ctypes.c_int, ctypes.c_int])(y, x, t, n, d, m)
    i = np.arange(n)
    keep = i // d < m
    expected = np.where(keep, x + t[np.minimum(i // d, m - 1)], 0).astype(np.float32)
    np.testing.assert_array_equal(y, expected)


def test_per_quotient_loads_are_hoisted_out_of_the_inner_loop() -> None:
    text = run_pass({"function": "chan"})
    hoisted = re.findall(r"xp_h\d+ = ([^;]*);", text)
    assert any("w[" in h for h in hoisted) and any("b[" in h for h in hoisted), text
    inner = text[text.index("for (int i = "):]
    assert "/ d" not in inner.split("}")[0]


@settings(max_examples=20, deadline=None)
@given(s=st.integers(0, 250), n=st.integers(0, 2600))
def test_multiples_of_the_divisor_move_to_the_quotient(libs: dict[str, ctypes.CDLL], s: int, n: int) -> None:
    """TVM's nested axes: split by 10, ``i / 100`` and ``i % 1000`` become quotient math (numpy reference)."""
    rng = np.random.default_rng(s * 7 + n)
    size = max(n, 1)
    x, t = rng.standard_normal(size).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    y = np.full(size, 3.0, dtype=np.float32)
    bind(libs["levels"], "levels", [F32P, F32P, F32P, ctypes.c_int, ctypes.c_int])(y, x, t, s, n)
    i = np.arange(s, n)
    expected = np.full(size, 3.0, dtype=np.float32)
    expected[s:n] = (x[s:n] + t[i // 100 % 7] * (i // 10 % 10).astype(np.float32) + (i % 100).astype(np.float32)
                     - np.float32(0.25) * (i % 1000 // 10).astype(np.float32) + (i >> 4).astype(np.float32))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 400), h=st.integers(-3, 9), w=st.integers(1, 12))
def test_symbolic_multiples_need_a_positive_factor(libs: dict[str, ctypes.CDLL], n: int, h: int, w: int) -> None:
    """``i / (h * w)`` becomes ``q / h`` when split by ``w``: only where ``h > 0`` (else the flat loop, C
    semantics); numpy reference with C's truncating division."""
    if h * w == 0:
        return  # the source itself divides by zero
    if h < 0:
        n = min(n, -h * w)  # keeps i / (h * w) == 0: t[0] is the only plane
    size = max(n, 1)
    rng = np.random.default_rng(n + 17 * abs(h) + w)
    x = rng.standard_normal(size).astype(np.float32)
    i = np.arange(n)
    plane = np.trunc(i / (h * w)).astype(np.int64)
    t = rng.standard_normal(int(np.abs(plane).max(initial=0)) + 1).astype(np.float32)
    y = np.zeros(size, dtype=np.float32)
    bind(libs["planes"], "planes", [F32P, F32P, F32P, ctypes.c_int, ctypes.c_int, ctypes.c_int])(y, x, t, n, h, w)
    row = np.trunc(i / w).astype(np.int64)
    expected = np.zeros(size, dtype=np.float32)
    expected[:n] = (x[:n] * t[plane] + np.fmod(row, h).astype(np.float32)
                    - np.fmod(i, h * w).astype(np.float32))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-4)


def test_divisor_chosen_is_the_one_the_others_are_multiples_of() -> None:
    text = run_pass({"function": "levels"})
    split = text[text.index("levels"):]
    assert "xp_dl_d = (long long)10;" in split
    inner = split[split.index("for (int i = xp_dl_lo"):]
    inner = inner[:inner.index("}")]
    assert "/ 100" not in inner and "% 1000" not in inner, inner  # hoisted per quotient


def test_small_divisors_are_left_to_the_flat_loop_by_default() -> None:
    with pytest.raises(PassRefused, match="below min_divisor"):
        run_pass({"function": "bcast", "min_divisor": 16})  # i & 7, i >> 3: a split into loops of 8
    with pytest.raises(PassRefused, match="shorter than 16 that hoist no load or call"):
        run_pass({"function": "bcast"})  # loops of 8 that would hoist only (float)(i >> 3)


@pytest.mark.parametrize(("fn", "why"), [("plain", "divide"), ("moving", "divide"), ("fdiv", "divide")])
def test_refuses_loops_it_cannot_split(fn: str, why: str) -> None:
    with pytest.raises(PassRefused, match=why):
        run_pass({"function": fn, "loop": "i"})


def test_batchnorm_default_plan_hoists_and_verifies_against_the_reference(tmp_path: Path) -> None:
    """The flattened TVM-style batch norm: the default plan splits it (delinearize is a default step), and the
    translation passes the spec's numpy reference on every case (per-channel loads and the sqrt hoisted per
    channel)."""
    from xpiler_core.tune.config import Config
    from xpiler_core.tune.cpu_problem import CpuTuningProblem
    from xpiler_core.verify.spec import load_spec

    spec = load_spec(SUITE / "normalization" / "batchnorm" / "spec.toml")
    problem = CpuTuningProblem(spec.source.read_text(), str(spec.source), spec, tmp_path)
    text = problem.render(Config((), problem.binding_defaults))
    assert text is not None
    assert any("sqrtf(" in h for h in re.findall(r"xp_h\d+ = ([^;]*);", text))
    report = problem._verify(text, ())
    assert report.passed, report.summary()


# TVM's transpose: each block writes 1024 consecutive outputs, thread tx reading row tx & 63 of column tx >> 6
def _split_and_launch(source: str, entry: str, x: np.ndarray, blocks: int, threads: int,
                      tmp_path: Path) -> tuple[str, np.ndarray]:
    """``source`` through the CPU plan (delinearize must change it), built, and ``entry(x, out, blocks, threads)``
    run: the output text and ``out`` (NaN where nothing was written)."""
    from tests.conftest import build_shared
    from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

    text, records, _ctx = translate_to_cpu(source, "k.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "delinearize")
    assert record["changed"], record
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    out = np.full(blocks * threads, np.nan, np.float32)
    getattr(lib, entry)(x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), blocks, threads)
    return text, out


TRANSPOSE = r"""
extern "C" __global__ void __launch_bounds__(1024) tr(float* __restrict__ A, float* __restrict__ T) {
  T[blockIdx.x * blockDim.x + threadIdx.x] = A[(blockIdx.x / 20) * 20480 + (threadIdx.x & 63) * 320
                                                 + (blockIdx.x % 20) * 16 + (threadIdx.x >> 6)];
}
extern "C" void run_tr(float* A, float* T, int blocks, int threads) { tr<<<blocks, threads>>>(A, T); }
"""


@pytest.mark.parametrize("threads", [1024, 96, 64, 40])
def test_a_thread_loop_is_split_by_the_mask_it_reads_with(tmp_path: Path, threads: int) -> None:
    """The CPU plan splits the loop over threadIdx.x by 64 (one column of the gather per quotient, a constant
    stride inside) and the launch computes the gather numpy computes, for blocks that are not a multiple of 64
    too (the last quotient is partial) and blocks shorter than one quotient."""
    blocks = 40
    a = np.random.default_rng(threads).standard_normal(2 * 20480).astype(np.float32)
    text, out = _split_and_launch(TRANSPOSE, "run_tr", a, blocks, threads, tmp_path)
    assert "& 63" not in text.split("xp_dl_base + xp_dl_d;")[1].split("}")[0]
    b, t = np.divmod(np.arange(blocks * threads), threads)
    expected = a[(b // 20) * 20480 + (t & 63) * 320 + (b % 20) * 16 + (t >> 6)]
    np.testing.assert_array_equal(out, expected)


DIGITS = r"""
extern "C" __global__ void __launch_bounds__(64) win(float* __restrict__ x, float* __restrict__ y) {
  y[blockIdx.x * blockDim.x + threadIdx.x] = x[blockIdx.x * 256 + (threadIdx.x >> 5) * 128
                                                + ((threadIdx.x & 31) >> 3) * 32 + (threadIdx.x & 7) * 2];
}
extern "C" void run_win(float* x, float* y, int blocks, int threads) { win<<<blocks, threads>>>(x, y); }
"""


@pytest.mark.parametrize("threads", [64, 96, 128, 40, 8])
def test_a_thread_loop_divided_by_a_chain_of_constants_becomes_one_loop_per_digit(tmp_path: Path,
                                                                                   threads: int) -> None:
    """Split by 32 alone the loop would still read ``(tx & 31) >> 3`` and ``tx & 7``; as digits of the mixed
    radix 32 / 8 (``tx = t0 * 32 + t1 * 8 + t2``) every division folds and the innermost loop reads with one
    stride. Blocks that 32 does not divide run the original loop. Against numpy at each block size."""
    blocks = 7
    x = np.random.default_rng(threads).standard_normal(blocks * 256 + 256).astype(np.float32)
    text, out = _split_and_launch(DIGITS, "run_win", x, blocks, threads, tmp_path)
    innermost = re.findall(r"for \(int (xp_dl_t\d+) = 0; \1 < 8; \+\+\1\) \{(.*?)\n\s*\}", text, re.S)
    assert innermost, text
    for digit, body in innermost:
        assert not re.search(rf"{digit}\s*(>>|&|/|%)", body), body
    b, t = np.divmod(np.arange(blocks * threads), threads)
    expected = x[b * 256 + (t >> 5) * 128 + ((t & 31) >> 3) * 32 + (t & 7) * 2]
    np.testing.assert_array_equal(out, expected)


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _c_eval(e: object, env: dict[str, int]) -> int:
    from xpiler_core import ast as A

    assert isinstance(e, A.Expr)
    if isinstance(e, A.Name):
        return env[e.id]
    if isinstance(e, A.Cast):
        return _c_eval(e.operand, env)
    value = A.const_int(e)
    if value is not None:
        return value
    assert isinstance(e, A.Binary), e
    a, b = _c_eval(e.left, env), _c_eval(e.right, env)
    ops = {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if b >= 0 else 0, ">>": a >> b if b >= 0 else 0,
           "&": a & b}
    if e.op in ops:
        return ops[e.op]
    return _c_div(a, b) if e.op == "/" else a - b * _c_div(a, b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=3, max_size=3), st.integers(0, 5), st.integers(0, 3),
       st.sampled_from(["/", "%", ">>", "&"]), st.sampled_from(["/", "%", ">>", "&"]), st.integers(1, 70),
       st.integers(1, 70))
def test_digit_folding_agrees_with_c_arithmetic(coeffs: list[int], const: int, order: int, op1: str, op2: str,
                                                by1: int, by2: int) -> None:
    """``_simplify_digits`` folds a division of an affine form of digits only where C's quotient and remainder
    are the two parts: evaluated at every digit value, the folded expression equals the original (C semantics)."""
    from xpiler_core import ast as A
    from xpiler_core.passes.cpu.delinearize import _simplify_digits

    ranges = {"a": 3, "b": 4, "c": 8}
    order_names = ["a", "b", "c"]
    form: A.Expr = A.lit(const)
    for name, k in zip(order_names, coeffs, strict=True):
        form = A.binop("+", form, A.binop("*", A.Name(name), A.lit(k)))

    def divide(e: A.Expr, op: str, by: int) -> A.Expr:
        if op == ">>":
            return A.binop(">>", e, A.lit(by % 6))
        if op == "&":
            return A.binop("&", e, A.lit((1 << (by % 6)) - 1))
        return A.binop(op, e, A.lit(by))

    expr = divide(A.binop("+", divide(form, op1, by1), A.Name("c") if order else A.lit(0)), op2, by2)
    folded = _simplify_digits(expr, ranges, order_names)
    for a in range(3):
        for b in range(4):
            for c in range(8):
                env = {"a": a, "b": b, "c": c}
                assert _c_eval(folded, env) == _c_eval(expr, env), (expr, folded, env)


WINDOW = r"""
extern "C" __global__ void __launch_bounds__(64) pool(float* __restrict__ x, float* __restrict__ y) {
  y[blockIdx.x * blockDim.x + threadIdx.x] = -3.402823e+38f;
  for (int r = 0; r < 3; ++r) {
    y[blockIdx.x * blockDim.x + threadIdx.x] = max(y[blockIdx.x * blockDim.x + threadIdx.x],
        (1 <= ((threadIdx.x & 7) * 2 + r)) ? x[blockIdx.x * 512 + (threadIdx.x >> 5) * 256
                                              + ((threadIdx.x & 31) >> 3) * 32 + (threadIdx.x & 7) * 2 + r - 1]
                                            : -3.402823e+38f);
  }
}
extern "C" void run_pool(float* x, float* y, int blocks, int threads) { pool<<<blocks, threads>>>(x, y); }
"""


@pytest.mark.parametrize("threads", [64, 96, 40])
def test_the_outer_digits_move_out_of_the_window_loop(tmp_path: Path, threads: int) -> None:
    """A pool's window loop, which thread_interchange put outside the threads, ends up between the outer digits
    and the innermost one (each 8-lane row of threads runs its whole window); the launch computes numpy's
    windowed max at each block size (40: the original loop)."""
    blocks = 5
    x = np.random.default_rng(threads).standard_normal(blocks * 512 + 512).astype(np.float32)
    text, out = _split_and_launch(WINDOW, "run_pool", x, blocks, threads, tmp_path)
    assert re.search(r"for \(int xp_dl_t1 = 0; xp_dl_t1 < 4; \+\+xp_dl_t1\)\s*for \(int r = 0;", text), text
    b, t = np.divmod(np.arange(blocks * threads), threads)
    base = b * 512 + (t >> 5) * 256 + ((t & 31) >> 3) * 32 + (t & 7) * 2
    taps = [np.where((t & 7) * 2 + r >= 1, x[np.maximum(base + r - 1, 0)], np.float32(-3.402823e38))
            for r in range(3)]
    np.testing.assert_array_equal(out, np.maximum.reduce(taps))


SHARED_ACCUMULATOR = r"""
void f(float* y, const float* x) {
    for (int r = 0; r < 3; ++r)
        for (int xp_dl_t0 = 0; xp_dl_t0 < 2; ++xp_dl_t0)
            for (int xp_dl_t1 = 0; xp_dl_t1 < 8; ++xp_dl_t1)
                y[xp_dl_t1] = y[xp_dl_t1] * 0.5f + x[r * 16 + xp_dl_t0 * 8 + xp_dl_t1];
}
"""


def test_digits_that_share_an_element_stay_inside() -> None:
    """``y[t1]`` does not tell ``t0`` apart: with ``t0`` outside ``r`` the updates of one element would run in
    another order, so the loop order is kept (the pass refuses); ``y[t0 * 8 + t1]`` (one element per digit pair)
    has its outer digit moved out."""
    mod = get_pass("delinearize")
    module = lower_text(SHARED_ACCUMULATOR, "f.c", Dialect.C)
    with pytest.raises(PassRefused):
        mod.apply(module, mod.INFO.defaults(), PassContext(Dialect.C, Dialect.C))
    distinct = SHARED_ACCUMULATOR.replace("y[xp_dl_t1]", "y[xp_dl_t0 * 8 + xp_dl_t1]")
    out = mod.apply(lower_text(distinct, "f.c", Dialect.C), mod.INFO.defaults(), PassContext(Dialect.C, Dialect.C))
    text = print_module(out, Dialect.C)
    assert re.search(r"for \(int xp_dl_t0 = 0; xp_dl_t0 < 2; \+\+xp_dl_t0\)\s*for \(int r = 0;", text), text
