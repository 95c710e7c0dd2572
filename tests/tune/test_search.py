"""Intra-pass parameter search against brute force over small and large synthetic spaces."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.tune.search import search_params

SMALL = {"factor": (2, 4, 8, 16, 32, 64), "unroll": (True, False)}
LARGE = {"collapse": (1, 2, 3), "schedule": ("static", "dynamic", "guided"), "threads": (0, 1, 2, 4, 8, 16),
         "simd": (True, False), "min_parallel": (0, 4096, 16384, 65536, 262144)}
LARGE_DEFAULTS = {"collapse": 3, "schedule": "static", "threads": 0, "simd": True, "min_parallel": 65536}


def small_score(p: dict) -> float:
    return 10.0 - abs(p["factor"] - 16) / 8 + (0.5 if p["unroll"] else 0.0)


def large_score(p: dict) -> float:
    # separable, one peak: threads=1, min_parallel=262144, simd, guided, collapse 2
    return (
        {0: 0.0, 1: 3.0, 2: 1.0, 4: 0.5, 8: 0.2, 16: 0.1}[p["threads"]]
        + {0: 0.0, 4096: 0.3, 16384: 0.6, 65536: 0.9, 262144: 1.2}[p["min_parallel"]]
        + (0.7 if p["simd"] else 0.0)
        + {"static": 0.1, "dynamic": 0.0, "guided": 0.4}[p["schedule"]]
        + {1: 0.0, 2: 0.5, 3: 0.2}[p["collapse"]]
    )


def brute_force(space: dict, score) -> tuple[dict, float]:
    keys = list(space)
    best = max((dict(zip(keys, values, strict=True)) for values in itertools.product(*space.values())), key=score)
    return best, score(best)


class Counter:
    def __init__(self, score) -> None:
        self.score, self.calls, self.points = score, 0, []

    def __call__(self, p: dict) -> float:
        self.calls += 1
        self.points.append(tuple(sorted(p.items())))
        return self.score(p)


def test_grid_finds_the_brute_force_optimum_of_a_small_space() -> None:
    counter = Counter(small_score)
    out = search_params(SMALL, {"factor": 8, "unroll": False}, counter, quota=20, rng=random.Random(1),
                        spent=lambda: counter.calls)
    best, value = brute_force(SMALL, small_score)
    assert out.best == best and out.score == value
    assert counter.calls == 12  # the whole grid, each point once


def test_evolutionary_search_finds_the_peak_of_a_large_space_within_quota() -> None:
    counter = Counter(large_score)
    out = search_params(LARGE, LARGE_DEFAULTS, counter, quota=60, rng=random.Random(0), spent=lambda: counter.calls)
    best, value = brute_force(LARGE, large_score)
    assert counter.calls <= 60 < 540
    assert out.score == value and out.best == best


@given(st.integers(0, 10_000), st.integers(1, 30))
@settings(max_examples=30, deadline=None)
def test_search_is_deterministic_per_seed_and_respects_the_quota(seed: int, quota: int) -> None:
    runs = []
    for _ in range(2):
        counter = Counter(large_score)
        out = search_params(LARGE, LARGE_DEFAULTS, counter, quota=quota, rng=random.Random(seed),
                            spent=lambda c=counter: c.calls)
        assert counter.calls <= quota
        assert len(set(counter.points)) == len(counter.points)  # no point measured twice
        runs.append((counter.points, out.best))
    assert runs[0] == runs[1]


def test_illegal_points_are_skipped_and_do_not_count() -> None:
    spent = [0]

    def score(p: dict) -> float | None:
        if p["factor"] > 8:
            return None  # the pass refuses these
        spent[0] += 1
        return float(p["factor"])

    out = search_params(SMALL, {"factor": 2, "unroll": False}, score, quota=20, rng=random.Random(3),
                        spent=lambda: spent[0])
    assert out.best["factor"] == 8 and out.score == 8.0
    assert spent[0] == 6  # 3 legal factors x 2 unroll values


def test_stop_ends_the_search() -> None:
    counter = Counter(large_score)
    search_params(LARGE, LARGE_DEFAULTS, counter, quota=100, rng=random.Random(0), spent=lambda: counter.calls,
                  stop=lambda: counter.calls >= 5)
    assert counter.calls == 5


def test_moves_that_help_separately_are_tried_together() -> None:
    # two independent gains: the combination is the optimum and is found right after the coordinate moves
    space = {"a": (0, 1), "b": (0, 1), "c": (0, 1, 2)}
    counter = Counter(lambda p: 1.0 + 0.3 * p["a"] + 0.2 * p["b"] - 0.1 * p["c"])
    out = search_params(space, {"a": 0, "b": 0, "c": 0}, counter, quota=6, rng=random.Random(0),
                        spent=lambda: counter.calls)
    assert out.best == {"a": 1, "b": 1, "c": 0}
    # the start, its four single-parameter moves, then the combination of the two that helped
    assert counter.calls == 6 and counter.points[-1] == (("a", 1), ("b", 1), ("c", 0))
