"""``xpiler test SPEC [--candidate FILE] [--warp-size N]``: run a kernel test spec and print the verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from xpiler_core.cli.translate import add_project_flags, project_from_args
from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect, detect_dialect


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
    add_project_flags(p, programs=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.frontend.source import decode_source
    from xpiler_core.project import build_settings, load_project
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
    # the project's flags (compile_commands.json / xpiler.toml beside the spec's source, then -I/-D/--std) reach
    # the build of the source, of its reference and of the candidate
    project = load_project(str(spec.source), project_from_args(args))
    source_text = spec.source.read_text(encoding="utf-8", errors="replace") if spec.source.is_file() else ""
    reference = Path(spec.reference_source) if spec.reference_source else spec.source
    reference_text = reference.read_text(encoding="utf-8", errors="replace") if reference.is_file() else ""
    report = run_spec(
        spec,
        candidate_text=text,
        candidate_dialect=dialect,
        candidate_entry=args.entry,
        candidate_kind=kind,
        warp_size=args.warp_size,
        cases=args.case,
        seed=args.seed,
        build=build_settings(project, str(args.candidate or spec.source), text if text is not None else source_text,
                             device=project.reference_device if text is None else "runtime"),
        reference_build=build_settings(project, str(reference), reference_text, device=project.reference_device),
    )
    print(f"{spec.name}: {report.summary()}")
    return 0 if report.passed else 1
