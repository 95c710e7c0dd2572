"""AMD matrix cores (``__builtin_amdgcn_mfma_f32_16x16x4f32``) and GNU vector types: the runtime's model of the
instruction against numpy, and HIP → CUDA / HIP → CPU translations of a wavefront GEMM verified against numpy."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import translate
from xpiler_core.translation import TranslateOptions
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec
from xpiler_core.verify.toolchains import compile_check

# one 16x16 output tile per 64-thread block (16 x 4 threads = one wavefront), K in steps of 4
SOURCE = r"""
#include <hip/hip_runtime.h>
__global__ void mfma_gemm(const float* A, const float* B, float* D, int M, int N, int K) {
  using v4f = __attribute__((__vector_size__(4 * sizeof(float)))) float;
  const int m0 = blockIdx.x * 16, n0 = blockIdx.y * 16;
  v4f acc = {0};
  for (int k0 = 0; k0 < K; k0 += 4) {
    float a = A[(m0 + threadIdx.x) * K + k0 + threadIdx.y];
    float b = B[(k0 + threadIdx.y) * N + n0 + threadIdx.x];
    acc = __builtin_amdgcn_mfma_f32_16x16x4f32(a, b, acc, 0, 0, 0);
  }
  for (int i = 0; i < 4; ++i) {
    int row = m0 + threadIdx.y * 4 + i, col = n0 + threadIdx.x;
    if (row < M && col < N) D[row * N + col] = acc[i];
  }
}
"""


@pytest.fixture()
def spec_path(tmp_path: Path) -> Path:
    (tmp_path / "k.hip").write_text(SOURCE)
    (tmp_path / "ref.py").write_text("import numpy as np\n\ndef ref(A, B, M, N, K):\n"
                                     "    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)\n")
    cases = "".join(f"[[cases]]\nM = {m}\nN = {n}\nK = {k}\n" for m, n, k in ((16, 16, 4), (32, 48, 12), (64, 32, 64)))
    args = "".join(textwrap.dedent(f"""
        [[args]]
        name = "{name}"
        dtype = "float32"
        shape = {shape}
        role = "{role}"
        """) for name, shape, role in (("A", '["M", "K"]', "in"), ("B", '["K", "N"]', "in"), ("D", '["M", "N"]', "out")))
    scalars = "".join(f'\n[[args]]\nname = "{v}"\ndtype = "int32"\nrole = "scalar"\nvalue = "{v}"\n' for v in "MNK")
    (tmp_path / "spec.toml").write_text(textwrap.dedent("""
        name = "mfma_gemm"
        source = "k.hip"
        entry = "mfma_gemm"
        kind = "kernel"
        grid = ["M // 16", "N // 16"]
        block = [16, 4]
        reference = "ref.py:ref"
        tolerance = { atol = 1e-4, rtol = 1e-4 }
        """) + args + scalars + "\n" + cases)
    return tmp_path / "spec.toml"


def test_runtime_models_the_instruction(spec_path: Path) -> None:
    report = run_spec(load_spec(str(spec_path)), warp_size=64)
    assert report.passed, report.summary()


@pytest.mark.parametrize("target", [Dialect.CUDA, Dialect.C])
def test_translations_verify_against_numpy(spec_path: Path, target: Dialect) -> None:
    result = translate(SOURCE, str(spec_path.parent / "k.hip"), TranslateOptions(target=target,
                                                                                 spec_path=str(spec_path)))
    assert result.status.value == "verified", (result.status, [d.message for d in result.diagnostics])
    assert "__builtin_amdgcn" not in result.output_text and "vector_size" not in result.output_text.split(
        "xpiler(matrix_cores) end")[-1]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_output_compiles_with_nvcc(spec_path: Path) -> None:
    result = translate(SOURCE, str(spec_path.parent / "k.hip"), TranslateOptions(target=Dialect.CUDA, verify=False))
    verdict = compile_check(result.output_text, Dialect.CUDA)
    assert verdict.ok, verdict.stderr[-2000:]


def test_broadcast_modifiers_are_unresolved(spec_path: Path) -> None:
    text = SOURCE.replace("acc, 0, 0, 0)", "acc, 1, 0, 0)")
    result = translate(text, str(spec_path.parent / "k.hip"), TranslateOptions(target=Dialect.CUDA, verify=False))
    assert any("broadcast modifiers" in u.reason for u in result.unresolved)
