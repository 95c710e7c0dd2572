"""The shared timing method (benchmarks/timing.py) on a fake clock: both sides interleaved in alternating order,
samples long enough, the ratio of the minima and its interval, and a busy machine flagged."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import timing  # noqa: E402


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing.time, "thread_time", fake)
    monkeypatch.setattr(timing.time, "perf_counter", fake)
    return fake


def test_sides_interleave_and_the_ratio_is_of_the_minima(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    order: list[str] = []
    slow_calls = iter([3e-3] * 2 + [2e-3] * 1000)  # the warm-up and calibration calls are slower

    def a() -> None:
        order.append("a")
        clock.now += next(slow_calls)

    def b() -> None:
        order.append("b")
        clock.now += 1e-3

    got = timing.compare(a, b, rounds=5, warmup=1)
    assert got.a.calls_per_sample == 1 and got.b.calls_per_sample == 1  # each call already lasts >= 1 ms
    timed = order[-10:]
    assert timed == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]
    assert len(got.a.cpu_s) == len(got.b.cpu_s) == 5
    assert got.ratio == pytest.approx(2.0) and got.interval == (pytest.approx(2.0), pytest.approx(2.0))
    assert not got.busy and "2.000x" in got.describe()


def test_short_calls_are_batched_to_a_millisecond(clock: FakeClock) -> None:
    def tiny() -> None:
        clock.now += 1e-5

    assert timing.calls_per_sample(tiny) == 128  # the first power of two with 128 x 10 us >= 1 ms


def test_a_loaded_machine_is_flagged(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (64.0, 64.0, 64.0))
    monkeypatch.setattr(timing.os, "cpu_count", lambda: 2)

    def step() -> None:
        clock.now += 1e-3

    got = timing.compare(step, step, rounds=3, warmup=0)
    assert got.busy and "not a result" in got.describe()


def test_wall_clock_is_the_only_other_clock() -> None:
    with pytest.raises(ValueError):
        timing.compare(lambda: None, lambda: None, clock="cycles")
