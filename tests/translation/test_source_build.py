"""A translation the target's compiler rejects, of a source its own compiler rejects too: the result says the
source does not build (with the source compiler's first error) before blaming the translation. The judge is
nvcc itself, run here on the same text."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.translation import Status

# stores through a pointer to const: nvcc and every target compiler reject it
STORES_THROUGH_CONST = """
__global__ void copy(const float* x, float* y, int n) {
  const float* out = y;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i];
}
"""
BUILDS = """
__global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + undefined_name;
}
"""

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


@pytest.mark.parametrize("target", [Dialect.C, Dialect.HIP])
def test_a_source_nvcc_rejects_is_named_before_the_translation_is_blamed(tmp_path: Path, target: Dialect) -> None:
    source = tmp_path / "copy.cu"
    source.write_text(STORES_THROUGH_CONST)
    nvcc = subprocess.run(["nvcc", "-arch=sm_80", "-c", str(source), "-o", str(tmp_path / "copy.o")],
                          capture_output=True, text=True)
    assert nvcc.returncode != 0  # the premise: nvcc rejects the source
    result = translate(source.read_text(), str(source), TranslateOptions(target=target))
    assert result.status is Status.UNRESOLVED
    assert result.reason.startswith("the source itself does not build (nvcc"), result.reason
    assert "copy.cu(5)" in result.reason, result.reason  # the source's own line, in nvcc's words


def test_a_source_that_builds_is_not_said_not_to(tmp_path: Path) -> None:
    """The check follows the source compiler's verdict: the same call on a source nvcc rejects for another
    reason names that reason, and one nvcc accepts is never called broken."""
    source = tmp_path / "copy.cu"
    source.write_text(BUILDS.replace(" + undefined_name", ""))
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.C))
    assert "the source itself does not build" not in result.reason
    source.write_text(BUILDS)
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.C))
    assert "undefined_name" in result.reason.split("; the target toolchain")[0], result.reason


def test_a_bang_source_the_mlu_model_rejects_is_named_the_same_way(tmp_path: Path) -> None:
    """BANG → CUDA asks the MLU model's build (the source's own toolchain here) through the same check."""
    source = tmp_path / "add.mlu"
    source.write_text("""
__mlu_global__ void add(float* x, float* y, int n) {
  __nram__ float buf[256];
  __memcpy(buf, x, 256 * sizeof(float), GDRAM2NRAM);
  __bang_add(buf, buf, buf, 256);
  undefined_call(buf);
  __memcpy(y, buf, 256 * sizeof(float), NRAM2GDRAM);
}
""")
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.CUDA))
    assert result.status is Status.UNRESOLVED
    assert result.reason.startswith("the source itself does not build (on the MLU model: add.mlu:6:3"), result.reason
