"""Loop recovery expands a thread's initialized array across a barrier (a register-blocked tile's
``float acc[TM * TN] = {0.0};``, as in the common 2-D block-tiling SGEMMs): every thread's copy starts zeroed
with the listed elements set, as C++ initializes the array. Checked against numpy on the CPU translation."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

SOURCE = r"""
__global__ void rows_reversed(const float* x, float* y) {
  __shared__ float tile[64];
  float acc[4] = {0.0f, 1.0f};  // acc[1] starts at one, the others at zero
  int regs[2][2] = {};
  for (int r = 0; r < 4; ++r) {
    tile[threadIdx.x] = x[(blockIdx.x * 4 + r) * 64 + threadIdx.x];
    __syncthreads();
    acc[r] += tile[63 - threadIdx.x];
    regs[r / 2][r % 2] = r;
    __syncthreads();
  }
  for (int r = 0; r < 4; ++r) y[(blockIdx.x * 4 + r) * 64 + threadIdx.x] = acc[r] + regs[r / 2][r % 2];
}

extern "C" void run(const float* x, float* y, int blocks) { rows_reversed<<<blocks, 64>>>(x, y); }
"""


@pytest.mark.parametrize("blocks", [1, 3])
def test_initialized_thread_arrays_across_barriers(tmp_path, blocks: int) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(SOURCE, "k.cu")
    assert text is not None
    recovery = next(r for r in records if r["name"] == "loop_recovery")
    assert recovery["changed"], recovery["refused"]
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    x = np.random.default_rng(blocks).standard_normal((blocks, 4, 64)).astype(np.float32)
    y = np.full_like(x, np.nan)
    lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int(blocks))
    expected = x[:, :, ::-1] + np.array([0.0, 1.0, 0.0, 0.0])[None, :, None] + np.arange(4.0)[None, :, None]
    np.testing.assert_allclose(y, expected, rtol=1e-6)
