"""Stop signals (Ctrl-C, SIGTERM, SIGHUP) as exceptions in the main thread — never inside a fork.

Python runs a signal's handler in the main thread at the next bytecode, wherever that is. While the main thread
starts a child with a ``preexec_fn`` (every :class:`~xpiler_core.runtime.children.Popen`), the interpreter runs
the at-fork handlers in the parent, among them ``logging``'s lock release: an exception raised there is
printed as "Exception ignored" and swallowed, and the logging lock stays held, so the next thread that logs
waits forever and the stopped run never exits (a SIGTERM 0.2-4 s into ``xpiler translate --to hip`` hung so).
:func:`held` marks that window; a stop arriving in it is raised when the window closes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt
    """SIGTERM (or SIGHUP) arrived: unwind like Ctrl-C so every ``finally`` runs and children are killed."""


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

stopped_by: list[str] = []  # stops that arrived (in case code we call swallowed the exception)
_pending: list[int] = []  # stops that arrived while held
_held_depth = 0


def _stop(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    name = signal.Signals(signum).name
    stopped_by.append(name)
    raise Terminated(name)


def _handler(signum: int, frame: FrameType | None) -> None:
    if _held_depth:
        _pending.append(signum)
        return
    _stop(signum)


def install() -> Callable[[], None]:
    """Turn the stop signals into exceptions (main thread only); returns what puts the previous handlers back.
    A SIGINT that is ignored (a background job) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    stopped_by.clear()
    _pending.clear()
    previous: list[tuple[int, Callable[[int, FrameType | None], object] | int | None]] = []
    for signum in STOP_SIGNALS:
        if signum == signal.SIGINT and signal.getsignal(signum) is not signal.default_int_handler:
            continue
        previous.append((signum, signal.signal(signum, _handler)))

    def restore() -> None:
        for signum, handler in previous:
            signal.signal(signum, handler)

    return restore


@contextmanager
def held() -> Iterator[None]:
    """A stop arriving inside is raised at the end (in the main thread; other threads never get the handler)."""
    global _held_depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held_depth += 1
    try:
        yield
    finally:
        _held_depth -= 1
        if not _held_depth and _pending:
            signum = _pending[0]
            _pending.clear()
            _stop(signum)
