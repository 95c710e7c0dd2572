"""The frame decoder on its own: valid frames in any chunking come out whole and unchanged; every kind of
broken frame ends in a delivered message, a skip or a parse error, and the frame after it is read."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from xpiler_server.framing import MAX_BODY_BYTES, FrameDecoder, Message, Skipped, Unparsable


def frame(value: Any, declared: int | str | None = None, header: bytes = b"Content-Length") -> bytes:
    body = json.dumps(value).encode()
    length = len(body) if declared is None else declared
    return header + b": " + str(length).encode() + b"\r\n\r\n" + body


def request(msg_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": {"x": "Content-Length: 3 }"}}


def messages(events: list[Any]) -> list[Any]:
    return [event.value for event in events if isinstance(event, Message)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=8), json_values, max_size=4), min_size=1, max_size=5), st.data())
def test_valid_frames_in_any_chunking_decode_unchanged(values: list[dict[str, Any]], data: st.DataObject) -> None:
    stream = b"".join(frame(value) for value in values)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    decoder = FrameDecoder()
    events = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        events += decoder.feed(stream[start:end])
    assert events == [Message(value) for value in values]


def test_one_byte_at_a_time() -> None:
    stream = frame(request(1)) + b"\r\n" + frame(request(2))
    decoder = FrameDecoder()
    events = [event for i in range(len(stream)) for event in decoder.feed(stream[i : i + 1])]
    assert events == [Message(request(1)), Message(request(2))]


def test_headers_in_any_order_case_and_line_ending() -> None:
    body = json.dumps(request(1)).encode()
    stream = (b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: " + str(len(body)).encode()
              + b"\r\n\r\n" + body + b"Content-Length: " + str(len(body)).encode() + b"\n\n" + body)
    assert FrameDecoder().feed(stream) == [Message(request(1)), Message(request(1))]


def test_length_too_short_delivers_the_whole_message() -> None:
    body_length = len(json.dumps(request(1)))
    events = FrameDecoder().feed(frame(request(1), declared=body_length - 9) + frame(request(2)))
    assert messages(events) == [request(1), request(2)]
    assert events[0].warning and "said" in events[0].warning


def test_length_too_long_with_the_next_frame_behind() -> None:
    body_length = len(json.dumps(request(1)))
    events = FrameDecoder().feed(frame(request(1), declared=body_length + 1000) + frame(request(2)))
    assert messages(events) == [request(1), request(2)]


def test_length_too_long_then_silence_is_delivered_when_idle() -> None:
    decoder = FrameDecoder()
    body_length = len(json.dumps(request(1)))
    assert decoder.feed(frame(request(1), declared=body_length + 50)) == []
    assert decoder.waiting_for_body
    assert messages(decoder.idle()) == [request(1)]
    assert not decoder.waiting_for_body


def test_a_message_still_arriving_is_not_cut_short_by_a_pause() -> None:
    decoder = FrameDecoder()
    whole = frame(request(1))
    assert decoder.feed(whole[:-10]) == []
    assert decoder.idle() == []  # a proper prefix of an object is never a whole object
    assert decoder.feed(whole[-10:]) == [Message(request(1))]


def test_truncated_frame_followed_by_a_frame_is_a_parse_error_then_the_frame() -> None:
    truncated = frame(request(1))[:-20]
    events = FrameDecoder().feed(truncated + frame(request(2)))
    assert isinstance(events[0], Unparsable)
    assert messages(events) == [request(2)]


def test_body_that_is_not_json_is_a_parse_error() -> None:
    events = FrameDecoder().feed(b"Content-Length: 5\r\n\r\nhello" + frame(request(2)))
    assert isinstance(events[0], Unparsable) and messages(events) == [request(2)]
    decoder = FrameDecoder()
    assert decoder.feed(b"Content-Length: 4\r\n\r\n\xff\xfe{}") == []
    [error] = decoder.idle()
    assert isinstance(error, Unparsable) and "UTF-8" in error.reason


def test_nesting_bomb_is_a_parse_error_not_a_crash() -> None:
    bomb = b"[" * 200_000
    decoder = FrameDecoder()
    events = decoder.feed(b"Content-Length: %d\r\n\r\n" % len(bomb) + bomb + frame(request(2)))
    assert isinstance(events[0], Unparsable) and messages(events) == [request(2)]


def test_bad_lengths_are_skipped() -> None:
    for declared in (b"abc", b"-5", str(MAX_BODY_BYTES + 1).encode(), b"1e3", b"", b"0x10", b"12 34"):
        events = FrameDecoder().feed(b"Content-Length: " + declared + b"\r\n\r\n" + json.dumps(request(1)).encode()
                                     + frame(request(2)))
        assert isinstance(events[0], Skipped), declared
        assert messages(events) == [request(2)], declared


def test_conflicting_lengths_are_not_believed() -> None:
    events = FrameDecoder().feed(b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n{}  " + frame(request(2)))
    assert isinstance(events[0], Skipped) and "conflicting" in events[0].reason
    assert messages(events)[-1] == request(2)


def test_garbage_between_frames_is_skipped() -> None:
    events = FrameDecoder().feed(frame(request(1)) + b"\x00garbage\xff\r\nmore" + frame(request(2)))
    assert messages(events) == [request(1), request(2)]
    assert any(isinstance(event, Skipped) for event in events)


def test_garbage_without_headers_is_dropped_as_it_arrives() -> None:
    decoder = FrameDecoder()
    skipped = 0
    for _ in range(200):
        skipped += sum(isinstance(e, Skipped) for e in decoder.feed(b"no header here\r\n" * 4096))
    assert skipped >= 200  # each chunk is dropped when it arrives, not kept until a header comes
    assert messages(decoder.feed(frame(request(3)))) == [request(3)]


def test_header_split_across_reads_is_not_lost_while_skipping() -> None:
    decoder = FrameDecoder()
    whole = frame(request(4))
    decoder.feed(b"junk line\r\n" + whole[:9])  # "Content-L"
    assert messages(decoder.feed(whole[9:])) == [request(4)]


def test_end_of_input_reports_what_was_left() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"Content-Length: 100\r\n\r\n{\"jsonrpc\"")
    [event] = decoder.finish()
    assert isinstance(event, Skipped) and "ended inside a frame" in event.reason


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_after_any_bytes_the_second_of_two_frames_is_read(garbage: bytes) -> None:
    decoder = FrameDecoder()
    events = decoder.feed(garbage)
    events += decoder.feed(b"\r\n" + frame(request(1)) + frame(request(2)))
    events += decoder.idle()
    assert request(2) in messages(events)
    assert all(isinstance(event, (Message, Skipped, Unparsable)) for event in events)
