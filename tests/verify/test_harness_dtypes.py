"""Harness with float16/bfloat16 buffers, a reference source (differential), and the warp-64 hazard."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

HALF_KERNEL = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void mix(const __half* a, const __nv_bfloat16* b, float* out, __nv_bfloat16* bout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = __half2float(a[i]) * __bfloat162float(b[i]);
    bout[i] = __float2bfloat16(__bfloat162float(b[i]) + 1.0f);
  }
}
"""
HALF_REF = """
import numpy as np
def mix(a, b, n):
    assert a.dtype == np.float16 and b.dtype == np.float32
    return a.astype(np.float32) * b, b + 1
"""
ARGS = """
[[args]]
name = "a"
dtype = "float16"
shape = ["n"]
[[args]]
name = "b"
dtype = "bfloat16"
shape = ["n"]
[[args]]
name = "out"
dtype = "float32"
shape = ["n"]
role = "out"
[[args]]
name = "bout"
dtype = "bfloat16"
shape = ["n"]
role = "out"
atol = 0.02
rtol = 0.01
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 300
"""


def _spec(d: Path, body: str) -> Path:
    p = d / "spec.toml"
    p.write_text(body + ARGS)
    return p


def test_half_and_bfloat16_buffers(tmp_path: Path) -> None:
    (tmp_path / "mix.cu").write_text(HALF_KERNEL)
    (tmp_path / "ref.py").write_text(HALF_REF)
    spec = load_spec(
        _spec(
            tmp_path,
            'source = "mix.cu"\nentry = "mix"\ngrid = ["ceil_div(n, 64)"]\nblock = [64]\nreference = "ref.py:mix"\n'
            "tolerance = { atol = 1e-6, rtol = 1e-6 }\n",
        )
    )
    report = run_spec(spec)
    assert report.passed, report.summary()


def test_reference_source_differential(tmp_path: Path) -> None:
    (tmp_path / "mix.cu").write_text(HALF_KERNEL)
    (tmp_path / "mix_ref.cu").write_text(HALF_KERNEL.replace("__half2float(a[i])", "(float)a[i]"))
    (tmp_path / "wrong.cu").write_text(HALF_KERNEL.replace("+ 1.0f", "+ 2.0f"))
    spec = load_spec(
        _spec(
            tmp_path,
            'source = "mix.cu"\nentry = "mix"\ngrid = ["ceil_div(n, 64)"]\nblock = [64]\n'
            'reference_source = "mix_ref.cu"\nreference_entry = "mix"\n',
        )
    )
    assert run_spec(spec).passed
    bad = run_spec(spec, candidate_text=(tmp_path / "wrong.cu").read_text())
    assert not bad.passed and bad.cases[0].output_name == "bout" and bad.cases[0].first_mismatch == (0,)


HAZARD = r"""
__global__ void row_normalize(const float* x, float* y) {
  int lane = threadIdx.x % 32;
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  float v = x[row * 32 + lane], s = v;
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffff, s, offset);
  s = __shfl_sync(0xffffffff, s, 0);
  y[row * 32 + lane] = v / s;
}
"""
HAZARD_SPEC = """
source = "k.cu"
entry = "row_normalize"
grid = ["rows // 8"]
block = [256]
reference = "ref.py:norm"
tolerance = { atol = 1e-6, rtol = 1e-5 }
[[args]]
name = "x"
dtype = "float32"
shape = ["rows", 32]
init = "uniform(0.5, 1.5)"
[[args]]
name = "y"
dtype = "float32"
shape = ["rows", 32]
role = "out"
[[cases]]
rows = 64
"""


@pytest.mark.parametrize("warp", [32, 64])
def test_rename_only_hip_port_is_caught_at_warp_64(tmp_path: Path, warp: int) -> None:
    (tmp_path / "k.cu").write_text(HAZARD)
    (tmp_path / "ref.py").write_text("def norm(x):\n    return x / x.sum(axis=1, keepdims=True)\n")
    (tmp_path / "spec.toml").write_text(HAZARD_SPEC)
    hip = "#include <hip/hip_runtime.h>\n" + HAZARD
    report = run_spec(load_spec(tmp_path / "spec.toml"), candidate_text=hip, candidate_dialect=Dialect.HIP, warp_size=warp)
    assert report.warp_size == warp
    if warp == 32:
        assert report.passed, report.summary()
    else:
        assert not report.passed and report.cases[0].mismatches == 32 * 32  # every odd row
        assert report.cases[0].first_mismatch == (1, 0)
