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


class TreeProgress:
    """A tree migration's progress: on a terminal one line rewritten in place (files done of all, how many
    verified and not, the estimated time left, what runs now); elsewhere one plain line per finished file."""

    def __init__(self, total: int, kept: int, where: str, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.done, self.kept = total, 0, kept
        self.counts: dict[str, int] = {}
        self.started = time.monotonic()
        self.current = ""
        self._lock = threading.Lock()
        if total:
            self._say(f"{total} file(s) to translate on {where}" + (f"; {kept} unchanged since the last run"
                                                                    if kept else ""))

    def _say(self, line: str) -> None:
        self.stream.write(("\r\x1b[K" if self.live else "") + line + ("" if self.live else "\n"))
        self.stream.flush()

    def starting(self, job: object) -> None:
        with self._lock:
            self.current = str(getattr(job, "relative", ""))
            if self.live:
                self._draw()

    def finished(self, outcome: object, reused: bool = False) -> None:
        status = str(getattr(outcome, "status", "?"))
        with self._lock:
            self.done += 1
            self.counts[status] = self.counts.get(status, 0) + 1
            if self.live:
                self._draw()
            elif not reused:
                reason = str(getattr(outcome, "reason", "") or "").split("\n")[0]
                self._say(f"[{self.done}/{self.total}] {getattr(outcome, 'relative', '?')}: {status}"
                          + (f" — {reason}" if reason else ""))

    def _draw(self) -> None:
        elapsed = time.monotonic() - self.started
        ran = self.done - self.kept
        left = self.total - self.done
        eta = f", about {elapsed / ran * left:.0f} s left" if ran > 0 and left else ""
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items()))
        width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
        line = f"[{self.done}/{self.total}] {counts}{eta}" + (f" · {self.current}" if left and self.current else "")
        self.stream.write("\r\x1b[K" + line[:width])
        self.stream.flush()

    def close(self) -> None:
        if self.live and self.total:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
