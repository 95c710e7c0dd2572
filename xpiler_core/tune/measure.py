"""Latency measurement of built CPU libraries: warm-up, repeated interleaved rounds, medians, noise.

Libraries run in a child process (:mod:`xpiler_core.tune.timing_worker`) with a time and memory limit, on
the spec's inputs for one case. Timing several libraries in the same child, round-robin, makes them share
whatever load the machine has at that moment, so their ratio is steadier than two separate timings.
Comparisons are paired (per round, one library's time over the other's) and noise-aware: a distribution-free
confidence interval of the median ratio (binomial order statistics) must lie above 1 + margin before one
library counts as faster.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xpiler_core.progress import Cancelled, CancelToken
from xpiler_core.runtime import children
from xpiler_core.runtime.sandbox import _scalar
from xpiler_core.verify.inputs import case_inputs
from xpiler_core.verify.spec import KernelSpec

WORKER = Path(__file__).resolve().parent / "timing_worker.py"
MEMORY_BYTES = 8 * 1024**3


@dataclass(frozen=True)
class MeasureSettings:
    """How hard to measure: warm-up calls, rounds, target seconds per sample, cap on the whole run."""

    warmup: int = 3
    rounds: int = 15
    sample_s: float = 0.002
    max_s: float = 2.0
    timeout_s: float = 60.0
    warmup_s: float = 0.02  # at least this long calling each library before the first round (caches, clocks)
    bursts: int = 4  # a sample is the fastest of this many bursts of calls (preempted bursts are dropped)


@dataclass
class LatencyStats:
    """Per-call seconds of every round, and their median and quartiles."""

    samples: list[float] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.05 = the middle half lies within ±2.5 %)."""
        if len(self.samples) < 4:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4)
        return (q3 - q1) / self.median_s if self.median_s > 0 else 0.0


class MeasureError(Exception):
    """A library could not be timed (crash, timeout); the message says why."""


def case_elements(spec: KernelSpec, case: Mapping[str, Any]) -> int:
    """Elements over all of the spec's buffers at ``case``."""
    from xpiler_core.verify.inputs import shape_of

    return sum(int(np.prod(shape_of(arg, case, str(spec.path)), dtype=np.int64)) for arg in spec.args if arg.is_buffer)


def largest_case(spec: KernelSpec) -> int:
    """Index of the case with the most elements over all buffers: the one worth tuning for."""
    return max(range(len(spec.cases)), key=lambda i: case_elements(spec, spec.cases[i])) if spec.cases else 0


def paired_ratios(base: LatencyStats, candidate: LatencyStats) -> list[float]:
    """Per round, base time / candidate time (> 1: the candidate was faster in that round)."""
    return [b / c for b, c in zip(base.samples, candidate.samples, strict=False) if c > 0]


def paired_speedup(base: LatencyStats, candidate: LatencyStats) -> float:
    """Median over rounds of base time / candidate time (> 1: the candidate is faster)."""
    ratios = paired_ratios(base, candidate)
    return statistics.median(ratios) if ratios else 0.0


def median_interval(values: list[float], confidence: float = 0.9) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the k-th smallest and k-th largest value, k the
    largest order with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (at least the extremes)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return (float("nan"), float("nan"))
    tail = (1 - confidence) / 2
    k, below = 1, 0.0
    while k < (n + 1) // 2:
        below += math.comb(n, k - 1) / 2**n  # P(X <= k - 1)
        if below + math.comb(n, k) / 2**n > tail:
            break
        k += 1
    return ordered[k - 1], ordered[n - k]


def speedup_interval(base: LatencyStats, candidate: LatencyStats, confidence: float = 0.9) -> tuple[float, float]:
    """Confidence interval of the paired speedup of ``candidate`` over ``base``."""
    return median_interval(paired_ratios(base, candidate), confidence)


def clearly_faster(base: LatencyStats, candidate: LatencyStats, margin: float = 0.03) -> bool:
    """The candidate beats ``base`` beyond the noise: the whole confidence interval of its paired speedup lies
    above 1 + margin."""
    if not paired_ratios(base, candidate):
        return False
    return speedup_interval(base, candidate)[0] > 1 + margin




def measure_libraries(
    libraries: list[Path],
    spec: KernelSpec,
    entry: str,
    case_index: int,
    workdir: Path,
    *,
    settings: MeasureSettings | None = None,
    seed: int = 0,
    threads: int | None = None,
    cancel: CancelToken | None = None,
) -> list[LatencyStats]:
    """Time each library's ``entry`` (an ``extern "C"`` host function taking the spec's arguments in order)
    on the inputs of case ``case_index``, interleaved; one :class:`LatencyStats` per library."""
    settings = settings or MeasureSettings()
    workdir.mkdir(parents=True, exist_ok=True)
    inputs = case_inputs(spec, spec.cases[case_index], case_index, seed)
    request_args: list[dict[str, object]] = []
    for i, arg in enumerate(spec.args):
        if arg.is_buffer:
            file = f"in{i}_{arg.name}.bin"
            (workdir / file).write_bytes(np.ascontiguousarray(inputs[arg.name]).tobytes())
            request_args.append({"name": arg.name, "kind": "buffer", "file": file})
        else:
            ctype, value = _scalar(arg.dtype, inputs[arg.name])
            request_args.append({"name": arg.name, "kind": "scalar", "ctype": ctype, "value": value})
    request = {
        "libraries": [str(p) for p in libraries], "entry": entry, "args": request_args,
        "warmup": settings.warmup, "rounds": settings.rounds, "sample_s": settings.sample_s, "max_s": settings.max_s,
        "warmup_s": settings.warmup_s, "bursts": settings.bursts,
    }
    request_path = workdir / "timing_request.json"
    request_path.write_text(json.dumps(request))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads or os.cpu_count() or 1))
    proc = children.Popen(
        [sys.executable, "-S", "-E", str(WORKER), str(request_path)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, errors="replace", cwd=workdir, env=env, memory_bytes=MEMORY_BYTES,
        wall_seconds=settings.timeout_s,
    )
    deadline = time.monotonic() + settings.timeout_s
    while True:
        try:
            _, stderr = proc.communicate(timeout=0.25)
            break
        except subprocess.TimeoutExpired:
            stop = cancel is not None and cancel.cancelled
            if stop or time.monotonic() > deadline:
                proc.kill()
                proc.communicate()
                if stop:
                    raise Cancelled("cancelled") from None
                raise MeasureError(f"timing timed out after {settings.timeout_s:g} s") from None
    if proc.returncode != 0:
        tail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {proc.returncode}"
        raise MeasureError(f"timing run failed: {tail}")
    data = json.loads((workdir / "timings.json").read_text())
    return [LatencyStats(list(s)) for s in data["samples"]]
