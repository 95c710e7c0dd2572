"""Broken frames on the real server's stdio: a Content-Length that is too short, too long, not a number,
negative or absurd, garbage between frames, a body that is not JSON. After each the server answers the next
request (and, where the broken frame still held one whole JSON message, that one too); ``shutdown`` is
answered and ``exit`` ends the process within 2 s."""

from __future__ import annotations

import collections.abc
import subprocess
import sys
import time
from pathlib import Path

import pytest
from raw_stdio import SENTINEL_METHOD, SENTINEL_PARAMS, RawServer, encode, frame

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def sentinel_body(msg_id: str) -> bytes:
    return encode({"jsonrpc": "2.0", "id": msg_id, "method": SENTINEL_METHOD, "params": SENTINEL_PARAMS})


@pytest.fixture(scope="module")
def server() -> collections.abc.Iterator[RawServer]:
    """One server for the cases that leave it running: each case ends with an answered request, so the
    stream is back in step for the next."""
    raw = RawServer()
    try:
        raw.initialize()
        yield raw
    finally:
        raw.close()


@pytest.fixture
def own_server() -> collections.abc.Iterator[RawServer]:
    raw = RawServer()
    try:
        raw.initialize()
        yield raw
    finally:
        raw.close()


def test_length_too_short_delivers_the_message_and_the_next(server: RawServer) -> None:
    body = sentinel_body("short")
    server.send_bytes(frame(body, declared=len(body) - 17) + frame(sentinel_body("after-short")))
    assert "result" in server.response("short")
    assert "result" in server.response("after-short")


def test_length_too_long_delivers_the_message_and_the_next(server: RawServer) -> None:
    body = sentinel_body("long")
    server.send_bytes(frame(body, declared=len(body) + 40) + frame(sentinel_body("after-long")))
    assert "result" in server.response("long")
    assert "result" in server.response("after-long")


def test_length_too_long_and_nothing_follows_is_answered_after_a_pause(server: RawServer) -> None:
    body = sentinel_body("long-alone")
    server.send_bytes(frame(body, declared=len(body) + 500))
    assert "result" in server.response("long-alone", timeout=10)
    assert "result" in server.sentinel("after-long-alone")


def test_length_too_short_as_the_last_message_is_answered_after_a_pause(server: RawServer) -> None:
    body = sentinel_body("short-alone")
    server.send_bytes(frame(body, declared=len(body) - 3))
    assert "result" in server.response("short-alone", timeout=10)
    assert "result" in server.sentinel("after-short-alone")


@pytest.mark.parametrize("declared", ["abc", "-5", "99999999999999", "1e3", "", "0x10", "12 34"])
def test_bad_length_is_skipped_and_the_server_keeps_answering(server: RawServer, declared: str) -> None:
    server.send_bytes(frame(sentinel_body("bad-length"), declared=declared))
    msg_id = f"after-bad-length-{declared}"
    assert "result" in server.sentinel(msg_id)


@pytest.mark.parametrize(
    "garbage",
    [b"hello world\r\n", b"\x00\xff\xfe garbage", b"Content-Type: x\r\n\r\n", b"Content-Len", b"{\"jsonrpc\": \"2.0\"}\r\n\r\n",
     b"Content-Length: 12\r\nX\r\n"],
    ids=["text-line", "binary", "header-without-length", "truncated-header", "body-without-header", "bad-header-line"],
)
def test_garbage_between_frames_is_skipped(server: RawServer, garbage: bytes) -> None:
    server.send_bytes(garbage)
    assert "result" in server.sentinel(f"after-garbage-{garbage!r}")


@pytest.mark.parametrize("body", [b"hello", b"{\"id\": 1, ", b"\xff\xfe{}", b"[" * 100_000], ids=["text", "truncated", "not-utf8", "nesting"])
def test_body_that_is_not_json_gets_a_parse_error_with_null_id(server: RawServer, body: bytes) -> None:
    server.send_bytes(frame(body) + frame(sentinel_body("after-parse-error")))
    error = server.null_id_response()
    assert error["error"]["code"] == PARSE_ERROR and error["id"] is None
    assert "result" in server.response("after-parse-error")


@pytest.mark.parametrize(
    ("message", "answered_id"),
    [(b"[1, 2]", None), (b"42", None), (b"{\"id\": 7, \"method\": \"shutdown\"}", 7),
     (b"{\"jsonrpc\": \"1.0\", \"id\": 8, \"method\": \"shutdown\"}", 8),
     (b"{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"initialized\", \"params\": {}}", 9),
     (b"{\"jsonrpc\": \"2.0\", \"id\": 10, \"method\": 5}", 10),
     (b"{\"jsonrpc\": \"2.0\", \"id\": null, \"method\": \"shutdown\"}", None)],
    ids=["batch", "number", "no-version", "old-version", "notification-with-id", "method-not-a-string", "null-id"],
)
def test_invalid_requests_are_answered_with_invalid_request(server: RawServer, message: bytes, answered_id: int | None) -> None:
    server.send_bytes(frame(message))
    answer = server.null_id_response() if answered_id is None else server.response(answered_id)
    assert answer["error"]["code"] == INVALID_REQUEST, answer
    assert "result" in server.sentinel(f"after-invalid-{answered_id}")


def test_shutdown_and_exit_work_after_broken_frames(own_server: RawServer) -> None:
    body = sentinel_body("broken")
    own_server.send_bytes(frame(body, declared="abc") + b"junk\r\n" + frame(body, declared=len(body) + 9))
    assert own_server.shutdown_and_exit(timeout=2.0) == 0


def test_exit_ends_the_process_while_a_frame_is_half_sent(own_server: RawServer) -> None:
    own_server.send_bytes(b"Content-Length: 4000\r\n\r\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"textDocument/hov")
    assert own_server.shutdown_and_exit(timeout=2.0) == 0


def test_requests_after_shutdown_get_an_error(own_server: RawServer) -> None:
    assert "result" in own_server.response_to_shutdown()
    answer = own_server.sentinel("after-shutdown")
    assert answer["error"]["code"] == INVALID_REQUEST
    own_server.notify("exit")
    assert own_server.proc.wait(timeout=2.0) == 0


def test_exit_without_shutdown_ends_the_process_with_code_1(own_server: RawServer) -> None:
    own_server.notify("exit")
    assert own_server.proc.wait(timeout=2.0) == 1


def test_closed_input_ends_the_process(own_server: RawServer) -> None:
    own_server.send_bytes(b"Content-Length: 100\r\n\r\n{\"jsonrpc\"")
    assert own_server.proc.stdin is not None
    own_server.proc.stdin.close()
    try:
        own_server.proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server kept running after its input closed; its log:\n{own_server.log()}")
    assert "input" in own_server.log()


def test_exit_ends_the_process_while_a_job_ignores_its_cancel_token(tmp_path: Path) -> None:
    stuck = RawServer([sys.executable, str(Path(__file__).with_name("stuck_job_server.py"))])
    try:
        stuck.initialize()
        source = tmp_path / "kernel.cu"
        source.write_text("__global__ void k(float *x) { x[threadIdx.x] = 0; }\n")
        stuck.notify("textDocument/didOpen", {"textDocument": {"uri": source.as_uri(), "languageId": "cuda", "version": 1,
                                                               "text": source.read_text()}})
        stuck.request("tune", "workspace/executeCommand", {"command": "xpiler.tune", "arguments": [source.as_uri()]})
        assert "jobId" in stuck.response("tune")["result"]
        time.sleep(0.5)  # the job's thread is in the tuner now
        assert stuck.shutdown_and_exit(timeout=2.0) == 0
    finally:
        stuck.close()
