"""The watchdog of one xpiler process (see ``children.py``): reads lines from its standard input —
``g PGID`` / ``u PGID`` (a child process group started / ended), ``d PATH`` / ``r PATH`` (a scratch folder
made / removed) — and when the input closes, because xpiler exited or was killed, kills the groups and
removes the folders still listed. Standard library only; runs with ``python -S -E``."""

import os
import shutil
import signal
import sys


def main() -> None:
    # The terminal's Ctrl-C and a SIGTERM to xpiler's process group are for xpiler; the watchdog cleans after it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    folders: set[str] = set()
    stream = sys.stdin.buffer
    for raw in stream:
        line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
        kind, _, value = line.partition(" ")
        if kind == "g" and value.isdigit():
            groups.add(int(value))
        elif kind == "u" and value.isdigit():
            groups.discard(int(value))
        elif kind == "d" and value:
            folders.add(value)
        elif kind == "r":
            folders.discard(value)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    for folder in folders:
        if os.path.isdir(folder) and not os.path.islink(folder):
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
