"""Retrieval quality over the hand-written query set, chunking, and the kernel-derived query."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.llm.manuals import MANUALS_ROOT, load_chunks, slugify, split_sections
from xpiler_core.llm.retrieval import ManualIndex, default_index, folders_for, kernel_terms

from .conftest import REPO

QUERIES = Path(__file__).with_name("retrieval_queries.toml")
HELD_OUT = Path(__file__).with_name("retrieval_heldout.toml")
# Measured 40/42 top-3 hits when this threshold was set; the issue asks for the right chunk in the top 3.
MIN_TOP3_HIT_RATE = 0.9


def load_queries(path: Path = QUERIES) -> list[dict[str, object]]:
    with path.open("rb") as handle:
        return list(tomllib.load(handle)["queries"])


def test_the_query_set_is_large_enough_and_names_real_chunks() -> None:
    queries = load_queries()
    assert len(queries) >= 30
    ids = {chunk.id for chunk in default_index().chunks}
    for path in (QUERIES, HELD_OUT):
        missing = [e for q in load_queries(path) for e in q["expected"] if e not in ids]  # type: ignore[attr-defined]
        assert missing == [], path.name


@pytest.mark.parametrize("path", [QUERIES, HELD_OUT], ids=["tuned-on", "held-out"])
def test_top3_hit_rate(path: Path) -> None:
    index = default_index()
    queries = load_queries(path)
    hits = 0
    misses = []
    for q in queries:
        found = [h.chunk.id for h in index.search(str(q["query"]), 3)]
        if any(e in found for e in q["expected"]):  # type: ignore[attr-defined]
            hits += 1
        else:
            misses.append((q["query"], found))
    rate = hits / len(queries)
    assert rate >= MIN_TOP3_HIT_RATE, f"top-3 hit rate {rate:.2f}; misses: {misses}"


def test_chunk_ids_are_unique_and_stable() -> None:
    chunks = load_chunks()
    ids = [c.id for c in chunks]
    assert len(ids) == len(set(ids))
    assert "cuda/device#shfl-xor-sync" in ids and "bang/memory#memcpy-directions" in ids
    assert [c.id for c in load_chunks()] == ids  # same files → same ids


def test_every_target_has_notes() -> None:
    folders = {c.folder for c in load_chunks()}
    assert {"cuda", "hip", "cpu", "bang"} <= folders
    assert sum(1 for c in load_chunks() if c.folder in {"cuda", "hip", "cpu"}) >= 60


@pytest.mark.parametrize(
    ("heading", "slug"),
    [("__shfl_xor_sync", "shfl-xor-sync"), ("__memcpy (strided, 7 arguments)", "memcpy-strided-7-arguments"),
     ("Launch <<<dim, type, queue>>>", "launch-dim-type-queue"), ("???", "section")],
)
def test_slugify(heading: str, slug: str) -> None:
    assert slugify(heading) == slug


def test_duplicate_headings_get_numbered_ids(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.md").write_text("# T\n## add\none\n## add\ntwo\n## sub\nthree\n")
    assert [c.id for c in load_chunks(tmp_path)] == ["x/notes#add", "x/notes#add-2", "x/notes#sub"]
    assert split_sections("# T\nintro\n## a\nbody\n") == ("T", [("a", "body")])


def test_folder_filter_keeps_to_the_translation_targets() -> None:
    index = default_index()
    hits = index.search("barrier for all threads", 5, folders_for(Dialect.CUDA, Dialect.C))
    assert hits and all(h.chunk.folder in {"cpu", "cuda"} for h in hits)
    assert folders_for(Dialect.CUDA, Dialect.HIP) == ("hip", "cuda")


def test_an_empty_or_stopword_query_finds_nothing() -> None:
    assert default_index().search("", 3) == []
    assert default_index().search("the of and", 3) == []


def test_an_empty_corpus_is_refused() -> None:
    with pytest.raises(ValueError):
        ManualIndex([])


def test_kernel_terms_come_from_the_frontend_model() -> None:
    path = REPO / "examples" / "softmax_warp.cu"
    terms = kernel_terms(path.read_text(), str(path), Dialect.CUDA)
    text = path.read_text()
    for name in ("__shfl_xor_sync", "__syncthreads", "threadIdx"):
        assert (name in text) == (name in terms)
    assert "__launch_bounds__" in terms


def test_kernel_terms_retrieve_the_sections_the_kernel_needs() -> None:
    path = REPO / "examples" / "softmax_warp.cu"
    terms = kernel_terms(path.read_text(), str(path), Dialect.CUDA)
    hits = default_index().search(" ".join(["warp size 64 wavefront", *terms]), 6, folders_for(Dialect.CUDA, Dialect.HIP))
    ids = [h.chunk.id for h in hits]
    assert "cuda/device#shfl-xor-sync" in ids or "hip/differences#shuffles-without-masks-shfl-shfl-down-shfl-xor" in ids


@pytest.mark.skipif(bool(os.environ.get("XPILER_MANUALS_DIR")), reason="manuals relocated by the environment")
def test_manuals_root_is_the_repository_folder() -> None:
    assert MANUALS_ROOT == REPO / "manuals"


@pytest.mark.parametrize(("target", "folder"), [(Dialect.BANG, "bang"), (Dialect.C, "cpu"), (Dialect.HIP, "hip")])
def test_the_prompt_gets_sections_of_the_target_not_only_of_the_source(target: Dialect, folder: str) -> None:
    from xpiler_core.llm.client import LLMConfig
    from xpiler_core.llm.propose import ProposerConfig, retrieve
    from xpiler_core.passes.base import PassContext, SourceUnit

    path = REPO / "examples" / "vector_add.cu"
    unit = SourceUnit(path.read_text(), Dialect.CUDA, str(path))
    _, chunks = retrieve("translate", unit, PassContext(Dialect.CUDA, target, file=str(path)),
                         ProposerConfig(llm=LLMConfig(), top_k=4))
    assert len(chunks) == 4 and len({c.id for c in chunks}) == 4
    assert sum(c.folder == folder for c in chunks) >= 2
