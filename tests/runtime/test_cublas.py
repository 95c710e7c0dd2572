"""cuBLAS on the runtime (GEMM family, column-major, transposes, strided batches, mixed types), against numpy."""

from __future__ import annotations

import numpy as np

from xpiler_core.dialect import Dialect

SOURCE = r"""
#include <cublas_v2.h>
#include <cuda_fp16.h>
static int run(const float* a, const float* b, float* c, float* c2, const float* x, const float* y,
               float* batched, const __half* ha, const __half* hb, float* hc, int m, int n, int k) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
  const float alpha = 1.5f, beta = 0.0f, beta2 = -2.0f;
  // column-major C(m x n) = 1.5 * A(m x k) * B(k x n)
  if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, b, k, &beta, c, m)) return 2;
  // C2 = 1.5 * X^T * Y^T - 2 * C2 (X stored as k x m, Y as n x k, both column-major)
  if (cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_T, m, n, k, &alpha, x, k, y, n, &beta2, c2, m)) return 3;
  // two batches of the first product, strided
  if (cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, 0, b, k, 0, &beta, batched, m,
                                (long long)m * n, 2)) return 4;
  if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, ha, CUDA_R_16F, m, hb, CUDA_R_16F, k, &beta, hc,
                   CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)) return 5;
  if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m - 1, b, k, &beta, c, m)
      != CUBLAS_STATUS_INVALID_VALUE) return 6;
  cublasDestroy(h);
  return 0;
}
extern "C" void t_gemm(int* status, const float* a, const float* b, float* c, float* c2, const float* x, const float* y,
                      float* batched, const __half* ha, const __half* hb, float* hc, int m, int n, int k) {
  *status = run(a, b, c, c2, x, y, batched, ha, hb, hc, m, n, k);
}

"""


def test_gemm_family_matches_numpy(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(SOURCE, Dialect.CUDA, 32)
    m, n, k = 5, 7, 3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m)).astype(np.float32)  # column-major m x k, stored as its transpose
    b = rng.standard_normal((n, k)).astype(np.float32)  # column-major k x n
    x = rng.standard_normal((m, k)).astype(np.float32)  # column-major k x m (A^T is m x k)
    y = rng.standard_normal((k, n)).astype(np.float32)  # column-major n x k
    c2 = rng.standard_normal((n, m)).astype(np.float32)
    ha, hb = a.astype(np.float16), b.astype(np.float16)
    args = [a, b, np.zeros((n, m), np.float32), c2.copy(), x, y, np.zeros((2, n, m), np.float32), ha, hb,
            np.zeros((n, m), np.float32), np.int32(m), np.int32(n), np.int32(k)]
    outs = lib.outputs("t_gemm", [np.zeros(1, np.int32), *args])
    assert outs[0][0] == 0, f"a cuBLAS call failed (step {outs[0][0]})"
    outs = outs[1:]
    A, B = a.T.astype(np.float64), b.T.astype(np.float64)  # the logical column-major matrices (m x k, k x n)
    X, Y = x.T.astype(np.float64), y.T.astype(np.float64)  # k x m and n x k: op() transposes them
    expected = 1.5 * A @ B
    np.testing.assert_allclose(outs[2].T, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[3].T, 1.5 * X.T @ Y.T - 2.0 * c2.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[6][0].T, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[6][1].T, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[9].T, 1.5 * ha.T.astype(np.float64) @ hb.T.astype(np.float64), rtol=1e-5,
                               atol=1e-5)
