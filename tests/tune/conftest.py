"""Tuning tests: an isolated cache directory per test session, so records start empty."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELU_SPEC = ROOT / "benchmarks" / "suite" / "activation" / "relu" / "spec.toml"
RELU_SOURCE = RELU_SPEC.parent / "relu.cu"


@pytest.fixture(scope="session", autouse=True)
def tune_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Session-wide (module fixtures tune before function fixtures run), restored afterwards."""
    root = tmp_path_factory.mktemp("xpiler-tune-cache")
    before = os.environ.get("XPILER_CACHE_DIR")
    os.environ["XPILER_CACHE_DIR"] = str(root)
    yield root
    if before is None:
        os.environ.pop("XPILER_CACHE_DIR", None)
    else:
        os.environ["XPILER_CACHE_DIR"] = before
