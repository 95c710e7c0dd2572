"""Every suite source (operators and the warp-64 hazard set) compiles with the real nvcc for sm_80 (a quarter of\nthem in the default run, the rest with -m slow)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from suite_catalog import CompileResult, SuiteEntry, iter_entries, nvcc_verdicts

ENTRIES = list(iter_entries())
# every fourth suite source in the default run (nvcc takes 1-2 s a file); the others with -m slow
SAMPLE = ENTRIES[::4]
REST = [e for e in ENTRIES if e not in SAMPLE]

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def check(entry: SuiteEntry) -> None:
    verdict: CompileResult = nvcc_verdicts([entry.source_path], jobs=1)[entry.source_path]
    assert verdict.ok, f"{entry.source_path}:\n{verdict.stderr}"


@pytest.mark.parametrize("entry", SAMPLE, ids=[e.test_id for e in SAMPLE])
def test_source_compiles_with_nvcc(entry: SuiteEntry) -> None:
    check(entry)


@pytest.mark.slow
@pytest.mark.parametrize("entry", REST, ids=[e.test_id for e in REST])
def test_every_other_source_compiles_with_nvcc(entry: SuiteEntry) -> None:
    check(entry)


def test_nvcc_rejects_a_broken_kernel(tmp_path: Path) -> None:
    """The verdict is nvcc's own: a kernel with a type error is reported as not compiling."""
    broken = tmp_path / "broken.cu"
    broken.write_text("__global__ void k(float* x) { x[threadIdx.x] = undeclared_name; }\n")
    verdict = nvcc_verdicts([broken], jobs=1)[broken]
    assert not verdict.ok
    assert "undeclared_name" in verdict.stderr
