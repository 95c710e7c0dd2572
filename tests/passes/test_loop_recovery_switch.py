"""Kernel launches inside code the AST keeps as text (a ``switch`` choosing which kernel to run, as sample
programs do) become calls of the block functions like any other launch: the structural CPU tier failed to
compile ("expected primary-expression before '<' token") and the program fell to the portable tier. A kernel
launched through a function pointer gives the pointer the block function's signature (and an address taken for
it follows a kernel renamed for its wrapper); ``cg::sync(block)`` is a barrier. Reference: the source program's
own output (a whole-program comparison), the spec's numpy reference and g++'s verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpiler_core.cli import main

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
__global__ void ones(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 1.0f;
}
__global__ void bump() {}
int main(int argc, char** argv) {
  const int n = 1000;
  int which = argc > 1 ? atoi(argv[1]) : 0;
  float h[n], *dx, *dy;
  for (int i = 0; i < n; ++i) h[i] = 0.5f * i;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, h, n * sizeof(float), cudaMemcpyHostToDevice);
  dim3 block(128), grid((n + 127) / 128);
  switch (which) {
    case 0:
      twice<<<grid, block>>>(dx, dy, n);
      break;
    default:
      ones<<<dim3((n + 63) / 64), dim3(64), 0, 0>>>(dy, n);
      break;
  }
  bump<<<1, 1>>>();
  cudaMemcpy(h, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  double s = 0;
  for (int i = 0; i < n; ++i) s += h[i];
  printf("sum %.1f\n", s);
  return 0;
}
"""


@pytest.mark.parametrize("which", ["0", "1"])
def test_launches_in_a_switch_are_lowered(tmp_path: Path, which: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "pick.cu"
    source.write_text(PROGRAM)
    code = main(["translate", str(source), "--to", "cpu", "-o", str(tmp_path / "pick.cpp"), "--arg", which])
    capsys.readouterr()
    manifest = json.loads((tmp_path / ".xpiler" / "pick.cpp.json").read_text())
    assert code == 0, manifest["outcome"]["reason"]
    recovery = next(p for p in manifest["passes"] if p["name"] == "loop_recovery")
    assert recovery["changed"], recovery["refused"]  # the structural tier, not the portable one
    assert "<<<" not in (tmp_path / "pick.cpp").read_text().split("int main")[1]


# a kernel chosen through a function pointer in a switch, synchronized with cg::sync; tested through a spec that
# names one kernel (the kernel gets a wrapper under its name, its block loops another: the address taken in the
# switch must follow the block loops, and the pointer take their signature)
POINTER_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void scale2(float* y, const float* x, int n) {
  cg::thread_block cta = cg::this_thread_block();
  __shared__ float t[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  t[threadIdx.x] = i < n ? x[i] : 0.0f;
  cg::sync(cta);
  if (i < n) y[i] = 2.0f * t[threadIdx.x];
}
__global__ void copy1(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
int main(int argc, char** argv) {
  const int n = 256;
  void (*kernel)(float*, const float*, int);
  switch (argc > 1 ? atoi(argv[1]) : 0) {
    case 0: kernel = &scale2; break;
    default: kernel = &copy1; break;
  }
  float h[n], *dx, *dy;
  for (int i = 0; i < n; ++i) h[i] = (float)i;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, h, n * sizeof(float), cudaMemcpyHostToDevice);
  kernel<<<n / 64, 64>>>(dy, dx, n);
  cudaMemcpy(h, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%f\n", h[n - 1]);
  return 0;
}
"""

POINTER_SPEC = """
name = "scale2"
source = "ptr.cu"
entry = "scale2"
kind = "kernel"
grid = ["n / 64"]
block = [64]
reference = "ref.py:scale2"
[[args]]
name = "y"
dtype = "float32"
shape = ["n"]
role = "out"
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 128
"""


def test_kernel_pointers_and_cg_sync(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ptr.cu").write_text(POINTER_PROGRAM)
    (tmp_path / "spec.toml").write_text(POINTER_SPEC)
    (tmp_path / "ref.py").write_text("def scale2(x, n):\n    return 2.0 * x\n")
    code = main(["translate", str(tmp_path / "ptr.cu"), "--to", "cpu", "--spec", str(tmp_path / "spec.toml"),
                 "-o", str(tmp_path / "ptr.cpp")])
    capsys.readouterr()
    manifest = json.loads((tmp_path / ".xpiler" / "ptr.cpp.json").read_text())
    assert code == 0, manifest["outcome"]["reason"]
    recovery = next(p for p in manifest["passes"] if p["name"] == "loop_recovery")
    assert recovery["changed"], recovery["refused"]
    text = (tmp_path / "ptr.cpp").read_text()
    assert "void (*kernel)(dim3, dim3, size_t, float *, const float *, int)" in text.replace("float*", "float *")


# a kernel held in a function pointer that main declares and another function launches through (a benchmark
# harness's `void (*gpuSgemm)(...) = kernel; run(gpuSgemm, ...)`): both pointers take the block signature
HANDED_POINTER = r"""
#include <cstdio>
__global__ void twice(float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2.0f; }
__global__ void thrice(float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 3.0f; }
void run(void (*f)(float*, int), float* a, int n) { f<<<(n + 31) / 32, 32>>>(a, n); cudaDeviceSynchronize(); }
int main() {
  const int n = 40;
  float* a;
  cudaMallocManaged(&a, n * sizeof(float));
  for (int i = 0; i < n; i++) a[i] = i;
  void (*f)(float*, int) = twice;
  run(f, a, n);
  void (*g)(float*, int) = &thrice;
  run(g, a, n);
  printf("%g %g\n", a[1], a[39]);
  return 0;
}
"""


def test_a_kernel_pointer_handed_to_a_launching_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "handed.cu"
    source.write_text(HANDED_POINTER)
    code = main(["translate", str(source), "--to", "cpu", "-o", str(tmp_path / "handed.cpp")])
    capsys.readouterr()
    manifest = json.loads((tmp_path / ".xpiler" / "handed.cpp.json").read_text())
    assert code == 0, manifest["outcome"]["reason"]
    assert manifest["facts"]["tier"] == "structural", manifest["facts"]  # before: g++ rejected it, portable tier
    assert manifest["outcome"]["program"]["matched"]  # the source program's own output (6 234)
