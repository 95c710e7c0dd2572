"""Build a CPU translation (C++) into a shared library for tests that call it directly."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.frontend.dialect import Dialect
from xpiler_core.runtime.build import build_library


def build_shared(text: str, workdir: Path) -> Path:
    result = build_library(text, Dialect.C, workdir, display_name="t.cpp", cplusplus_c=True)
    assert result.ok and result.library is not None, result.log
    return Path(result.library)
