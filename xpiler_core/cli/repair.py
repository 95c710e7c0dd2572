"""``xpiler repair CANDIDATE --spec SPEC``: local SMT repair of a candidate that fails its spec; prints the diff.

The candidate file is never modified unless ``--write`` is given; ``--output FILE`` writes the repaired text
elsewhere. Exit status: 0 repaired (or nothing to repair), 1 no repair found or refused.
"""

from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("repair", help="repair one small expression of a candidate that fails its spec (z3)")
    p.add_argument("candidate", help="the failing kernel source")
    p.add_argument("--spec", required=True, help="the kernel test spec (TOML) the candidate must pass")
    p.add_argument("--entry", help="the candidate's entry (default: the spec's)")
    p.add_argument("--dialect", choices=[d.value for d in Dialect], help="the candidate's dialect (default: detected)")
    p.add_argument("--warp-size", type=int, choices=[32, 64], help="warp size for the re-verification")
    p.add_argument("--budget", type=float, default=30.0, help="seconds for the whole repair (default 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", help="write the repaired text to this file")
    p.add_argument("--write", action="store_true", help="overwrite the candidate with the repaired text")
    p.add_argument("--json", action="store_true", help="print the repair record as JSON instead of a diff")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.frontend.source import decode_source
    from xpiler_core.repair.engine import repair_candidate, summarize
    from xpiler_core.safe_io import write_confined
    from xpiler_core.verify.spec import load_spec

    path = Path(args.candidate)
    try:
        text = decode_source(path.read_bytes(), str(path))
    except OSError as exc:
        raise XpilerError(f"cannot read candidate: {exc.strerror}", str(path)) from None
    spec = load_spec(args.spec)
    result = repair_candidate(
        text, str(path), spec, dialect=Dialect(args.dialect) if args.dialect else None, entry=args.entry,
        warp_size=args.warp_size, budget_s=args.budget, seed=args.seed,
    )
    if args.json:
        print(json.dumps(result.to_manifest(), indent=2))
    else:
        print(summarize(result))
        if result.text is not None:
            diff = difflib.unified_diff(
                text.splitlines(keepends=True), result.text.splitlines(keepends=True),
                fromfile=f"a/{path.name}", tofile=f"b/{path.name}",
            )
            print("".join(diff), end="")
            if result.model:
                print(f"solver model: {json.dumps(result.model)}")
    if result.text is not None:
        if args.output:
            out = Path(args.output)
            if out.resolve() == path.resolve() and not args.write:
                raise XpilerError("refusing to overwrite the candidate without --write", str(out))
            write_confined(out, result.text)
        if args.write:
            write_confined(path, result.text)
    return 0 if result.status in ("repaired", "not-needed") else 1
