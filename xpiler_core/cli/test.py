"""``xpiler test SPEC [--candidate FILE] [--warp-size N]``: run a kernel test spec and print the verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.source import decode_source


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "test", help="run a kernel test spec on the CPU runtime and compare with its reference"
    )
    p.add_argument("spec", help="the spec file (TOML)")
    p.add_argument("--candidate", help="run this file instead of the spec's source (same arguments)")
    p.add_argument("--entry", help="the candidate's entry (default: the spec's)")
    p.add_argument(
        "--kind", choices=["kernel", "host"], help="the candidate's entry kind (default: the spec's)"
    )
    p.add_argument(
        "--dialect", choices=[d.value for d in Dialect], help="the candidate's dialect (default: detected)"
    )
    p.add_argument(
        "--warp-size", type=int, choices=[32, 64], help="warp size (default 32 for CUDA, 64 for HIP)"
    )
    p.add_argument("--case", type=int, action="append", help="run only this case index (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.verify.harness import run_spec
    from xpiler_core.verify.spec import load_spec

    spec = load_spec(args.spec)
    text = None
    dialect = Dialect(args.dialect) if args.dialect else None
    if args.candidate:
        path = Path(args.candidate)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise XpilerError(f"cannot read candidate: {exc.strerror}", str(path)) from None
        text = decode_source(data, str(path))
        dialect = dialect or detect_dialect(text, str(path))
    kind = args.kind
    if text is not None and kind is None and dialect is Dialect.C:
        kind = "host"
    report = run_spec(
        spec,
        candidate_text=text,
        candidate_dialect=dialect,
        candidate_entry=args.entry,
        candidate_kind=kind,
        warp_size=args.warp_size,
        cases=args.case,
        seed=args.seed,
    )
    print(f"{spec.name}: {report.summary()}")
    return 0 if report.passed else 1
