"""One timing method for every benchmark that compares two implementations.

Both sides run in one process, interleaved (A B, then B A, round after round) so that whatever the machine
does meanwhile falls on both; each sample is N calls with N chosen so that a sample lasts at least 1 ms; after
a warm-up, ``rounds`` samples per side are taken of thread CPU time (what the calling thread spent: immune to
being descheduled; meaningful for single-threaded code) and wall time. Reported per side: min and median of
each; for the pair: the ratio of the minima (the speed-up, B over A) and a 95 % bootstrap interval of the
median per-round ratio. The machine's load average is recorded before and after; a comparison taken while the
load exceeded the core count is flagged (``busy``) and a caller that reports results must say so or refuse.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

MIN_SAMPLE_S = 1e-3


@dataclass
class SideTimes:
    name: str
    calls_per_sample: int
    cpu_s: list[float] = field(default_factory=list)  # per call, one entry per sample
    wall_s: list[float] = field(default_factory=list)

    @property
    def cpu_min(self) -> float:
        return min(self.cpu_s)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_s)

    @property
    def wall_min(self) -> float:
        return min(self.wall_s)

    @property
    def wall_median(self) -> float:
        return statistics.median(self.wall_s)


@dataclass
class Comparison:
    """``a`` is the baseline (the reference), ``b`` the candidate; ratios are a / b (above 1: b is faster)."""

    a: SideTimes
    b: SideTimes
    clock: str  # "cpu" (thread CPU time) or "wall"
    ratio: float  # min(a) / min(b) on the chosen clock
    interval: tuple[float, float]  # 95 % bootstrap interval of the median per-round ratio
    load_before: float
    load_after: float
    cores: int

    @property
    def busy(self) -> bool:
        """The machine was loaded beyond its cores while timing: the figure is not a result."""
        return max(self.load_before, self.load_after) > self.cores

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["busy"] = self.busy
        return out

    def describe(self) -> str:
        lo, hi = self.interval
        flag = " (machine busy: not a result)" if self.busy else ""
        return (f"{self.ratio:.3f}x [{lo:.3f}, {hi:.3f}] ({self.clock} time; {self.a.name} "
                f"{self.a.cpu_min * 1e6 if self.clock == 'cpu' else self.a.wall_min * 1e6:.1f} us, {self.b.name} "
                f"{self.b.cpu_min * 1e6 if self.clock == 'cpu' else self.b.wall_min * 1e6:.1f} us; load "
                f"{self.load_before:.2f}->{self.load_after:.2f} on {self.cores} cores){flag}")


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def calls_per_sample(fn: Callable[[], object], min_sample_s: float = MIN_SAMPLE_S) -> int:
    """Calls per sample so that one sample lasts at least ``min_sample_s`` of wall time."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= min_sample_s or n >= 1 << 20:
            return n
        n *= 2


def _sample(fn: Callable[[], object], n: int, side: SideTimes) -> None:
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(n):
        fn()
    side.wall_s.append((time.perf_counter() - w0) / n)
    side.cpu_s.append((time.thread_time() - c0) / n)


def _bootstrap_median(values: list[float], seed: int = 0, draws: int = 2000) -> tuple[float, float]:
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def compare(a: Callable[[], object], b: Callable[[], object], *, names: tuple[str, str] = ("reference", "candidate"),
            rounds: int = 31, warmup: int = 2, clock: str = "cpu", min_sample_s: float = MIN_SAMPLE_S) -> Comparison:
    """Time ``a`` and ``b`` interleaved in this process (see the module's text). ``clock="wall"`` for code that
    runs on several threads (thread CPU time sees only the calling one)."""
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', not {clock!r}")
    load_before = _load()
    for _ in range(warmup):
        a()
        b()
    side_a = SideTimes(names[0], calls_per_sample(a, min_sample_s))
    side_b = SideTimes(names[1], calls_per_sample(b, min_sample_s))
    for r in range(rounds):
        order = ((a, side_a), (b, side_b)) if r % 2 == 0 else ((b, side_b), (a, side_a))
        for fn, side in order:
            _sample(fn, side.calls_per_sample, side)
    pick = (lambda s: s.cpu_s) if clock == "cpu" else (lambda s: s.wall_s)
    per_round = [x / y for x, y in zip(pick(side_a), pick(side_b), strict=True) if y > 0]
    ratio = min(pick(side_a)) / min(pick(side_b)) if min(pick(side_b)) > 0 else float("inf")
    interval = _bootstrap_median(per_round) if per_round else (float("nan"), float("nan"))
    return Comparison(side_a, side_b, clock, ratio, interval, load_before, _load(), os.cpu_count() or 1)
