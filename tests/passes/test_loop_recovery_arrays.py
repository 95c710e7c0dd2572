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


# CUDA by Example's dot product: the tree's stride `i` lives across barriers and every thread halves it alike
# (`int i = blockDim.x / 2; while (i != 0) { ...; __syncthreads(); i /= 2; }`): one variable for the block,
# updated once per round (before: "a while loop with a barrier must have a thread-independent condition", and
# the portable tier); a variable updated in a loop with no barrier stays each thread's own
UNIFORM_STRIDE = r"""#include <cstdio>
__global__ void dot(const float* a, const float* b, float* c, int n) {
  __shared__ float cache[64];
  int tid = threadIdx.x + blockIdx.x * blockDim.x;
  float temp = 0;
  while (tid < n) { temp += a[tid] * b[tid]; tid += blockDim.x * gridDim.x; }
  cache[threadIdx.x] = temp;
  __syncthreads();
  int i = blockDim.x / 2;
  while (i != 0) {
    if (threadIdx.x < i) cache[threadIdx.x] += cache[threadIdx.x + i];
    __syncthreads();
    i /= 2;
  }
  if (threadIdx.x == 0) c[blockIdx.x] = cache[0];
}
int main() {
  const int n = 1000, blocks = 4;
  float *a, *b, *c;
  cudaMallocManaged(&a, n * sizeof(float)); cudaMallocManaged(&b, n * sizeof(float)); cudaMallocManaged(&c, blocks * sizeof(float));
  for (int i = 0; i < n; ++i) { a[i] = i * 0.5f; b[i] = (i % 7) * 0.25f; }
  dot<<<blocks, 64>>>(a, b, c, n);
  cudaDeviceSynchronize();
  float s = 0; for (int i = 0; i < blocks; ++i) s += c[i];
  printf("dot %g\n", s);
  return 0;
}
"""

STRIDE_IN_A_THREAD_LOOP = r"""#include <cstdio>
__global__ void halve(float* out) {
  __shared__ float s[64];
  int i = 64;
  for (int k = 0; k < 3; ++k) { i /= 2; }
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + i) % 64];
}
int main() {
  float* o; cudaMallocManaged(&o, 64 * sizeof(float));
  halve<<<1, 64>>>(o); cudaDeviceSynchronize();
  printf("%g %g\n", o[0], o[63]);
  return 0;
}
"""


@pytest.mark.parametrize("source", [UNIFORM_STRIDE, STRIDE_IN_A_THREAD_LOOP], ids=["while-stride", "no-barrier-loop"])
def test_a_variable_every_thread_updates_alike(tmp_path: Path, source: str) -> None:
    result = translate(source, str(tmp_path / "stride.cu"), TranslateOptions(Dialect.C))
    assert result.status == "verified", result.summary  # the source program's own output
    assert result.manifest["facts"]["tier"] == "structural"
