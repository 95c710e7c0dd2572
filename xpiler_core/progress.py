"""Progress reporting and cooperative cancellation for long work (translate, verify, repair, tune).

Long-running core functions take ``progress: ProgressFn | None`` and ``cancel: CancelToken | None``.
They call ``progress(fraction, message)`` at stage boundaries and ``cancel.check()`` between steps; a
cancelled job raises :class:`Cancelled`, which callers (CLI, server jobs) treat as a clean stop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

ProgressFn = Callable[[float, str], None]


class Cancelled(Exception):
    """Raised inside a job when its token was cancelled."""


class CancelToken:
    """Thread-safe cancellation flag shared between a job and whoever may stop it."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self.cancelled:
            raise Cancelled("cancelled")


def report(progress: ProgressFn | None, fraction: float, message: str) -> None:
    """Call ``progress`` if given, clamping the fraction to [0, 1]."""
    if progress is not None:
        progress(min(1.0, max(0.0, fraction)), message)
