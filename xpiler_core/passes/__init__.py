"""The passes: one module per pass, grouped by kind (``gpu/``: CUDA ⇄ HIP CST passes, ``method/``: the eleven
passes of the method, ``cpu/``: CPU speed passes, ``bang/``: BANG C passes; ``support/`` holds shared helpers,
not passes), discovered here so the CLI, the server and the tuner can list and run them by name."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from xpiler_core.passes.base import PassContext, PassInfo, PassRefused, SourceUnit

__all__ = ["PassContext", "PassInfo", "PassRefused", "SourceUnit", "all_passes", "get_pass"]

PASS_GROUPS = ("gpu", "method", "cpu", "bang")


@lru_cache(maxsize=1)
def all_passes() -> dict[str, ModuleType]:
    """Pass name → module, for every module of the pass groups that defines ``INFO`` and ``apply``."""
    found: dict[str, ModuleType] = {}
    for group in PASS_GROUPS:
        package = importlib.import_module(f"{__name__}.{group}")
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{__name__}.{group}.{info.name}")
            pass_info = getattr(module, "INFO", None)
            if isinstance(pass_info, PassInfo) and callable(getattr(module, "apply", None)):
                if pass_info.name in found:
                    raise RuntimeError(f"two passes named {pass_info.name}")
                found[pass_info.name] = module
    return dict(sorted(found.items()))


def get_pass(name: str) -> ModuleType:
    passes = all_passes()
    if name not in passes:
        raise KeyError(f"unknown pass '{name}'; known: {', '.join(passes)}")
    return passes[name]
