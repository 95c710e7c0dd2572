"""Warp code in the styles that break a rename-only port at 64 lanes (benchmarks/wave64/, our own kernels:
ballots and lane masks, per-warp slots and broadcasts, warp indices and the shared arrays they size, votes
around `continue`, early-exiting lanes) compiles with hipcc and computes at warp 64 what the source computes
at 32 (automatic tests; the reference is the source on the runtime). Code written against warpSize gets the
full wavefront; code whose contract is 32 lanes keeps 32-lane groups, and the result says which."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

WAVE64 = Path(__file__).resolve().parents[2] / "benchmarks" / "wave64"
KERNELS = sorted(p.stem for p in WAVE64.glob("*.cu"))
pytestmark = pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")


@pytest.mark.parametrize("kernel", KERNELS)
def test_wave64_style_verifies_at_warp_64(kernel: str) -> None:
    source = WAVE64 / f"{kernel}.cu"
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.HIP))
    assert result.status == "verified", result.summary
    strategy = next(r["params"].get("strategy") for r in result.passes_applied if r["name"] == "warp_size")
    expected = "native" if kernel == "warpsize_generic_sum" else "lanes32"  # the one written against warpSize
    assert strategy == expected, strategy
    assert ("64-lane wavefront (the code is written" in result.summary) == (expected == "native")
