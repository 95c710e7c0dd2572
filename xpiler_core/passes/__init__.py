"""The passes: one module per pass, discovered here so the CLI and the server can list and run them."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from xpiler_core.passes.base import PassContext, PassInfo, PassRefused, SourceUnit

__all__ = ["PassContext", "PassInfo", "PassRefused", "SourceUnit", "all_passes", "get_pass"]

_NOT_PASSES = {"base"}


@lru_cache(maxsize=1)
def all_passes() -> dict[str, ModuleType]:
    """Pass name → module, for every module in this package that defines ``INFO`` and ``apply``."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name in _NOT_PASSES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        pass_info = getattr(module, "INFO", None)
        if isinstance(pass_info, PassInfo) and callable(getattr(module, "apply", None)):
            found[pass_info.name] = module
    return dict(sorted(found.items()))


def get_pass(name: str) -> ModuleType:
    passes = all_passes()
    if name not in passes:
        raise KeyError(f"unknown pass '{name}'; known: {', '.join(passes)}")
    return passes[name]
