"""The ``xpiler`` command line.

Each subcommand lives in its own module of this package and exposes ``register(subparsers) -> None``; the
parser built there sets ``func(args) -> int``. Other installed packages add subcommands through the
``xpiler.commands`` entry point group (the language server adds ``serve``). Subcommand modules import only
the standard library and the foundations at load time (the rest inside ``run``), so ``--help`` answers at once.

Every failure is a message, never a bare traceback: a user error prints ``file:line:col: error: message`` and
exits 1; an unexpected exception is a bug of ours — its traceback goes to a log file and the exit status is 5.
Ctrl-C and SIGTERM stop the run: every child process group it started is killed and its scratch folders are
removed (``runtime/children.py``); exit 130 or 143.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from xpiler_core import __version__
from xpiler_core.diagnostics import XpilerError
from xpiler_core.runtime import stop_signals
from xpiler_core.runtime.stop_signals import Terminated

EXIT_BUG = 5
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xpiler", description="Verified kernel translation between accelerators.")
    parser.add_argument("--version", action="version", version=f"xpiler {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group="xpiler.commands"), key=lambda e: e.name):
        entry.load()(subparsers)
    return parser


def crash_log_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "xpiler" / "crashes"


def report_bug(exc: BaseException, argv: Sequence[str]) -> int:
    """Write the traceback to a log and tell the user it is our bug (exit 5)."""
    text = (f"xpiler {__version__}\ncommand: {' '.join(['xpiler', *argv])}\n\n"
            + "".join(traceback.format_exception(exc)))
    where = ""
    try:
        folder = crash_log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        log.write_text(text, encoding="utf-8")
        where = f"; the details are in {log}"
    except OSError:
        where = "; the traceback follows\n" + text
    print(f"xpiler: internal error: {type(exc).__name__}: {exc} — this is a bug in xpiler, not in your code"
          f"{where}", file=sys.stderr)
    return EXIT_BUG


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    restore_signals = stop_signals.install()
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        func = getattr(args, "func", None)
        if func is None:
            parser.print_help()
            return 2
        if getattr(args, "scratch_session", True):
            from xpiler_core.runtime import children

            children.start_session()
        status = int(func(args))
        if stop_signals.stopped_by:
            raise Terminated(stop_signals.stopped_by[-1])
        return status
    except XpilerError as exc:
        print(exc.format(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("xpiler: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated as exc:
        print(f"xpiler: stopped by {exc}", file=sys.stderr)
        return EXIT_TERMINATED
    except SystemExit:
        raise
    except BrokenPipeError:
        return 1  # the reader of our output went away (xpiler ... | head)
    except Exception as exc:  # noqa: BLE001 - every other exception is ours: a message and a log, not a traceback
        return report_bug(exc, args_list)
    finally:
        if "xpiler_core.runtime.children" in sys.modules:
            sys.modules["xpiler_core.runtime.children"].end_session()
        restore_signals()


def entry() -> None:
    """The console script: a Ctrl-C even while the modules load ends with a message, not a traceback."""
    try:
        status = main()
    except KeyboardInterrupt:
        print("xpiler: interrupted", file=sys.stderr)
        status = EXIT_INTERRUPTED
    sys.exit(status)


if __name__ == "__main__":
    entry()
