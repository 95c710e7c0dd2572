"""Kernels in the styles real code is written in (benchmarks/styles/, our own code) translate and verify:
CUDA → CPU on the structural tier, and the constructs that used to push them off it reach BANG too. The
reference is the source itself, run on the SIMT runtime with the same inputs (automatic tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

STYLES = Path(__file__).resolve().parents[2] / "benchmarks" / "styles"
KERNELS = sorted(p.stem for p in STYLES.glob("*.cu"))


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_style_verifies_on_the_cpu_structural_tier(kernel: str) -> None:
    source = STYLES / f"{kernel}.cu"
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.C))
    assert result.status == "verified", result.summary
    assert result.manifest["facts"]["tier"] == "structural", result.summary
    assert "xpiler_simt" not in result.output_text


@pytest.mark.parametrize("kernel", ["ballot_compact", "multireturn_warp", "template_float4"])
def test_jumps_multiple_returns_and_static_asserts_reach_bang(kernel: str) -> None:
    source = STYLES / f"{kernel}.cu"
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.BANG))
    assert result.status == "verified", result.summary


BREAK_WITH_BARRIER = """#include <cuda_runtime.h>
// the block walks its rows and stops at the first column whose first element is negative (a break every
// thread takes together, as CUDA requires around barriers), synchronizing every step
__global__ void prefix_until_negative(const float* x, float* out, int cols) {
  __shared__ float tile[64];
  int row = blockIdx.x;
  float acc = 0.0f;
  for (int c = 0; c < cols; ++c) {
    tile[threadIdx.x] = x[(row * 64 + threadIdx.x) * cols + c];
    __syncthreads();
    float v = tile[threadIdx.x];
    float first = tile[0];
    __syncthreads();
    if (first < 0.0f) break;
    acc += v;
  }
  out[row * 64 + threadIdx.x] = acc;
}
extern "C" void run(const float* x, float* out, int rows, int cols) {
  float *dx, *dout;
  cudaMalloc(&dx, rows * 64 * cols * sizeof(float)); cudaMalloc(&dout, rows * 64 * sizeof(float));
  cudaMemcpy(dx, x, rows * 64 * cols * sizeof(float), cudaMemcpyHostToDevice);
  prefix_until_negative<<<rows, 64>>>(dx, dout, cols);
  cudaMemcpy(out, dout, rows * 64 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dout);
}
"""


def test_a_break_in_a_loop_with_barriers_is_predicated(tmp_path: Path) -> None:
    source = tmp_path / "break.cu"
    source.write_text(BREAK_WITH_BARRIER)
    result = translate(BREAK_WITH_BARRIER, str(source), TranslateOptions(target=Dialect.C))
    assert result.status == "verified" and result.manifest["facts"]["tier"] == "structural", result.summary
