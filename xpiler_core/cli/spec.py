"""``xpiler spec init FILE [--kernel K] [-o SPEC]``: draft a test spec for a kernel no automatic test reaches.

Writes ``FILE``'s folder/``<kernel>.toml`` (or ``-o SPEC``, never over an existing file) with every parameter,
the launch the code determines, three cases and the source as the reference; ``FILL_ME`` marks what the code
does not say. Then ``xpiler translate FILE --to T --spec SPEC`` verifies against it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from xpiler_core.cli.translate import read_source
from xpiler_core.diagnostics import XpilerError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("spec", help="draft a test spec for a kernel (spec init FILE)")
    parser.add_argument("action", choices=["init"], help="init: write a spec drafted from the kernel's signature")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--kernel", help="the kernel (default: the file's first)")
    parser.add_argument("-o", "--output", metavar="SPEC", help="where to write it (default: FILE's folder/<kernel>.toml)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.api import draft_spec
    from xpiler_core.safe_io import write_confined
    from xpiler_core.verify.spec import PLACEHOLDER

    text = read_source(args.file)
    draft = draft_spec(text, args.file, args.kernel)
    out = Path(args.output) if args.output else Path(draft.path)
    if out.exists() or out.is_symlink():
        raise XpilerError("the spec file exists already; not overwritten (give -o)", str(out))
    try:
        write_confined(out, draft.text)
    except OSError as exc:
        raise XpilerError(f"cannot write the spec: {exc.strerror}", str(out)) from None
    todo = draft.to_fill
    print(f"wrote {out}" + (f": replace the {todo} {PLACEHOLDER} mark(s), then" if todo else "; then")
          + f" xpiler translate {args.file} --to cpu --spec {out}")
    return 0
