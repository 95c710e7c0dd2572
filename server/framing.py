"""LSP base-protocol framing (``Content-Length`` headers + JSON bodies) that survives broken frames.

pygls 2.1 reads a header line and then exactly the declared number of bytes: one wrong length and it waits
forever for bytes that never come (too long) or reads the next frame's header as a body (too short), and
from then on answers nothing, ``shutdown`` and ``exit`` included. Here the input is cut into messages by a
pure, incremental :class:`FrameDecoder` (``feed(bytes) -> events``) that resynchronises on the next
``Content-Length:`` header after anything malformed, and :func:`read_frames` drives it from "whatever is
available" reads, so a frame that promises more bytes than it has is resolved by the next header or by a
short pause, never by waiting for bytes that will not come.

Why a header inside a pending body proves the frame is broken: ``Content-Length: 12`` followed by a literal
line break cannot be part of valid JSON (outside a string it is no JSON token; inside a string a literal
line break is not allowed). So such a match ends the broken frame, and the bytes before it are the message
if they are one complete JSON value (the declared length was wrong), else a parse error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

# A declared length beyond this is not believed (the frame is skipped): the editor never sends bodies this big.
MAX_BODY_BYTES = 64 * 1024 * 1024
# A header block longer than this without its closing blank line is garbage.
MAX_HEADER_BYTES = 8 * 1024
# How far past a declared length a too-short frame's message may run before the frame is given up.
MAX_OVERRUN_BYTES = 1024 * 1024
# With a frame still short of its declared length, a pause this long (no bytes arriving) means no more are
# coming: what is there is judged as it is.
GRACE_S = 0.3
READ_CHUNK = 65536

_LENGTH_HEADER = re.compile(rb"(?i)content-length:")
# Bounded so that a match straddling two reads is found by rescanning a fixed tail.
_FRAME_HEADER = re.compile(rb"(?i)content-length:[ \t]{0,8}\d{1,20}[ \t]{0,8}\r?\n")
_FRAME_HEADER_MAX = 64
_HEADER_LINE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\r\n]*")
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_BLANK = b" \t\r\n"


@dataclass(frozen=True)
class Message:
    """One JSON value from the client. ``warning`` says how it was recovered from a broken frame."""

    value: Any
    warning: str | None = None


@dataclass(frozen=True)
class Skipped:
    """Bytes dropped while looking for the next frame (garbage, a header with a bad length)."""

    reason: str


@dataclass(frozen=True)
class Unparsable:
    """A frame whose body is not JSON: the client is owed a ParseError with id null (JSON-RPC 2.0)."""

    reason: str


Event = Message | Skipped | Unparsable


class FrameDecoder:
    """Cuts a byte stream into LSP messages; never raises on any input and never needs bytes that a
    broken frame promised but did not send."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._body_length: int | None = None  # None: reading a header block
        self._scanned = 0  # body bytes already searched for a frame header
        self._declared_body_failed = False  # the declared number of bytes arrived and is not JSON

    @property
    def waiting_for_body(self) -> bool:
        """A frame's header has arrived but its body is not complete: a pause in the input counts."""
        return self._body_length is not None

    def feed(self, data: bytes) -> list[Event]:
        self._buffer += data
        return self._advance(idle=False)

    def idle(self) -> list[Event]:
        """No bytes arrived for the grace period: judge a pending body by what it holds."""
        return self._advance(idle=True)

    def finish(self) -> list[Event]:
        """The input ended: deliver what can be delivered, report what is left."""
        events = self._advance(idle=True)
        rest = bytes(self._buffer).strip(_BLANK)
        if rest:
            where = "inside a frame" if self._body_length is not None else "inside a header"
            events.append(Skipped(f"the input ended {where}; {len(rest)} bytes dropped: {_preview(rest)}"))
        self._buffer.clear()
        self._body_length = None
        return events

    # ------------------------------------------------------------------ states

    def _advance(self, idle: bool) -> list[Event]:
        events: list[Event] = []
        while True:
            if self._body_length is None:
                progressed = self._read_header(events)
            else:
                progressed = self._read_body(events, idle)
            if not progressed:
                return events

    def _read_header(self, events: list[Event]) -> bool:
        buffer = self._buffer
        start = 0
        while start < len(buffer) and buffer[start] in _BLANK:
            start += 1
        if start:
            del buffer[:start]  # line breaks between frames are harmless
        if not buffer:
            return False
        window = min(len(buffer), MAX_HEADER_BYTES + 4)
        end = _HEADER_END.search(buffer, 0, window)
        block_end = end.start() if end is not None else None
        lines = bytes(buffer[: block_end if block_end is not None else window]).split(b"\n")
        complete = lines if block_end is not None else lines[:-1]  # the last line may still be arriving
        fields: dict[bytes, list[bytes]] = {}
        for line in complete:
            line = line.rstrip(b"\r")
            if not _HEADER_LINE.fullmatch(line):
                return self._resync(events, f"not a header line: {_preview(line)}")
            name, _, value = line.partition(b":")
            fields.setdefault(name.strip().lower(), []).append(value.strip())
        if block_end is None:
            if len(buffer) > MAX_HEADER_BYTES:
                return self._resync(events, f"a header of over {MAX_HEADER_BYTES} bytes without its blank line")
            return False
        assert end is not None
        lengths = set(fields.get(b"content-length", []))
        # Resynchronising searches from inside the block: garbage glued to a header line ("junkContent-Length:
        # 5", a skipped body followed by the next header) hides the real header in a line of another name or value.
        if not lengths:
            return self._resync(events, "a header without Content-Length")
        if len(lengths) > 1:
            return self._resync(events, f"conflicting Content-Length values {sorted(lengths)}")
        (declared,) = lengths
        if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
            return self._resync(events, f"Content-Length {_preview(declared)} is not a length of 0 to {MAX_BODY_BYTES} bytes")
        del buffer[: end.end()]
        self._body_length = int(declared)
        self._scanned = 0
        self._declared_body_failed = False
        return True

    def _resync(self, events: list[Event], reason: str) -> bool:
        """Drop bytes up to the next ``Content-Length:`` after the current position (keeping a tail that may
        be the start of one)."""
        buffer = self._buffer
        found = _LENGTH_HEADER.search(buffer, 1)
        cut = found.start() if found is not None else max(1, len(buffer) - _header_name_prefix_at_end(buffer))
        events.append(Skipped(f"{reason}; {cut} bytes skipped: {_preview(bytes(buffer[:cut]))}"))
        del buffer[:cut]
        return True

    def _read_body(self, events: list[Event], idle: bool) -> bool:
        buffer = self._buffer
        declared = self._body_length
        assert declared is not None
        if len(buffer) >= declared and not self._declared_body_failed:
            parsed = _parse(buffer[:declared])
            if isinstance(parsed, _Value):
                events.append(Message(parsed.value))
                return self._consume(declared)
            self._declared_body_failed = True  # not parsed again while more bytes arrive
        # Either the body is incomplete or it is not JSON: the declared length may be wrong.
        header_at = self._frame_header_in_body()
        if header_at is not None:
            parsed = _parse(buffer[:header_at])
            if isinstance(parsed, _Value):
                events.append(Message(parsed.value, self._length_warning(declared, header_at)))
            else:
                events.append(Unparsable(f"a frame of {declared} declared bytes ended by the next frame's header "
                                         f"after {header_at} bytes is not JSON ({parsed.reason})"))
            return self._consume(header_at)
        if idle:
            parsed = _parse(buffer) if bytes(buffer[-64:]).rstrip(_BLANK)[-1:] in (b"}", b"]") else _Failure("incomplete")
            if isinstance(parsed, _Value) and isinstance(parsed.value, (dict, list)):
                # A proper prefix of a JSON object or array is never a whole one: nothing of it is missing.
                events.append(Message(parsed.value, self._length_warning(declared, len(buffer))))
                return self._consume(len(buffer))
            if len(buffer) >= declared:
                events.append(Unparsable(f"a frame body of {declared} bytes is not JSON ({_parse_reason(buffer[:declared])})"))
                return self._consume(declared)
            return False  # still short of its length and not a whole message: more may come
        if len(buffer) > declared + MAX_OVERRUN_BYTES:
            events.append(Unparsable(f"a frame body of {declared} bytes is not JSON ({_parse_reason(buffer[:declared])})"))
            return self._consume(declared)
        return False

    def _frame_header_in_body(self) -> int | None:
        buffer = self._buffer
        found = _FRAME_HEADER.search(buffer, max(0, self._scanned - _FRAME_HEADER_MAX))
        self._scanned = len(buffer)
        return found.start() if found is not None else None

    def _length_warning(self, declared: int, actual: int) -> str:
        body = bytes(self._buffer[:actual]).rstrip(_BLANK)
        return f"Content-Length said {declared} bytes but the message had {len(body)}; delivered it anyway"

    def _consume(self, count: int) -> bool:
        del self._buffer[:count]
        self._body_length = None
        self._scanned = 0
        self._declared_body_failed = False
        return True


