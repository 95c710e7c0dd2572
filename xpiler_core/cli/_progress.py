"""What a long command shows while it works: on a terminal, one status line rewritten in place (elapsed time
and the current step: pass, compile, each kernel's tests), erased when the run ends; nothing when standard
error is not a terminal (logs and pipes get the result only)."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TextIO


class TerminalProgress:
    """A ``ProgressFn`` drawing on ``stream`` if it is a terminal; use as a context manager."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._shown = False

    def __call__(self, fraction: float, message: str) -> None:
        if not self.live:
            return
        width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
        line = f"[{time.monotonic() - self.started:6.1f}s {fraction * 100:3.0f}%] {message}"
        with self._lock:
            self.stream.write("\r\x1b[K" + line[:width])
            self.stream.flush()
            self._shown = True

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._shown = False
