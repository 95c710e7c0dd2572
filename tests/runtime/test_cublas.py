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


HELPERS = r"""
#include <cstdio>
#include <cublas_v2.h>
// the helper API's copies: a strided vector there and back, a column-major sub-matrix there and back
int main() {
  const int rows = 5, cols = 4, lda = 7, ldb = 6;
  float host[lda * cols], back[ldb * cols] = {0}, vec[12], vback[12] = {0};
  for (int i = 0; i < lda * cols; ++i) host[i] = i * 1.5f;
  for (int i = 0; i < 12; ++i) vec[i] = 100.0f + i;
  float *dm, *dv;
  cudaMalloc(&dm, ldb * cols * sizeof(float)); cudaMalloc(&dv, 12 * sizeof(float));
  cudaMemset(dm, 0, ldb * cols * sizeof(float)); cudaMemset(dv, 0, 12 * sizeof(float));
  int s = cublasSetMatrix(rows, cols, sizeof(float), host, lda, dm, ldb);
  s += cublasGetMatrix(rows, cols, sizeof(float), dm, ldb, back, ldb);
  s += cublasSetVector(4, sizeof(float), vec, 3, dv, 2);
  s += cublasGetVectorAsync(4, sizeof(float), dv, 2, vback, 1, (cudaStream_t)0);
  int bad = cublasSetMatrix(rows, cols, sizeof(float), host, rows - 1, dm, ldb) == CUBLAS_STATUS_INVALID_VALUE;
  for (int i = 0; i < ldb * cols; ++i) printf("%g ", back[i]);
  printf("\n");
  for (int i = 0; i < 4; ++i) printf("%g ", vback[i]);
  printf("\n%d %d\n", s, bad);
  return 0;
}
"""


def test_helper_copies_match_their_column_major_definition(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from xpiler_core.api import run_program

    outcome = run_program(HELPERS, str(tmp_path / "helpers.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    lines = outcome.stdout.strip().splitlines()
    host = np.arange(7 * 4, dtype=np.float64).reshape(4, 7) * 1.5  # column j at host[j * lda]
    back = np.zeros((4, 6))
    back[:, :5] = host[:, :5]  # rows 0..4 of each column copied; the rest of the 6-long column stays 0
    assert [float(v) for v in lines[0].split()] == back.ravel().tolist()
    assert [float(v) for v in lines[1].split()] == [100.0 + 3 * i for i in range(4)]
    assert lines[2].split() == ["0", "1"]
