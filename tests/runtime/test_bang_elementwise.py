"""Elementwise, scalar, cycle, active and fill intrinsics of the BANG model against numpy."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if TYPE_CHECKING:  # fixtures come from conftest.py; the class is only needed for annotations
    from tests.runtime.conftest import BangLib


BINARY = [
    ("__bang_add", 0, lambda a, b: a + b),
    ("__bang_sub", 1, lambda a, b: a - b),
    ("__bang_mul", 2, lambda a, b: a * b),
    ("__bang_div", 3, lambda a, b: a / b),
    ("__bang_maxequal", 4, np.maximum),
    ("__bang_minequal", 5, np.minimum),
    ("__bang_eq", 6, lambda a, b: (a == b).astype(np.float64)),
    ("__bang_ne", 7, lambda a, b: (a != b).astype(np.float64)),
    ("__bang_lt", 8, lambda a, b: (a < b).astype(np.float64)),
    ("__bang_le", 9, lambda a, b: (a <= b).astype(np.float64)),
    ("__bang_gt", 10, lambda a, b: (a > b).astype(np.float64)),
    ("__bang_ge", 11, lambda a, b: (a >= b).astype(np.float64)),
    ("__bang_and", 12, lambda a, b: ((a != 0) & (b != 0)).astype(np.float64)),
    ("__bang_or", 13, lambda a, b: ((a != 0) | (b != 0)).astype(np.float64)),
    ("__bang_div(5-arg)", 14, lambda a, b: a / b),
    ("__bang_add(in-place)", 15, lambda a, b: a + b),
    ("__bang_maximum", 16, np.maximum),
    ("__bang_minimum", 17, np.minimum),
    ("__bang_pow", 18, lambda a, b: np.abs(a) ** b),
]


def _operands(rng: np.random.Generator, n: int, positive_base: bool = False) -> tuple[np.ndarray, np.ndarray]:
    a = rng.normal(size=n).astype(np.float32)
    b = rng.normal(size=n).astype(np.float32)
    b[np.abs(b) < 0.05] = 0.5  # keep divisors away from zero
    # Comparisons and logic need ties and zeros too.
    a[::7] = b[::7]
    a[::11] = 0.0
    if positive_base:  # pow: a non-negative base keeps the reference real
        a = np.abs(a) + 0.1
    return a, b


@pytest.mark.parametrize("name,op,ref", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("n", [1, 5, 64, 1000, 32768])
def test_binary_matches_numpy(bang: BangLib, rng: np.random.Generator, name: str, op: int, ref, n: int) -> None:
    a, b = _operands(rng, n, positive_base=name == "__bang_pow")
    out = bang.ok("t_binary", op, np.zeros(n, np.float32), a, b, n).arrays[1]
    expected = ref(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 4096), op=st.sampled_from(BINARY), seed=st.integers(0, 2**16))
def test_binary_any_length(bang: BangLib, n: int, op, seed: int) -> None:
    a, b = _operands(np.random.default_rng(seed), n, positive_base=op[0] == "__bang_pow")
    out = bang.ok("t_binary", op[1], np.zeros(n, np.float32), a, b, n).arrays[1]
    np.testing.assert_allclose(out, op[2](a.astype(np.float64), b.astype(np.float64)), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("n", [1, 64, 777])
def test_binary_half_rounds_like_numpy_float16(bang: BangLib, rng: np.random.Generator, n: int) -> None:
    a = rng.normal(size=n).astype(np.float16)
    b = rng.normal(size=n).astype(np.float16)
    out = bang.ok("t_binary_half", np.zeros(n, np.float32), a, b, n).arrays[0]
    np.testing.assert_array_equal(out, (a + b).astype(np.float32))  # IEEE half add, round to nearest


SCALAR = [
    ("__bang_add_scalar", 0, lambda a, s: a + s),
    ("__bang_sub_scalar", 1, lambda a, s: a - s),
    ("__bang_mul_scalar", 2, lambda a, s: a * s),
    ("__bang_div_scalar", 3, lambda a, s: a / s),
    ("__bang_add_const", 4, lambda a, s: a + s),
    ("__bang_sub_const", 5, lambda a, s: a - s),
    ("__bang_mul_const", 6, lambda a, s: a * s),
    ("__bang_maxeq_scalar", 7, np.maximum),
    ("__bang_mineq_scalar", 8, np.minimum),
    ("__bang_gt_scalar", 9, lambda a, s: (a > s).astype(np.float64)),
    ("__bang_ge_scalar", 10, lambda a, s: (a >= s).astype(np.float64)),
    ("__bang_lt_scalar", 11, lambda a, s: (a < s).astype(np.float64)),
    ("__bang_le_scalar", 12, lambda a, s: (a <= s).astype(np.float64)),
    ("__bang_eq_scalar", 13, lambda a, s: (a == s).astype(np.float64)),
    ("__bang_ne_scalar", 14, lambda a, s: (a != s).astype(np.float64)),
    ("__bang_write_value", 15, lambda a, s: np.full_like(a, s)),
    ("__memset_nram", 16, lambda a, s: np.full_like(a, s)),
    ("__bang_write_zero", 17, lambda a, s: np.zeros_like(a)),
]


@pytest.mark.parametrize("name,op,ref", SCALAR, ids=[s[0] for s in SCALAR])
@pytest.mark.parametrize("n,scalar", [(1, 0.75), (63, -1.5), (1024, 3.0), (5000, 0.25)])
def test_scalar_matches_numpy(bang: BangLib, rng: np.random.Generator, name: str, op: int, ref, n: int,
                              scalar: float) -> None:
    a = rng.normal(size=n).astype(np.float32)
    a[::5] = scalar
    out = bang.ok("t_scalar", op, np.zeros(n, np.float32), a, scalar, n).arrays[1]
    s = float(np.float32(scalar))
    np.testing.assert_allclose(out, ref(a.astype(np.float64), s), rtol=1e-6, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 4096), op=st.sampled_from(SCALAR), scalar=st.floats(-8, 8).filter(lambda v: abs(v) > 1e-2),
       seed=st.integers(0, 2**16))
def test_scalar_any_length(bang: BangLib, n: int, op, scalar: float, seed: int) -> None:
    a = np.random.default_rng(seed).normal(size=n).astype(np.float32)
    out = bang.ok("t_scalar", op[1], np.zeros(n, np.float32), a, scalar, n).arrays[1]
    s = float(np.float32(scalar))
    np.testing.assert_allclose(out, op[2](a.astype(np.float64), s), rtol=1e-6, atol=1e-7)


_erf = np.vectorize(math.erf)

UNARY = [
    ("__bang_active_relu", 0, lambda x: np.maximum(x, 0), "any"),
    ("__bang_active_sigmoid", 1, lambda x: 1 / (1 + np.exp(-x)), "any"),
    ("__bang_active_exp", 2, np.exp, "any"),
    ("__bang_active_log", 3, np.log, "pos"),
    ("__bang_active_sqrt", 4, np.sqrt, "pos"),
    ("__bang_active_recip", 5, lambda x: 1 / x, "pos"),
    ("__bang_active_gelu", 6, lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))), "any"),
    ("__bang_active_gelup", 7, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), "any"),
    ("__bang_active_tanh", 8, np.tanh, "any"),
    ("__bang_active_abs", 9, np.abs, "any"),
    ("__bang_active_sign", 10, np.sign, "any"),
    ("__bang_active_rsqrt", 11, lambda x: 1 / np.sqrt(x), "pos"),
    ("__bang_sin", 12, np.sin, "any"),
    ("__bang_cos", 13, np.cos, "any"),
    ("__bang_square", 14, np.square, "any"),
    ("__bang_relu", 15, lambda x: np.maximum(x, 0), "any"),
    ("__bang_exp", 16, np.exp, "any"),
    ("__bang_active_exphp", 17, np.exp, "any"),
    ("__bang_active_sqrthp", 18, np.sqrt, "pos"),
    ("__bang_active_reciphp", 19, lambda x: 1 / x, "pos"),
    ("__bang_active_loghp", 20, np.log, "pos"),
    ("__bang_neg", 21, np.negative, "any"),
    ("__bang_sigmoid", 22, lambda x: 1 / (1 + np.exp(-x)), "any"),
    ("__bang_log", 23, np.log, "pos"),
    ("__bang_sqrt", 24, np.sqrt, "pos"),
    ("__bang_rsqrt", 25, lambda x: 1 / np.sqrt(x), "pos"),
    ("__bang_recip", 26, lambda x: 1 / x, "pos"),
    ("__bang_tanh", 27, np.tanh, "any"),
    ("__bang_gelu", 28, lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))), "any"),
    ("__bang_abs", 29, np.abs, "any"),
    ("__bang_sign", 30, np.sign, "any"),
    ("__bang_active_sin", 31, np.sin, "any"),
    ("__bang_active_cos", 32, np.cos, "any"),
    ("__bang_active_square", 33, np.square, "any"),
    ("__bang_active_rsqrthp", 34, lambda x: 1 / np.sqrt(x), "pos"),
    ("__bang_floor", 35, np.floor, "any"),
    ("__bang_not", 36, lambda x: (x == 0).astype(np.float64), "any"),
]


def _unary_input(rng: np.random.Generator, n: int, domain: str) -> np.ndarray:
    if domain == "pos":
        return rng.uniform(0.05, 20.0, size=n).astype(np.float32)
    x = (rng.normal(size=n) * 3).astype(np.float32)
    x[::9] = 0.0
    return x


@pytest.mark.parametrize("name,op,ref,domain", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("n", [1, 7, 256, 9999])
def test_unary_matches_numpy(bang: BangLib, rng: np.random.Generator, name: str, op: int, ref, domain: str,
                             n: int) -> None:
    x = _unary_input(rng, n, domain)
    out = bang.ok("t_unary", op, np.zeros(n, np.float32), x, n).arrays[1]
    np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=2e-6, atol=2e-6)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 4096), op=st.sampled_from(UNARY), seed=st.integers(0, 2**16))
def test_unary_any_length(bang: BangLib, n: int, op, seed: int) -> None:
    x = _unary_input(np.random.default_rng(seed), n, op[3])
    out = bang.ok("t_unary", op[1], np.zeros(n, np.float32), x, n).arrays[1]
    np.testing.assert_allclose(out, op[2](x.astype(np.float64)), rtol=2e-6, atol=2e-6)


CYCLE = [
    ("__bang_cycle_add", 0, np.add),
    ("__bang_cycle_sub", 1, np.subtract),
    ("__bang_cycle_mul", 2, np.multiply),
    ("__bang_cycle_maxequal", 3, np.maximum),
    ("__bang_cycle_minequal", 4, np.minimum),
]


@pytest.mark.parametrize("name,op,ref", CYCLE, ids=[c[0] for c in CYCLE])
@pytest.mark.parametrize("rows,seg_n", [(1, 64), (4, 16), (30, 100), (128, 3)])
def test_cycle_broadcasts_segment(bang: BangLib, rng: np.random.Generator, name: str, op: int, ref, rows: int,
                                  seg_n: int) -> None:
    n = rows * seg_n
    a = rng.normal(size=n).astype(np.float32)
    seg = rng.normal(size=seg_n).astype(np.float32)
    out = bang.ok("t_cycle", op, np.zeros(n, np.float32), a, seg, n, seg_n).arrays[1]
    expected = ref(a.reshape(rows, seg_n).astype(np.float64), seg.astype(np.float64)).reshape(-1)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)


def test_cycle_rejects_ragged_length(bang: BangLib) -> None:
    r = bang.call("t_cycle", 0, np.zeros(100, np.float32), np.ones(100, np.float32), np.ones(30, np.float32), 100, 30)
    assert r.error is not None and "__bang_cycle_add" in r.error and "multiple of the segment length" in r.error


@pytest.mark.parametrize("n", [1, 100, 5000])
def test_float2half_rn_then_half2float(bang: BangLib, rng: np.random.Generator, n: int) -> None:
    x = (rng.normal(size=n) * 100).astype(np.float32)
    out = bang.ok("t_half_round_trip", np.zeros(n, np.float32), x, n).arrays[0]
    np.testing.assert_array_equal(out, x.astype(np.float16).astype(np.float32))  # numpy rounds to nearest even


INT_OPS = [("__bang_add(int32)", 0, lambda a, b: a + b), ("__bang_sub(int32)", 1, lambda a, b: a - b),
           ("__bang_maxequal(int32)", 2, np.maximum), ("__bang_add_scalar(int32)", 3, lambda a, b: a + 123456789)]


@pytest.mark.parametrize("name,op,ref", INT_OPS, ids=[o[0] for o in INT_OPS])
def test_int32_arithmetic_is_exact(bang: BangLib, rng: np.random.Generator, name: str, op: int, ref) -> None:
    n = 1000
    a = rng.integers(-(2**29), 2**29, size=n, dtype=np.int32)
    b = rng.integers(-(2**29), 2**29, size=n, dtype=np.int32)
    out = bang.ok("t_binary_int", op, np.zeros(n, np.int32), a, b, n).arrays[1]
    np.testing.assert_array_equal(out, ref(a.astype(np.int64), b.astype(np.int64)))
