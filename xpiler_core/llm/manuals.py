"""The target manuals as retrieval chunks: one chunk per ``## `` section, with a stable id.

A chunk's id is ``<path below manuals/ without .md>#<slug of its heading>`` (``cuda/device#syncthreads``,
``bang/memory#memcpy-directions``). Two sections of one file with the same slug get ``-2``, ``-3`` suffixes
in document order. The file's ``# `` title and its introduction are kept as the chunk's context.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# ``xpiler_core/_manuals`` is a symlink to the repository's manuals/ folder in a checkout (and an editable
# install); a wheel built by ``pip install .`` carries a copy of it as package data. XPILER_MANUALS_DIR points
# elsewhere (another corpus, a test's).
PACKAGED_MANUALS = Path(__file__).resolve().parents[1] / "_manuals"
MANUALS_ROOT = Path(os.environ.get("XPILER_MANUALS_DIR") or PACKAGED_MANUALS.resolve())


@dataclass(frozen=True)
class Chunk:
    id: str
    file: str  # relative to the manuals root, e.g. "cuda/device.md"
    heading: str
    text: str  # the section body, heading excluded
    title: str  # the file's "# " title

    @property
    def folder(self) -> str:
        """The target the chunk belongs to: "cuda", "hip", "cpu", "bang" (or "" for top-level files)."""
        return self.file.split("/", 1)[0] if "/" in self.file else ""

    def render(self) -> str:
        return f"[{self.id}] {self.heading}\n{self.text.strip()}"


def slugify(heading: str) -> str:
    """Lower-case words of the heading joined by '-': ``__shfl_xor_sync`` → ``shfl-xor-sync``."""
    words = re.findall(r"[a-z0-9]+", heading.lower().replace("_", " "))
    return "-".join(words) or "section"


def split_sections(markdown: str) -> tuple[str, list[tuple[str, str]]]:
    """(file title, [(heading, body)]) for the ``## `` sections of one markdown text."""
    title = ""
    sections: list[tuple[str, list[str]]] = []
    for line in markdown.splitlines():
        if line.startswith("# ") and not title:
            title = line[2:].strip()
        elif line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
    return title, [(heading, "\n".join(body).strip()) for heading, body in sections]


def load_chunks(root: Path = MANUALS_ROOT) -> list[Chunk]:
    """Every section of every ``*.md`` under ``root``, in path order, with stable ids."""
    chunks: list[Chunk] = []
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root).as_posix()
        stem = relative[: -len(".md")]
        title, sections = split_sections(path.read_text(encoding="utf-8"))
        seen: dict[str, int] = {}
        for heading, body in sections:
            slug = slugify(heading)
            seen[slug] = seen.get(slug, 0) + 1
            suffix = f"-{seen[slug]}" if seen[slug] > 1 else ""
            chunks.append(Chunk(f"{stem}#{slug}{suffix}", relative, heading, body, title))
    return chunks


@lru_cache(maxsize=4)
def cached_chunks(root: str = str(MANUALS_ROOT)) -> tuple[Chunk, ...]:
    return tuple(load_chunks(Path(root)))
