"""SMT repair quick-fix: after a failing verification, a background job asks the core for a one-expression
repair; when it finds one (re-verified on every spec case), the ``test.failed`` diagnostic is republished
with ``data.fix`` so the client offers "Apply repair (verified): `old` → `new`" as an undoable versioned edit;
when no repair is found, the diagnostic says why.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from xpiler_core import api as core_api
from xpiler_core.diagnostics import Span
from xpiler_core.dialect import Dialect

log = logging.getLogger(__name__)
REPAIR_BUDGET_S = 30.0
# the repair is re-verified on every spec case before it is offered: the title says so
FIX_TITLE = "Apply repair (verified): "


def fix_for(text: str, edits: list[Any]) -> dict[str, Any] | None:
    """One ``data.fix`` (title, covering span, new text) for a repair's edits (byte spans in ``text``)."""
    if not edits:
        return None
    data = text.encode("utf-8")
    ordered = sorted(edits, key=lambda e: e.span.start_byte)
    first, last = ordered[0].span, ordered[-1].span
    chunk = data[first.start_byte : last.end_byte]
    for e in reversed(ordered):
        a, b = e.span.start_byte - first.start_byte, e.span.end_byte - first.start_byte
        chunk = chunk[:a] + e.new.encode("utf-8") + chunk[b:]
    span = Span(first.start_byte, last.end_byte, first.start_line, first.start_col, last.end_line, last.end_col)
    head = ordered[0]
    title = f"{FIX_TITLE}`{head.old}` → `{head.new}`" + (f" (+{len(ordered) - 1} more)" if len(ordered) > 1 else "")
    return {"title": title, "span": span.to_dict(), "new_text": chunk.decode("utf-8")}


async def start_repair(
    server: Any, uri: str, version: int, path: str, text: str, spec_path: str | Path, dialect: Dialect,
    warp_size: int | None,
) -> None:
    """Start the background repair job for a document version whose verification failed."""

    def work(job: Any, progress: Any) -> Any:
        progress(0.05, "localizing the failing test")
        return core_api.repair(text, path, str(spec_path), dialect, warp_size, budget_s=REPAIR_BUDGET_S,
                               progress=lambda f, m: progress(min(0.95, f), m), cancel=job.cancel)

    async def done(job: Any) -> None:
        if job.state != "done" or job.result is None:
            return
        result = job.result
        job.message = f"repair {result.status}: {result.message}"
        doc = server.documents.get(uri)
        if doc is None or doc.version != version:
            job.stale = doc is not None
            return
        fix = fix_for(text, result.edits) if result.repaired else None
        stored = server.job_diagnostics.get(uri, {}).get("verify")
        if stored is None or stored[0] != version or (result.repaired and fix is None):
            return
        updated: list[types.Diagnostic] = []
        for d in stored[1]:
            if d.code == "test.failed":
                data = dict(d.data) if isinstance(d.data, dict) else {"version": version}
                data["repair"] = result.to_manifest()
                if fix is not None:
                    data["fix"] = fix
                    note = f"repair found and verified: {fix['title'][len(FIX_TITLE):]}"
                else:
                    note = f"no repair: {result.message}"
                d = types.Diagnostic(range=d.range, message=f"{d.message} — {note}", severity=d.severity, code=d.code,
                                     source=d.source, data=data)
            updated.append(d)
        await server.set_job_diagnostics(uri, "verify", version, updated)

    await server.jobs.start("repair", uri, version, f"SMT repair {Path(path).name}", work, done)
