"""Limits every child process xpiler starts (compilers, test workers, whole programs) lives under.

A child runs in its own process group (a timeout kills everything it started), dies with the thread that
started it (``PR_SET_PDEATHSIG``: a killed ``xpiler translate`` or a cancelled editor job leaves no
process behind), cannot use more than its address-space limit, cannot burn more than its CPU-time limit
(besides the caller's wall-clock timeout) and writes no core files.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
# Compilers and programs built for the runtime spread blocks over every core: CPU time is wall time times
# cores, plus a margin for start-up.
_CPU_MARGIN_S = 30


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the process group and the timeouts still apply
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(137)


def child_limits(memory_bytes: int, wall_seconds: float, new_group: bool = True) -> Callable[[], None]:
    """A ``preexec_fn`` applying the limits above."""
    cpu = int(wall_seconds * (os.cpu_count() or 1)) + _CPU_MARGIN_S

    def apply() -> None:
        if new_group:
            os.setsid()
        _die_with_parent()
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply
