"""Every suite source (operators and the warp-64 hazard set) compiles with the real nvcc for sm_80."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from suite_catalog import CompileResult, SuiteEntry, iter_entries, nvcc_verdicts

ENTRIES = list(iter_entries())

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture(scope="module")
def verdicts() -> dict[Path, CompileResult]:
    return nvcc_verdicts([e.source_path for e in ENTRIES], jobs=2)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.test_id for e in ENTRIES])
def test_source_compiles_with_nvcc(entry: SuiteEntry, verdicts: dict[Path, CompileResult]) -> None:
    verdict = verdicts[entry.source_path]
    assert verdict.ok, f"{entry.source_path}:\n{verdict.stderr}"


def test_nvcc_rejects_a_broken_kernel(tmp_path: Path) -> None:
    """The verdict is nvcc's own: a kernel with a type error is reported as not compiling."""
    broken = tmp_path / "broken.cu"
    broken.write_text("__global__ void k(float* x) { x[threadIdx.x] = undeclared_name; }\n")
    verdict = nvcc_verdicts([broken], jobs=1)[broken]
    assert not verdict.ok
    assert "undeclared_name" in verdict.stderr
