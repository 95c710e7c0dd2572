"""BM25 over the manual chunks, and the retrieval query built from a pass and the kernel it works on."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rank_bm25 import BM25Okapi

from xpiler_core.dialect import Dialect
from xpiler_core.llm.manuals import MANUALS_ROOT, Chunk, cached_chunks
from xpiler_core.llm.tokens import split_identifier, tokenize

SYNONYMS_FILE = Path(__file__).with_name("synonyms.toml")

# A heading names the API the section is about: count its words more than the body's.
HEADING_WEIGHT = 3

# Which manual folders can inform a translation into / out of each dialect.
FOLDERS: dict[Dialect, tuple[str, ...]] = {
    Dialect.CUDA: ("cuda",),
    Dialect.HIP: ("hip", "cuda"),  # HIP notes describe differences; the shared API is in cuda/
    Dialect.C: ("cpu",),
    Dialect.BANG: ("bang",),
}


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float


def chunk_tokens(chunk: Chunk) -> list[str]:
    return tokenize(" ".join([chunk.heading] * HEADING_WEIGHT + [chunk.title, chunk.text]))


class ManualIndex:
    """A BM25 index over a fixed list of chunks."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            raise ValueError("no manual chunks to index")
        self.chunks = list(chunks)
        documents = [chunk_tokens(c) for c in self.chunks]
        self._vocabulary = frozenset(token for document in documents for token in document)
        self._bm25 = BM25Okapi(documents)

    def query_tokens(self, query: str) -> list[str]:
        """Query tokens plus cross-target synonyms, and adjacent words joined when the join is a term of
        the corpus ("task id" → also "taskid", "atomic add" → also "atomicadd")."""
        tokens = tokenize(query)
        synonyms = load_synonyms()
        expanded = list(tokens)
        for token in tokens:
            expanded.extend(synonyms.get(token, ()))
        words = [split_identifier(w) for w in query.split()]
        simple = [w[0] if len(w) == 1 else None for w in words]  # one-word identifiers only
        for left, right in zip(simple, simple[1:], strict=False):
            if left and right and left + right in self._vocabulary:
                expanded.append(left + right)
        return expanded

    def search(self, query: str, k: int = 3, folders: Iterable[str] | None = None) -> list[Hit]:
        """The ``k`` best chunks for ``query`` (optionally only from the given manual folders)."""
        tokens = self.query_tokens(query)
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        allowed = set(folders) if folders is not None else None
        ranked = sorted(
            (i for i in range(len(self.chunks)) if allowed is None or self.chunks[i].folder in allowed),
            key=lambda i: (-scores[i], self.chunks[i].id),
        )
        return [Hit(self.chunks[i], float(scores[i])) for i in ranked[:k] if scores[i] > 0.0]


@lru_cache(maxsize=1)
def load_synonyms() -> dict[str, tuple[str, ...]]:
    with SYNONYMS_FILE.open("rb") as handle:
        table = tomllib.load(handle).get("expand", {})
    return {tokenize(word)[0]: tuple(t for w in words for t in tokenize(w)) for word, words in table.items()}


@lru_cache(maxsize=2)
def default_index(root: str = str(MANUALS_ROOT)) -> ManualIndex:
    return ManualIndex(cached_chunks(root))


def folders_for(source: Dialect, target: Dialect) -> tuple[str, ...]:
    """Manual folders relevant to a source → target translation (target first)."""
    ordered = [*FOLDERS[target], *FOLDERS[source]]
    return tuple(dict.fromkeys(ordered))


def kernel_terms(text: str, path: str, dialect: Dialect) -> list[str]:
    """Names of the APIs, intrinsics, warp ops, atomics, barriers and builtins the kernel uses.

    Uses the frontend's KernelModel; the frontend never raises, and an empty list is a fine answer.
    """
    from xpiler_core.frontend.model import load_model_bytes

    model = load_model_bytes(text.encode("utf-8", errors="surrogatepass"), path, dialect)
    terms: list[str] = []
    for function in model.functions:
        for uses in (function.api_calls, function.intrinsics, function.warp_ops, function.atomics,
                     function.barriers, function.tensor_core):
            terms.extend(use.name for use in uses)
        terms.extend(builtin.spelled for builtin in function.builtins)
        terms.extend(buffer.memory for buffer in function.buffers)
        if function.launch_bounds is not None:
            terms.append("__launch_bounds__")
        if function.inline_asm:
            terms.append("inline PTX asm")
    terms.extend(buffer.memory for buffer in model.buffers)
    return list(dict.fromkeys(terms))  # first-use order, no repeats


def build_query(pass_name: str, pass_summary: str, terms: Sequence[str], problem: str = "") -> str:
    """The retrieval query: what the pass does, what went wrong, and what the kernel uses."""
    return " ".join([pass_name.replace("_", " "), pass_summary, problem, *terms]).strip()
