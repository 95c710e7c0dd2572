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
import time
from collections import Counter
from pathlib import Path

from xpiler_core.cli._progress import TreeProgress
from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect, detect_dialect, dialect_from_suffix
from xpiler_core.frontend.source import decode_lenient
from xpiler_core.migration.jobs import FileJob, FileOutcome, job_digest, options_to_dict
from xpiler_core.migration.pool import LocalPool, Pool
from xpiler_core.migration.record import RunRecord
from xpiler_core.migration.report import write_report
from xpiler_core.safe_io import UnsafePath, read_nofollow, write_confined
from xpiler_core.translation import EXIT_CODES, Status, TranslateOptions, output_suffix, sha256_text
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


def _plan(root: Path, out_root: Path, files: list[Path], options: TranslateOptions
          ) -> tuple[list[FileJob], list[tuple[Path, bytes]]]:
    """The units to translate (as jobs) and the other files to copy."""
    jobs: list[FileJob] = []
    copies: list[tuple[Path, bytes]] = []
    for path in files:
        relative = path.relative_to(root)
        try:
            data = read_nofollow(path)
            text, _ = decode_lenient(data, str(path))
        except (XpilerError, OSError):
            data, text = b"", ""
        if text and is_unit(path, text, options):
            output = relative.with_suffix(output_suffix(options.target))
            own = dataclasses.replace(options, spec_path=spec_beside(str(path)), output_path=str(out_root / output))
            jobs.append(FileJob(str(relative), str(path), text, str(output), options_to_dict(own),
                                job_digest(str(relative), str(path), text, own)))
        elif data or not path.stat().st_size:
            copies.append((relative, data))
    return jobs, copies


def _write(outcome: FileOutcome, out_root: Path) -> None:
    """The job's texts into the output tree (a failed write is the file's outcome, not the run's end)."""
    if not outcome.output_text:
        return
    out = out_root / outcome.output
    try:
        write_confined(out, outcome.output_text, out_root)
        for name, text in outcome.companions.items():
            write_confined(out.parent / name, text, out_root)
        manifest = dict(outcome.manifest)
        manifest["output"] = {"path": str(out), "sha256": sha256_text(outcome.output_text)}
        write_confined(out.parent / ".xpiler" / f"{out.name}.json",
                       json.dumps(manifest, indent=2, sort_keys=True, default=str), out_root)
    except (OSError, XpilerError) as exc:
        outcome.status, outcome.reason = "error", f"the output could not be written: {getattr(exc, 'message', exc)}"


def translate_tree(root: Path, out_root: Path | None, options: TranslateOptions, as_json: bool, *, jobs: int = 1,
                   cluster: str | None = None, fresh: bool = False) -> int:
    if out_root is None:
        raise XpilerError("translating a folder needs -o OUTDIR (the translated tree is written there)", str(root))
    root, out_root = root.resolve(), out_root.resolve()
    if out_root == root:
        raise XpilerError("the output folder must differ from the source folder", str(out_root))
    from xpiler_core.safe_io import writable_folder_problem

    problem = writable_folder_problem(out_root)
    if problem:
        raise XpilerError(f"cannot write the translated tree: {problem}", str(out_root))
    started = time.monotonic()
    files, links = _walk(root, out_root)
    for link in links:
        print(f"{link.relative_to(root)}: skipped — a symbolic link (not followed)", file=sys.stderr, flush=True)
    work, copies = _plan(root, out_root, files, options)
    record = RunRecord(str(root), options.target.value) if fresh else \
        RunRecord.load(out_root, root, options.target.value)
    outcomes: dict[str, FileOutcome] = {}
    todo: list[FileJob] = []
    kept_names: set[str] = set()
    for job in work:
        kept = record.reusable(job.relative, job.digest)
        if kept is not None and (not kept.output or (out_root / kept.output).is_file()):
            outcomes[job.relative] = kept
            kept_names.add(job.relative)
        else:
            todo.append(job)
    pool = make_pool(jobs, cluster, options)
    progress = TreeProgress(len(work), len(outcomes), pool.describe())
    for kept in outcomes.values():
        progress.finished(kept, reused=True)
    try:
        for outcome in pool.run(todo, progress.starting):
            _write(outcome, out_root)
            outcomes[outcome.relative] = outcome
            record.put(outcome)
            record.save(out_root)
            progress.finished(outcome)
    finally:
        progress.close()
    copied = 0
    for relative, data in copies:
        dest = out_root / relative
        if dest.exists() or dest.is_symlink() or len(data) > MAX_COPY_BYTES:
            continue  # a translated header already written there, or a data file too large
        try:
            write_confined(dest, data, out_root)
            os.chmod(dest, (root / relative).stat().st_mode & 0o7777)
        except UnsafePath as exc:
            print(exc.format(), file=sys.stderr)
            continue
        copied += 1
    ordered = [outcomes[j.relative] for j in work if j.relative in outcomes]
    rows = [{**dataclasses.asdict(o), "reused": o.relative in kept_names} for o in ordered]
    for row in rows:
        for heavy in ("output_text", "companions", "manifest"):
            row.pop(heavy, None)
    html_path, _ = write_report(out_root, root, "cpu" if options.target is Dialect.C else options.target.value, rows, copied,
                                [str(p.relative_to(root)) for p in links], pool.describe(), time.monotonic() - started)
    worst = max((Status(o.status) if o.status in {s.value for s in Status} else Status.ERROR for o in ordered),
                key=_SEVERITY.index, default=Status.VERIFIED)
    if as_json:
        json.dump({"root": str(root), "output": str(out_root), "report": str(html_path),
                   "files": [{"file": r["relative"], "status": r["status"], "output": r["output"] or "-",
                              "reason": r["reason"], "reused": r["reused"]} for r in rows],
                   "copied": copied, "skipped_links": [str(p.relative_to(root)) for p in links]},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        width = max([len(r["relative"]) for r in rows] + [4])
        print(f"{'file':<{width}}  {'status':<22}  output / reason")
        for row in rows:
            reason = str(row["reason"] or "").split("\n")[0]
            print(f"{row['relative']:<{width}}  {row['status']:<22}  {row['output'] or '-'}"
                  + (f"  ({reason})" if reason else ""))
        counts = Counter(str(r["status"]) for r in rows)
        kept_note = f" ({len(kept_names)} unchanged since the last run, kept)" if kept_names else ""
        print(f"{len(rows)} file(s) translated{kept_note}: " + ", ".join(f"{n} {k}" for k, n in counts.items())
              + f"; {copied} other file(s) copied to {out_root}"
              + (f"; {len(links)} symbolic link(s) skipped" if links else "")
              + f"; report: {html_path}")
    return EXIT_CODES[worst] if rows else 0


def make_pool(jobs: int, cluster: str | None, options: TranslateOptions) -> Pool:
    if cluster:
        from xpiler_core.migration.ray_pool import RayPool

        return RayPool(cluster, options.target)
    return LocalPool(jobs)
