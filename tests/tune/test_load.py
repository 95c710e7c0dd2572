"""The machine-load probe and what the tuner does with it: busy → no thread-count change crowned, and said."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tune_cases import RELU_SOURCE, RELU_SPEC

from xpiler_core.tune import Config, TuneOptions, tune
from xpiler_core.tune import tuner as tuner_module
from xpiler_core.tune.config import freeze
from xpiler_core.tune.load import MachineLoad, machine_load, parse_running
from xpiler_core.tune.measure import MeasureSettings
from xpiler_core.tune.tuner import changes_parallelism

FAST = MeasureSettings(warmup=1, rounds=5, sample_s=0.001, max_s=0.5, timeout_s=30)


def test_parse_running_reads_the_fourth_field() -> None:
    assert parse_running("0.52 0.58 0.59 3/467 12345\n") == 3
    assert parse_running("garbage") is None


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="no /proc/loadavg on this platform")
def test_busy_neighbours_are_seen() -> None:
    cpus = os.cpu_count() or 1
    needed = max(1, math.ceil(0.25 * cpus))
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(needed)]
    try:
        time.sleep(0.3)
        load = machine_load()
        assert load.other_runnable >= needed and load.busy, load
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def test_parallel_knobs_are_what_a_busy_machine_cannot_judge() -> None:
    base = Config(binding=freeze({"threads": 0, "simd": True}))
    assert changes_parallelism(Config(binding=freeze({"threads": 1, "simd": True})), base)
    assert not changes_parallelism(Config(binding=freeze({"threads": 0, "simd": False})), base)


@pytest.mark.slow  # a whole tuning run (30 s): the default run stays near its 15-minute budget
def test_busy_machine_is_flagged_and_thread_changes_not_crowned(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = MachineLoad(other_runnable=float(os.cpu_count() or 1), cpus=os.cpu_count() or 1)
    monkeypatch.setattr(tuner_module, "machine_load", lambda: busy)
    monkeypatch.setattr(tuner_module.time, "sleep", lambda _s: None)
    messages: list[str] = []
    options = TuneOptions(spec_path=str(RELU_SPEC), budget_s=120, max_trials=6, seed=1, settings=FAST)
    result = tune(RELU_SOURCE.read_text(), str(RELU_SOURCE), options, on_event=lambda e: messages.append(e.message))
    assert result.loaded and "other runnable" in result.load
    assert result.baseline_config is not None
    assert not changes_parallelism(result.best.config, result.baseline_config)
    assert any("busy" in m for m in messages)
