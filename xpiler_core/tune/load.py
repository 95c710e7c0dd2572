"""Is the machine busy enough that timings cannot be trusted? Other runnable tasks, sampled now.

The load average trails by a minute; the kernel's instantaneous count of runnable scheduling entities
(``/proc/loadavg``'s fourth field, ``running/total``) does not. Sampled a few times while no timing runs,
minus the sampler itself, its median is the number of tasks competing for the cores right now. A second
CPU-bound process on a 2-core machine takes half the machine: thread-count comparisons made then measure
the neighbour, not the candidate.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

LOADAVG = Path("/proc/loadavg")


@dataclass(frozen=True)
class MachineLoad:
    other_runnable: float  # median of the samples: runnable tasks besides the sampler
    cpus: int

    @property
    def busy(self) -> bool:
        """Another task holds a core (at least one, and at least a quarter of the machine)."""
        return self.other_runnable >= max(1.0, 0.25 * self.cpus)

    def describe(self) -> str:
        return f"{self.other_runnable:g} other runnable task(s) on {self.cpus} core(s)"


def parse_running(text: str) -> int | None:
    """The running count of a ``/proc/loadavg`` line (``0.50 0.40 0.30 2/123 4567`` → 2)."""
    fields = text.split()
    if len(fields) < 4 or "/" not in fields[3]:
        return None
    running = fields[3].split("/", 1)[0]
    return int(running) if running.isdigit() else None


def machine_load(samples: int = 7, interval_s: float = 0.02) -> MachineLoad:
    """Other runnable tasks now (0 where the platform does not say)."""
    cpus = os.cpu_count() or 1
    counts: list[int] = []
    for i in range(samples):
        try:
            running = parse_running(LOADAVG.read_text())
        except OSError:
            running = None
        if running is None:
            return MachineLoad(0.0, cpus)
        counts.append(max(0, running - 1))  # the sampler itself is running
        if i + 1 < samples:
            time.sleep(interval_s)
    return MachineLoad(float(statistics.median(counts)), cpus)
