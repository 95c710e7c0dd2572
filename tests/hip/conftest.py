from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "benchmarks" / "suite"


@pytest.fixture
def suite() -> Path:
    if not SUITE.is_dir():
        pytest.skip("benchmark suite not present")
    return SUITE
