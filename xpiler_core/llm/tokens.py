"""A code-aware tokenizer for retrieval: identifiers are split into the words they are made of.

``__shfl_xor_sync`` → ``shfl xor sync shflxorsync``, ``cudaMemcpyHostToDevice`` → ``cuda memcpy host to
device ...``, ``GDRAM2NRAM`` → ``gdram 2 nram``. The joined form of a compound identifier is kept as an
extra token so an exact API name outranks prose that merely mentions its parts. English stop words are
dropped and plurals folded, so "threads" matches "thread".
"""

from __future__ import annotations

import re

# Identifier-ish runs: letters, digits, underscores. Everything else separates tokens.
_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")
# Pieces of one identifier: an upper-case run not followed by lower case (acronyms: "NRAM", "GDRAM"),
# a capitalised or lower-case word, or a number.
_PIECE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

STOP_WORDS = frozenset(
    """a an and are as at be by can do does for from has have how i if in into is it its me my of on or
    our so than that the their then there these this those to use used uses using via was what when where
    which while who why will with you your""".split()
)


def fold(word: str) -> str:
    """Lower-case and fold a regular English plural ("threads" → "thread", "copies" → "copy")."""
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def split_identifier(identifier: str) -> list[str]:
    """The lower-case words of one identifier (camelCase, snake_case, acronyms and digits split)."""
    return [piece.lower() for part in identifier.split("_") for piece in _PIECE.findall(part)]


def tokenize(text: str) -> list[str]:
    """Tokens of prose or code for BM25 (order kept, duplicates kept: term frequency matters)."""
    tokens: list[str] = []
    for run in _WORD_RUN.findall(text):
        pieces = split_identifier(run)
        for piece in pieces:
            if piece not in STOP_WORDS:
                tokens.append(fold(piece))
        if len(pieces) > 1:
            tokens.append("".join(pieces))
    return tokens
