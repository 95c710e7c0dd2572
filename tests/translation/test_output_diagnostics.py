"""A translation opened in the editor shows the problems of the user's code, not the grammar's misreadings of
the prelude the tool wrote (g++ compiles it: the compiler's verdict is the reference); a real syntax error in the
user's part of the same file is still reported."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core import api
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import parse_text
from xpiler_core.pipeline import TranslateOptions, translate

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cpu_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    source = REPO / "examples" / "vector_add.cu"
    result = translate(source.read_text(), str(source), TranslateOptions(Dialect.C, verify=False))
    assert result.output_text
    return result.output_text


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_the_tools_prelude_raises_no_problem(cpu_output: str, tmp_path: Path) -> None:
    out = tmp_path / "vector_add.cpp"
    out.write_text(cpu_output)
    built = subprocess.run(["g++", "-std=c++17", "-fopenmp", "-fsyntax-only", str(out)], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr[-1500:]
    parsed = parse_text(cpu_output, str(out), None)
    assert any(d.code.startswith("syntax.") for d in parsed.diagnostics)  # the grammar does misread it
    _, _, shown = api.analyze_model(parsed)
    assert not [d for d in shown if d.code.startswith("syntax.")]


def test_a_syntax_error_in_the_users_part_is_still_shown(cpu_output: str) -> None:
    broken = cpu_output + "\nvoid user_code(float* x) { x[0] = (1.0f; }\n"
    _, _, shown = api.analyze_model(parse_text(broken, "vector_add.cpp", None))
    lines = broken.count("\n")
    assert any(d.code.startswith("syntax.") and d.span.start_line >= lines - 1 for d in shown)
