"""``xpiler translate DIR --to T -o OUTDIR``: a source tree translated file by file, its layout kept.

Every source file of the tree that holds GPU code for the source platform is translated (its local headers
with it, written beside its output under the target's naming); every other file is copied unchanged, so the
output tree builds as the input did. Hidden folders and the output folder itself are skipped. Symbolic links
are never followed — neither linked folders nor linked files (a link in a cloned tree may point anywhere);
each is listed as skipped. Nothing is written outside the output folder. Prints one line per translated file
(status, output, reason) and exits with the worst status's code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect, detect_dialect, dialect_from_suffix
from xpiler_core.frontend.source import decode_lenient
from xpiler_core.pipeline import translate, write_outputs
from xpiler_core.safe_io import UnsafePath, read_nofollow, write_confined
from xpiler_core.translation import EXIT_CODES, Status, TranslateOptions, output_suffix
from xpiler_core.verify.spec import spec_beside

# A private module (leading underscore): the parser does not import it; ``translate`` does, for a folder.

# Which files are translation units (headers travel with the units that include them).
_UNIT_SUFFIXES = {".cu", ".hip", ".c", ".cc", ".cpp", ".cxx", ".mlu"}
_SEVERITY = [Status.VERIFIED, Status.NOT_EXECUTED, Status.UNRESOLVED, Status.ERROR]
MAX_COPY_BYTES = 64 * 1024**2


def _walk(root: Path, skip: Path) -> tuple[list[Path], list[Path]]:
    """(regular files, symbolic links) below ``root``, hidden entries and the output folder left out; linked
    folders are not entered."""
    files: list[Path] = []
    links: list[Path] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        kept: list[Path] = []
        for name in sorted(dirs):
            path = here / name
            if name.startswith(".") or path == skip:
                continue
            (links if path.is_symlink() else kept).append(path)
        dirs[:] = [p.name for p in kept]
        for name in sorted(names):
            path = here / name
            if name.startswith("."):
                continue
            if path.is_symlink():
                links.append(path)
            elif path.is_file():
                files.append(path)
    return sorted(files), sorted(links)


def is_unit(path: Path, text: str, options: TranslateOptions) -> bool:
    """A file to translate: a unit suffix and GPU code of a dialect other than the target."""
    if path.suffix.lower() not in _UNIT_SUFFIXES:
        return False
    dialect = options.source_dialect or detect_dialect(text, str(path))
    if dialect is options.target:
        return False
    if dialect is Dialect.C and dialect_from_suffix(str(path)) is Dialect.C:
        # plain C/C++ host files go to CUDA only when asked (C → CUDA); elsewhere they are copied
        return options.target is Dialect.CUDA and "#pragma omp" in text
    return True


def translate_tree(root: Path, out_root: Path | None, options: TranslateOptions, as_json: bool) -> int:
    if out_root is None:
        raise XpilerError("translating a folder needs -o OUTDIR (the translated tree is written there)", str(root))
    root, out_root = root.resolve(), out_root.resolve()
    if out_root == root:
        raise XpilerError("the output folder must differ from the source folder", str(out_root))
    from xpiler_core.safe_io import writable_folder_problem

    problem = writable_folder_problem(out_root)
    if problem:
        raise XpilerError(f"cannot write the translated tree: {problem}", str(out_root))
    rows: list[dict[str, str]] = []
    worst = Status.VERIFIED
    copied = 0
    files, links = _walk(root, out_root)
    for link in links:
        print(f"{link.relative_to(root)}: skipped — a symbolic link (not followed)", file=sys.stderr, flush=True)
    for path in files:
        relative = path.relative_to(root)
        dest = out_root / relative
        try:
            data = read_nofollow(path)
            text, _ = decode_lenient(data, str(path))
        except (XpilerError, OSError):
            data, text = b"", ""
        if text and is_unit(path, text, options):
            output = dest.with_suffix(output_suffix(options.target))
            try:
                result = translate(text, str(path), dataclasses.replace(options, spec_path=spec_beside(str(path))))
                written, _ = write_outputs(result, str(output), root=out_root)
                status, reason, shown = result.status, result.reason, str(written.relative_to(out_root))
                if not result.output_text:
                    shown = "-"
            except XpilerError as exc:
                status, reason, shown = Status.ERROR, exc.message if hasattr(exc, "message") else str(exc), "-"
            worst = max(worst, status, key=_SEVERITY.index)
            rows.append({"file": str(relative), "status": status.value, "output": shown, "reason": reason})
            print(f"{relative}: {status.value}" + (f" — {reason}" if reason else ""), file=sys.stderr, flush=True)
            continue
        if dest.exists() or dest.is_symlink() or len(data) > MAX_COPY_BYTES or not data and path.stat().st_size:
            continue  # a translated header already written there, a data file too large, or unreadable
        try:
            write_confined(dest, data, out_root)
            os.chmod(dest, path.stat().st_mode & 0o7777)
        except UnsafePath as exc:
            print(exc.format(), file=sys.stderr)
            continue
        copied += 1
    if as_json:
        json.dump({"root": str(root), "output": str(out_root), "files": rows, "copied": copied,
                   "skipped_links": [str(p.relative_to(root)) for p in links]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        width = max([len(r["file"]) for r in rows] + [4])
        print(f"{'file':<{width}}  {'status':<22}  output / reason")
        for row in rows:
            print(f"{row['file']:<{width}}  {row['status']:<22}  {row['output']}"
                  + (f"  ({row['reason']})" if row["reason"] else ""))
        counts = {s.value: sum(1 for r in rows if r["status"] == s.value) for s in _SEVERITY}
        print(f"{len(rows)} file(s) translated: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)
              + f"; {copied} other file(s) copied to {out_root}"
              + (f"; {len(links)} symbolic link(s) skipped" if links else ""))
    return EXIT_CODES[worst] if rows else 0
