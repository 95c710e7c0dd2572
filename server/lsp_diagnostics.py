"""Core diagnostics → LSP diagnostics, and the per-version set the server publishes for a document."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from xpiler_server.positions import ByteLines

from xpiler_core.diagnostics import Diagnostic, Severity

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}


def to_lsp(diagnostic: Diagnostic, lines: ByteLines, encoding: str, version: int) -> types.Diagnostic:
    data: dict[str, Any] = {"version": version}
    fix = diagnostic.data.get("fix") if isinstance(diagnostic.data, dict) else None
    if isinstance(fix, dict):
        data["fix"] = fix  # quick-fix hook: {"title", "span": Span dict, "new_text"} (SMT repairs)
    source = diagnostic.source if diagnostic.source and diagnostic.source != "xpiler" else "xpiler"
    rng = lines.range_of(diagnostic.span, encoding)
    if rng.start == rng.end:
        # Compilers give a point; show it up to the end of its line so it can be seen and hovered.
        end = lines.point(rng.start.line, 1 << 30, encoding)
        rng = types.Range(start=rng.start, end=end) if end.character > rng.start.character else rng
    return types.Diagnostic(
        range=rng,
        message=diagnostic.message,
        severity=_SEVERITY.get(diagnostic.severity, types.DiagnosticSeverity.Error),
        code=diagnostic.code,
        source=source,
        data=data,
    )
