"""The engine's host functions (launch, scheduler, device heap, copy-back records) are compiled once per set of
runtime flags into a shared library that programs link (runtime/engine_lib.py), not into every program. A
program so built computes what numpy computes, finds its engine when its build is answered from the cache into
another folder, and computes the same when the library is turned off (the engine compiled into it, as before)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.runtime.build import build_library

PROGRAM = r"""
#include <cstdio>
__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
  const int n = 300;
  float x[n], y[n];
  for (int i = 0; i < n; ++i) { x[i] = i * 0.25f; y[i] = 1.0f - i; }
  float *dx, *dy;
  cudaMalloc(&dx, sizeof x); cudaMalloc(&dy, sizeof y);
  cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y, sizeof y, cudaMemcpyHostToDevice);
  saxpy<<<(n + 127) / 128, 128>>>(3.0f, dx, dy, n);
  cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i += 37) printf("%.2f\n", y[i]);
  return 0;
}
"""


# the same computation behind an exported entry, called through ctypes
ENTRY = PROGRAM.replace("int main() {", 'extern "C" void entry() {').replace("return 0;", "")
CALL = "import ctypes, sys; ctypes.CDLL(sys.argv[1]).entry()"


def expected() -> list[str]:
    i = np.arange(300, dtype=np.float32)
    y = np.float32(3.0) * (i * np.float32(0.25)) + (np.float32(1.0) - i)
    return [f"{v:.2f}" for v in y[::37]]


def run(program: Path) -> list[str]:
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def engine_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("libxpiler_engine_*.so"))


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XPILER_CACHE_DIR", str(cache))
    monkeypatch.delenv("XPILER_NO_ENGINE_LIB", raising=False)
    return cache


def test_a_program_links_the_engine_and_finds_it_wherever_its_cached_build_lands(tmp_path: Path,
                                                                                fresh_cache: Path) -> None:
    first = build_library(PROGRAM, Dialect.CUDA, tmp_path / "a", executable=True)
    assert first.ok and first.library is not None, first.log
    assert run(first.library) == expected()
    assert len(engine_files(tmp_path / "a")) == 1
    # the launch is the library's: the program itself holds no copy of it
    symbols = subprocess.run(["nm", "-C", str(first.library)], capture_output=True, text=True, check=True).stdout
    assert not [line for line in symbols.splitlines() if "xpiler::run_kernel(" in line and " U " not in line]
    # a library build answered from the cache into another folder (loaded in a child: the engine installs
    # signal handlers)
    for folder in ("c", "d"):
        built = build_library(ENTRY, Dialect.CUDA, tmp_path / folder)
        assert built.ok and built.library is not None, built.log
        assert built.cached == (folder == "d")
        loaded = subprocess.run([sys.executable, "-c", CALL, str(built.library)], capture_output=True, text=True,
                                timeout=60, check=True)
        assert loaded.stdout.split() == expected()


def test_without_the_library_the_engine_is_compiled_into_the_program(tmp_path: Path, fresh_cache: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XPILER_NO_ENGINE_LIB", "1")
    built = build_library(PROGRAM, Dialect.CUDA, tmp_path / "inline", executable=True)
    assert built.ok and built.library is not None, built.log
    assert engine_files(tmp_path / "inline") == []
    assert run(built.library) == expected()
