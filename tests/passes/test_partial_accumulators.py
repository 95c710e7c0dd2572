"""The partial-accumulators pass: serial reduction loops → independent lane accumulators.

Semantics against numpy on ragged sizes (never multiples of the lane count): a TVM-style max over a 4-D
tensor (loops merged into one), per-thread row sums of squares with a run-time width, a guarded sum, an
integer min (exact), a product; built with gcc, called through ctypes. Max/min and integer results must be
bit-exact (they do not depend on order); sums within the tolerance that reassociation needs. Shapes the
pass must leave alone: an operand that reads the accumulator, a select (not NaN-safe), a call with side
effects, a loop too short to split.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu
from xpiler_core.printer import print_module

PASSES = ["detensorization", "loop_recovery", "partial_accumulators", "loop_binding"]

KERNELS = r"""
#define D0 7
#define D1 5
#define D2 11
#define D3 13
__global__ void max4d(const float* __restrict__ x, float* __restrict__ out) {
  out[0] = -3.402823e+38f;
  for (int a = 0; a < D0; ++a)
    for (int b = 0; b < D1; ++b)
      for (int c = 0; c < D2; ++c)
        for (int d = 0; d < D3; ++d)
          out[0] = max(out[0], x[a * (D1 * D2 * D3) + b * (D2 * D3) + c * D3 + d]);
}
__global__ void rowsq(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int c = 0; c < cols; ++c) acc += x[r * cols + c] * x[r * cols + c];
  y[r] = acc;
}
__global__ void guarded_sum(const float* x, float* out, int n) {
  float s[1];
  s[0] = 0.0f;
  for (int o = 0; o < 4096; ++o)
    if (o * 3 + 1 < n) s[0] = s[0] + x[o * 3 + 1];
  out[0] = s[0];
}
__global__ void imin(const int* v, int* out, int n) {
  int m = 2147483647;
  for (int i = 0; i < n; ++i) m = min(v[i], m);
  out[0] = m;
}
__global__ void prod(const float* x, float* out, int n) {
  float p = 1.0f;
  for (int i = 0; i < n; i++) p *= x[i];
  out[0] = p;
}
__global__ void window_sub(const float* x, float* y, int n) {
  y[2] = 1.0f;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < n; ++c) y[2] = y[2] - x[r * n + c] * 0.5f;
}
"""

LAUNCHES = {
    "window_sub": {"entry": "window_sub", "grid": "1", "block": "1"},
    "max4d": {"entry": "max4d", "grid": "1", "block": "1"},
    "rowsq": {"entry": "rowsq", "grid": "(rows + 63) / 64", "block": "64"},
    # one thread per block: the lane accumulators inside the thread loop run (with 64 the threads are the lanes)
    "rowsq_one_thread": {"entry": "rowsq", "grid": "rows", "block": "1"},
    "guarded_sum": {"entry": "guarded_sum", "grid": "1", "block": "1"},
    "imin": {"entry": "imin", "grid": "1", "block": "1"},
    "prod": {"entry": "prod", "grid": "1", "block": "1"},
}

FLOAT_PTR = ctypes.POINTER(ctypes.c_float)
INT_PTR = ctypes.POINTER(ctypes.c_int)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    import subprocess

    out: dict[str, ctypes.CDLL] = {}
    for entry, launch in LAUNCHES.items():
        text, records, _ctx = translate_to_cpu(KERNELS, "k.cu", None, {"loop_recovery": launch}, PASSES)
        assert text is not None and ("xp_pa" in text or "xp_acc" in text), entry
        assert next(r for r in records if r["name"] == "partial_accumulators")["changed"]
        folder = tmp_path_factory.mktemp(entry)
        src, lib = folder / "k.cpp", folder / "k.so"
        src.write_text(text)
        subprocess.run(["g++", "-O2", "-fopenmp", "-fno-strict-aliasing", "-shared", "-fPIC", str(src), "-o",
                        str(lib)], check=True, capture_output=True, timeout=300)
        out[entry] = ctypes.CDLL(str(lib))
    return out


def test_max_over_merged_loops_is_exact(libs: dict[str, ctypes.CDLL]) -> None:
    x = np.random.default_rng(0).standard_normal(7 * 5 * 11 * 13).astype(np.float32)
    x[1234] = np.nan  # fmaxf semantics: NaN is ignored, as CUDA's max does
    out = np.zeros(1, dtype=np.float32)
    libs["max4d"].max4d(x.ctypes.data_as(FLOAT_PTR), out.ctypes.data_as(FLOAT_PTR))
    assert out[0] == np.nanmax(x)


def test_merged_loop_is_one_loop() -> None:
    module = lower_text(KERNELS, "k.cu", Dialect.CUDA)
    out = get_pass("partial_accumulators").apply(module, {"function": "max4d"},
                                                 PassContext(Dialect.CUDA, Dialect.C))
    text = print_module(out, Dialect.C)
    body = text[text.index("void max4d"):text.index("void rowsq")]
    assert "xp_f" in body and "int d = 0" not in body  # the four loops walked as one


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 70), cols=st.integers(0, 150), one_thread=st.booleans())
def test_row_sums_of_squares_match_numpy(libs: dict[str, ctypes.CDLL], rows: int, cols: int,
                                         one_thread: bool) -> None:
    x = np.random.default_rng(rows * 1000 + cols).uniform(-1, 1, (rows, cols)).astype(np.float32)
    y = np.full(rows, -7.0, dtype=np.float32)
    lib = libs["rowsq_one_thread" if one_thread else "rowsq"]
    lib.rowsq(x.ctypes.data_as(FLOAT_PTR), y.ctypes.data_as(FLOAT_PTR), ctypes.c_int(rows), ctypes.c_int(cols))
    np.testing.assert_allclose(y, (x.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 95, 1000, 12289, 20000])
def test_guarded_sum_matches_numpy(libs: dict[str, ctypes.CDLL], n: int) -> None:
    x = np.random.default_rng(n).uniform(0, 1, max(n, 1) + 4 * 4096).astype(np.float32)
    out = np.zeros(1, dtype=np.float32)
    libs["guarded_sum"].guarded_sum(x.ctypes.data_as(FLOAT_PTR), out.ctypes.data_as(FLOAT_PTR), ctypes.c_int(n))
    picked = [x[o * 3 + 1] for o in range(4096) if o * 3 + 1 < n]
    np.testing.assert_allclose(out[0], np.sum(np.array(picked, dtype=np.float64)), rtol=1e-5, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(0, 3000))
def test_integer_min_is_exact(libs: dict[str, ctypes.CDLL], n: int) -> None:
    v = np.random.default_rng(n).integers(-(2**31), 2**31 - 1, max(n, 1), dtype=np.int32)
    out = np.zeros(1, dtype=np.int32)
    libs["imin"].imin(v.ctypes.data_as(INT_PTR), out.ctypes.data_as(INT_PTR), ctypes.c_int(n))
    assert out[0] == (v[:n].min() if n else 2147483647)


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 1001])
def test_product_matches_numpy(libs: dict[str, ctypes.CDLL], n: int) -> None:
    x = np.random.default_rng(n).uniform(0.9, 1.1, max(n, 1)).astype(np.float32)
    out = np.zeros(1, dtype=np.float32)
    libs["prod"].prod(x.ctypes.data_as(FLOAT_PTR), out.ctypes.data_as(FLOAT_PTR), ctypes.c_int(n))
    np.testing.assert_allclose(out[0], np.prod(x[:n].astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("body", [
    "acc = acc + acc * x[i];",              # the operand reads the accumulator
    "acc = acc > x[i] ? acc : x[i];",       # a select: not associative with NaN
    "acc = acc + x[i++];",                  # a side effect in the operand
    "acc = acc - x[i];",                    # not associative
])
def test_leaves_non_reductions_alone(body: str) -> None:
    source = ("__global__ void k(const float* x, float* y, int n) {\n  float acc = 0.0f;\n"
              f"  for (int i = 0; i < n; ++i) {body}\n  y[0] = acc;\n}}\n")
    module = lower_text(source, "k.cu", Dialect.CUDA)
    with pytest.raises(PassRefused):
        get_pass("partial_accumulators").apply(module, {}, PassContext(Dialect.CUDA, Dialect.C))


def test_short_constant_loop_is_left_alone() -> None:
    source = ("__global__ void k(const float* x, float* y) {\n  float acc = 0.0f;\n"
              "  for (int i = 0; i < 11; ++i) acc += x[i];\n  y[0] = acc;\n}\n")
    module = lower_text(source, "k.cu", Dialect.CUDA)
    with pytest.raises(PassRefused, match="too few"):
        get_pass("partial_accumulators").apply(module, {}, PassContext(Dialect.CUDA, Dialect.C))


@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_memory_accumulator_kept_in_a_register_is_exact(libs: dict[str, ctypes.CDLL], n: int) -> None:
    """Not associative (subtraction): the location is kept in a local in the same order, bit for bit; with
    n = 0 the loop never runs and y[2] keeps what the kernel stored before it."""
    x = np.random.default_rng(n).standard_normal(max(3 * n, 1)).astype(np.float32)
    y = np.zeros(4, dtype=np.float32)
    libs["window_sub"].window_sub(x.ctypes.data_as(FLOAT_PTR), y.ctypes.data_as(FLOAT_PTR), ctypes.c_int(n))
    expected = np.float32(1.0)
    for v in x[:3 * n]:
        expected = np.float32(expected - np.float32(v * np.float32(0.5)))
    assert y[2] == expected
