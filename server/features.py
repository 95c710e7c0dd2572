"""LSP feature handlers: lifecycle, document sync, code actions, hover, code lens, inlay hints."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from xpiler_server import commands
from xpiler_server.config import target_name
from xpiler_server.documents import Analysis
from xpiler_server.jobs import Job
from xpiler_server.server import COMMANDS, XpilerServer, guarded

from xpiler_core import api as core_api

log = logging.getLogger(__name__)

TUNING_PROGRESS_NOTIFICATION = "xpiler/tuningProgress"
_TARGET_LABELS = {"hip": "HIP", "cpu": "CPU (C/OpenMP)", "cuda": "CUDA", "bang": "BANG C"}
TRANSLATE_KIND = "source.xpiler.translate"
RUN_PASS_KIND = "refactor.rewrite.xpiler"


def register(server: XpilerServer) -> None:
    commands.register(server)
    server.jobs.listeners.append(lambda job: _on_job_update(server, job))

    @server.feature(types.INITIALIZE)
    @guarded("initialize")
    def initialize(params: types.InitializeParams) -> None:
        server.initialization_options = params.initialization_options
        server.apply_settings(None)

    @server.feature(types.INITIALIZED)
    @guarded("initialized")
    async def initialized(params: types.InitializedParams) -> None:
        await server.refresh_configuration()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @guarded("didChangeConfiguration")
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        if isinstance(params.settings, dict) and params.settings:
            server.apply_settings(params.settings)  # pushed settings; a pull below wins when the client has one
        await server.refresh_configuration()

    @server.feature(types.SHUTDOWN)
    @guarded("shutdown")
    def shutdown(params: None) -> None:
        # Jobs check their token between steps; cancelling lets the worker threads end so the process can exit.
        server.jobs.cancel()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @guarded("didOpen")
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        doc = server.documents.open(params.text_document)
        server.schedule_diagnostics(doc.uri, 0)
        server.schedule_target_diagnostics(doc.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @guarded("didChange")
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.track_edits(params.text_document.uri, list(params.content_changes))
        doc = server.documents.change(params, server.encoding)
        if doc is not None:
            server.schedule_diagnostics(doc.uri)
            server.schedule_target_diagnostics(doc.uri)  # restarts the idle timer

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @guarded("didClose")
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        server.documents.close(params.text_document.uri)
        server.forget(params.text_document.uri)
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    @guarded("workDoneProgress/cancel")
    def progress_cancel(params: types.WorkDoneProgressCancelParams) -> None:
        server.jobs.cancel(str(params.token))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[TRANSLATE_KIND, RUN_PASS_KIND, types.CodeActionKind.QuickFix], resolve_provider=False
        ),
    )
    @guarded("codeAction")
    async def code_action(params: types.CodeActionParams) -> list[types.CodeAction] | None:
        return await code_actions(server, params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @guarded("hover")
    async def hover(params: types.HoverParams) -> types.Hover | None:
        return await hover_at(server, params)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    @guarded("codeLens")
    async def code_lens(params: types.CodeLensParams) -> list[types.CodeLens]:
        return await code_lenses(server, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    @guarded("inlayHint")
    async def inlay_hint(params: types.InlayHintParams) -> list[types.InlayHint]:
        return await inlay_hints(server, params.text_document.uri)

    # Advertise the commands even though their handlers are registered by ``commands.register``.
    assert set(COMMANDS) <= set(server.protocol.fm.commands), "every advertised command has a handler"


def _kind_wanted(kind: str, only: list[str] | None) -> bool:
    if not only:
        return True
    return any(kind == want or kind.startswith(want + ".") for want in only)


async def code_actions(server: XpilerServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    doc = server.documents.get(uri)
    if doc is None:
        return None
    only = [str(k) for k in params.context.only] if params.context and params.context.only else None
    actions: list[types.CodeAction] = []
    source = core_api.detect_dialect(doc.text[:200_000], doc.path)
    if _kind_wanted(TRANSLATE_KIND, only):
        for target in core_api.available_targets(source):
            name = target_name(target)
            title = f"Translate to {_TARGET_LABELS.get(name, name)}"
            actions.append(
                types.CodeAction(
                    title=title,
                    kind=f"{TRANSLATE_KIND}.{name}",
                    command=types.Command(title=title, command="xpiler.translate", arguments=[uri, name]),
                )
            )
    if _kind_wanted(RUN_PASS_KIND, only):
        # The kernel under the cursor, from the last analysis with the cursor mapped back through the edits
        # made since (code actions are asked for on every cursor move: they must not wait for a reparse).
        mapped = doc.map_to_last_analysis(doc.line_index.offset(params.range.start, server.encoding))
        if mapped is None:
            analysis = await server.analysis_of(doc)
            mapped = (analysis, analysis.lines.byte_offset(params.range.start, server.encoding))
        analysis, offset = mapped
        kernel = analysis.kernel_at(offset) if analysis.parsed is not None else None
        if kernel is not None:
            for entry in core_api.passes():
                title = f"Run pass: {entry.name}"
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=f"{RUN_PASS_KIND}.{entry.name}",
                        command=types.Command(
                            title=title,
                            command="xpiler.runPass",
                            arguments=[uri, entry.name, kernel.name],
                        ),
                    )
                )
    if _kind_wanted(types.CodeActionKind.QuickFix, only) and params.context:
        for diagnostic in params.context.diagnostics:
            actions.extend(_quick_fixes(server, doc, diagnostic))
    return actions


def _quick_fixes(server: XpilerServer, doc: Any, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    out: list[types.CodeAction] = []
    data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
    fix = data.get("fix")
    analysis = doc.analysis
    if isinstance(fix, dict) and analysis is not None and data.get("version") == doc.version:
        span = fix.get("span") or {}
        try:
            from xpiler_core.diagnostics import Span

            rng = analysis.lines.range_of(Span(**span), server.encoding)
            out.append(
                types.CodeAction(
                    title=str(fix.get("title") or "Apply fix"),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=types.WorkspaceEdit(
                        document_changes=[
                            types.TextDocumentEdit(
                                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version),
                                edits=[types.TextEdit(range=rng, new_text=str(fix.get("new_text", "")))],
                            )
                        ]
                    ),
                )
            )
        except (TypeError, ValueError):
            log.warning("ignoring malformed fix on diagnostic %s", diagnostic.code)
    for provider in server.quick_fix_providers:
        try:
            out.extend(provider(doc, diagnostic))
        except Exception:
            log.exception("quick-fix provider failed")
    return out


# ------------------------------------------------------------------------------------------------ hover


async def hover_at(server: XpilerServer, params: types.HoverParams) -> types.Hover | None:
    doc = server.documents.get(params.text_document.uri)
    if doc is None:
        return None
    analysis = await server.analysis_of(doc)
    if analysis.parsed is None:
        return None
    offset = analysis.lines.byte_offset(params.position, server.encoding)
    kernel = analysis.kernel_named_at(offset)
    if kernel is None:
        return None
    sections = [f"**kernel `{kernel.name}`**"]
    if kernel.features:
        sections.append("features: " + ", ".join(f"`{f}`" for f in kernel.features))
    if kernel.params:
        sections.append("parameters: " + ", ".join(f"`{p}`" for p in kernel.params))
    sections.extend(_job_sections(server, doc.uri))
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(sections)),
        range=analysis.lines.range_of(kernel.name_span, server.encoding),
    )


def _job_sections(server: XpilerServer, uri: str) -> list[str]:
    """What the jobs of this document know right now (read at request time: each hover is current)."""
    out: list[str] = []
    verify = server.jobs.latest(uri, "verify")
    if verify is not None:
        out.append(_verification_section(verify))
    translate = server.jobs.latest(uri, "translate")
    if translate is not None:
        snap = translate.snapshot()
        line = f"**translation** ({snap['state']}, {snap['percentage']}%): {snap['message']}"
        if translate.live.get("output"):
            line += f" → `{translate.live['output']}`"
        out.append(line)
    tune = server.jobs.latest(uri, "tune")
    if tune is not None:
        out.append(_tuning_section(tune))
    return out


def _verification_section(job: Job) -> str:
    snap = job.snapshot()
    evidence = job.live.get("verification")
    head = f"**verification** ({snap['state']}{', stale' if job.stale else ''}, {snap['percentage']}%): {snap['message']}"
    if evidence is None:
        return head
    steps = list(evidence.steps)
    lines = [head]
    if evidence.toolchain:
        lines.append(f"- toolchain: {evidence.toolchain} (compiles: {evidence.compile_ok})")
    if steps:
        passed = sum(1 for s in steps if s.passed)
        worst = max(s.max_abs_err for s in steps)
        lines.append(f"- tests: {passed}/{len(steps)} of {evidence.cases_total} cases passed, max abs err {worst:.3g}")
    if evidence.tolerance:
        lines.append("- tolerance: " + ", ".join(f"{k}={v}" for k, v in evidence.tolerance.items()))
    if evidence.failing is not None:
        lines.append(f"- first failing case: {getattr(evidence.failing, 'sizes', {})}")
    lines.append(f"- spec: `{evidence.spec_path}`")
    return "\n".join(lines)


def _tuning_section(job: Job) -> str:
    snap = job.snapshot()
    live = snap["live"]
    parts = [f"**tuning** ({snap['state']}, {snap['percentage']}%): {snap['message']}"]
    if "trials" in live:
        parts.append(f"- trials: {live['trials']} of at most {live.get('budget', '?')}")
    if "best_config" in live:
        parts.append(f"- best config: `{live['best_config']}`")
    if "best_latency_ms" in live:
        baseline = f" (untuned {live['baseline_latency_ms']} ms)" if "baseline_latency_ms" in live else ""
        parts.append(f"- latency: {live['best_latency_ms']} ms{baseline}")
    if "speedup" in live:
        interval = live.get("speedup_interval")
        parts.append(f"- speedup: {live['speedup']}x" + (f" (95 % interval {interval[0]}–{interval[1]}x)"
                                                            if interval else ""))
    if live.get("output"):
        parts.append(f"- tuned code: `{live['output']}`")
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------ lens / inlay


async def code_lenses(server: XpilerServer, uri: str) -> list[types.CodeLens]:
    doc = server.documents.get(uri)
    if doc is None:
        return []
    analysis = await server.analysis_of(doc)
    status = _status_line(server, uri)
    lenses = []
    # A kernel without a spec may still be tested automatically; the draft is for those no test reaches.
    has_spec = await asyncio.to_thread(core_api.find_spec, doc.path) is not None
    for kernel in analysis.kernels:
        rng = analysis.lines.range_of(kernel.name_span, server.encoding)
        title = f"xpiler: {status}" if status else "xpiler: verify"
        lenses.append(
            types.CodeLens(range=rng, command=types.Command(title=title, command="xpiler.verify", arguments=[uri]))
        )
        if not has_spec:
            lenses.append(types.CodeLens(range=rng, command=types.Command(
                title="xpiler: create test spec", command="xpiler.createSpec", arguments=[uri, kernel.name])))
    return lenses


async def inlay_hints(server: XpilerServer, uri: str) -> list[types.InlayHint]:
    doc = server.documents.get(uri)
    if doc is None:
        return []
    status = _status_line(server, uri)
    if not status:
        return []
    analysis: Analysis = await server.analysis_of(doc)
    return [
        types.InlayHint(
            position=analysis.lines.range_of(kernel.name_span, server.encoding).end,
            label=f" {status}",
            padding_left=True,
        )
        for kernel in analysis.kernels
    ]


def _status_line(server: XpilerServer, uri: str) -> str:
    running = [j for j in server.jobs.running() if j.uri == uri]
    if running:
        job = running[-1]
        snap = job.snapshot()
        return f"{job.kind} {snap['percentage']}% — {snap['message']}"
    verify = server.jobs.latest(uri, "verify")
    if verify is not None and verify.state == "done":
        return verify.message
    return ""


def _on_job_update(server: XpilerServer, job: Job) -> None:
    """Push job state to clients that show it without hovering."""
    if job.kind == "tune":
        server.protocol.notify(TUNING_PROGRESS_NOTIFICATION, job.snapshot())
    workspace_caps = getattr(server.client_capabilities, "workspace", None)
    if getattr(getattr(workspace_caps, "code_lens", None), "refresh_support", False):
        asyncio.ensure_future(_quiet(server.workspace_code_lens_refresh_async(None)))
    if getattr(getattr(workspace_caps, "inlay_hint", None), "refresh_support", False):
        asyncio.ensure_future(_quiet(server.workspace_inlay_hint_refresh_async(None)))


async def _quiet(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:
        log.debug("refresh request failed", exc_info=True)
