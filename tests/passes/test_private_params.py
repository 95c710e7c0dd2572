"""Parameters a kernel writes are per thread (CUDA gives every thread its own copy): the structural CPU
translation of a shared-memory tiled SGEMM that advances its pointer parameters per thread (``A += cRow *
BLOCKSIZE * K; … A += BLOCKSIZE;``, written as in a widely copied tutorial) and of a kernel that counts a
scalar parameter down must compute what numpy computes, with several OpenMP threads running blocks. Before
the fix the updates went to one shared parameter inside the thread loop (1024 times per block, racing
between OpenMP threads): wrong results or a crash."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

SGEMM = r"""
template <const int BLOCKSIZE>
__global__ void sgemm_shared_mem_block(int M, int N, int K, float alpha, const float *A, const float *B,
                                       float beta, float *C) {
  const unsigned cRow = blockIdx.x;
  const unsigned cCol = blockIdx.y;
  __shared__ float As[BLOCKSIZE * BLOCKSIZE];
  __shared__ float Bs[BLOCKSIZE * BLOCKSIZE];
  const unsigned threadCol = threadIdx.x % BLOCKSIZE;
  const unsigned threadRow = threadIdx.x / BLOCKSIZE;
  A += cRow * BLOCKSIZE * K;
  B += cCol * BLOCKSIZE;
  C += cRow * BLOCKSIZE * N + cCol * BLOCKSIZE;
  float tmp = 0.0;
  for (int bkIdx = 0; bkIdx < K; bkIdx += BLOCKSIZE) {
    As[threadRow * BLOCKSIZE + threadCol] = A[threadRow * K + threadCol];
    Bs[threadRow * BLOCKSIZE + threadCol] = B[threadRow * N + threadCol];
    __syncthreads();
    A += BLOCKSIZE;
    B += BLOCKSIZE * N;
    for (int dotIdx = 0; dotIdx < BLOCKSIZE; ++dotIdx)
      tmp += As[threadRow * BLOCKSIZE + dotIdx] * Bs[dotIdx * BLOCKSIZE + threadCol];
    __syncthreads();
  }
  C[threadRow * N + threadCol] = alpha * tmp + beta * C[threadRow * N + threadCol];
}

extern "C" void run_sgemm(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C) {
  dim3 grid((M + 15) / 16, (N + 15) / 16);
  sgemm_shared_mem_block<16><<<grid, 16 * 16>>>(M, N, K, alpha, A, B, beta, C);
}

// a scalar parameter counted down by each thread (its own copy)
__global__ void strided_fill(float* y, int n, int stride) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  while (n > 0 && i < 4096) {
    y[i] += 1.0f;
    i += stride;
    n--;
  }
}

extern "C" void run_fill(float* y, int n, int stride) {
  strided_fill<<<4, 64>>>(y, n, stride);
}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, _ = translate_to_cpu(SGEMM, "sgemm.cu")
    assert text is not None
    assert any(r["name"] == "loop_recovery" and r["changed"] for r in records)
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("private"))))


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize(("m", "n", "k"), [(64, 48, 80), (16, 16, 16), (128, 32, 48)])
def test_tiled_sgemm_with_pointer_bumps_matches_numpy(library: ctypes.CDLL, m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = rng.standard_normal((m, n), dtype=np.float32)
    expected = 1.5 * (a.astype(np.float64) @ b) + 0.5 * c
    library.run_sgemm(m, n, k, ctypes.c_float(1.5), ptr(a), ptr(b), ctypes.c_float(0.5), ptr(c))
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


def test_a_scalar_parameter_counted_down_per_thread(library: ctypes.CDLL) -> None:
    y = np.zeros(4096, dtype=np.float32)
    library.run_fill(ptr(y), 3, 256)
    expected = np.zeros(4096, dtype=np.float32)
    for i in range(256):  # 4 blocks of 64 threads, each adds 1 at i, i + 256, i + 512
        expected[[i, i + 256, i + 512]] += 1.0
    np.testing.assert_array_equal(y, expected)


def test_the_argument_is_copied_once_per_thread(tmp_path: Path) -> None:
    text, _, _ = translate_to_cpu(SGEMM, "sgemm.cu")
    assert text is not None
    assert "xp_arg_A" in text and "xp_arg_n" in text

