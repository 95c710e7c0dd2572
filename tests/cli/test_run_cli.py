"""``xpiler run``: a whole CUDA program on the CPU runtime prints what it computes (checked against numpy),
exits with its own status, and a program that does not build says so with the compiler's message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xpiler_core.cli import main

PROGRAM = r"""#include <cstdio>
#include <cstdlib>
__global__ void squares(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (float)i * (float)i * SCALE;
}
int main(int argc, char** argv) {
  int n = atoi(argv[1]);
  float* d; cudaMalloc(&d, n * sizeof(float));
  squares<<<(n + 63) / 64, 64>>>(d, n);
  float* h = (float*)malloc(n * sizeof(float));
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0; for (int i = 0; i < n; ++i) sum += h[i];
  printf("sum %.1f\n", sum);
  return sum > 1e6 ? 3 : 0;
}
"""


def test_a_program_runs_with_its_arguments_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "squares.cu"
    source.write_text(PROGRAM)
    assert main(["run", str(source), "-D", "SCALE=2.0f", "--arg=100"]) == 0
    out = capsys.readouterr()
    expected = 2.0 * float(np.sum(np.arange(100, dtype=np.float64) ** 2))
    assert f"sum {expected:.1f}" in out.out
    assert "exited with status 0" in out.err
    # its own exit status comes back (the sum is larger with more elements)
    assert main(["run", str(source), "-D", "SCALE=2.0f", "--arg=2000"]) == 3
    assert "exits with status 3" in capsys.readouterr().err


def test_a_program_that_does_not_build_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "squares.cu"
    source.write_text(PROGRAM)  # SCALE undefined without -D
    assert main(["run", str(source), "--arg=10"]) == 1
    err = capsys.readouterr().err
    assert "squares.cu:5:" in err and "SCALE" in err and "does not build" in err
