"""``xpiler spec init``: a drafted spec loads only once filled, and then judges a translation against the
source itself (the reference is the source program run on the runtime, not the translation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.api import draft_spec
from xpiler_core.cli import main
from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect
from xpiler_core.verify.expr import evaluate_int
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import PLACEHOLDER, load_spec

SAXPY = """
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

SCALE_2D = """
__global__ void scale2d(float* m, int rows, int cols, float s) {
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows && c < cols) m[r * cols + c] *= s;
}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_one_size_kernel_draft_is_complete_and_its_grid_covers_every_element(tmp_path: Path) -> None:
    source = _write(tmp_path, "saxpy.cu", SAXPY)
    draft = draft_spec(SAXPY, str(source))
    assert draft.to_fill == 0
    spec_path = Path(draft.path)
    spec_path.write_text(draft.text, encoding="utf-8")
    spec = load_spec(spec_path)
    # The drafted launch must cover every n of every case with whole blocks (C integer division semantics).
    for case in spec.cases:
        grid = evaluate_int(spec.grid[0], case)
        block = evaluate_int(spec.block[0], case)
        assert grid * block >= case["n"] > (grid - 1) * block


def test_drafted_spec_passes_the_source_and_fails_a_wrong_translation(tmp_path: Path) -> None:
    source = _write(tmp_path, "saxpy.cu", SAXPY)
    draft = draft_spec(SAXPY, str(source))
    Path(draft.path).write_text(draft.text, encoding="utf-8")
    spec = load_spec(draft.path)
    assert run_spec(spec).passed
    wrong = SAXPY.replace("a * x[i] + y[i]", "a * x[i] - y[i]")
    report = run_spec(spec, candidate_text=wrong, candidate_dialect=Dialect.CUDA)
    assert not report.passed


def test_unfilled_value_is_an_error_at_its_line(tmp_path: Path) -> None:
    source = _write(tmp_path, "scale.cu", SCALE_2D)
    draft = draft_spec(SCALE_2D, str(source))
    assert draft.to_fill == 1
    Path(draft.path).write_text(draft.text, encoding="utf-8")
    with pytest.raises(XpilerError) as caught:
        load_spec(draft.path)
    line = draft.text.splitlines()[caught.value.line]
    assert PLACEHOLDER in line and line.strip().startswith("shape")
    Path(draft.path).write_text(draft.text.replace(f'"{PLACEHOLDER}"', '"rows * cols"'), encoding="utf-8")
    assert run_spec(load_spec(draft.path)).passed


def test_cli_writes_once_and_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _write(tmp_path, "saxpy.cu", SAXPY)
    spec_path = tmp_path / "saxpy.toml"
    assert main(["spec", "init", str(source)]) == 0
    written = spec_path.read_text(encoding="utf-8")
    spec_path.write_text(written + "\n# edited by the user\n", encoding="utf-8")
    assert main(["spec", "init", str(source)]) != 0
    assert spec_path.read_text(encoding="utf-8").endswith("# edited by the user\n")
    assert "not overwritten" in capsys.readouterr().err


def test_file_without_kernel_is_refused(tmp_path: Path) -> None:
    text = "__device__ float twice(float v) { return 2 * v; }\n"
    source = _write(tmp_path, "helpers.cu", text)
    with pytest.raises(XpilerError, match="no __global__ kernel"):
        draft_spec(text, str(source))
