"""Shared helpers for the CPU-direction tests: build C text with gcc (cached) and call it with ctypes."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from xpiler_core.frontend.dialect import Dialect
from xpiler_core.runtime.build import build_library


def build_c(text: str, workdir: Path, cplusplus: bool | None = None) -> ctypes.CDLL:
    """Plain C unless the text has C++ linkage markers (or ``cplusplus`` says so: the CPU plan's output is C++)."""
    as_cpp = "extern \"C\"" in text if cplusplus is None else cplusplus
    result = build_library(text, Dialect.C, workdir, display_name="t.c", cplusplus_c=as_cpp)
    assert result.ok, result.log
    assert result.library is not None
    return ctypes.CDLL(str(result.library))


@pytest.fixture
def cbuild(tmp_path: Path):  # noqa: ANN201 - fixture
    return lambda text, cplusplus=None: build_c(text, tmp_path, cplusplus)
