"""Core diagnostics → LSP diagnostics, and the per-version set the server publishes for a document."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from xpiler_core.diagnostics import Diagnostic, Severity
from xpiler_server.positions import ByteLines

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
    return types.Diagnostic(
        range=lines.range_of(diagnostic.span, encoding),
        message=diagnostic.message,
        severity=_SEVERITY.get(diagnostic.severity, types.DiagnosticSeverity.Error),
        code=diagnostic.code,
        source=source,
        data=data,
    )
