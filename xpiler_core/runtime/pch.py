"""Precompiled runtime headers: the SIMT headers (CUDA and HIP builds) and the MLU model's header are parsed
once per set of flags, not once per program.

Every program built for the runtime starts with ``-include cuda_runtime.h`` (or the HIP or BANG header):
parsing those headers and the standard headers under them was about half of the g++ time of a small test
program (0.3 of 0.9 s). :func:`precompiled_include` returns the path to give ``-include`` instead: a one-line
header beside its ``.gch``, built on first use under ``$XPILER_CACHE_DIR/pch/<key>/``, the key covering the
compiler and its version, every runtime header's text and the flags that shape the header's meaning
(language standard, optimization, ``-fPIC``, the runtime's macros). The program's own flags (a project's
``-I``/``-D``) are left out of the key on purpose: g++ checks a precompiled header against the macros of the
compilation using it and, when it does not fit, reads the plain header instead, so the result is always the
same program — only slower. Builds are atomic (a fresh name renamed into place), so parallel test workers and
editor jobs can race for the same header safely. ``XPILER_NO_PCH=1`` turns the whole thing off.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from xpiler_core.cache import cache_root, stable_key
from xpiler_core.runtime import children

PCH_TIMEOUT_S = 300
PCH_MEMORY_BYTES = 8 * 1024**3
# flags that only matter to the link (or to the output's kind): not part of a header's meaning
_LINK_ONLY = frozenset({"-shared", "-rdynamic"})


def _disabled() -> bool:
    return os.environ.get("XPILER_NO_PCH", "") not in ("", "0")


def header_flags(flags: Sequence[str]) -> list[str]:
    """The flags of a build that shape the precompiled header (link-only flags, libraries and the
    ``-include`` of the header itself left out)."""
    out: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
            continue
        if flag == "-include":
            skip = True
            continue
        if flag in _LINK_ONLY or flag.startswith("-l") or flag.startswith("-Wl,"):
            continue
        out.append(flag)
    return out


def precompiled_include(header: str, flags: Sequence[str], digest: str, compiler: str, version: str) -> str | None:
    """The file to ``-include`` instead of ``header`` (its precompiled form beside it), or None when it
    cannot be built here (the caller then includes ``header`` itself). ``flags``: the build's flags that shape
    the header (see :func:`header_flags`); ``digest``: a hash of every header it reads."""
    if _disabled():
        return None
    shaping = header_flags(flags)
    key = stable_key("pch-v1", header, shaping, digest, compiler, version)
    folder = cache_root() / "pch" / key[:24]
    stub = folder / "xpiler_pch.h"
    gch = folder / "xpiler_pch.h.gch"
    built = build_once(gch, include_line(header),
                       lambda partial: [compiler, *shaping, "-x", "c++-header", str(stub), "-o", str(partial)],
                       stub, PCH_TIMEOUT_S, PCH_MEMORY_BYTES)
    return str(stub) if built else None


def include_line(header: str) -> str:
    """The line that includes ``header`` (a path or a name on the include path)."""
    return f'#include "{header}"\n' if os.path.isabs(header) else f"#include <{header}>\n"


def build_once(target: Path, unit_text: str, command: Callable[[Path], list[str]], unit: Path, timeout: float,
               memory_bytes: int) -> bool:
    """Whether ``target`` (a file under the cache) exists, built now when it does not: ``unit_text`` written to
    ``unit`` and ``command(partial)`` run to a fresh name renamed into place, so parallel workers race safely;
    a failure is remembered beside it (``failed``, the compiler's messages) and not tried again."""
    folder = target.parent
    failed = folder / "failed"
    if target.is_file():
        return True
    if failed.exists():
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(unit, unit_text.encode())
        partial = folder / f".{secrets.token_hex(6)}{target.suffix}"
        proc = children.run(command(partial), capture_output=True, text=True, errors="replace", timeout=timeout,
                            cwd=folder, memory_bytes=memory_bytes, env=dict(os.environ, LC_ALL="C"))
    except (OSError, subprocess.TimeoutExpired):
        return False
    if proc.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        try:
            atomic_write(failed, (proc.stderr or proc.stdout or "").encode())
        except OSError:
            pass
        return False
    os.replace(partial, target)
    return True


def atomic_write(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    temp.write_bytes(data)
    os.replace(temp, path)


def with_precompiled(flags: Sequence[str], shaping: Sequence[str], digest: str, compiler: str,
                     version: str) -> list[str]:
    """``flags`` with the header after ``-include`` replaced by its precompiled form when there is one;
    ``shaping``: the runtime's own flags of this build (not the project's), which the header is built with."""
    out = list(flags)
    header = included_header(out)
    stub = precompiled_include(header, shaping, digest, compiler, version) if header is not None else None
    if stub is not None:
        out[out.index("-include") + 1] = stub
    return out


def included_header(flags: Sequence[str]) -> str | None:
    """The header a build's first ``-include`` names."""
    for i, flag in enumerate(flags[:-1]):
        if flag == "-include":
            return flags[i + 1]
    return None
