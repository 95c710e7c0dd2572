"""One translation parses its source text once: the plan, the test builder, the hooks and the runtime's launch
rewriter share the parsed unit (counted on the parser itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend import source
from xpiler_core.pipeline import TranslateOptions, translate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_add.cu"


@pytest.mark.parametrize("target", [Dialect.HIP, Dialect.C, Dialect.BANG])
def test_the_source_text_is_parsed_once_per_translation(target: Dialect, monkeypatch: pytest.MonkeyPatch) -> None:
    text = EXAMPLE.read_text() + f"\n// {target.value}\n"  # a text no earlier test parsed
    parses: list[str] = []
    monkeypatch.setattr(source, "PARSE_LISTENERS", [parses.append])
    result = translate(text, str(EXAMPLE), TranslateOptions(target=target))
    assert result.status == "verified", result.summary
    assert parses.count(text) == 1
