"""pytest-lsp helpers: the real server over stdio, and a client that behaves like an editor where the
tests need one (it creates files for ``workspace/applyEdit`` and structures code actions correctly)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

HERE = Path(__file__).parent
REPO = HERE.parent.parent

CAPABILITIES = types.ClientCapabilities(
    window=types.WindowClientCapabilities(
        work_done_progress=True, show_document=types.ShowDocumentClientCapabilities(support=True)
    ),
    workspace=types.WorkspaceClientCapabilities(
        apply_edit=True,
        configuration=True,
        workspace_edit=types.WorkspaceEditClientCapabilities(
            document_changes=True, resource_operations=[types.ResourceOperationKind.Create]
        ),
        code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True),
        inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True),
    ),
    text_document=types.TextDocumentClientCapabilities(
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True),
        code_action=types.CodeActionClientCapabilities(
            code_action_literal_support=types.ClientCodeActionLiteralOptions(
                code_action_kind=types.ClientCodeActionKindOptions(
                    value_set=["source", "refactor", "quickfix"]
                )
            )
        ),
    ),
)


def _structure_code_action_or_command(converter: Any) -> None:
    """lsprotocol 2025.0.0 structures a CodeAction that carries a command as a Command in Python clients."""
    union = typing.Union[types.Command, types.CodeAction]  # noqa: UP007 (the exact type lsprotocol uses)

    def hook(obj: Any, _: Any) -> Any:
        if isinstance(obj, dict) and (isinstance(obj.get("command"), dict) or {"kind", "edit", "diagnostics"} & obj.keys()):
            return converter.structure(obj, types.CodeAction)
        return converter.structure(obj, types.Command)

    converter.register_structure_hook(union, hook)


def plain(value: Any) -> Any:
    """pygls hands unknown notifications' params over as namedtuples: turn them back into dicts/lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 positions) to ``text``, last first, as an editor does."""
    from xpiler_server.positions import LineIndex

    index = LineIndex.of(text)
    spans = [(index.offset(e.range.start, "utf-16"), index.offset(e.range.end, "utf-16"), e.new_text) for e in edits]
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _record_published_diagnostics(client: LanguageClient) -> None:
    """Keep every publishDiagnostics the client receives, in order: waiting for "the next notification" loses one
    that arrives while the waiter handles the previous (two publishes in one read, as on a loaded machine)."""
    client.published = []  # type: ignore[attr-defined]
    features = client.protocol.fm.features
    keep_latest = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def record(params: types.PublishDiagnosticsParams) -> None:
        client.published.append(params)  # type: ignore[attr-defined]
        keep_latest(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record


def make_editor_client() -> LanguageClient:
    client = make_test_lsp_client()
    _structure_code_action_or_command(client.protocol._converter)
    client.applied_edits = []  # type: ignore[attr-defined]
    client.custom_notifications = []  # type: ignore[attr-defined]
    _record_published_diagnostics(client)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        """Apply CreateFile + TextDocumentEdit on disk, as an editor would (refusing to overwrite)."""
        client.applied_edits.append(params)  # type: ignore[attr-defined]
        for change in params.edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                path = Path(change.uri.removeprefix("file://"))
                overwrite = bool(change.options and change.options.overwrite)
                if path.exists() and not overwrite:
                    return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"{path} exists")
                path.write_text("", encoding="utf-8")
            elif isinstance(change, types.TextDocumentEdit) and change.text_document.version is not None:
                continue  # an edit of an open document: the test applies it to its own copy of the text
            elif isinstance(change, types.TextDocumentEdit):
                path = Path(change.text_document.uri.removeprefix("file://"))
                text = path.read_text(encoding="utf-8") if path.exists() else ""
                for edit in change.edits:
                    if edit.range.start.line == 0 and edit.range.start.character == 0 and edit.range.end == edit.range.start:
                        text = edit.new_text + text
                    else:
                        return types.ApplyWorkspaceEditResult(applied=False, failure_reason="test client: only inserts at 0:0")
                path.write_text(text, encoding="utf-8")
        return types.ApplyWorkspaceEditResult(applied=True)

    for method in ("xpiler/jobProgress", "xpiler/jobFinished", "xpiler/tuningProgress"):

        def record(params: Any, method: str = method) -> None:
            client.custom_notifications.append((method, plain(params)))  # type: ignore[attr-defined]

        client.feature(method)(record)

    client.message_requests = []  # type: ignore[attr-defined]
    client.message_request_answer = None  # type: ignore[attr-defined]

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def show_message_request(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        """Record the prompt; answer with ``client.message_request_answer`` (None: the user dismissed it)."""
        client.message_requests.append(params)  # type: ignore[attr-defined]
        answer = client.message_request_answer  # type: ignore[attr-defined]
        return types.MessageActionItem(title=answer) if answer else None

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def code_lens_refresh(params: Any) -> None:
        return None

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_hint_refresh(params: Any) -> None:
        return None

    return client


def server_command(script: str | None = None) -> list[str]:
    if script is None:
        return [sys.executable, "-m", "xpiler_server"]
    return [sys.executable, str(HERE / script)]


SERVER_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


async def initialize(client: LanguageClient, options: dict[str, Any] | None = None) -> None:
    await client.initialize_session(
        types.InitializeParams(
            capabilities=CAPABILITIES,
            initialization_options=options or {"diagnostics": {"debounceMs": 10}},
        )
    )




async def wait_for_version(client: LanguageClient, uri: str, version: int, timeout: float = 45.0) -> list[types.Diagnostic]:
    """The diagnostics the server publishes for ``uri`` at ``version`` (the first such publish, received before the
    call or after)."""

    async def poll() -> list[types.Diagnostic]:
        while True:
            for params in client.published:  # type: ignore[attr-defined]
                if params.uri == uri and params.version == version:
                    return list(params.diagnostics)
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(poll(), timeout)


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1, language_id: str = "cuda") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=version, text=text)
        )
    )


async def wait_notification(client: LanguageClient, method: str, job_id: str, timeout: float = 150) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for seen_method, params in list(client.custom_notifications):  # type: ignore[attr-defined]
            if seen_method == method and params.get("jobId") == job_id:
                return params
        await asyncio.sleep(0.02)
    raise TimeoutError(f"no {method} for {job_id}")


async def wait_progress(client: LanguageClient, token: str, kind: type, timeout: float = 120) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reports = client.progress_reports.get(token, [])
        if any(isinstance(r, kind) for r in reports):
            return reports
        await asyncio.sleep(0.01)
    raise TimeoutError(f"no {kind.__name__} progress for {token}")


async def execute(client: LanguageClient, command: str, *arguments: Any) -> Any:
    return await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=list(arguments))),
        timeout=30,
    )


async def code_actions(client: LanguageClient, uri: str, line: int, only: list[str] | None = None) -> list[Any]:
    at = types.Position(line=line, character=2)
    return list(
        await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=at, end=at),
                context=types.CodeActionContext(diagnostics=[], only=only),
            )
        )
        or []
    )


async def wait_until_diagnostics(
    client: LanguageClient, uri: str, predicate: Callable[[list[types.Diagnostic]], bool], timeout: float = 15
) -> list[types.Diagnostic]:
    """The first published diagnostics of ``uri`` (already received or arriving) that satisfy ``predicate``."""

    async def poll() -> list[types.Diagnostic]:
        while not predicate(list(client.diagnostics.get(uri, []))):
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return list(client.diagnostics[uri])

    return await asyncio.wait_for(poll(), timeout)
