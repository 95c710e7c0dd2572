"""The ``xpiler`` console script's first code. Until the command line has loaded, Ctrl-C ends the process with
one line (there is nothing to clean up yet) instead of a traceback from the middle of an import; from then on
``cli.main`` handles it (children killed, scratch removed, exit 130)."""

import os
import signal
import sys
from types import FrameType


def _interrupted_while_loading(signum: int, frame: FrameType | None) -> None:
    sys.stderr.write("xpiler: interrupted\n")
    os._exit(130)


def run() -> None:
    previous = signal.signal(signal.SIGINT, _interrupted_while_loading)
    from xpiler_core.cli import entry

    signal.signal(signal.SIGINT, previous)
    entry()
