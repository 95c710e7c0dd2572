"""A real HTTP server on loopback speaking the OpenAI chat-completions protocol, with scripted replies.

Each test queues replies; every POST to ``/v1/chat/completions`` pops the next one. A reply is either a
chat message content (sent as a well-formed completion) or a raw HTTP status + body (for malformed or
failing answers). Requests are recorded so tests can see what the client really sent.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Raw:
    status: int
    body: bytes
    content_type: str = "application/json"


@dataclass
class ScriptedOpenAI:
    server: ThreadingHTTPServer
    replies: deque[str | Raw] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue(self, *replies: str | Raw) -> None:
        self.replies.extend(replies)


def _handler(state: ScriptedOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, "body": body,
                                   "authorization": self.headers.get("Authorization")})
            if self.path.rstrip("/") != "/v1/chat/completions" or not state.replies:
                self._send(404, b'{"error": {"message": "no scripted reply"}}', "application/json")
                return
            reply = state.replies.popleft()
            if isinstance(reply, Raw):
                self._send(reply.status, reply.body, reply.content_type)
                return
            completion = {
                "id": f"chatcmpl-{len(state.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            self._send(200, json.dumps(completion).encode(), "application/json")

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
            return

    return Handler


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAI]:
    # loopback traffic must never go through a proxy configured in the environment
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    state = ScriptedOpenAI(server)
    server.RequestHandlerClass = _handler(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def network_refused(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every socket connect of this process fails and is recorded; constructing an OpenAI client fails.

    Returns the list of addresses something tried to connect to (empty: no network call was attempted).
    """
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network access in the default path")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    import openai

    def no_client(*args: object, **kwargs: object) -> None:
        raise AssertionError("the OpenAI client was constructed on the default path")

    monkeypatch.setattr(openai, "OpenAI", no_client)
    return attempts
