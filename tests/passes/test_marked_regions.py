"""The helper blocks passes insert between begin/end marks are found and removed exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xpiler_core.passes.support.cst import marked_region, remove_marked_region

BEGIN, END = "// xpiler(test) begin", "// xpiler(test) end"
# text around the block: anything that does not itself contain a mark
plain = st.text(alphabet=st.characters(codec="utf-8"), max_size=40).filter(
    lambda s: "xpiler(test)" not in s)


@given(before=plain, body=plain, newline=st.booleans(), after=plain)
def test_the_block_and_one_newline_after_it_are_removed(before: str, body: str, newline: bool, after: str) -> None:
    block = BEGIN + body + END
    text = before + block + ("\n" if newline else "") + after
    assert marked_region(text, BEGIN, END) == (len(before), len(before) + len(block))
    # one newline right after the block goes with it, whether it was written with the block or not
    rest = after if newline or not after.startswith("\n") else after[1:]
    assert remove_marked_region(text, BEGIN, END) == before + rest


@given(text=plain)
def test_text_without_a_complete_block_is_unchanged(text: str) -> None:
    for candidate in (text, text + BEGIN + text, END + text, END + text + BEGIN):
        assert marked_region(candidate, BEGIN, END) is None
        assert remove_marked_region(candidate, BEGIN, END) == candidate
