"""Detensorization on code that reads a fragment's own elements (``frag.num_elements``, ``frag.x[i]``): an
element-wise epilogue is right whatever lane holds which element, so the numpy reference judges it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "matrix" / "gemm_wmma"
EPILOGUE = ("  for (int i = 0; i < c_frag.num_elements; i++) c_frag.x[i] = c_frag.x[i] * 2.0f + 1.0f;\n"
            "  wmma::store_matrix_sync(c_tile, c_frag")


def _scaled_gemm(tmp_path: Path) -> Path:
    """The suite's wmma GEMM with ``C = 2 * A @ B + 1`` applied to the accumulator's elements."""
    source = (SUITE / "gemm_wmma.cu").read_text()
    assert "  wmma::store_matrix_sync(c_tile, c_frag" in source
    (tmp_path / "gemm_wmma.cu").write_text(source.replace("  wmma::store_matrix_sync(c_tile, c_frag", EPILOGUE, 1))
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n\n\ndef gemm_wmma(A, B, M, N, K):\n"
        "    return (2.0 * (A.astype(np.float64) @ B.astype(np.float64)) + 1.0).astype(np.float32)\n")
    shutil.copy(SUITE / "spec.toml", tmp_path / "spec.toml")
    return tmp_path


@pytest.mark.parametrize("target", [Dialect.BANG, Dialect.C])
def test_fragment_elements_are_the_tile_the_loops_compute(tmp_path: Path, target: Dialect) -> None:
    folder = _scaled_gemm(tmp_path)
    source = folder / "gemm_wmma.cu"
    result = translate(source.read_text(), str(source),
                       TranslateOptions(target=target, spec_path=str(folder / "spec.toml")))
    assert result.status == "verified", result.summary
    assert "num_elements" not in result.output_text and "c_frag.x" not in result.output_text
