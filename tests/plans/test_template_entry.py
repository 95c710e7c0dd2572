"""A spec may name a template kernel's instantiation as its entry (``scale_rows<4>``, what a repository's
launcher instantiates): the CPU translation exports a wrapper of that instance under a C name
(``scale_rows__4``) and the harness calls it there. Before, the output kept only the template and the tests
failed on a missing symbol, reported as "the translation computes different results". Reference: numpy."""

from __future__ import annotations

import ctypes
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.cli import main

SOURCE = r"""
template <int ROWS_PER_BLOCK>
__global__ void scale_rows(const float* x, float* y, int cols, float s) {
  __shared__ float row_scale[ROWS_PER_BLOCK];
  if (threadIdx.x < ROWS_PER_BLOCK) row_scale[threadIdx.x] = s * (blockIdx.x * ROWS_PER_BLOCK + threadIdx.x + 1);
  __syncthreads();
  for (int r = 0; r < ROWS_PER_BLOCK; ++r) {
    int row = blockIdx.x * ROWS_PER_BLOCK + r;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[row * cols + c] = x[row * cols + c] * row_scale[r];
  }
}
"""

SPEC = """
name = "scale_rows"
source = "rows.cu"
entry = "scale_rows<4>"
kind = "kernel"
grid = ["rows / 4"]
block = [32]
reference = "ref.py:scale_rows"
[[args]]
name = "x"
dtype = "float32"
shape = ["rows", "cols"]
role = "in"
[[args]]
name = "y"
dtype = "float32"
shape = ["rows", "cols"]
role = "out"
[[args]]
name = "cols"
dtype = "int32"
role = "scalar"
value = "cols"
[[args]]
name = "s"
dtype = "float32"
role = "scalar"
value = "0.5"
[[cases]]
rows = 8
cols = 37
[[cases]]
rows = 12
cols = 5
"""

REFERENCE = """
import numpy as np
def scale_rows(x, cols, s):
    rows = x.shape[0]
    return (x * (s * np.arange(1, rows + 1, dtype=np.float32))[:, None]).astype(np.float32)
"""


def _translated(tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, spec: str, reference: str,
                *options: str) -> tuple[int, dict[str, Any], Path]:
    """``xpiler translate`` of ``source`` (as ``NAME.cu``, the spec's ``source``) to CPU with the spec: the
    exit code, the manifest and the output's path."""
    name = re.search(r'source = "(\w+)\.cu"', spec)
    stem = name.group(1) if name else "rows"
    (tmp_path / f"{stem}.cu").write_text(source)
    (tmp_path / "spec.toml").write_text(spec)
    (tmp_path / "ref.py").write_text(reference)
    out = tmp_path / f"{stem}.cpp"
    code = main(["translate", str(tmp_path / f"{stem}.cu"), "--to", "cpu", *options, "--spec",
                 str(tmp_path / "spec.toml"), "-o", str(out)])
    capsys.readouterr()
    return code, json.loads((tmp_path / ".xpiler" / f"{stem}.cpp.json").read_text()), out


def test_template_instance_entry_is_exported_and_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, manifest, out = _translated(tmp_path, capsys, SOURCE, SPEC, REFERENCE)
    assert code == 0, manifest["outcome"]["reason"]
    # the exported instance computes what numpy does (independently of the tool's own harness)
    lib = ctypes.CDLL(str(build_shared(out.read_text(), tmp_path / "build")))
    x = np.random.default_rng(1).standard_normal((16, 9)).astype(np.float32)
    y = np.full_like(x, np.nan)
    # the grid (rows / 4) is no function of the kernel's parameters: the wrapper takes it last
    assert "scale_rows__4(const float *x, float *y, int cols, float s, int xp_grid_x)" in out.read_text()
    lib.scale_rows__4(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int(9),
                      ctypes.c_float(0.5), ctypes.c_int(4))
    np.testing.assert_allclose(y, x * (0.5 * np.arange(1, 17, dtype=np.float32))[:, None], rtol=1e-6)


TILED = r"""
template <int T>
__global__ void tgemm(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[row * K + k0 + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (k0 + threadIdx.y < K && col < N) ? B[(k0 + threadIdx.y) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
"""

TILED_SPEC = """
name = "tgemm"
source = "tgemm.cu"
entry = "tgemm<16>"
kind = "kernel"
grid = ["ceil_div(N, 16)", "ceil_div(M, 16)"]
block = [16, 16]
reference = "ref.py:tgemm"
tolerance = { atol = 1e-3, rtol = 1e-3 }
[[args]]
name = "A"
dtype = "float32"
shape = ["M", "K"]
role = "in"
[[args]]
name = "B"
dtype = "float32"
shape = ["K", "N"]
role = "in"
[[args]]
name = "C"
dtype = "float32"
shape = ["M", "N"]
role = "out"
[[args]]
name = "M"
dtype = "int32"
role = "scalar"
value = "M"
[[args]]
name = "N"
dtype = "int32"
role = "scalar"
value = "N"
[[args]]
name = "K"
dtype = "int32"
role = "scalar"
value = "K"
[[cases]]
M = 33
N = 47
K = 29
"""


