"""Tuning tests: an isolated cache directory per test module, so records start empty."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module", autouse=True)
def tune_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Per test module (module fixtures tune before function fixtures run), restored afterwards so test
    directories that run later keep their own cache."""
    root = tmp_path_factory.mktemp("xpiler-tune-cache")
    before = os.environ.get("XPILER_CACHE_DIR")
    os.environ["XPILER_CACHE_DIR"] = str(root)
    yield root
    if before is None:
        os.environ.pop("XPILER_CACHE_DIR", None)
    else:
        os.environ["XPILER_CACHE_DIR"] = before