@dataclass(frozen=True)
class _Value:
    value: Any


@dataclass(frozen=True)
class _Failure:
    reason: str


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(data: bytes | bytearray) -> _Value | _Failure:
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        return _Failure(f"not UTF-8: {exc.reason} at byte {exc.start}")
    if not text.strip():
        return _Failure("empty")
    try:
        return _Value(json.loads(text, parse_constant=_reject_constant))
    except RecursionError:
        return _Failure("nested too deeply")
    except ValueError as exc:
        return _Failure(str(exc))


def _parse_reason(data: bytes | bytearray) -> str:
    parsed = _parse(data)
    return parsed.reason if isinstance(parsed, _Failure) else "a value followed by more bytes"


def _header_name_prefix_at_end(buffer: bytearray) -> int:
    """Length of the longest end of ``buffer`` that could be the start of a ``Content-Length:`` still arriving."""
    name = b"content-length:"
    tail = bytes(buffer[-(len(name) - 1) :]).lower()
    for size in range(len(tail), 0, -1):
        if name.startswith(tail[-size:]):
            return size
    return 0


def _preview(data: bytes, limit: int = 40) -> str:
    shown = repr(data[:limit])
    return shown + ("…" if len(data) > limit else "")


# --------------------------------------------------------------------------------------------- reading


