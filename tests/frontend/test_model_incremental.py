"""The model of an incrementally reparsed file equals the model of a fresh parse of the same text."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.frontend.model import build_model
from xpiler_core.frontend.source import parse_text

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "softmax_warp.cu").read_text()
INSERTS = ["", "x", " ", "\n", "}", "{", "(", ";", "__syncthreads();", "threadIdx.y", "// c\n", "<<<1, 2>>>"]


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(min_value=0, max_value=len(EXAMPLE.encode())),
    length=st.integers(min_value=0, max_value=40),
    insert=st.sampled_from(INSERTS),
)
def test_incremental_model_equals_fresh_model(start: int, length: int, insert: str) -> None:
    data = EXAMPLE.encode()
    end = min(len(data), start + length)
    # Keep edits on character boundaries (the example is ASCII, so every byte is one).
    parsed = parse_text(EXAMPLE, "softmax_warp.cu")
    edited = parsed.edit(start, end, insert)
    fresh = parse_text(edited.text, "softmax_warp.cu")
    assert edited.text == data[:start].decode() + insert + data[end:].decode()
    assert build_model(edited).to_dict() == build_model(fresh).to_dict()