def test_template_instance_is_instantiated_for_the_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the instance's values are written into its own block function, so the tile extents are constants and the
    # matrix product is recognized (the template itself has no tile size to recognize)
    (tmp_path / "tgemm.cu").write_text(TILED)
    (tmp_path / "spec.toml").write_text(TILED_SPEC)
    (tmp_path / "ref.py").write_text("import numpy as np\ndef tgemm(A, B, M, N, K):\n"
                                     "    return (A.astype(np.float64) @ B).astype(np.float32)\n")
    code = main(["translate", str(tmp_path / "tgemm.cu"), "--to", "cpu", "--spec", str(tmp_path / "spec.toml"),
                 "-o", str(tmp_path / "tgemm.cpp")])
    capsys.readouterr()
    manifest = json.loads((tmp_path / ".xpiler" / "tgemm.cpp.json").read_text())
    assert code == 0, manifest["outcome"]["reason"]
    gemm = next(p for p in manifest["passes"] if p["name"] == "cpu_gemm")
    assert gemm["changed"], gemm["refused"]


def test_template_instance_entry_runs_on_the_portable_tier(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # the portable tier launches the instance as the spec spells it (before: no launcher, "no translation")
    code, manifest, _ = _translated(tmp_path, capsys, SOURCE, SPEC, REFERENCE, "--tier", "portable")
    assert code == 0, manifest["outcome"]["reason"]
    assert manifest["facts"]["tier"] == "portable"
    assert manifest["outcome"]["tests"]["passed"]


# a double-buffered template kernel in a file with its own main: a do-while tile loop around barriers, a register
# array sized by a constant computed from the template's parameters (kept across the barrier: hoisted above
# its declaration), and main's launch of the instance (the block function's name, the arguments kept)
DOUBLE_BUFFERED = r"""
#include <cstdio>
template <int BS>
__global__ void window_sums(const float* x, float* y, int n) {
  const int per_thread = BS / 4;
  __shared__ float tile[2][BS];
  float keep[2 * per_thread];
  int t = 0, buf = 0;
  for (int i = 0; i < 2 * per_thread; ++i) keep[i] = 0.0f;
  do {
    tile[buf][threadIdx.x] = x[(blockIdx.x * 4 + t) * BS + threadIdx.x];
    __syncthreads();
    keep[t % (2 * per_thread)] += tile[buf][(threadIdx.x + 1) % BS];
    buf ^= 1;
    ++t;
  } while (t < 4);
  float s = 0.0f;
  for (int i = 0; i < 2 * per_thread; ++i) s += keep[i];
  y[blockIdx.x * BS + threadIdx.x] = s;
}
int main() {
  const int n = 64;
  float *x, *y;
  cudaMallocManaged(&x, 4 * n * sizeof(float));
  cudaMallocManaged(&y, n * sizeof(float));
  for (int i = 0; i < 4 * n; ++i) x[i] = i % 7;
  window_sums<16><<<n / 16, 16>>>(x, y, n);
  cudaDeviceSynchronize();
  printf("%g %g\n", y[0], y[n - 1]);
  return 0;
}
"""

DOUBLE_BUFFERED_SPEC = """
name = "window_sums"
source = "window.cu"
entry = "window_sums<16>"
kind = "kernel"
grid = ["n / 16"]
block = [16]
reference = "ref.py:window_sums"
[[args]]
name = "x"
dtype = "float32"
shape = ["4 * n"]
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
n = 32
[[cases]]
n = 64
"""

DOUBLE_BUFFERED_REFERENCE = """
import numpy as np
def window_sums(x, n):
    blocks = x.reshape(n // 16, 4, 16)
    return np.roll(blocks, -1, axis=2).sum(axis=1).reshape(n).astype(np.float32)
"""


def test_a_double_buffered_template_kernel_stays_structural(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, manifest, _ = _translated(tmp_path, capsys, DOUBLE_BUFFERED, DOUBLE_BUFFERED_SPEC, DOUBLE_BUFFERED_REFERENCE)
    assert code == 0, manifest["outcome"]["reason"]
    assert manifest["facts"]["tier"] == "structural", manifest["facts"]  # before: "a barrier inside DoWhile"
    assert manifest["outcome"]["tests"]["passed"]


def test_an_instance_with_a_boolean_argument_gets_its_own_block_function(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # `gemm<96, 32, false>`: the instance is specialized like an integer-only one (what cpu_gemm reads)
    source = SOURCE.replace("template <int ROWS_PER_BLOCK>", "template <int ROWS_PER_BLOCK, bool NEGATE>").replace(
        "* row_scale[r];", "* (NEGATE ? -row_scale[r] : row_scale[r]);")
    spec = SPEC.replace('entry = "scale_rows<4>"', 'entry = "scale_rows<4, false>"')
    code, manifest, out = _translated(tmp_path, capsys, source, spec, REFERENCE)
    assert code == 0, manifest["outcome"]["reason"]
    assert manifest["facts"]["tier"] == "structural"
    assert "static void scale_rows_blocks__4_false(" in out.read_text()
