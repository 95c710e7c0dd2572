"""Loop recovery recomputes a thread's pure values where a later thread loop reads them (``int tid =
threadIdx.x;`` read after a barrier) instead of keeping them in per-thread arrays, and keeps an array for
every value that could differ when computed again: one read from memory a barrier separates from its use, one
written after its declaration, one over a name the block updates. Checked against numpy on the CPU
translation."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

# a 2-D block: copies of the thread index, a global index and a row built from both, all read across barriers
PURE_VALUES = r"""
__global__ void shifted_rows(const float* x, float* y, int width) {
  __shared__ float tile[4][32];
  int tid = threadIdx.x;
  const unsigned gx = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * 4 + threadIdx.y;
  tile[threadIdx.y][tid] = x[row * width + gx];
  __syncthreads();
  float v = tile[threadIdx.y][(tid + 1) % 32];
  __syncthreads();
  tile[threadIdx.y][tid] = 2.0f * v;
  __syncthreads();
  y[row * width + gx] = tile[threadIdx.y][31 - tid] + tid;
}

extern "C" void run(const float* x, float* y, int bx, int by) {
  shifted_rows<<<dim3(bx, by), dim3(32, 4)>>>(x, y, bx * 32);
}
"""


def shifted_rows_model(x: np.ndarray) -> np.ndarray:
    rows, width = x.shape
    tiles = x.reshape(rows // 4, 4, width // 32, 32)
    doubled = 2.0 * np.roll(tiles, -1, axis=3)
    return (doubled[..., ::-1] + np.arange(32.0)).reshape(rows, width)


@pytest.mark.parametrize("grid", [(1, 1), (3, 2)])
def test_pure_values_are_recomputed_and_compute_what_numpy_does(tmp_path: Path, grid: tuple[int, int]) -> None:
    text, records, _ctx = translate_to_cpu(PURE_VALUES, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "loop_recovery")["changed"]
    for name in ("tid", "gx", "row"):
        assert f"{name}[xp_nt]" not in text, name  # no per-thread array: each loop computes its own
    assert "v[xp_nt]" in text  # a value read from shared memory is carried, not recomputed
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    bx, by = grid
    x = np.random.default_rng(bx * 7 + by).standard_normal((by * 4, bx * 32)).astype(np.float32)
    y = np.full_like(x, np.nan)
    lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int(bx), ctypes.c_int(by))
    np.testing.assert_allclose(y, shifted_rows_model(x), rtol=1e-6)


# values that would differ if computed again after the barrier: each must stay its thread's own copy
NOT_RECOMPUTABLE = r"""
__global__ void keep(const float* x, float* y, int n) {
  __shared__ float tile[64];
  tile[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  float seen = tile[63 - threadIdx.x];   // reads memory the next phase overwrites
  int moved = threadIdx.x;
  if (x[blockIdx.x * 64 + threadIdx.x] > 0.0f) moved += 1;  // written after its declaration
  __syncthreads();
  tile[threadIdx.x] = 0.0f;
  float acc = 0.0f;
  for (int s = 1; s < 4; ++s) {
    int at = (threadIdx.x + s) % 64;   // reads the loop's counter, which the block updates
    __syncthreads();
    acc += x[blockIdx.x * 64 + at];
  }
  __syncthreads();
  y[blockIdx.x * 64 + threadIdx.x] = seen + moved + acc + tile[threadIdx.x];
}

extern "C" void run(const float* x, float* y, int blocks) { keep<<<blocks, 64>>>(x, y, blocks * 64); }
"""


def keep_model(x: np.ndarray) -> np.ndarray:
    blocks = x.reshape(-1, 64)
    t = np.arange(64)
    seen = blocks[:, ::-1]
    moved = t + (blocks > 0)
    acc = sum(blocks[:, (t + s) % 64] for s in range(1, 4))
    return (seen + moved + acc).reshape(-1)


@pytest.mark.parametrize("blocks", [1, 4])
def test_values_that_could_change_stay_per_thread(tmp_path: Path, blocks: int) -> None:
    text, _records, _ctx = translate_to_cpu(NOT_RECOMPUTABLE, "k.cu")
    assert text is not None
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    x = np.random.default_rng(blocks).standard_normal(blocks * 64).astype(np.float32)
    y = np.full_like(x, np.nan)
    lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int(blocks))
    np.testing.assert_allclose(y, keep_model(x), rtol=1e-5, atol=1e-5)
