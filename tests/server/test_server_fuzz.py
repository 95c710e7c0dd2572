"""A seeded fuzz of the framing and JSON-RPC layers against the real server over stdio: random methods and
params (random JSON, and LSP-shaped params with random parts), broken frames of every kind (lengths too short,
too long, not numbers, negative, absurd; garbage; truncated headers and bodies; bodies that are not JSON or
not UTF-8; values that are not requests). After each broken frame a valid request must be answered. Every
request gets an answer (a result or an error), the process never dies, and at the end ``shutdown`` is answered
and ``exit`` ends it within 2 s. The short run (1,500 messages) is in the default test run; ``-m slow`` runs 50,000.
Figures (messages, seconds, answered, memory) are printed: run with ``-s`` to see them."""

from __future__ import annotations

import json
import random
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from raw_stdio import SENTINEL_METHOD, SENTINEL_PARAMS, RawServer, frame

ANSWER_TIMEOUT_S = 30.0
KERNEL = "__global__ void scale(float *x, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) x[i] = 2.0f * x[i];\n}\n"

REQUEST_METHODS = [
    "textDocument/hover", "textDocument/codeAction", "textDocument/codeLens", "textDocument/inlayHint",
    "textDocument/completion", "textDocument/definition", "textDocument/documentSymbol", "workspace/symbol",
    "workspace/executeCommand", "codeAction/resolve", "xpiler/unknown",
]
NOTIFICATION_METHODS = [
    "textDocument/didOpen", "textDocument/didChange", "textDocument/didClose", "textDocument/didSave",
    "workspace/didChangeConfiguration", "$/cancelRequest", "$/setTrace", "window/workDoneProgress/cancel",
    "workspace/didChangeWorkspaceFolders", "xpiler/unknownNotification",
]
COMMANDS = ["xpiler.translate", "xpiler.verify", "xpiler.runPass", "xpiler.cancel", "xpiler.showManifest",
            "xpiler.tune", "xpiler.createSpec", "xpiler.nothing"]
# Never sent at random: they end or restart the session, which the run checks at its end.
LIFECYCLE = {"initialize", "shutdown", "exit"}


@dataclass
class Figures:
    messages: int = 0  # frames sent, broken ones included
    broken: int = 0
    requests: int = 0  # requests that must be answered (valid ones and the check after each broken frame)
    answered: int = 0
    errors: int = 0  # answers that were errors
    hangs: int = 0
    crashes: int = 0
    seconds: float = 0.0
    rss_before_kib: int = 0
    rss_after_kib: int = 0

    def line(self) -> str:
        return ", ".join(f"{name}={value:.1f}" if isinstance(value, float) else f"{name}={value}"
                         for name, value in vars(self).items())


