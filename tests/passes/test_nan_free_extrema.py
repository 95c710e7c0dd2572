"""``nan_free_extrema``: a running max/min that provably never holds NaN loses its per-element NaN test.

CUDA's ``fmaxf``/``max`` return the other operand when one is NaN. The kernels below are translated by the CPU
plan, built with g++ and run on rows full of NaNs (some rows all NaN) against numpy's ``fmax``/``fmin``, which
have the same rule. Three kernels whose running value *can* hold NaN (started from the data, accumulated onto
what the caller passed, overwritten with data inside the loop) must keep CUDA's answer: rewriting them would
keep a NaN that CUDA drops.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

FLT_MAX = np.finfo(np.float32).max

KERNELS = r"""
#include <cfloat>
// a local running max from a constant
__global__ void rowmax(const float* __restrict__ x, float* __restrict__ y, int n, int m) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) {
    float acc = -FLT_MAX;
    for (int j = 0; j < m; ++j) acc = fmaxf(acc, x[r * m + j]);
    y[r] = acc;
  }
}

// TVM's spelling: the output element itself accumulates, after a constant store
__global__ void rowmin_tvm(const float* __restrict__ x, float* __restrict__ y, int n, int m) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) {
    y[r] = 3.402823e+38f;
    for (int j = 0; j < m; ++j) y[r] = min(y[r], x[r * m + j]);
  }
}

// started from the data: may hold NaN
__global__ void rowmax_first(const float* __restrict__ x, float* __restrict__ y, int n, int m) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) {
    float acc = x[r * m];
    for (int j = 1; j < m; ++j) acc = max(acc, x[r * m + j]);
    y[r] = acc;
  }
}

// accumulated onto what the caller passed: may hold NaN
__global__ void rowmax_onto(const float* __restrict__ x, float* __restrict__ y, int n, int m) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n)
    for (int j = 0; j < m; ++j) y[r] = max(y[r], x[r * m + j]);
}

// overwritten with data inside the loop: may hold NaN after the restart
__global__ void rowmax_restart(const float* __restrict__ x, float* __restrict__ y, int n, int m) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) {
    y[r] = -FLT_MAX;
    for (int j = 0; j < m; ++j) {
      y[r] = max(y[r], x[r * m + j]);
      if (j == m / 2) y[r] = x[r * m + j];
    }
  }
}

extern "C" void run_rowmax(const float* x, float* y, int n, int m) { rowmax<<<(n + 63) / 64, 64>>>(x, y, n, m); }
extern "C" void run_rowmin_tvm(const float* x, float* y, int n, int m) { rowmin_tvm<<<(n + 63) / 64, 64>>>(x, y, n, m); }
extern "C" void run_rowmax_first(const float* x, float* y, int n, int m) { rowmax_first<<<(n + 63) / 64, 64>>>(x, y, n, m); }
extern "C" void run_rowmax_onto(const float* x, float* y, int n, int m) { rowmax_onto<<<(n + 63) / 64, 64>>>(x, y, n, m); }
extern "C" void run_rowmax_restart(const float* x, float* y, int n, int m) { rowmax_restart<<<(n + 63) / 64, 64>>>(x, y, n, m); }
"""


@pytest.fixture(scope="module")
def translated(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, str]:
    text, records, _ctx = translate_to_cpu(KERNELS, "extrema.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "nan_free_extrema")
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("extrema")))), " ".join(record["notes"])


def _rows(n: int, m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, m)).astype(np.float32)
    x[rng.random((n, m)) < 0.3] = np.nan
    x[::7] = np.nan  # rows with nothing but NaN
    x[3::11, 0] = np.nan  # rows that start with NaN
    return x


def _run(lib: ctypes.CDLL, name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    n, m = x.shape
    getattr(lib, f"run_{name}")(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), n, m)
    return y


def _fold(op: np.ufunc, start: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = start.astype(np.float32).copy()
    for j in range(x.shape[1]):
        out = op(out, x[:, j])
    return out


@pytest.mark.parametrize("shape", [(1, 1), (70, 9), (333, 17)])
def test_rewritten_extrema_keep_cuda_nan_rule(translated: tuple[ctypes.CDLL, str], shape: tuple[int, int]) -> None:
    lib, notes = translated
    assert "rowmax: " in notes and "rowmin_tvm: " in notes, notes  # the two provable ones were rewritten
    n, m = shape
    x = _rows(n, m, n * m)
    got = _run(lib, "rowmax", x, np.zeros(n, np.float32))
    np.testing.assert_array_equal(got, _fold(np.fmax, np.full(n, -FLT_MAX), x))
    got = _run(lib, "rowmin_tvm", x, np.full(n, np.nan, np.float32))
    np.testing.assert_array_equal(got, _fold(np.fmin, np.full(n, np.float32(3.402823e38)), x))


@pytest.mark.parametrize("shape", [(70, 9), (333, 17)])
def test_running_values_that_may_hold_nan_keep_cuda_answer(translated: tuple[ctypes.CDLL, str],
                                                          shape: tuple[int, int]) -> None:
    lib, notes = translated
    for name in ("rowmax_first", "rowmax_onto", "rowmax_restart"):
        assert f"{name}:" not in notes, notes
    n, m = shape
    x = _rows(n, m, n + m)
    got = _run(lib, "rowmax_first", x, np.zeros(n, np.float32))
    np.testing.assert_array_equal(got, _fold(np.fmax, x[:, 0], x[:, 1:]))
    start = np.where(np.arange(n) % 2 == 0, np.nan, -5.0).astype(np.float32)
    got = _run(lib, "rowmax_onto", x, start.copy())
    np.testing.assert_array_equal(got, _fold(np.fmax, start, x))
    got = _run(lib, "rowmax_restart", x, np.zeros(n, np.float32))
    half = m // 2
    np.testing.assert_array_equal(got, _fold(np.fmax, x[:, half], x[:, half + 1:]))
