"""``xpiler serve --tcp PORT``: the same server on a loopback socket (for attaching a debugger or a log
viewer); a client connects, opens a kernel, gets diagnostics and a hover."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[2]
KERNEL = "__global__ void twice(float* x, int n) {\n    int i = threadIdx.x;\n    if (i < n) x[i] *= 2.0f;\n}\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def connect(port: int, client: LanguageClient, server: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        if server.poll() is not None:
            raise AssertionError(f"server exited: {server.stderr.read().decode() if server.stderr else ''}")
        try:
            await client.start_tcp("127.0.0.1", port)
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise AssertionError("server did not listen")


@pytest.mark.asyncio
async def test_tcp_server_on_loopback(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "xpiler_core", "serve", "--tcp", str(port)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )
    client = LanguageClient("tcp-test", "1")
    published: asyncio.Queue[types.PublishDiagnosticsParams] = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait(params)

    try:
        await connect(port, client, server)
        await asyncio.wait_for(client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities())), 20)
        client.initialized(types.InitializedParams())
        uri = (tmp_path / "twice.cu").as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(uri=uri, language_id="cuda", version=1, text=KERNEL))
        )
        first = await asyncio.wait_for(published.get(), 20)
        assert first.uri == uri and first.version == 1
        hover = await asyncio.wait_for(
            client.text_document_hover_async(
                types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=18))
            ),
            20,
        )
        assert hover is not None and "twice" in hover.contents.value  # type: ignore[union-attr]
        await asyncio.wait_for(client.shutdown_async(None), 20)
        client.exit(None)
    finally:
        await client.stop()
        server.terminate()
        server.wait(timeout=20)
    # It listens on loopback only (pygls logs the bound address).
    assert f"Serving on ('127.0.0.1', {port})" in (server.stderr.read().decode() if server.stderr else "")


def test_bad_port_is_a_located_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "serve", "--tcp", "70000"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    assert "error: --tcp: port 70000" in done.stderr and "Traceback" not in done.stderr
