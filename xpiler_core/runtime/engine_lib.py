"""The SIMT engine's host-side functions compiled once per set of runtime flags, not once per program.

A CUDA/HIP program built for the runtime used to generate the code of the whole engine (launch, the block
scheduler, the device heap, copy-back records, fault reports) in its own translation unit: about 0.7 of the
1.0 s g++ took for a vector add, even with the headers precompiled. ``include/xpiler/linkage.h`` marks those
functions; :func:`engine_library` compiles them into ``libxpiler_engine_<key>.so`` under
``$XPILER_CACHE_DIR/engine/<key>/`` (the key covers the compiler and its version, every runtime header's text
and the flags that shape the headers, as a precompiled header's does), and a program built with
``-DXPILER_ENGINE_EXTERN`` sees their declarations only and links that library. :func:`place_engine` puts the
library beside the program (a hard link where it can), which finds it through ``$ORIGIN``: a cached program
copied into a fresh folder finds its engine the same way. The program is the same program either way (the
same definitions, one copy of the engine's state: its variables are C++ inline variables, unique across
objects); when the library cannot be built (or ``XPILER_NO_ENGINE_LIB=1``) programs compile the engine
inline as before. Builds are atomic (a fresh name renamed into place), so parallel workers race safely.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

from xpiler_core.cache import cache_root, stable_key
from xpiler_core.runtime.pch import build_once, header_flags, include_line, included_header

ENGINE_TIMEOUT_S = 300
ENGINE_MEMORY_BYTES = 8 * 1024**3
# a program built against the library declares the engine's functions and defines none of them
EXTERN_FLAG = "-DXPILER_ENGINE_EXTERN"


def _disabled() -> bool:
    return os.environ.get("XPILER_NO_ENGINE_LIB", "") not in ("", "0")


def engine_library(flags: Sequence[str], libraries: Sequence[str], digest: str, compiler: str,
                   version: str) -> Path | None:
    """The engine compiled with the runtime flags ``flags`` (those of a build before the project's own), or
    None when it cannot be built here (the caller then compiles the engine inline). ``libraries``: the
    ``-l`` flags the engine needs; ``digest``: a hash of every runtime header."""
    header = included_header(flags)
    if _disabled() or header is None:
        return None
    # a shared library is position-independent whoever links it: a harness library (built -fPIC) and a whole
    # program (built without) share one engine
    shaping = [f for f in header_flags(flags) if f != "-fPIC"]
    key = stable_key("engine-lib-v2", header, shaping, list(libraries), digest, compiler, version)
    name = f"libxpiler_engine_{key[:16]}.so"
    folder = cache_root() / "engine" / key[:24]
    library = folder / name
    unit = folder / "engine.cpp"
    built = build_once(library, include_line(header),
                       lambda partial: [compiler, *shaping, "-fPIC", "-shared", "-DXPILER_ENGINE_LIBRARY", str(unit),
                                        "-o", str(partial), f"-Wl,-soname,{name}", *libraries],
                       unit, ENGINE_TIMEOUT_S, ENGINE_MEMORY_BYTES)
    return library if built else None


def place_engine(library: Path, folder: Path) -> Path:
    """``library`` beside the programs built in ``folder`` (found there through ``$ORIGIN``)."""
    target = folder / library.name
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{secrets.token_hex(6)}.{library.name}"
    try:
        os.link(library, partial)
    except OSError:  # another file system (or no hard links): a copy
        shutil.copyfile(library, partial)
    os.replace(partial, target)
    return target


def link_flags(placed: Path) -> list[str]:
    """What links a program to the engine placed beside it."""
    return [str(placed), "-Wl,-rpath,$ORIGIN"]
