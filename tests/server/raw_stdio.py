"""The real server over stdio, spoken to byte by byte: the frame and fuzz tests send what no client library
would (wrong lengths, garbage, broken JSON), so they need a client that writes raw bytes."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from typing import Any

from server_lsp_helpers import SERVER_ENV, server_command

# A request every test can use to ask "are you still there?": it acts at once and has a result.
SENTINEL_METHOD = "workspace/executeCommand"
SENTINEL_PARAMS = {"command": "xpiler.cancel", "arguments": ["no-such-job"]}


def frame(body: bytes, declared: int | str | None = None) -> bytes:
    """One LSP frame; ``declared`` replaces the true Content-Length (to make a broken frame)."""
    length = len(body) if declared is None else declared
    return b"Content-Length: " + str(length).encode() + b"\r\n\r\n" + body


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode("utf-8")


class RawServer:
    """``python -m xpiler_server`` on pipes. Frames from the server are read on a thread and kept by id;
    the server's own requests (configuration, progress tokens) are answered with null."""

    def __init__(self, command: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            command or server_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=SERVER_ENV,
        )
        self.responses: dict[str, dict[str, Any]] = {}
        self.null_id_responses: list[dict[str, Any]] = []
        self.notifications = 0
        self.stdout_closed = threading.Event()
        self.stderr_lines: list[str] = []
        self._changed = threading.Condition()
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # ------------------------------------------------------------------ reading

    def _read_stdout(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                assert length is not None, "the server sent a frame without Content-Length"
                body = out.read(length)
                if len(body) < length:
                    return
                self._received(json.loads(body))
        finally:
            with self._changed:
                self.stdout_closed.set()
                self._changed.notify_all()

    def _received(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            try:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            except (BrokenPipeError, ValueError):
                pass  # the test closed the server's input
            return
        with self._changed:
            if "method" in message:
                self.notifications += 1
            elif message.get("id") is None:
                self.null_id_responses.append(message)
            else:
                self.responses[key(message["id"])] = message
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        for line in iter(err.readline, b""):
            self.stderr_lines.append(line.decode("utf-8", "replace").rstrip())
            if len(self.stderr_lines) > 20000:
                del self.stderr_lines[:10000]

    def log(self) -> str:
        return "\n".join(self.stderr_lines[-60:])

    # ------------------------------------------------------------------ writing

    def send_bytes(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        with self._write_lock:
            stdin.write(data)
            stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(frame(encode(message)))

    def request(self, msg_id: int | str, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    # ------------------------------------------------------------------ waiting

    def response(self, msg_id: int | str, timeout: float = 15) -> dict[str, Any]:
        """The server's answer to request ``msg_id`` (a result or an error); TimeoutError if none comes."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while key(msg_id) not in self.responses:
                left = deadline - time.monotonic()
                if left <= 0 or self.stdout_closed.is_set():
                    state = "closed its output" if self.stdout_closed.is_set() else f"no answer in {timeout} s"
                    raise TimeoutError(f"request {msg_id!r}: the server {state}; its log:\n{self.log()}")
                self._changed.wait(left)
            return self.responses.pop(key(msg_id))

    def null_id_response(self, timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self.null_id_responses:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no response with id null in {timeout} s; the server's log:\n{self.log()}")
                self._changed.wait(left)
            return self.null_id_responses.pop(0)

    def sentinel(self, msg_id: int | str, timeout: float = 15) -> dict[str, Any]:
        """Ask the still-there question and return the answer."""
        self.request(msg_id, SENTINEL_METHOD, SENTINEL_PARAMS)
        return self.response(msg_id, timeout)

    def initialize(self, root: str | None = None) -> None:
        params: dict[str, Any] = {"processId": os.getpid(), "capabilities": {}, "rootUri": None}
        if root is not None:
            params["workspaceFolders"] = [{"uri": "file://" + root, "name": "workspace"}]
        self.request("init", "initialize", params)
        assert "result" in self.response("init", timeout=60), self.log()
        self.notify("initialized", {})

    def shutdown_and_exit(self, timeout: float = 2.0) -> int:
        """``shutdown`` (must be answered), then ``exit``: the exit code, or TimeoutError when the process
        is still alive ``timeout`` seconds after ``exit``."""
        answer = self.response_to_shutdown()
        assert "result" in answer, answer
        self.notify("exit")
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the server was still running {timeout} s after exit; its log:\n{self.log()}") from None

    def response_to_shutdown(self) -> dict[str, Any]:
        self.request("shutdown", "shutdown")
        return self.response("shutdown")

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


def key(msg_id: Any) -> str:
    """Responses kept by the id's JSON spelling: 1 and "1" are different requests."""
    return json.dumps(msg_id)