async def read_frames(read: Callable[[], Awaitable[bytes]], on_event: Callable[[Event], None],
                      stop: threading.Event) -> str:
    """Feed the decoder from ``read`` (b"" at the end of the input) until the input ends or ``stop`` is set;
    every event goes to ``on_event``. Returns why reading stopped."""
    decoder = FrameDecoder()
    while not stop.is_set():
        try:
            if decoder.waiting_for_body:
                data = await asyncio.wait_for(read(), GRACE_S)
            else:
                data = await read()
        except TimeoutError:
            events = decoder.idle()
        except OSError as exc:
            for event in decoder.finish():
                on_event(event)
            return f"reading the input failed: {exc}"
        else:
            if not data:
                for event in decoder.finish():
                    on_event(event)
                return "the input was closed"
            events = decoder.feed(data)
        for event in events:
            on_event(event)
    return "the server stopped"


class ThreadedReader:
    """Chunks of a blocking binary stream (stdin), read on a daemon thread: a read blocked on a pipe must not
    keep the process alive after ``exit``, as a thread-pool worker would. A small queue keeps a fast client
    from filling memory faster than messages are handled."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def read(self) -> bytes:
        if self._queue is None:
            self._loop = asyncio.get_running_loop()
            self._queue = asyncio.Queue(maxsize=8)
            threading.Thread(target=self._pump, name="xpiler-stdin", daemon=True).start()
        return await self._queue.get()

    def _read_chunk(self) -> bytes:
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            read_some = getattr(self._stream, "read1", None)
            return bytes(read_some(READ_CHUNK)) if read_some is not None else self._stream.read(1)
        return os.read(fd, READ_CHUNK)

    def _pump(self) -> None:
        assert self._loop is not None and self._queue is not None
        while True:
            try:
                data = self._read_chunk()
            except (OSError, ValueError) as exc:
                log.error("reading the input failed: %s", exc)
                data = b""
            try:
                asyncio.run_coroutine_threadsafe(self._queue.put(data), self._loop).result()
            except Exception:
                return  # the event loop is gone: the server has stopped
            if not data:
                return
