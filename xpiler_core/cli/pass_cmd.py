"""``xpiler pass NAME FILE [--param k=v ...] [--target c|cuda|hip|bang] [-o OUT]``: run one pass.

Prints the transformed source (or writes it to OUT, never over FILE). A refusal exits with status 2 and
``file:1:1: error: pass NAME refused: reason`` on stderr; ``xpiler pass --list`` lists passes and their
parameters.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect, detect_dialect


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("pass", help="run one transformation pass on a file")
    parser.add_argument("name", nargs="?", help="pass name (see --list)")
    parser.add_argument("file", nargs="?", help="source file")
    parser.add_argument("--param", action="append", default=[], metavar="K=V", help="pass parameter")
    parser.add_argument("--target", default=None, help="target dialect (default: c for AST passes from CUDA)")
    parser.add_argument("-o", "--output", default=None, help="write the result here instead of stdout")
    parser.add_argument("--list", action="store_true", help="list passes and parameters")
    parser.add_argument("--dump", metavar="DIR", help="also write the program after the pass to DIR (NN-<pass>.<ext>)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.passes import all_passes, get_pass
    from xpiler_core.passes.base import PassContext, SourceUnit
    from xpiler_core.passes.driver import DumpIntermediates, run_passes
    from xpiler_core.printer import print_module
    from xpiler_core.safe_io import write_confined

    if args.list:
        for name, module in all_passes().items():
            info = module.INFO
            print(f"{name} ({info.kind}; {', '.join(info.directions)}): {info.summary}")
            for p in info.params:
                print(f"    {p.name}={p.default!r}  {p.doc}")
        return 0
    if not args.name or not args.file:
        raise XpilerError("usage: xpiler pass NAME FILE [--param k=v] [-o OUT]")
    try:
        module = get_pass(args.name)
    except KeyError as exc:
        raise XpilerError(str(exc.args[0])) from None
    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise XpilerError(f"cannot read file: {exc.strerror}", str(path)) from None
    params = dict(module.INFO.defaults())
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep:
            raise XpilerError(f"--param expects K=V, got {item!r}")
        params[key.strip()] = value
    source = detect_dialect(text, str(path))
    target = Dialect(args.target) if args.target else (Dialect.C if module.INFO.kind == "ast" and source in (
        Dialect.CUDA, Dialect.HIP) and "cuda->cpu" in module.INFO.directions else source)
    ctx = PassContext(source_dialect=source, target=target, file=str(path))
    instruments = [DumpIntermediates(Path(args.dump), target)] if args.dump else []
    run = run_passes(SourceUnit(text, source, str(path)), [(args.name, params)], ctx, instruments=instruments)
    refused = run.records[0]
    if refused["refused"] is not None:
        span = refused.get("span") or {}
        line, col = span.get("start_line", 0) + 1, span.get("start_col", 0) + 1
        print(f"{path}:{line}:{col}: error: pass {args.name} refused: {refused['refused']}", file=sys.stderr)
        return 2
    new_text = run.unit.text if isinstance(run.unit, SourceUnit) else print_module(run.unit, target)
    for note in ctx.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.output:
        dest = Path(args.output)
        if dest.resolve() == path.resolve():
            raise XpilerError("refusing to write over the source file", str(dest))
        write_confined(dest, new_text)
    else:
        sys.stdout.write(new_text)
    return 0
