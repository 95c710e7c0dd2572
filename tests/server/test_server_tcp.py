"""``xpiler serve --tcp PORT``: the same server on a loopback socket (for attaching a debugger or a log
viewer); a client connects, opens a kernel, gets diagnostics and a hover. It says at start that the port is
unauthenticated and for debugging only, and a broken frame over TCP does not stop it answering."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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
    log = server.stderr.read().decode() if server.stderr else ""
    # It listens on loopback only (the log names the bound address) and warns that the port is open to anyone.
    assert f"Serving on ('127.0.0.1', {port})" in log
    assert "no authentication" in log and "debugging only" in log


def start_tcp_server(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "xpiler_core", "serve", "--tcp", str(port)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )


def connect_socket(port: int, server: subprocess.Popen[bytes]) -> socket.socket:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=15)
        except OSError:
            time.sleep(0.05)
    raise AssertionError("server did not listen")


def frame(message: dict[str, Any], length_change: int = 0) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % (len(body) + length_change) + body


def answers(sock: socket.socket, wanted: set[Any]) -> dict[Any, dict[str, Any]]:
    """Read frames until every id in ``wanted`` has its response (socket timeout: the server hangs)."""
    found: dict[Any, dict[str, Any]] = {}
    data = b""
    while not wanted <= found.keys():
        head, sep, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), None)
        if sep and length is not None and len(rest) >= length:
            message = json.loads(rest[:length])
            data = rest[length:]
            if "id" in message and "method" not in message:
                found[message["id"]] = message
            continue
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    return found


def test_broken_frame_over_tcp_does_not_stop_the_server() -> None:
    port = free_port()
    server = start_tcp_server(port)
    try:
        with connect_socket(port, server) as sock:
            sock.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}))
            assert "result" in answers(sock, {1})[1]
            sock.sendall(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            ping = {"jsonrpc": "2.0", "method": "workspace/executeCommand", "params": {"command": "xpiler.cancel", "arguments": ["none"]}}
            sock.sendall(frame({**ping, "id": 2}, length_change=-12) + frame({**ping, "id": 3}, length_change=+30) + frame({**ping, "id": 4}))
            found = answers(sock, {2, 3, 4})
            assert all("result" in found[i] for i in (2, 3, 4)), found
            sock.sendall(frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
            assert "result" in answers(sock, {5})[5]
            sock.sendall(frame({"jsonrpc": "2.0", "method": "exit"}))
            assert server.wait(timeout=2.0) == 0
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=20)


def test_tcp_help_says_it_is_unsafe() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "serve", "--help"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60,
    )
    assert "UNSAFE" in done.stdout and "authentication" in done.stdout


def test_bad_port_is_a_located_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "serve", "--tcp", "70000"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    assert "error: --tcp: port 70000" in done.stderr and "Traceback" not in done.stderr
