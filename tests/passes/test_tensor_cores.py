"""tensor_cores: wmma keeps CUDA's layout semantics on a 64-wide wavefront (row/col major, ldm, store layout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, run_pass, translate
from xpiler_core.verify.toolchains import compile_check

COL_MAJOR_KERNEL = """#include <mma.h>
using namespace nvcuda;
// C (16x16, stored column-major) = A (16xK, row-major) * B (Kx16, stored column-major); one warp.
__global__ void wmma_colmajor(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C, int K) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + k0, K);
    wmma::load_matrix_sync(b, B + k0, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C, acc, 16, wmma::mem_col_major);
}
"""

SPEC = """
name = "wmma_colmajor"
source = "wmma_colmajor.cu"
entry = "wmma_colmajor"
kind = "kernel"
grid = [1]
block = [32]
reference = "ref.py:colmajor"
tolerance = { atol = 1e-3, rtol = 1e-3 }

[[args]]
name = "A"
dtype = "float16"
shape = [16, "K"]
role = "in"
init = "uniform(-1.0, 1.0)"

[[args]]
name = "B"
dtype = "float16"
shape = [16, "K"]
role = "in"
init = "uniform(-1.0, 1.0)"

[[args]]
name = "C"
dtype = "float32"
shape = [16, 16]
role = "out"

[[args]]
name = "K"
dtype = "int32"
role = "scalar"
value = "K"

[[cases]]
K = 16

[[cases]]
K = 48
"""

REF = """
import numpy as np
def colmajor(A, B, K):
    # B holds the Kx16 matrix column by column: row n of the array is column n of the matrix
    c = A.astype(np.float32) @ B.astype(np.float32).T
    return np.ascontiguousarray(c.T)  # column-major storage of c
"""


def test_col_major_operands_and_store_keep_their_meaning_at_warp_64(tmp_path: Path) -> None:
    (tmp_path / "wmma_colmajor.cu").write_text(COL_MAJOR_KERNEL)
    (tmp_path / "spec.toml").write_text(SPEC)
    (tmp_path / "ref.py").write_text(REF)
    result = translate(COL_MAJOR_KERNEL, str(tmp_path / "wmma_colmajor.cu"),
                       TranslateOptions(Dialect.HIP, spec_path=str(tmp_path / "spec.toml")))
    assert "nvcuda" not in result.output_text and "<mma.h>" not in result.output_text
    assert result.status == "verified", result.summary


@pytest.mark.slow
def test_gemm_wmma_suite_kernel_verified_at_warp_64(suite: Path) -> None:
    spec = suite / "matrix" / "gemm_wmma" / "spec.toml"
    if not spec.exists():
        pytest.skip("gemm_wmma not in the suite")
    source = spec.parent / "gemm_wmma.cu"
    result = translate(source.read_text(), str(source), TranslateOptions(Dialect.HIP, spec_path=str(spec)))
    assert result.status == "verified", result.summary


def test_unsupported_shapes_are_unresolved() -> None:
    text = COL_MAJOR_KERNEL.replace("matrix_a, 16, 16, 16", "matrix_a, 32, 8, 16")
    outcome = run_pass("tensor_cores", text, "w.cu", {}, Dialect.HIP)
    assert any("16x16x16" in u.reason for u in outcome.unresolved)


def test_round_trip_restores_nvcuda_wmma_for_nvcc() -> None:
    hip = translate(COL_MAJOR_KERNEL, "w.cu", TranslateOptions(Dialect.HIP, verify=False)).output_text
    back = translate(hip, "w.hip", TranslateOptions(Dialect.CUDA, verify=False)).output_text
    assert "#include <mma.h>" in back and "using namespace nvcuda;" in back and "xpiler_wmma" not in back
    verdict = compile_check(back, Dialect.CUDA)
    assert verdict.ok, verdict.stderr
