"""A CUDA program's own atomicMax(double*) (CUDA has none; HIP has one): the HIP translation compiles with
hipcc and computes what the source program computes on the runtime (its own output is the reference), with
the definition in the file or in a project header."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

pytestmark = pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")

DEFINITION = """__device__ double atomicMax(double* address, double val) {
  unsigned long long* bits = (unsigned long long*)address;
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    old = atomicCAS(bits, assumed, __double_as_longlong(fmax(val, __longlong_as_double(assumed))));
  } while (assumed != old);
  return __longlong_as_double(old);
}
"""
PROGRAM = """#include <cstdio>
@DEFINITION@
#define TRACK_MAX(p, v) atomicMax(p, v)
__global__ void maxes(const double* x, double* m, int* im, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { TRACK_MAX(m, x[i]); atomicMax(im, (int)x[i]); }
}
int main() {
  const int n = 1000; double h[n];
  for (int i = 0; i < n; ++i) h[i] = (i * 37 % 1000) * 0.5;
  double *dx, *dm; int* di;
  cudaMalloc(&dx, sizeof(h)); cudaMalloc(&dm, 8); cudaMalloc(&di, 4);
  cudaMemcpy(dx, h, sizeof(h), cudaMemcpyHostToDevice); cudaMemset(dm, 0, 8); cudaMemset(di, 0, 4);
  maxes<<<(n + 127) / 128, 128>>>(dx, dm, di, n);
  double m; int im;
  cudaMemcpy(&m, dm, 8, cudaMemcpyDeviceToHost); cudaMemcpy(&im, di, 4, cudaMemcpyDeviceToHost);
  printf("max %.1f %d\\n", m, im);
  return 0;
}
"""


def _hipcc_compiles(path: Path) -> None:
    built = subprocess.run(["hipcc", "--offload-arch=gfx90a", "-c", str(path), "-o", str(path.with_suffix(".o"))],
                           env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]


def test_own_definition_in_the_file(tmp_path: Path) -> None:
    source = tmp_path / "maxes.cu"
    source.write_text(PROGRAM.replace("@DEFINITION@", DEFINITION))
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.HIP))
    assert result.status == "verified", result.summary
    out = tmp_path / "maxes.hip"
    out.write_text(result.output_text)
    _hipcc_compiles(out)


def test_own_definition_in_a_project_header(tmp_path: Path) -> None:
    (tmp_path / "atomics.cuh").write_text("#pragma once\n" + DEFINITION)
    source = tmp_path / "maxes.cu"
    source.write_text(PROGRAM.replace("@DEFINITION@", '#include "atomics.cuh"'))
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.HIP))
    assert result.status == "verified", result.summary
    for name, text in result.companions.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "maxes.hip"
    out.write_text(result.output_text)
    _hipcc_compiles(out)
