"""Per-pass meta-prompts: annotate the computation and the hardware facts, then transform.

Templates live in ``prompts.toml`` (data, not code): a common frame plus one table per pass and per
target. Unknown passes use the ``translate`` table, so a new pass works before it gets its own text.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from xpiler_core.dialect import Dialect
from xpiler_core.llm.manuals import Chunk

PROMPTS_FILE = Path(__file__).with_name("prompts.toml")
DIALECT_NAMES = {Dialect.CUDA: "CUDA", Dialect.HIP: "HIP", Dialect.C: "C (OpenMP + SIMD)", Dialect.BANG: "BANG C"}
FENCE_LANGUAGE = {Dialect.CUDA: "cuda", Dialect.HIP: "cpp", Dialect.C: "c", Dialect.BANG: "c"}


@dataclass(frozen=True)
class Prompt:
    messages: tuple[dict[str, str], ...]  # OpenAI chat messages: ({"role": ..., "content": ...}, ...)
    chunk_ids: tuple[str, ...]

    def as_text(self) -> str:
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)


@lru_cache(maxsize=1)
def templates() -> dict[str, Any]:
    with PROMPTS_FILE.open("rb") as handle:
        return tomllib.load(handle)


def build_prompt(
    pass_name: str,
    source_text: str,
    source: Dialect,
    target: Dialect,
    warp_size: int,
    chunks: Sequence[Chunk],
    *,
    problem: str = "",
    rules_candidate: str | None = None,
) -> Prompt:
    """The chat messages asking for ``pass_name``'s transformation of ``source_text`` into ``target``."""
    table = templates()
    common = table["common"]
    pass_table = table["passes"].get(pass_name, table["passes"]["translate"])
    fields = {"source_dialect": DIALECT_NAMES[source], "target_dialect": DIALECT_NAMES[target],
              "warp_size": str(warp_size), "pass_name": pass_name}

    def fill(template: str) -> str:
        return template.format(**fields)

    facts = [fill(f) for f in table["targets"].get(target.value, {}).get("facts", [])]
    facts += [fill(f) for f in pass_table.get("facts", [])]
    lines = [f"Pass: {pass_name}. Goal: {fill(pass_table['goal'])}", ""]
    if problem:
        lines += [f"Why the rule-based translator could not finish: {problem}", ""]
    lines += [fill(common["annotate"]), "", fill(common["facts"])]
    lines += [f"- {fact}" for fact in facts]
    if chunks:
        lines += ["", "Manual sections:"] + [chunk.render() for chunk in chunks]
    lines += ["", fill(common["transform"]), "", fill(common["output"]), ""]
    lines += [f"Source ({DIALECT_NAMES[source]}):", f"```{FENCE_LANGUAGE[source]}", source_text.rstrip(), "```"]
    if rules_candidate is not None:
        lines += ["", "Partial rule-based translation (may be wrong):", f"```{FENCE_LANGUAGE[target]}",
                  rules_candidate.rstrip(), "```"]
    messages = ({"role": "system", "content": fill(common["system"])}, {"role": "user", "content": "\n".join(lines)})
    return Prompt(messages, tuple(chunk.id for chunk in chunks))
