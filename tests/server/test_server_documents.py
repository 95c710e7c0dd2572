"""Document sync without a client: random incremental edits (UTF-16 positions, non-ASCII text) must give the
same text as applying them to a plain string, and the incrementally reparsed tree must equal a fresh parse."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from xpiler_server.config import XpilerConfig
from xpiler_server.documents import Document
from xpiler_server.positions import LineIndex

from xpiler_core.frontend.source import parse_text

BASE = """\
// ünïcode comment 😀
__global__ void k(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 2.0f;  // ∑
}
"""

UTF16 = types.PositionEncodingKind.Utf16


def utf16_position(text: str, offset: int) -> types.Position:
    """Reference: line and UTF-16 column of a str offset, computed by brute force."""
    before = text[:offset]
    line = before.count("\n")
    column_text = before[before.rfind("\n") + 1 :]
    return types.Position(line=line, character=len(column_text.encode("utf-16-le")) // 2)


fragments = st.sampled_from(["", "x", "(", ")", "{", "}", "\n", "😀", "é", " int j = 0;", "__syncthreads();\n", "/*", "*/"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), fragments), min_size=1, max_size=8))
def test_incremental_edits_match_string_edits_and_fresh_parse(edits: list[tuple[float, float, str]]) -> None:
    doc = Document("file:///t/k.cu", "/t/k.cu", "cuda", 1, BASE)
    doc.analyze()
    expected = BASE
    version = 1
    for a, b, new in edits:
        start, end = sorted((int(a * len(expected)), int(b * len(expected))))
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=utf16_position(expected, start), end=utf16_position(expected, end)), text=new
        )
        expected = expected[:start] + new + expected[end:]
        version += 1
        doc.apply_changes([change], version, UTF16)
        assert doc.text == expected
    analysis = doc.analyze()
    assert analysis.version == version
    assert analysis.parsed is not None
    fresh = parse_text(expected, "/t/k.cu")
    assert str(analysis.parsed.root) == str(fresh.root)
    assert [d.message for d in analysis.parsed.diagnostics] == [d.message for d in fresh.diagnostics]


@given(st.text(alphabet=st.sampled_from("ab\n😀é"), max_size=40), st.data())
def test_position_round_trip(text: str, data: st.DataObject) -> None:
    offset = data.draw(st.integers(0, len(text)))
    index = LineIndex.of(text)
    position = utf16_position(text, offset)
    assert index.position(offset, UTF16) == position
    assert index.offset(position, UTF16) == offset


def test_settings_ignore_wrong_types() -> None:
    config = XpilerConfig().merged(
        {"target": "cpu", "hipWarpSize": True, "testBudget": {"cases": "3"}, "llm": {"enabled": 1}, "tuning": [1]}
    )
    assert config.target == "cpu"
    assert config.hip_warp_size == 64
    assert config.test_cases is None
    assert config.llm_enabled is False
    nested = XpilerConfig().merged({"xpiler": {"hipWarpSize": 32, "diagnostics": {"debounceMs": 0}}})
    assert nested.hip_warp_size == 32 and nested.debounce_ms == 0


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), fragments), min_size=1, max_size=6))
def test_carried_diagnostic_ranges_follow_the_text(edits: list[tuple[float, float, str]]) -> None:
    """A range over ``blockIdx`` moved through edits that do not touch it still covers ``blockIdx``."""
    from xpiler_server.positions import shift_range

    text = BASE
    start = text.index("blockIdx")
    rng: types.Range | None = types.Range(start=utf16_position(text, start), end=utf16_position(text, start + 8))
    for a, b, new in edits:
        lo, hi = sorted((int(a * len(text)), int(b * len(text))))
        edited = types.Range(start=utf16_position(text, lo), end=utf16_position(text, hi))
        assert rng is not None
        rng = shift_range(rng, edited, new, UTF16)
        text = text[:lo] + new + text[hi:]
        if rng is None:
            return  # the edit touched it: dropped, never misplaced
    index = LineIndex.of(text)
    assert rng is not None
    assert text[index.offset(rng.start, UTF16) : index.offset(rng.end, UTF16)] == "blockIdx"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), fragments), min_size=1, max_size=6), st.floats(0, 1))
def test_cursor_maps_back_into_the_last_analysis(edits: list[tuple[float, float, str]], where: float) -> None:
    """A cursor on unedited text maps to the same character of the analysed text."""
    doc = Document("file:///t/k.cu", "/t/k.cu", "cuda", 1, BASE)
    doc.analyze()
    text, version = BASE, 1
    current: list[int | None] = list(range(len(BASE)))  # current index → index in BASE, None where edited
    for a, b, new in edits:
        lo, hi = sorted((int(a * len(text)), int(b * len(text))))
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=utf16_position(text, lo), end=utf16_position(text, hi)), text=new
        )
        text = text[:lo] + new + text[hi:]
        current = current[:lo] + [None] * len(new) + current[hi:]
        version += 1
        doc.apply_changes([change], version, UTF16)
    if not text:
        return
    cursor = min(int(where * len(text)), len(text) - 1)
    mapped = doc.map_to_last_analysis(cursor)
    assert mapped is not None
    analysis, byte_offset = mapped
    assert analysis.version == 1
    expected = current[cursor]
    if expected is not None:
        assert byte_offset == len(BASE[:expected].encode("utf-8"))


def test_each_syntax_error_is_reported_once() -> None:
    broken = "__global__ void k(float* x, float s, int n) {\n    int i = threadIdx.x;\n    if (i < n x[i] *= s;\n}\n"
    analysis = Document("file:///t/b.cu", "/t/b.cu", "cuda", 1, broken).analyze()
    syntax = [(d.code, d.span.start_byte) for d in analysis.diagnostics if d.code.startswith("syntax.")]
    assert syntax, "the broken condition must be reported"
    assert len(syntax) == len(set(syntax)), f"duplicate syntax diagnostics: {syntax}"
