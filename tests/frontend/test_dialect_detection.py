"""Which dialect a file is written in, from its content and name (what the compilers would be asked to build)."""

from __future__ import annotations

import pytest

from xpiler_core.dialect import Dialect, detect_dialect

HIP_KERNEL = "#include <hip/hip_runtime.h>\n__global__ void k(float* x) { x[hipThreadIdx_x] = 0; }\n"


@pytest.mark.parametrize(("text", "path", "expected"), [
    ("__global__ void k(float* x) { x[threadIdx.x] = 0; }\n", "k.cu", Dialect.CUDA),
    (HIP_KERNEL, "k.cpp", Dialect.HIP),
    ("__mlu_global__ void k(float* x) { __bang_write_zero(x, 64); }\n", "k.mlu", Dialect.BANG),
    ("#include <cuda_runtime.h>\nint main() { float* p; cudaMalloc(&p, 4); }\n", "main.cpp", Dialect.CUDA),
    ("void add(float* x, int n) { for (int i = 0; i < n; ++i) x[i] += 1; }\n", "add.c", Dialect.C),
    # a CPU output on the portable tier: HIP kernels compiled against the SIMT headers written beside it
    ('#define XPILER_DIALECT_HIP 1\n#include "xpiler_simt/hip/hip_runtime.h"\n' + HIP_KERNEL, "out.cpp", Dialect.C),
    ('#include "/tmp/work/xpiler_simt/cuda_runtime.h"\n__global__ void k() {}\n', "check_out.cpp", Dialect.C),
])
def test_detected_dialect(text: str, path: str, expected: Dialect) -> None:
    assert detect_dialect(text, path) is expected
