"""Finding the processes a test started, as an administrator would: each run gets a unique environment
variable, every process it starts inherits it, and /proc shows who carries it."""

from __future__ import annotations

import time
from pathlib import Path


def marked(token: str) -> list[int]:
    """Processes whose environment carries ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def settle(token: str, seconds: float = 5.0) -> list[int]:
    """The marked processes still there after up to ``seconds`` of waiting for them to go."""
    deadline = time.monotonic() + seconds
    while marked(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    return marked(token)


def ctrl_c_as_in_a_terminal() -> None:
    """A ``preexec_fn``: the child gets Ctrl-C's default disposition. pytest-xdist's workers ignore SIGINT and a
    child inherits that, so Python would never raise KeyboardInterrupt in it and a Ctrl-C test would test nothing."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
