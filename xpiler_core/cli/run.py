"""``xpiler run FILE [-I DIR] [-D NAME] [--std S] [--arg A] [--unit U]``: run a whole CUDA/HIP program on the
CPU runtime, built as a translation's checks build it, and say whether it runs.

Prints the program's standard output and error as they came, then one line: how it ended. Exit status: the
program's own, 124 when it did not finish in time, 1 when it did not build (the compiler's messages first).
It answers the question every whole-program verification starts with: does the source itself run here?
"""

from __future__ import annotations

import argparse
import sys

from xpiler_core.cli.translate import TARGET_NAMES, add_project_flags, project_from_args, read_source


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run a CUDA/HIP program (with main) on the CPU runtime")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--from", dest="source", choices=["cuda", "hip"],
                        help="the program's dialect (default: detected from the code)")
    parser.add_argument("--warp-size", type=int, help="warp size to run at (default: 32 for CUDA, 64 for HIP)")
    add_project_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.api import run_program

    text = read_source(args.file)
    project = project_from_args(args)
    on_gpu = getattr(args, "reference", "runtime") == "gpu"
    where = "on this machine's GPU" if on_gpu else "on the runtime"
    outcome = run_program(text, args.file, project=project,
                          source_dialect=TARGET_NAMES[args.source] if args.source else None, warp_size=args.warp_size)
    if not outcome.built:
        sys.stderr.write(outcome.build_log.rstrip() + "\n")
        print(f"{args.file}: the program {outcome.failure} {where}", file=sys.stderr)
        return 1
    sys.stdout.write(outcome.stdout)
    sys.stderr.write(outcome.stderr)
    ended = f"the program {outcome.failure}" if outcome.failure else "the program ran and exited with status 0"
    ran_on = "this machine's GPU" if on_gpu else f"the {outcome.dialect.value.upper()} runtime"
    print(f"xpiler run: {ended} ({outcome.seconds:.2f} s on {ran_on})", file=sys.stderr)
    if outcome.exit_code is None:
        return 124
    return outcome.exit_code if outcome.exit_code >= 0 else 128 - outcome.exit_code
