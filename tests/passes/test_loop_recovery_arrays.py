"""Loop recovery expands a thread's initialized array across a barrier (a register-blocked tile's
``float acc[TM * TN] = {0.0};``, as in the common 2-D block-tiling SGEMMs): every thread's copy starts zeroed
with the listed elements set, as C++ initializes the array. Checked against numpy on the CPU translation."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
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


# BLAS-style accessor macros named like the kernel's own parameters, and a parameter moved by them
# (`A = &A(bx * 4, 0)`, advanced across barriers): each thread's copy, which the macro must read
ACCESSOR_MACROS = r"""
#include <cstdio>
#define A(i, j) A[(i) + (j) * lda]
#define C(i, j) C[(i) + (j) * ldc]
__global__ void scale_columns(int M, int N, float* A, float* C) {
  int lda = M, ldc = M;
  A = &A(blockIdx.x * 4, 0);
  C = &C(blockIdx.x * 4, 0);
  for (int j = 0; j < N; ++j) {
    C(threadIdx.x, 0) = (j + 1) * A(threadIdx.x, 0);
    __syncthreads();  // A and C live across the barrier: each thread's own copies
    A += lda;
    C += ldc;
  }
}
int main() {
  const int M = 8, N = 3;
  float *a, *c;
  cudaMallocManaged(&a, M * N * sizeof(float));
  cudaMallocManaged(&c, M * N * sizeof(float));
  for (int i = 0; i < M * N; ++i) a[i] = 0.5f * i;
  scale_columns<<<M / 4, 4>>>(M, N, a, c);
  cudaDeviceSynchronize();
  for (int i = 0; i < M * N; ++i) printf("%g ", c[i]);
  printf("\n");
  return 0;
}
"""


def test_accessor_macros_that_read_a_moved_parameter(tmp_path: Path) -> None:
    result = translate(ACCESSOR_MACROS, str(tmp_path / "columns.cu"), TranslateOptions(Dialect.C))
    assert result.status == "verified", result.summary  # the source program's own output
    assert result.manifest["facts"]["tier"] == "structural"  # before: g++ rejected `A[xp_t](i, j)`
