"""The ``xpiler`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``; the parser built there sets ``func(args) -> int``. Other installed packages
add subcommands through the ``xpiler.commands`` entry point group (the language server adds ``serve``).
Every failure is printed as ``file:line:col: error: message`` with a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from xpiler_core import __version__
from xpiler_core.diagnostics import XpilerError


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
    for entry in sorted(entry_points(group="xpiler.commands"), key=lambda e: e.name):
        entry.load()(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args))
    except XpilerError as exc:
        print(exc.format(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("xpiler: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
