"""One on-disk cache (diskcache) shared by compiles, tests, LLM replies and tuning records.

Location: ``$XPILER_CACHE_DIR`` or ``~/.cache/xpiler``. Each use names its own sub-cache so keys from
different rooms cannot collide. ``XPILER_NO_CACHE=1`` turns every lookup into a miss (writes still happen).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import diskcache


def cache_root() -> Path:
    root = os.environ.get("XPILER_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "xpiler"


@cache
def _open(name: str, root: str) -> diskcache.Cache:
    return diskcache.Cache(str(Path(root) / name), size_limit=2**31)


def get_cache(name: str) -> diskcache.Cache:
    """The named sub-cache (e.g. ``"compile"``, ``"tests"``, ``"llm"``, ``"tune"``)."""
    return _open(name, str(cache_root()))


def caching_disabled() -> bool:
    return os.environ.get("XPILER_NO_CACHE", "") not in ("", "0")


def stable_key(*parts: Any) -> str:
    """A sha256 over a JSON rendering of the parts (sorted keys): stable across processes and runs."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()
