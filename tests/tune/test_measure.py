"""Latency measurement: ordering of libraries doing known amounts of work, paired statistics, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.runtime.build import build_library
from xpiler_core.tune.measure import (
    LatencyStats,
    MeasureError,
    MeasureSettings,
    clearly_faster,
    largest_case,
    measure_libraries,
    median_interval,
    paired_speedup,
)
from xpiler_core.verify.spec import load_spec

SPEC = """
name = "scale"
source = "scale.c"
entry = "scale"
kind = "host"
reference = "ref.py:scale"
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "inout"
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 100
[[cases]]
n = 20000
[[cases]]
n = 3000
"""

WORK = """
void scale(float *x, int n) {{
    for (int r = 0; r < {repeats}; ++r)
        for (int i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 0.001f;
}}
"""


@pytest.fixture()
def spec(tmp_path: Path):
    (tmp_path / "spec.toml").write_text(SPEC)
    (tmp_path / "scale.c").write_text(WORK.format(repeats=1))
    (tmp_path / "ref.py").write_text("def scale(x, n):\n    return x\n")
    return load_spec(str(tmp_path / "spec.toml"))


def _lib(tmp_path: Path, repeats: int) -> Path:
    built = build_library(WORK.format(repeats=repeats), Dialect.C, tmp_path / f"lib{repeats}")
    assert built.ok and built.library is not None, built.log
    return built.library


def test_largest_case_is_the_one_with_most_elements(spec) -> None:
    assert largest_case(spec) == 1


def test_more_work_measures_slower_and_pairs_show_it(spec, tmp_path: Path) -> None:
    light, heavy = _lib(tmp_path, 1), _lib(tmp_path, 16)
    settings = MeasureSettings(warmup=2, rounds=7, sample_s=0.002, max_s=3.0)
    a, b = measure_libraries([heavy, light], spec, "scale", 1, tmp_path / "m", settings=settings)
    assert len(a.samples) == len(b.samples) >= 3
    assert b.median_s < a.median_s  # 16x the work is slower, whatever the machine load
    assert paired_speedup(a, b) > 1.0
    assert clearly_faster(a, b)
    assert not clearly_faster(b, a)


def test_a_crashing_library_is_a_measure_error(spec, tmp_path: Path) -> None:
    crash = build_library("void scale(float *x, int n) { *(volatile int *)0 = n; }", Dialect.C, tmp_path / "c")
    assert crash.ok and crash.library is not None
    with pytest.raises(MeasureError, match="timing run failed"):
        measure_libraries([crash.library], spec, "scale", 0, tmp_path / "m", settings=MeasureSettings(rounds=3))


def test_paired_statistics_against_hand_computed_values() -> None:
    base = LatencyStats([10.0, 10.0, 11.0, 10.0, 30.0])  # one noisy round
    cand = LatencyStats([5.0, 5.0, 5.5, 5.0, 5.0])
    assert paired_speedup(base, cand) == 2.0  # ratios 2, 2, 2, 2, 6 → median 2
    assert clearly_faster(base, cand)
    same = LatencyStats([10.0, 9.9, 10.1, 10.0, 10.05])
    assert not clearly_faster(base, same)  # within noise
    assert LatencyStats([1.0, 2.0, 3.0, 4.0, 5.0]).median_s == 3.0


def _binomial_coverage(n: int, k: int) -> float:
    """P(the k-th smallest <= median <= the k-th largest) for n samples of a continuous distribution."""
    from math import comb

    return sum(comb(n, j) for j in range(k, n - k + 1)) / 2**n


@pytest.mark.parametrize("n", [5, 9, 15, 21, 31])
def test_median_interval_is_the_tightest_order_statistic_pair_with_90_percent_coverage(n: int) -> None:
    values = [float(v) for v in range(100, 100 + n)][::-1]  # any order
    lo, hi = median_interval(values, 0.9)
    k = int(lo) - 99  # lo is the k-th smallest
    assert hi == 100 + n - k  # symmetric: the k-th largest
    assert _binomial_coverage(n, k) >= 0.9 or k == 1
    assert k == 1 or _binomial_coverage(n, k + 1) < 0.9 or k + 1 > (n + 1) // 2
