"""Robustness end to end: a handler that raises answers with an error and the server keeps serving;
malformed params are answered (not left hanging); garbage and a 20 MB file neither crash nor hang it."""

from __future__ import annotations

import asyncio
import random
from concurrent.futures import Future
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from server_lsp_helpers import (
    SERVER_ENV,
    initialize,
    make_editor_client,
    open_doc,
    server_command,
    wait_for_version,
)
from test_server_diagnostics import GOOD

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=server_command("fault_server.py"), client_factory=make_editor_client, server_env=SERVER_ENV
    )
)
async def faulty(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def hover(client: LanguageClient, uri: str, line: int, character: int) -> types.Hover | None:
    return await asyncio.wait_for(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character))
        ),
        timeout=20,
    )


async def test_crash_inside_handler_leaves_server_answering(faulty: LanguageClient, tmp_path) -> None:
    uri = (tmp_path / "scale.cu").as_uri()
    waiting = asyncio.ensure_future(wait_for_version(faulty, uri, 1))
    open_doc(faulty, uri, GOOD)
    await waiting
    inside_kernel = types.Range(start=types.Position(line=1, character=8), end=types.Position(line=1, character=8))
    with pytest.raises(Exception, match="injected fault") as raised:
        await asyncio.wait_for(
            faulty.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=inside_kernel,
                    context=types.CodeActionContext(diagnostics=[], only=["refactor"]),
                )
            ),
            timeout=20,
        )
    assert "Traceback" not in str(raised.value)
    # Still serving: hover on the kernel name, then a change gets fresh diagnostics.
    result = await hover(faulty, uri, 0, 17)
    assert result is not None and "scale" in result.contents.value  # type: ignore[union-attr]
    waiting = asyncio.ensure_future(wait_for_version(faulty, uri, 2))
    faulty.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=GOOD + "int broken(\n")],
        )
    )
    assert any(d.severity == types.DiagnosticSeverity.Error for d in await waiting)


async def raw_request(client: LanguageClient, msg_id: str, method: str, params: Any) -> Any:
    """Send a request exactly as given (bypassing the client's own serialization) and await the answer."""
    future: Future[Any] = Future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout=20)


async def test_malformed_params_get_an_error_not_a_hang(client: LanguageClient, tmp_path) -> None:
    with pytest.raises(Exception, match="Invalid params"):
        await raw_request(client, "bad-hover", types.TEXT_DOCUMENT_HOVER, {"textDocument": 5, "position": "x"})
    with pytest.raises(Exception, match="Invalid params"):
        await raw_request(client, "bad-action", types.TEXT_DOCUMENT_CODE_ACTION, {"range": None})
    with pytest.raises(Exception, match="must be a string|missing argument"):
        await raw_request(client, "bad-cmd", types.WORKSPACE_EXECUTE_COMMAND, {"command": "xpiler.translate", "arguments": [42]})
    # A malformed notification is dropped; the next request is still answered.
    client.protocol._send_data({"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_CHANGE, "params": {"bogus": True}})
    uri = (tmp_path / "ok.cu").as_uri()
    open_doc(client, uri, GOOD)
    assert (await hover(client, uri, 0, 17)) is not None


async def test_garbage_and_huge_files_do_not_crash_or_hang(client: LanguageClient, tmp_path) -> None:
    rng = random.Random(5)
    garbage = bytes(rng.randrange(256) for _ in range(20000)).decode("latin-1")
    garbage_uri = (tmp_path / "garbage.cu").as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, garbage_uri, 1, timeout=30))
    open_doc(client, garbage_uri, garbage)
    await waiting  # diagnostics arrive (whatever they say), no crash
    nested = "__global__ void k() {" + "(" * 5000 + "\n"
    nested_uri = (tmp_path / "nested.cu").as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, nested_uri, 1, timeout=30))
    open_doc(client, nested_uri, nested)
    await waiting
    huge = GOOD * (20_000_000 // len(GOOD))
    huge_uri = (tmp_path / "huge.cu").as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, huge_uri, 1, timeout=60))
    open_doc(client, huge_uri, huge)
    diagnostics = await waiting
    assert any(d.code == "server.too-large" for d in diagnostics)
    # Typing into the huge file stays cheap and the server keeps answering other documents.
    for version in range(2, 12):
        at = types.Position(line=version, character=0)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=huge_uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text="x")],
            )
        )
    small_uri = (tmp_path / "small.cu").as_uri()
    open_doc(client, small_uri, GOOD)
    assert (await hover(client, small_uri, 0, 17)) is not None
    with pytest.raises(Exception, match="too large"):
        await asyncio.wait_for(
            client.workspace_execute_command_async(types.ExecuteCommandParams(command="xpiler.translate", arguments=[huge_uri, "hip"])),
            timeout=30,
        )
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=huge_uri)))
