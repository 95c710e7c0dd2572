"""The ``xpiler.*`` commands. Each starts a background job (or acts at once) and answers immediately with
the job id; the job's outcome arrives as an edit, a new file, diagnostics and notifications."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path
from xpiler_server import results
from xpiler_server.config import TARGET_NAMES, target_name
from xpiler_server.confinement import Source, accepted_source, output_problem
from xpiler_server.documents import MAX_LIVE_ANALYSIS_BYTES, Document
from xpiler_server.jobs import Job
from xpiler_server.lsp_diagnostics import to_lsp
from xpiler_server.positions import ByteLines
from xpiler_server.server import XpilerServer, guarded

from xpiler_core import api as core_api
from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.safe_io import UnsafePath, write_confined

log = logging.getLogger(__name__)


def _unpack(args: tuple[Any, ...], names: tuple[str, ...]) -> dict[str, Any]:
    """Arguments as a dict: either positional (uri, …) or one object with these keys."""
    if len(args) == 1 and isinstance(args[0], dict):
        return {name: args[0].get(name) for name in names}
    return {name: (args[i] if len(args) > i else None) for i, name in enumerate(names)}


def _str(values: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = values.get(name)
    if value is None:
        if required:
            raise JsonRpcInvalidParams(f"missing argument '{name}'")
        return None
    if not isinstance(value, str):
        raise JsonRpcInvalidParams(f"argument '{name}' must be a string")
    return value


def _snapshot(server: XpilerServer, uri: str) -> tuple[Source, str, int]:
    """(source, text, version) of an open document, or of a workspace file on disk (version -1); any other
    file is refused before it is read (see confinement.py)."""
    source = accepted_source(server, uri)
    doc = server.documents.get(uri)
    if doc is not None:
        return source, doc.text, doc.version
    try:
        return source, Path(source.path).read_text(encoding="utf-8"), -1
    except (OSError, UnicodeDecodeError) as exc:
        raise JsonRpcInvalidParams(f"cannot read {source.path}: {exc}") from None


def _check_size(text: str, path: str) -> None:
    if len(text) > MAX_LIVE_ANALYSIS_BYTES:
        raise JsonRpcInvalidParams(
            f"{Path(path).name} is {len(text) / 1e6:.1f} MB: too large to translate in the editor "
            f"(limit {MAX_LIVE_ANALYSIS_BYTES / 1e6:.1f} MB); use the xpiler CLI"
        )


def register(server: XpilerServer) -> None:
    @server.command("xpiler.translate")
    @guarded("xpiler.translate")
    async def translate(*args: Any) -> dict[str, Any]:
        values = _unpack(args, ("uri", "target"))
        uri = _str(values, "uri", required=True)
        assert uri is not None
        return await start_translation(server, uri, _str(values, "target"))

    @server.command("xpiler.verify")
    @guarded("xpiler.verify")
    async def verify(*args: Any) -> dict[str, Any]:
        values = _unpack(args, ("uri",))
        uri = _str(values, "uri", required=True)
        assert uri is not None
        return await start_verification(server, uri)

    @server.command("xpiler.runPass")
    @guarded("xpiler.runPass")
    async def run_pass(*args: Any) -> dict[str, Any]:
        values = _unpack(args, ("uri", "pass", "kernel", "params"))
        uri = _str(values, "uri", required=True)
        name = _str(values, "pass", required=True)
        params = values.get("params") or {}
        if not isinstance(params, dict):
            raise JsonRpcInvalidParams("argument 'params' must be an object")
        assert uri is not None and name is not None
        return await start_pass(server, uri, name, _str(values, "kernel"), params)

    @server.command("xpiler.cancel")
    @guarded("xpiler.cancel")
    def cancel(*args: Any) -> dict[str, Any]:
        values = _unpack(args, ("job",))
        key = _str(values, "job")
        if key is None and len(args) == 1 and isinstance(args[0], dict):
            key = args[0].get("jobId") or args[0].get("uri")
        return {"cancelled": server.jobs.cancel(key)}

    @server.command("xpiler.showManifest")
    @guarded("xpiler.showManifest")
    async def show_manifest(*args: Any) -> dict[str, Any]:
        values = _unpack(args, ("uri",))
        uri = _str(values, "uri", required=True)
        assert uri is not None
        return await show_manifest_of(server, uri)

    @server.command("xpiler.createSpec")
    @guarded("xpiler.createSpec")
    async def create_spec(*args: Any) -> dict[str, Any]:
        values = _unpack(args, ("uri", "kernel"))
        uri = _str(values, "uri", required=True)
        assert uri is not None
        return await create_spec_of(server, uri, _str(values, "kernel"))

    @server.command("xpiler.tune")
    @guarded("xpiler.tune")
    async def tune(*args: Any) -> dict[str, Any]:
        values = _unpack(args, ("uri", "target"))
        uri = _str(values, "uri", required=True)
        assert uri is not None
        return await start_tuning(server, uri, _str(values, "target"))


# --------------------------------------------------------------------------------------------- translate


async def start_translation(server: XpilerServer, uri: str, target_arg: str | None) -> dict[str, Any]:
    source_file, text, version = _snapshot(server, uri)
    path = source_file.path
    root = source_file.write_root()  # before the work: its result could not land
    _check_size(text, path)
    source = core_api.detect_dialect(text, path)
    if target_arg is not None and target_arg.lower() not in TARGET_NAMES:
        raise JsonRpcInvalidParams(f"unknown target '{target_arg}' (hip, cpu, cuda, bang)")
    target = TARGET_NAMES[target_arg.lower()] if target_arg else server.config.target_dialect
    if target not in core_api.available_targets(source):
        raise JsonRpcInvalidParams(f"no translation plan from {source.value} to {target_name(target)}")
    config = server.config
    spec_path = core_api.find_spec(path)
    project = core_api.project_for(path, server.workspace_root(path), include_dirs=config.include_dirs,
                                   defines=config.defines, std=config.std, program_args=config.program_args)

    def work(job: Job, progress: Any) -> Any:
        return core_api.translate(
            text,
            path,
            target,
            warp_size=config.warp_size_for(target) if target is Dialect.HIP else None,
            spec_path=spec_path,
            verify=True,
            proposer="llm" if config.llm_enabled and config.llm_endpoint else "rules",
            progress=progress,
            cancel=job.cancel,
            llm={"base_url": config.llm_endpoint, "model": config.llm_model, "api_key_env": config.llm_api_key_env},
            project=project,
        )

    async def done(job: Job) -> None:
        if job.state != "done":
            return
        result = job.result
        server.translations[uri] = (version, result)
        job.message = f"{getattr(result, 'status', '?')}: {getattr(result, 'summary', '')}"
        job.live["status"] = getattr(result, "status", None)
        current = server.documents.get(uri)
        if current is not None and current.version == version:
            analysis = await server.analysis_of(current)
            await server.set_job_diagnostics(uri, "translate", version, _translation_diagnostics(server, current, analysis, result))
        if current is not None and current.version != version:
            job.stale = True
            job.message = f"stale: the document changed (v{version} → v{current.version}); not applied"
            asyncio.ensure_future(_offer_stale(server, job, uri, target_arg, lambda: _land(server, job, path, root)))
            return
        await _land(server, job, path, root)

    title = f"Translate {Path(path).name} to {target_name(target).upper()}"
    job = await server.jobs.start("translate", uri, version, title, work, done)
    return {"jobId": job.id}


async def _land(server: XpilerServer, job: Job, source_path: str, root: Path) -> None:
    result = job.result
    output = getattr(result, "output_text", None)
    status = getattr(result, "status", "error")
    if not output:
        server.window_show_message(
            types.ShowMessageParams(
                type=types.MessageType.Error,
                message=f"xpiler: translation failed: {getattr(result, 'summary', 'no output')}",
            )
        )
        return
    suggested = getattr(result, "suggested_output_path", None)
    target = getattr(result, "target", None)
    default = Path(source_path).with_suffix(target.suffix if isinstance(target, Dialect) else ".out")
    taken = {doc.path for doc in server.documents}
    out_path = results.fresh_path(Path(suggested) if suggested else default, taken)
    files = {out_path: output}
    for name, text in (getattr(result, "companions", None) or {}).items():
        # headers translated with the file keep their names (the translation includes them by name): one that
        # exists with other content is never overwritten. Spelled out, not resolved: a link is refused, not followed.
        companion = Path(os.path.normpath(out_path.parent / name))
        problem = output_problem(companion, root)
        if problem is None and companion.exists():
            if companion.read_text(encoding="utf-8", errors="replace") != text:
                problem = f"{companion} exists with other content"
            else:
                continue
        if problem is not None:
            job.error = f"{problem}; translation not applied"
            server.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=f"xpiler: {job.error}"))
            return
        files[companion] = text
    applied, reason = await results.create_files(server, files, root)
    if not applied:
        job.error = reason
        server.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Error, message=f"xpiler: could not create {out_path}: {reason}")
        )
        return
    job.live["output"] = str(out_path)
    await results.show_file(server, out_path)
    kind = types.MessageType.Info if status == "verified" else types.MessageType.Warning
    server.window_show_message(
        types.ShowMessageParams(type=kind, message=f"xpiler: {out_path.name}: {status} — {getattr(result, 'summary', '')}")
    )


async def _offer_stale(server: XpilerServer, job: Job, uri: str, target_arg: str | None, apply: Any) -> None:
    try:
        choice = await server.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Warning,
                message=f"xpiler: {job.title} finished for an older version of the file; it was not applied.",
                actions=[types.MessageActionItem("Apply anyway"), types.MessageActionItem("Run again")],
            )
        )
    except Exception:
        log.debug("stale-result prompt failed", exc_info=True)
        return
    title = getattr(choice, "title", None)
    if title == "Apply anyway":
        await apply()
    elif title == "Run again":
        await start_translation(server, uri, target_arg)


# --------------------------------------------------------------------------------------------- verify


async def start_verification(server: XpilerServer, uri: str) -> dict[str, Any]:
    source_file, text, version = _snapshot(server, uri)
    path = source_file.path
    _check_size(text, path)
    spec_path = core_api.find_spec(path)
    if spec_path is None:
        raise JsonRpcInvalidParams(
            f"no test spec for {Path(path).name}: add a .toml next to it with source = \"{Path(path).name}\""
        )
    dialect = core_api.detect_dialect(text, path)
    warp_size = server.config.warp_size_for(dialect)
    test_cases = server.config.test_cases
    budget_s = server.config.test_seconds

    def work(job: Job, progress: Any) -> core_api.SourceVerification:
        evidence = core_api.SourceVerification(spec_path=spec_path)
        job.live["verification"] = evidence
        return core_api.verify_source(text, path, spec_path, dialect, warp_size, max_cases=test_cases,
                                      budget_s=budget_s, progress=progress, cancel=job.cancel, live=evidence)

    async def done(job: Job) -> None:
        if job.state != "done":
            return
        evidence: core_api.SourceVerification = job.result
        doc = server.documents.get(uri)
        job.message = _verification_summary(evidence)
        if doc is None:
            return
        analysis = await server.analysis_of(doc)
        if analysis.version != version:
            job.stale = True
            return
        await server.set_job_diagnostics(uri, "verify", version, _verification_diagnostics(server, doc, analysis, evidence))
        # ---- SMT repair hook (xpiler_core/repair, issue 8): a failing test gets a background repair job whose
        # result becomes a quick-fix on the test.failed diagnostic (server/repair_fix.py) ----
        if evidence.passed is False and evidence.compile_ok and evidence.failing is not None:
            from xpiler_server.repair_fix import start_repair

            await start_repair(server, uri, version, path, text, spec_path, dialect, warp_size)
        # ---- end of SMT repair hook ----

    title = f"Verify {Path(path).name}"
    job = await server.jobs.start("verify", uri, version, title, work, done)
    return {"jobId": job.id}


def _translation_diagnostics(server: XpilerServer, doc: Document, analysis: Any, result: Any) -> list[types.Diagnostic]:
    """What the translation could not do, on the source: its unresolved constructs, and a translation that
    did not verify (a failing whole program, failing tests, a compiler's rejection) said at the code it is
    about: ``main`` for a program, else the kernel the tests launch, else the first kernel."""
    target = getattr(result, "target", None)
    label = target_name(target).upper() if isinstance(target, Dialect) else "the target"
    limit = len(analysis.lines.data)
    out = []
    for item in getattr(result, "unresolved", []) or []:
        span = getattr(item, "span", None)
        if not isinstance(span, Span) or span.end_byte > limit:
            continue
        diagnostic = Diagnostic(
            Severity.WARNING, "translate.unresolved", f"not translated to {label}: {item.reason}", span, doc.path
        )
        out.append(to_lsp(diagnostic, analysis.lines, server.encoding, analysis.version))
    status = str(getattr(result, "status", ""))
    reason = str(getattr(result, "reason", "") or "")
    if status not in ("verified", "") and reason:
        anchor = core_api.status_anchor(analysis.parsed, analysis.kernels, result)
        if anchor is not None and anchor.end_byte <= limit:
            severity = Severity.INFO if status == "compiled-not-executed" else Severity.WARNING
            diagnostic = Diagnostic(severity, f"translate.{status}", f"{label}: {status} — {reason}", anchor, doc.path)
            out.append(to_lsp(diagnostic, analysis.lines, server.encoding, analysis.version))
    return out


def _verification_summary(evidence: core_api.SourceVerification) -> str:
    if evidence.compile_ok is False:
        return f"does not compile with {evidence.toolchain}"
    if evidence.passed is None:
        return f"{evidence.status}: {evidence.reason or evidence.error}"
    passed = sum(1 for s in evidence.steps if s.passed)
    worst = max((s.max_abs_err for s in evidence.steps), default=0.0)
    verdict = "verified" if evidence.passed else "FAILED"
    return f"{verdict}: {passed}/{len(evidence.steps)} cases passed, max abs err {worst:.3g}"


def _verification_diagnostics(
    server: XpilerServer, doc: Document, analysis: Any, evidence: core_api.SourceVerification
) -> list[types.Diagnostic]:
    encoding = server.encoding
    lines: ByteLines = analysis.lines
    out = [to_lsp(d, lines, encoding, analysis.version) for d in evidence.compile_diagnostics]
    failing = evidence.failing
    if failing is None:
        return out
    spec_entry = None
    try:
        spec_entry = getattr(core_api.load_spec(evidence.spec_path), "entry", None)
    except Exception:
        log.debug("could not reload spec", exc_info=True)
    kernel = next((k for k in analysis.kernels if k.name == spec_entry), analysis.kernels[0] if analysis.kernels else None)
    located = core_api.localize_failure(analysis.parsed, kernel, failing)
    span, where_found = located if located is not None else (kernel.name_span if kernel else Span.empty(), "the kernel")
    sizes = ", ".join(f"{k}={v}" for k, v in (getattr(failing, "sizes", {}) or {}).items())
    if getattr(failing, "error", None):
        message = f"test failed ({sizes}): {failing.error}"
    else:
        index = getattr(failing, "first_mismatch", None)
        where = f"{failing.output_name}[{', '.join(map(str, index))}]" if index is not None else str(failing.output_name)
        message = (
            f"test failed ({sizes}): {where} expected {failing.expected} got {failing.got}; "
            f"max abs err {failing.max_abs_err:.3g}, {failing.mismatches} mismatching elements"
        )
    diagnostic = Diagnostic(
        Severity.ERROR, "test.failed", message, span, doc.path, source="xpiler-test", data={"placed_on": where_found}
    )
    out.append(to_lsp(diagnostic, lines, encoding, analysis.version))
    return out


# --------------------------------------------------------------------------------------------- run a pass


async def start_pass(
    server: XpilerServer, uri: str, name: str, kernel: str | None, params: dict[str, Any]
) -> dict[str, Any]:
    accepted_source(server, uri)  # a file outside the workspace is refused as such, whether open or not
    doc = server.documents.get(uri)
    if doc is None:
        raise JsonRpcInvalidParams(f"{uri} is not open")
    known = {entry.name: entry for entry in core_api.passes()}
    if name not in known:
        raise JsonRpcInvalidParams(f"unknown pass '{name}'")
    entry = known[name]
    text, version, path = doc.text, doc.version, doc.path
    _check_size(text, path)
    target = _pass_target(entry.directions, core_api.detect_dialect(text, path), server.config.target_dialect)
    pass_params = dict(params)
    if kernel and "kernel" in entry.params:
        pass_params.setdefault("kernel", kernel)

    def work(job: Job, progress: Any) -> Any:
        progress(0.1, f"running {name}")
        return core_api.run_pass(name, text, path, pass_params, target)

    async def done(job: Job) -> None:
        if job.state != "done":
            return
        outcome = job.result
        refused = getattr(outcome, "refused", None)
        if refused:
            job.message = f"refused: {refused}"
            server.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=f"xpiler: {name} refused: {refused}")
            )
            return
        current = server.documents.get(uri)
        if current is None or current.version != version:
            job.stale = True
            job.message = "stale: the document changed while the pass ran; not applied"
            server.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=f"xpiler: {name}: {job.message}")
            )
            return
        new_text = getattr(outcome, "text", text)
        if new_text == text:
            job.message = "no change"
            return
        edit = _minimal_edit(current, text, new_text, server.encoding)
        response = await server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(
                label=f"xpiler: {name}",
                edit=types.WorkspaceEdit(
                    document_changes=[
                        types.TextDocumentEdit(
                            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                            edits=[edit],
                        )
                    ]
                ),
            )
        )
        job.message = "applied" if getattr(response, "applied", False) else f"not applied: {getattr(response, 'failure_reason', '')}"

    job = await server.jobs.start("runPass", uri, version, f"Run pass {name}", work, done)
    return {"jobId": job.id}


def _pass_target(directions: tuple[str, ...], source: Dialect, default: Dialect) -> Dialect:
    """The target of the first direction of the pass that starts from this document's dialect."""
    source_names = {Dialect.CUDA: "cuda", Dialect.HIP: "hip", Dialect.C: "c", Dialect.BANG: "bang"}[source]
    for direction in directions:
        src, _, dst = direction.partition("->")
        if src.strip() == source_names and dst.strip() in TARGET_NAMES:
            return TARGET_NAMES[dst.strip()]
    return default


def _minimal_edit(doc: Document, old: str, new: str, encoding: str) -> types.TextEdit:
    """One edit replacing only the differing middle of ``old`` (common prefix and suffix kept)."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    index = doc.line_index if doc.text == old else _index_of(old)
    return types.TextEdit(
        range=types.Range(start=index.position(prefix, encoding), end=index.position(len(old) - suffix, encoding)),
        new_text=new[prefix : len(new) - suffix],
    )


def _index_of(text: str) -> Any:
    from xpiler_server.positions import LineIndex

    return LineIndex.of(text)


# --------------------------------------------------------------------------------------------- manifest


async def create_spec_of(server: XpilerServer, uri: str, kernel: str | None) -> dict[str, Any]:
    """Draft a test spec for a kernel beside its file (one undoable edit, never over an existing file)."""
    source, text, _version = _snapshot(server, uri)
    path = source.path
    root = source.write_root()
    _check_size(text, path)
    try:
        draft = await asyncio.to_thread(core_api.draft_spec, text, path, kernel)
    except core_api.XpilerError as exc:
        raise JsonRpcInvalidParams(exc.message) from None
    spec_path = results.fresh_path(Path(draft.path), set())
    applied, reason = await results.create_files(server, {spec_path: draft.text}, root)
    if not applied:
        server.window_show_message(types.ShowMessageParams(type=types.MessageType.Error,
                                                           message=f"xpiler: spec not created: {reason}"))
        return {"created": False, "reason": reason}
    await results.show_file(server, spec_path)
    todo = f"replace the {draft.to_fill} FILL_ME value(s), then " if draft.to_fill else ""
    server.window_show_message(types.ShowMessageParams(
        type=types.MessageType.Info, message=f"xpiler: drafted {spec_path.name}: {todo}run Verify or Translate"))
    return {"created": True, "spec": str(spec_path), "toFill": draft.to_fill}


async def show_manifest_of(server: XpilerServer, uri: str) -> dict[str, Any]:
    source = accepted_source(server, uri)
    entry = server.translations.get(uri)
    if entry is None:
        raise JsonRpcInvalidParams("no translation of this file yet: run Translate first")
    version, result = entry
    manifest = getattr(result, "manifest", None) or {}
    path = Path(source.path)
    target = getattr(result, "target", None)
    suffix = target_name(target) if isinstance(target, Dialect) else "out"
    manifest_path = path.parent / ".xpiler" / f"{path.stem}.{suffix}.manifest.json"
    try:
        write_confined(manifest_path, json.dumps(manifest, indent=2, sort_keys=True, default=str), source.write_root())
    except UnsafePath as exc:
        raise JsonRpcInvalidParams(exc.message) from None
    except OSError as exc:
        raise JsonRpcInvalidParams(f"cannot write {manifest_path}: {exc.strerror}") from None
    await results.show_file(server, manifest_path)
    return {"uri": from_fs_path(str(manifest_path)), "version": version, "manifest": json.loads(json.dumps(manifest, default=str))}


# --------------------------------------------------------------------------------------------- tune


async def start_tuning(server: XpilerServer, uri: str, target_arg: str | None) -> dict[str, Any]:
    source_file, text, version = _snapshot(server, uri)
    path = source_file.path
    root = source_file.write_root()
    _check_size(text, path)
    if target_arg is not None and target_arg.lower() not in TARGET_NAMES:
        raise JsonRpcInvalidParams(f"unknown target '{target_arg}' (hip, cpu, cuda, bang)")
    # Tuning measures real latency, so it defaults to the target this machine can run: the CPU. Other
    # targets are passed on and the core says why it will not claim latencies it cannot measure.
    target = TARGET_NAMES[target_arg.lower()] if target_arg else Dialect.C
    config = server.config
    spec_path = core_api.find_spec(path)

    def work(job: Job, progress: Any) -> Any:
        job.live.update({"trials": 0, "budget": config.tuning_trials, "budget_s": config.tuning_seconds})

        def on_event(event: Any) -> None:
            live = {"trials": event.trials, "phase": event.kind, "elapsed_s": round(event.elapsed_s, 2)}
            if event.best_speedup is not None:
                live["speedup"] = round(event.best_speedup, 3)
            if event.best_interval is not None:
                live["speedup_interval"] = [round(event.best_interval[0], 3), round(event.best_interval[1], 3)]
            if event.best_latency_s is not None:
                live["best_latency_ms"] = round(event.best_latency_s * 1000, 4)
            if event.best_config is not None:
                live["best_config"] = event.best_config
            if event.baseline_latency_s is not None:
                live["baseline_latency_ms"] = round(event.baseline_latency_s * 1000, 4)
            with job.lock:
                job.live.update(live)
            progress(event.fraction, event.message)  # also checks the cancel token

        return core_api.tune(
            text,
            path,
            target,
            spec_path=spec_path,
            budget_s=config.tuning_seconds,
            max_trials=config.tuning_trials,
            progress=progress,
            cancel=job.cancel,
            on_event=on_event,
        )

    async def done(job: Job) -> None:
        if job.state != "done":
            return
        result = job.result
        best = result.best
        job.message = (
            f"best {best.speedup:.2f}x over the untuned translation ({'confirmed' if result.confirmed else 'untuned kept'}),"
            f" {result.trials_measured} trials: {best.description}"
        )
        current = server.documents.get(uri)
        if current is not None and current.version != version:
            job.stale = True
            job.message = f"stale: the document changed (v{version} → v{current.version}); tuned code not applied"
            return
        out_path = results.fresh_path(
            Path(path).with_name(f"{Path(path).stem}.tuned{core_api.output_suffix(target)}"), {doc.path for doc in server.documents}
        )
        applied, reason = await results.create_file(server, out_path, result.best_text, root)
        if not applied:
            job.error = reason
            return
        job.live["output"] = str(out_path)
        await results.show_file(server, out_path)

    title = f"Tune {Path(path).name} for {target_name(target).upper()}"
    job = await server.jobs.start("tune", uri, version, title, work, done)
    return {"jobId": job.id}
