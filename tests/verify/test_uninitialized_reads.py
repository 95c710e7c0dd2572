"""A source whose outputs depend on device memory it never wrote is defective, and that is the verdict (issue 31:
a benchmark's batchnorm copied back an output its kernel wrote only in part; on a GPU the rest is whatever the
memory last held, here it was zeros on both sides and the translation was called verified). The harness runs a
host-entry source once more with fresh device allocations poisoned (runtime: ``XPILER_DEVICE_FILL=poison``);
outputs that change are the source's defect (exit 4, the output named), unless the same block order without
the poison changes them alike (a schedule-dependent result, not an uninitialized read).

References: the programs below are written so that what they read is known by construction (half of an output
never written; one element past an input's end; every element written, summed with float atomics)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from xpiler_core.cli import main

HALF_WRITTEN = r"""
#include <cuda_runtime.h>
__global__ void half_write(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 2) y[i] = 2.0f * x[i];
}
extern "C" void scale(const float* x, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  half_write<<<(n + 255) / 256, 256>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""

# the last thread reads x[n], one element past the buffer (inside the allocation's slack, or its guard page)
ONE_PAST = r"""
#include <cuda_runtime.h>
__global__ void pair_sum(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + x[i + 1];
}
extern "C" void pairs(const float* x, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  pair_sum<<<(n + 127) / 128, 128>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""

# every element written; the total's rounding depends on which block adds first (not on unwritten memory)
ATOMIC_TOTAL = r"""
#include <cuda_runtime.h>
__global__ void total(const float* x, float* y, float* sum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = x[i] * 0.5f; atomicAdd(sum, x[i] * 1.37f); }
}
extern "C" void half_and_total(const float* x, float* y, float* sum, int n) {
  float *dx, *dy, *ds;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMalloc(&ds, sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(ds, 0, sizeof(float));
  total<<<(n + 63) / 64, 64>>>(dx, dy, ds, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(sum, ds, sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy); cudaFree(ds);
}
"""


# a whole program: the last element is never written, and the sum it prints includes it
PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - LAST) y[i] = i * 0.5f;
}
int main() {
  const int n = 300;
  float *dy, h[n];
  cudaMalloc(&dy, n * sizeof(float));
  fill<<<(n + 127) / 128, 128>>>(dy, n);
  cudaMemcpy(h, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  float s = 0;
  for (int i = 0; i < n; ++i) s += h[i];
  printf("sum %f\n", s);
  cudaFree(dy);
  return 0;
}
"""


def translate(tmp_path: Path, text: str, target: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    if target == "hip" and shutil.which("hipcc") is None:
        pytest.skip("hipcc is not installed")
    source = tmp_path / "prog.cu"
    source.write_text(text)
    out = tmp_path / ("prog.cpp" if target == "cpu" else "prog.hip")
    code = main(["translate", str(source), "--to", target, "-o", str(out)])
    capsys.readouterr()
    manifest = json.loads((tmp_path / ".xpiler" / f"{out.name}.json").read_text())
    return code, str(manifest["outcome"]["reason"])


@pytest.mark.parametrize("target", ["cpu", "hip"])
def test_output_never_written_is_the_sources_defect(tmp_path: Path, target: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, reason = translate(tmp_path, HALF_WRITTEN, target, capsys)
    assert code == 4, reason
    assert "the source reads memory it never wrote" in reason and "'y'" in reason


def test_read_past_an_input_is_the_sources_defect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, reason = translate(tmp_path, ONE_PAST, "cpu", capsys)
    assert code == 4, reason
    assert "the source itself is defective" in reason


def test_schedule_dependent_rounding_is_not_an_uninitialized_read(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, reason = translate(tmp_path, ATOMIC_TOTAL, "cpu", capsys)
    assert code == 0, reason


@pytest.mark.parametrize(("last", "code"), [(1, 4), (0, 0)])
def test_program_printing_unwritten_memory_is_defective(tmp_path: Path, last: int, code: int,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    got, reason = translate(tmp_path, PROGRAM.replace("LAST", str(last)), "cpu", capsys)
    assert got == code, reason
    if code:
        assert "the source reads memory it never wrote" in reason and "output line 1" in reason


# a block stages 16 of its 32 elements in shared memory and every thread reads its slot back: half the slots
# were never written (on a GPU: whatever the block before left there). STAGED 32 stages them all.
SHARED_HALF = r"""
#include <cuda_runtime.h>
__global__ void stage(const float* x, float* y, int n) {
  __shared__ float s[32];
  int i = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.x < STAGED && i < n) s[threadIdx.x] = x[i];
  __syncthreads();
  if (i < n) y[i] = s[threadIdx.x] + 1.0f;
}
extern "C" void staged(const float* x, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  stage<<<(n + 31) / 32, 32>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""


@pytest.mark.parametrize("target", ["cpu", "hip"])
@pytest.mark.parametrize(("staged", "code"), [(16, 4), (32, 0)])
def test_shared_memory_never_written_is_the_sources_defect(tmp_path: Path, target: str, staged: int, code: int,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Both sides read the runtime's poisoned shared memory (NaN) at the same slots, so they agreed and the
    translation was called verified; the output is garbage on a GPU."""
    got, reason = translate(tmp_path, SHARED_HALF.replace("STAGED", str(staged)), target, capsys)
    assert got == code, reason
    if code:
        assert "the source reads memory it never wrote" in reason and "'y'" in reason