class Fuzzer:
    def __init__(self, server: RawServer, seed: int, folder: Path) -> None:
        self.server = server
        self.rng = random.Random(seed)
        self.folder = folder
        self.uris = [(folder / f"fuzz{i}.cu").as_uri() for i in range(4)] + ["untitled:Untitled-1", "file:///etc/passwd"]
        self.versions: dict[str, int] = {}
        self.next_id = 0
        self.figures = Figures()

    # ------------------------------------------------------------------ random values

    def text(self, size: int = 12) -> str:
        alphabet = string.printable + "é中\u200b\U0001f600\ud800\x00"
        return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(0, size)))

    def json_value(self, depth: int = 0) -> Any:
        kind = self.rng.randrange(9 if depth < 3 else 6)
        if kind == 0:
            return None
        if kind == 1:
            return self.rng.choice([True, False])
        if kind == 2:
            return self.rng.choice([0, -1, 1, 2**31, -(2**63), 2**64, self.rng.randint(-1000, 1000)])
        if kind == 3:
            return self.rng.choice([0.5, -1e308, 1e-300, 3.0])
        if kind in (4, 5):
            return self.rng.choice([self.text(), self.rng.choice(self.uris), "", "hip", "cpu"])
        if kind in (6, 7):
            return {self.text(6): self.json_value(depth + 1) for _ in range(self.rng.randint(0, 4))}
        return [self.json_value(depth + 1) for _ in range(self.rng.randint(0, 4))]

    def position(self) -> dict[str, Any]:
        return {"line": self.rng.choice([0, 1, 2, 5, 10**6, -1]), "character": self.rng.choice([0, 3, 17, 10**6, -1])}

    def shaped_params(self, method: str) -> Any:
        """Params shaped as LSP expects, so the handlers behind the decoding are reached too."""
        uri = self.rng.choice(self.uris)
        document = {"uri": uri}
        if method == "textDocument/didOpen":
            self.versions[uri] = 1
            text = self.rng.choice([KERNEL, KERNEL[: self.rng.randrange(len(KERNEL))], self.text(200), ""])
            return {"textDocument": {**document, "languageId": self.rng.choice(["cuda", "cpp", "hip", "x"]),
                                     "version": 1, "text": text}}
        if method == "textDocument/didChange":
            version = self.versions.get(uri, 0) + self.rng.choice([1, 1, 1, 0, -5])
            self.versions[uri] = version
            change: dict[str, Any] = {"text": self.text(30)}
            if self.rng.random() < 0.7:
                change["range"] = {"start": self.position(), "end": self.position()}
            return {"textDocument": {**document, "version": version}, "contentChanges": [change]}
        if method == "workspace/executeCommand":
            arguments = [self.rng.choice([uri, self.json_value()]) for _ in range(self.rng.randint(0, 3))]
            return {"command": self.rng.choice(COMMANDS), "arguments": arguments}
        if method == "$/cancelRequest":
            return {"id": self.rng.choice([self.next_id, self.text(4), None])}
        if method == "workspace/didChangeConfiguration":
            return {"settings": {"xpiler": {"target": self.rng.choice(["hip", "cpu", 7, None]), "diagnostics": {"debounceMs": 5}}}}
        return {"textDocument": document, "position": self.position(),
                "range": {"start": self.position(), "end": self.position()}, "context": {"diagnostics": []}}

    def mutate(self, value: Any) -> Any:
        if isinstance(value, dict) and value and self.rng.random() < 0.6:
            name = self.rng.choice(list(value))
            changed = dict(value)
            if self.rng.random() < 0.3:
                del changed[name]
            else:
                changed[name] = self.mutate(value[name])
            return changed
        return self.json_value()

    def params(self, method: str) -> Any:
        roll = self.rng.random()
        if roll < 0.15:
            return self.json_value()
        shaped = self.shaped_params(method)
        return self.mutate(shaped) if roll < 0.5 else shaped

    def method(self, pool: list[str]) -> str:
        if self.rng.random() < 0.1:
            name = self.text(20)
            return name if name not in LIFECYCLE else "xpiler/unknown"
        return self.rng.choice(pool)

    def fresh_id(self) -> int | str:
        self.next_id += 1
        return self.next_id if self.rng.random() < 0.7 else f"r{self.next_id}"

    # ------------------------------------------------------------------ messages

    def body(self, message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode("utf-8")

    def send_request(self) -> None:
        method = self.method(REQUEST_METHODS)
        msg_id = self.fresh_id()
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if self.rng.random() < 0.9:
            message["params"] = self.params(method)
        self.server.send_bytes(frame(self.body(message)))
        self.figures.messages += 1
        self.expect(msg_id)

    def send_burst(self) -> None:
        """Several requests in one write (frames that share a read), answered in any order."""
        ids = []
        data = b""
        for _ in range(self.rng.randint(2, 10)):
            method = self.method(REQUEST_METHODS)
            msg_id = self.fresh_id()
            ids.append(msg_id)
            data += frame(self.body({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": self.params(method)}))
        self.server.send_bytes(data)
        self.figures.messages += len(ids)
        for msg_id in ids:
            self.expect(msg_id)

    def send_notification(self) -> None:
        method = self.method(NOTIFICATION_METHODS)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if self.rng.random() < 0.95:
            message["params"] = self.params(method)
        self.server.send_bytes(frame(self.body(message)))
        self.figures.messages += 1

    def broken_frame(self) -> bytes:
        """One frame broken in one of many ways (its message may or may not be recovered)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": f"broken-{self.next_id}", "method": self.method(REQUEST_METHODS)}
        message["params"] = self.params(str(message["method"]))
        body = self.body(message)
        rng = self.rng
        kind = rng.randrange(16)
        if kind == 0:
            return frame(body, declared=max(0, len(body) - rng.randint(1, len(body))))
        if kind == 1:
            return frame(body, declared=len(body) + rng.randint(1, 2000))
        if kind == 2:
            return frame(body, declared=rng.choice(["abc", "", " ", "1e3", "0x20", "١٢", "12 34", "+5", "5.0"]))
        if kind == 3:
            return frame(body, declared=-rng.randint(1, 10**6))
        if kind == 4:
            return frame(body, declared=rng.choice([64 * 1024 * 1024 + 1, 10**12, 2**64]))
        if kind == 5:
            return bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))) + frame(body)
        if kind == 6:
            header = b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
            return header[: rng.randrange(1, len(header))]
        if kind == 7:
            return b"Content-Length: " + str(len(body)).encode() + b"\r\n" + body
        if kind == 8:
            return frame(bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))))
        if kind == 9:
            whole = frame(body)
            return whole[: rng.randrange(1, len(whole))]
        if kind == 10:
            return frame(body[:5] + b"\xff\xfe\xc3" + body[5:])
        if kind == 11:
            other = rng.choice([b"[1, 2]", b"42", b"\"text\"", b"null", b"{}", b"[]",
                                b"{\"id\": 1, \"method\": \"textDocument/hover\"}",
                                b"{\"jsonrpc\": \"2.0\", \"id\": [1], \"method\": \"x\"}",
                                b"{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": {\"a\": 1}}",
                                b"{\"jsonrpc\": \"2.0\", \"id\": 4, \"result\": 5}",
                                b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"initialized\"}",
                                b"[" + self.body(message) + b"]"])
            return frame(other)
        if kind == 12:
            flipped = bytearray(body)
            for _ in range(rng.randint(1, 5)):
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
            return frame(bytes(flipped))
        if kind == 13:
            return b"Content-Length: 3\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        if kind == 14:
            depth = rng.choice([1000, 100_000])
            return frame(b"[" * depth + b"]" * depth)
        return b"\r\n".join([b"X-Junk: " + self.text(10).encode("utf-8", "replace")] * rng.randint(1, 3)) + b"\r\n" + frame(body)

    def send_broken(self) -> None:
        self.server.send_bytes(self.broken_frame())
        self.figures.messages += 1
        self.figures.broken += 1
        msg_id = f"check-{self.next_id}"
        self.next_id += 1
        self.server.request(msg_id, SENTINEL_METHOD, SENTINEL_PARAMS)
        self.figures.messages += 1
        self.expect(msg_id)

    def expect(self, msg_id: int | str) -> None:
        self.figures.requests += 1
        try:
            answer = self.server.response(msg_id, timeout=ANSWER_TIMEOUT_S)
        except TimeoutError:
            if self.server.proc.poll() is not None:
                self.figures.crashes += 1
                raise AssertionError(f"the server died (code {self.server.proc.returncode}) before answering {msg_id!r}; "
                                     f"its log:\n{self.server.log()}") from None
            self.figures.hangs += 1
            raise
        assert ("result" in answer) != ("error" in answer), answer
        self.figures.answered += 1
        self.figures.errors += "error" in answer

    def run(self, count: int) -> Figures:
        started = time.monotonic()
        self.figures.rss_before_kib = self.server.rss_kib()
        while self.figures.messages < count:
            roll = self.rng.random()
            if roll < 0.35:
                self.send_request()
            elif roll < 0.4:
                self.send_burst()
            elif roll < 0.7:
                self.send_notification()
            else:
                self.send_broken()
        self.server.sentinel("last-check", timeout=ANSWER_TIMEOUT_S)  # every notification has been read
        self.figures.rss_after_kib = self.server.rss_kib()
        self.figures.seconds = time.monotonic() - started
        return self.figures


def fuzz(count: int, seed: int, folder: Path) -> Figures:
    server = RawServer()
    try:
        server.initialize()
        figures = Fuzzer(server, seed, folder).run(count)
        assert server.proc.poll() is None, f"the server exited; its log:\n{server.log()}"
        assert server.shutdown_and_exit(timeout=2.0) == 0
        print(f"\nfuzz seed={seed}: {figures.line()}")
        assert figures.hangs == 0 and figures.crashes == 0
        assert figures.answered == figures.requests
        # memory stays bounded: no per-message leak (documents opened by the fuzz are a few KB each)
        assert figures.rss_after_kib < figures.rss_before_kib + 512 * 1024, figures.line()
        return figures
    finally:
        server.close()


def test_fuzz_short(tmp_path: Path) -> None:
    figures = fuzz(1500, seed=20261204, folder=tmp_path)
    assert figures.broken > 250 and figures.seconds < 60


@pytest.mark.slow
def test_fuzz_fifty_thousand_messages(tmp_path: Path) -> None:
    figures = fuzz(50_000, seed=30, folder=tmp_path)
    assert figures.broken > 8000
