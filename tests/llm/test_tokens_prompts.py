"""The code-aware tokenizer, code-block extraction and the meta-prompt."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.llm.manuals import Chunk
from xpiler_core.llm.prompts import build_prompt, templates
from xpiler_core.llm.propose import extract_code_block
from xpiler_core.llm.tokens import split_identifier, tokenize


def test_identifiers_are_split_into_words() -> None:
    assert split_identifier("__bang_add") == ["bang", "add"]
    assert split_identifier("__shfl_xor_sync") == ["shfl", "xor", "sync"]
    assert split_identifier("cudaMemcpyHostToDevice") == ["cuda", "memcpy", "host", "to", "device"]
    assert split_identifier("GDRAM2NRAM") == ["gdram", "2", "nram"]
    assert split_identifier("_mm512_dpbusd_epi32") == ["mm", "512", "dpbusd", "epi", "32"]


def test_tokens_keep_the_joined_identifier_and_drop_stop_words() -> None:
    tokens = tokenize("copy from global memory to __nram__ with __bang_add")
    assert tokens == ["copy", "global", "memory", "nram", "bang", "add", "bangadd"]
    assert tokenize("threads copies") == ["thread", "copy"]


words = st.lists(st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8), min_size=1, max_size=5)


@given(words)
def test_snake_case_splits_back_into_its_words(parts: list[str]) -> None:
    assert split_identifier("__" + "_".join(parts)) == parts


# camelCase with one-letter words after the first is ambiguous ("aAA"): words of two letters or more.
camel_words = st.lists(st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8), min_size=1, max_size=5)


@given(st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8), camel_words)
def test_camel_case_splits_back_into_its_words(first: str, rest: list[str]) -> None:
    camel = first + "".join(p.capitalize() for p in rest)
    assert split_identifier(camel) == [first, *rest]


@given(st.text(max_size=200))
def test_tokenize_never_fails_and_yields_lowercase_words(text: str) -> None:
    for token in tokenize(text):
        assert token and token == token.lower() and token.replace("_", "").isalnum()


def test_extract_code_block() -> None:
    assert extract_code_block("text\n```cpp\nint x;\n```\n") == "int x;\n"
    assert extract_code_block("```\na\n```\nand\n```c\nlonger one\n```") == "longer one\n"
    assert extract_code_block("no code here") is None
    assert extract_code_block("```c\nunterminated") is None
    assert extract_code_block("```\n\n```") is None


def test_the_prompt_annotates_then_transforms_with_retrieved_sections() -> None:
    chunk = Chunk("hip/differences#ballot-64-bit", "hip/differences.md", "Ballot 64-bit", "64 bits per wave.", "HIP")
    prompt = build_prompt("warp_size", "__global__ void k() {}", Dialect.CUDA, Dialect.HIP, 64, [chunk],
                          problem="ballot stored in 32 bits")
    system, user = (m["content"] for m in prompt.messages)
    assert prompt.chunk_ids == ("hip/differences#ballot-64-bit",)
    assert user.index("Step 1") < user.index("Step 2") < user.index("Step 3")
    assert "[hip/differences#ballot-64-bit]" in user and "64-lane warp/wavefront" in user
    assert "ballot stored in 32 bits" in user and "__global__ void k() {}" in user


def test_every_pass_with_a_template_names_a_real_pass_or_translate() -> None:
    from xpiler_core.passes import all_passes

    known = set(all_passes()) | {"translate"}
    assert set(templates()["passes"]) <= known
