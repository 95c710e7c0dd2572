"""The SIMT header set a portable-tier CPU translation carries beside it in ``xpiler_simt/``.

The set is the runtime's own CUDA/HIP headers (not the BANG model's), copied so that the output builds with a
plain ``g++``. The plans write it next to their outputs; the precompiled openings (``pch.py``) read it from a
copy of their own (written there with the copy) and use that copy only for a file whose ``xpiler_simt/`` holds these same bytes.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

SIMT_DIR = "xpiler_simt"
# The BANG model's headers are not part of the CUDA/HIP SIMT set.
_NOT_SIMT = ("bang.h", "cnrt.h", "mlu.h", "xpiler_bang.h")


@cache
def simt_headers() -> dict[str, str]:
    """The SIMT header set: ``xpiler_simt/<path>`` → text."""
    root = resources.files("xpiler_core.runtime").joinpath("include")
    out: dict[str, str] = {}

    def visit(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            name = f"{prefix}{entry.name}"
            if entry.is_dir():
                visit(entry, name + "/")
            elif (entry.name.endswith((".h", ".hpp")) or name.startswith("cuda/")) and entry.name not in _NOT_SIMT:
                # (libcu++'s headers, <cuda/barrier>, have no extension)
                out[f"{SIMT_DIR}/{name}"] = entry.read_text(encoding="utf-8")

    visit(root, "")
    return out


@cache
def simt_digest() -> str:
    """A hash of the whole set (names and texts)."""
    h = hashlib.sha256()
    for name, text in sorted(simt_headers().items()):
        h.update(f"{name}\0{text}\0".encode())
    return h.hexdigest()


@cache
def _set_bytes() -> dict[str, bytes]:
    return {name: text.encode("utf-8") for name, text in simt_headers().items()}


def holds_the_set_or_none(folder: Path) -> bool:
    """Whether every file of the set that ``folder/xpiler_simt/`` holds has the set's bytes (an absent folder
    or file counts: a compile would not read it)."""
    if not (folder / SIMT_DIR).is_dir():
        return True
    for name, data in _set_bytes().items():
        try:
            if (folder / name).read_bytes() != data:
                return False
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True
