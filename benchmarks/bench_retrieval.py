"""Retrieval quality of the LLM proposer's BM25 index over ``manuals/``.

Run: ``python benchmarks/bench_retrieval.py [--queries tests/llm/retrieval_queries.toml] [--verbose]``.
For each hand-written query the rank of the first expected chunk in a search over the whole corpus (no
folder filter); prints hit@1, hit@3, hit@5 and the mean reciprocal rank, with and without the query
expansion (cross-target synonyms and joined adjacent words), and the misses at 3. Goal from issue 10:
the right chunk in the top 3 for at least 30 queries (report the rate).
"""

from __future__ import annotations

import argparse
import time
import tomllib
from pathlib import Path

from xpiler_core.llm.retrieval import ManualIndex, default_index
from xpiler_core.llm.tokens import tokenize

REPO = Path(__file__).resolve().parents[1]
DEFAULT_QUERIES = REPO / "tests" / "llm" / "retrieval_queries.toml"


class PlainIndex(ManualIndex):
    """The same index without query expansion (the tokenizer alone), for comparison."""

    def query_tokens(self, query: str) -> list[str]:
        return tokenize(query)


def ranks(index: ManualIndex, queries: list[dict[str, object]], depth: int = 20) -> list[int | None]:
    out: list[int | None] = []
    for q in queries:
        found = [h.chunk.id for h in index.search(str(q["query"]), depth)]
        expected = set(q["expected"])  # type: ignore[call-overload]
        out.append(next((i + 1 for i, cid in enumerate(found) if cid in expected), None))
    return out


def summary(name: str, got: list[int | None]) -> str:
    n = len(got)

    def at(k: int) -> str:
        hits = sum(1 for r in got if r is not None and r <= k)
        return f"{hits}/{n} ({hits / n:.0%})"

    mrr = sum(1.0 / r for r in got if r is not None) / n
    return f"| {name} | {at(1)} | {at(3)} | {at(5)} | {mrr:.3f} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("--verbose", action="store_true", help="print every query's rank")
    args = parser.parse_args()
    with args.queries.open("rb") as handle:
        queries = list(tomllib.load(handle)["queries"])
    started = time.perf_counter()
    index = default_index()
    built = time.perf_counter() - started
    plain = PlainIndex(index.chunks)
    started = time.perf_counter()
    expanded_ranks = ranks(index, queries)
    per_query_ms = (time.perf_counter() - started) / len(queries) * 1000
    plain_ranks = ranks(plain, queries)
    print(f"{len(index.chunks)} chunks, {len(queries)} queries; index built in {built * 1000:.0f} ms, "
          f"{per_query_ms:.1f} ms per query")
    print("| index | hit@1 | hit@3 | hit@5 | MRR |")
    print("|---|---|---|---|---|")
    print(summary("BM25 + code tokenizer + expansion (used)", expanded_ranks))
    print(summary("BM25 + code tokenizer only", plain_ranks))
    for q, rank in zip(queries, expanded_ranks, strict=True):
        if args.verbose or rank is None or rank > 3:
            top = [h.chunk.id for h in index.search(str(q["query"]), 3)]
            print(f"  rank {rank}: {q['query']!r} expected {q['expected']} top3 {top}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
