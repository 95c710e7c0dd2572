"""Dialect printers: the same AST printed for CUDA, HIP, C and BANG C differs in qualifiers, headers and
launch syntax only — checked against the real compilers where one exists (nvcc, hipcc, gcc/g++) and
against the dialects' documented spellings (BANG: __mlu_global__, __mlu_func__, __mlu_shared__)."""

from __future__ import annotations

import shutil

import pytest
from test_ast_roundtrip import compile_ok  # same directory (pytest prepends it to sys.path)

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.printer import print_module, style_for

# Portable between CUDA and HIP except for the spellings the printer owns.
PORTABLE_CUDA = r"""
#include <cuda_runtime.h>
#define TILE 16

__device__ __forceinline__ float sq(float v) { return v * v; }

template <int BS>
__global__ void __launch_bounds__(256) sum_squares(const float* __restrict__ x, float* out, int n) {
    __shared__ float partial[BS];
    extern __shared__ float scratch[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? sq(x[i]) : 0.0f;
    scratch[threadIdx.x] = partial[threadIdx.x];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

void launch(const float* x, float* out, int n) {
    dim3 block(256);
    dim3 grid((n + 255) / 256);
    sum_squares<256><<<grid, block, 256 * sizeof(float)>>>(x, out, n);
}
"""


def _module() -> A.Module:
    module = lower_text(PORTABLE_CUDA, "portable.cu")
    assert not [d for d in module.diagnostics if d.code in ("ast.internal", "ast.opaque")]
    return module


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
def test_cuda_ast_printed_as_hip_compiles_with_hipcc() -> None:
    assert compile_ok(PORTABLE_CUDA, ".cu")[0] if shutil.which("nvcc") else True
    text = print_module(_module(), Dialect.HIP)
    assert "#include <hip/hip_runtime.h>" in text and "cuda_runtime.h" not in text
    ok, err = compile_ok(text, ".hip")
    assert ok, err + text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_hip_source_printed_as_cuda_compiles_with_nvcc() -> None:
    hip_text = print_module(_module(), Dialect.HIP)
    back = lower_text(hip_text, "portable.hip")
    assert back.dialect is Dialect.HIP
    cuda_text = print_module(back, Dialect.CUDA)
    assert "#include <cuda_runtime.h>" in cuda_text
    ok, err = compile_ok(cuda_text, ".cu")
    assert ok, err + cuda_text


def test_bang_spellings() -> None:
    text = print_module(_module(), Dialect.BANG)
    assert "__mlu_global__ void sum_squares" in text
    assert "__mlu_func__ inline float sq" in text
    assert "__mlu_shared__ float partial[BS];" in text
    assert "__launch_bounds__" not in text
    assert "#include <bang.h>" in text
    assert "sum_squares<256><<<grid, block, 256 * sizeof(float)>>>(x, out, n);" in text


def test_bang_source_printed_as_cuda_maps_back() -> None:
    src = "__mlu_global__ void k(float *x) {\n    __mlu_shared__ float s[4];\n    s[0] = x[0];\n}\n"
    text = print_module(lower_text(src, "k.mlu"), Dialect.CUDA)
    assert text == "__global__ void k(float *x) {\n    __shared__ float s[4];\n    s[0] = x[0];\n}\n"


def test_c_printer_drops_gpu_qualifiers_and_uses_the_runtime_launch() -> None:
    text = print_module(_module(), Dialect.C)
    assert "__global__" not in text and "__device__" not in text and "__shared__" not in text
    assert "static inline float sq(float v)" in text
    assert "::xpiler::launch(sum_squares<256>, grid, block, 256 * sizeof(float))(x, out, n);" in text
    assert "cuda_runtime.h" not in text


def test_c_printer_output_compiles_for_cpu_code() -> None:
    # A kernel whose body is already CPU code (what CPU passes produce) must compile as C and C++.
    src = (
        "__device__ __forceinline__ float twice(float v) { return 2.0f * v; }\n"
        "__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {\n"
        "#pragma omp parallel for\n"
        "    for (int i = 0; i < n; ++i) y[i] = twice(x[i]);\n}\n"
    )
    text = print_module(lower_text(src, "scale.cu"), Dialect.C)
    for suffix in (".c", ".cpp"):
        ok, err = compile_ok(text, suffix)
        assert ok, err + text


def test_every_dialect_has_a_style() -> None:
    for dialect in Dialect:
        style = style_for(dialect)
        assert style.launch in ("chevron", "xpiler")
    assert style_for(Dialect.CUDA).spell(("__mlu_global__", "static")) == ["__global__", "static"]
    assert style_for(Dialect.C).spell(("__global__",)) == []
