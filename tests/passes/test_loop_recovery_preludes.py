"""Loop recovery on files whose prelude includes every header it might need: a `using namespace nvcuda;` with no
wmma in use is dropped (the CPU output verifies against the source), while fragments in use are still refused."""

from __future__ import annotations

from pathlib import Path

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes.method.loop_recovery import _without_unused_wmma_namespace
from xpiler_core.pipeline import TranslateOptions, translate

REPO = Path(__file__).resolve().parents[2]
PRELUDE = "#include <mma.h>\n#include <cuda_fp16.h>\nusing namespace nvcuda;\n"


def test_an_unused_wmma_namespace_directive_does_not_stop_loop_recovery(tmp_path: Path) -> None:
    text = PRELUDE + (REPO / "examples" / "vector_add.cu").read_text()
    result = translate(text, str(tmp_path / "vector_add.cu"), TranslateOptions(Dialect.C))
    assert result.status == "verified", result.summary
    assert "nvcuda" not in result.output_text


def test_fragments_in_use_keep_the_directive() -> None:
    used = lower_text(PRELUDE + """
__global__ void k(const half* a, float* out) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, 16);
  out[threadIdx.x] = 0.0f;
}
""", "k.cu", Dialect.CUDA)
    unused = lower_text(PRELUDE + "__global__ void k(float* out) { out[threadIdx.x] = 0.0f; }\n", "k.cu", Dialect.CUDA)

    def directives(module: A.Module) -> int:
        return sum(1 for i in module.items if isinstance(i, A.Opaque) and "namespace nvcuda" in i.text)

    assert directives(used) == directives(unused) == 1
    assert directives(_without_unused_wmma_namespace(used)) == 1
    assert directives(_without_unused_wmma_namespace(unused)) == 0


# host code that checks a kernel against cuBLAS (how GEMM repositories test theirs): the CPU output computes the
# cuBLAS calls itself, column-major and transposed as cuBLAS defines them (before: "'cublasHandle_t' was not
# declared", and the program fell to the portable tier); judged by the source program's own output
CUBLAS_CHECKED = r"""
#include <cstdio>
#include <cublas_v2.h>
__global__ void rowmajor_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < M && c < N) {
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];
    C[r * N + c] = s;
  }
}
int main() {
  const int M = 5, N = 7, K = 3;
  float *A, *B, *C, *R;
  cudaMallocManaged(&A, M * K * sizeof(float));
  cudaMallocManaged(&B, K * N * sizeof(float));
  cudaMallocManaged(&C, M * N * sizeof(float));
  cudaMallocManaged(&R, M * N * sizeof(float));
  for (int i = 0; i < M * K; ++i) A[i] = 0.25f * (i % 5) - 0.5f;
  for (int i = 0; i < K * N; ++i) B[i] = 0.5f * (i % 3) + 0.125f;
  rowmajor_gemm<<<dim3(1, 1), dim3(8, 8)>>>(A, B, C, M, N, K);
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f;
  // row-major C = A B is column-major C^T = B^T A^T
  cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, R, N);
  cudaDeviceSynchronize();
  float worst = 0.0f;
  for (int i = 0; i < M * N; ++i) worst = fmaxf(worst, fabsf(C[i] - R[i]));
  printf("C[0] %g C[last] %g R[last] %g max diff %g\n", C[0], C[M * N - 1], R[M * N - 1], worst);
  cublasDestroy(handle);
  return worst < 1e-5f ? 0 : 1;
}
"""


def test_host_code_that_calls_cublas_stays_structural(tmp_path: Path) -> None:
    result = translate(CUBLAS_CHECKED, str(tmp_path / "checked.cu"), TranslateOptions(Dialect.C))
    assert result.status == "verified", result.summary
    assert result.manifest["facts"]["tier"] == "structural"
    assert "xp_cublas_gemm" in result.output_text
