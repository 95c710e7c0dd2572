"""``xpiler test`` takes the project's flags as ``translate`` does: a spec whose kernel file includes a header
found only through ``-I`` and uses a macro given only with ``-D`` runs with them (the reference is numpy) and
fails to build without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.cli import main

HEADER = "#pragma once\n__device__ inline float scaled(float v) { return FACTOR * v; }\n"
KERNEL = """#include "ops/scaled.cuh"
__global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = scaled(x[i]);
}
"""
REFERENCE = "def scale(x, n):\n    return 3.0 * x\n"
SPEC = """name = "scale"
source = "scale.cu"
entry = "scale"
grid = ["ceil_div(n, 128)"]
block = [128]
reference = "ref.py:scale"
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"
[[args]]
name = "y"
dtype = "float32"
shape = ["n"]
role = "out"
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 1000
"""


def test_xpiler_test_uses_include_dirs_and_defines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "include" / "ops").mkdir(parents=True)
    (tmp_path / "include" / "ops" / "scaled.cuh").write_text(HEADER)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "scale.cu").write_text(KERNEL)
    (tmp_path / "src" / "ref.py").write_text(REFERENCE)
    (tmp_path / "src" / "scale.toml").write_text(SPEC)
    spec = str(tmp_path / "src" / "scale.toml")
    assert main(["test", spec]) != 0
    assert main(["test", spec, "-I", str(tmp_path / "include"), "-D", "FACTOR=3.0f"]) == 0
    assert "1/1" in capsys.readouterr().out
