"""Real compilers' verdicts, cached, with diagnostics at the user's line."""

from __future__ import annotations

import shutil

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.verify.toolchains import compile_check, detect_toolchains


def test_detect_gcc_and_gpp_with_versions() -> None:
    found = detect_toolchains()
    assert {"gcc", "g++"} <= set(found)
    assert found["gcc"].version[0].isdigit()


def test_gcc_error_line_and_column() -> None:
    v = compile_check("int f(int x) {\n  return x +;\n}\n", Dialect.C)
    assert not v.ok and v.toolchain == "gcc"
    (d,) = [d for d in v.diagnostics if d.severity.value == "error"]
    assert (d.span.start_line, d.span.start_col) == (1, 12)
    again = compile_check("int f(int x) {\n  return x +;\n}\n", Dialect.C)
    assert again.cached and not again.ok


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_verdicts() -> None:
    good = compile_check("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n", Dialect.CUDA)
    assert good.ok, good.stderr
    bad = compile_check("__global__ void k(float* x) {\n  x[0] = y;\n}\n", Dialect.CUDA)
    assert not bad.ok
    assert any(d.span.start_line == 1 and "undefined" in d.message for d in bad.diagnostics)
