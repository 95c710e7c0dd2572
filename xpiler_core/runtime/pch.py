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
editor jobs can race for the same header safely. The same for a C/C++ file's opening standard headers
(:func:`precompiled_preamble`: every CPU translation starts with its prelude's; :func:`precompiled_offload_preamble`: a HIP file's, hip_runtime.h included, for hipcc). ``XPILER_NO_PCH=1`` turns the
whole thing off.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from xpiler_core.cache import cache_root, stable_key
from xpiler_core.runtime import children
from xpiler_core.runtime.simt_set import holds_the_set_or_none, simt_digest, simt_headers

PCH_TIMEOUT_S = 300
PCH_MEMORY_BYTES = 8 * 1024**3
# flags that only matter to the link (or to the output's kind): not part of a header's meaning
_LINK_ONLY = frozenset({"-shared", "-rdynamic"})


def _disabled() -> bool:
    return os.environ.get("XPILER_NO_PCH", "") not in ("", "0")


def _without(flags: Sequence[str], options: tuple[str, ...], alone: frozenset[str] = frozenset()) -> list[str]:
    """``flags`` less each of ``options`` with its value (apart: ``-I DIR``, or joined: ``-IDIR``) and the flags in
    ``alone``."""
    out: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
        elif flag in options:
            skip = True
        elif not flag.startswith(options) and flag not in alone:
            out.append(flag)
    return out


def header_flags(flags: Sequence[str]) -> list[str]:
    """The flags of a build that shape the precompiled header (link-only flags, libraries and the
    ``-include`` of the header itself left out)."""
    return _without(flags, ("-include", "-l", "-Wl,"), _LINK_ONLY)


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


# Headers of the C and C++ standard libraries, POSIX, OpenMP and the x86 intrinsics, each guarded: read again,
# they change nothing. Not <assert.h>/<cassert>: the standard has them re-read, and each reading defines assert
# by NDEBUG as it is then (an opening that defines NDEBUG after including it would get the other assert). A
# project's own header, even one named with <...>, need not be guarded either: a file's opening stops at it.
_C_LIBRARY = ("complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal stdalign stdarg "
              "stdatomic stdbool stddef stdint stdio stdlib string tgmath time uchar wchar wctype").split()
_STANDARD_HEADERS = frozenset(
    [f"{name}.h" for name in _C_LIBRARY] + [f"c{name}" for name in _C_LIBRARY]
    + [f"{name}.h" for name in ("unistd pthread omp immintrin x86intrin emmintrin xmmintrin pmmintrin smmintrin "
                                "nmmintrin tmmintrin sys/time sys/types sys/stat").split()]
    + ("algorithm any array atomic bit bitset chrono complex deque exception functional initializer_list iomanip "
       "ios iosfwd iostream istream iterator limits list map memory mutex new numeric optional ostream queue random "
       "ratio set sstream stack stdexcept string string_view thread tuple type_traits typeinfo unordered_map "
       "unordered_set utility valarray variant vector").split())
# HIP's own headers (they come with hipcc and are guarded the same way): a HIP file's opening may include them
_HIP_HEADERS = frozenset(f"hip/{name}.h" for name in (
    "hip_runtime hip_runtime_api hip_fp16 hip_bf16 hip_bfloat16 hip_complex hip_cooperative_groups "
    "hip_vector_types math_functions device_functions").split())
# a line of a file's opening that only brings in standard headers and settles the macros they see
_PREAMBLE_DIRECTIVE = re.compile(
    r"\s*#\s*(?:include\s*<(?P<header>[^>\n]+)>|include\s*\"(?P<local>[^\"\n]+)\"|pragma\s+GCC\s+target\b.*|define\s+\w+.*|undef\s+\w+"
    r"|if(?:n?def)?\b.*|elif\b.*|else\b.*|endif\b.*)\s*$")
_CONDITIONAL_OPEN = re.compile(r"\s*#\s*if")
_CONDITIONAL_CLOSE = re.compile(r"\s*#\s*endif")
_LINE_MARKER = re.compile(r"\s*#\s*line\b")


class Opening(NamedTuple):
    """A file's opening (:func:`_opening`): its ``text`` as written, its ``directives`` — each line's code alone
    (comments, blank lines and ``#line`` markers dropped), with the conditional depth after it — and the
    ``headers`` it includes."""

    text: str
    directives: tuple[tuple[str, int], ...]
    headers: tuple[str, ...]

    def unit(self, through: int | None = None) -> str:
        """The directives (the first ``through`` of them) as a header's text: what a copy is built from, so files
        whose openings differ only in comments share one copy."""
        return "".join(f"{code}\n" for code, _ in self.directives[:through])


def leading_headers(text: str, allowed: frozenset[str] = _STANDARD_HEADERS) -> str | None:
    """The opening :func:`_opening` finds, as written, or None."""
    found = _opening(text, allowed)
    return found.text if found is not None else None


def _opening(text: str, allowed: frozenset[str] = _STANDARD_HEADERS,
             local: frozenset[str] = frozenset()) -> Opening | None:
    """The opening of a C/C++ file that only includes standard headers (``#include <...>`` of a name in
    ``allowed``, or ``#include "..."`` of one in ``local``: the portable tier's SIMT set) among comments, blank
    lines, ``#pragma GCC target``, ``#define``/``#undef`` and conditionals closed within it; None when it
    includes nothing. Every CPU translation starts with such a block (its prelude's
    headers: most of g++'s time on a small file). Parsed from a precompiled copy first, it is the file's own
    beginning read twice: the headers are guarded, the macros redefined identically — where the preprocessor
    confirms it (:func:`_read_twice_differs`) — so the program is the same. ``#line`` markers are passed over
    (they only name the file in messages) and left out."""
    kept: list[str] = []
    directives: list[tuple[str, int]] = []
    headers: list[str] = []
    cut = (0, 0, 0)  # lengths of kept, directives and headers at the last point outside every conditional
    depth = 0
    in_comment = False
    lines = text.splitlines()
    at = 0
    while at < len(lines):
        line = lines[at]
        at += 1
        block = _guarded_block(lines, at - 1) if depth == 0 and not in_comment else None
        if block is not None:  # a header's text in front, under its include guard: read twice, it is skipped
            end, block_headers = block
            kept += lines[at - 1 : end]
            directives += [(raw, 1) for raw in lines[at - 1 : end - 1]] + [(lines[end - 1], 0)]
            headers += block_headers
            cut = (len(kept), len(directives), len(headers))
            at = end
            continue
        code = line
        if in_comment:
            end = code.find("*/")
            if end < 0:
                kept.append(line)
                continue
            in_comment = False
            code = code[end + 2 :]
        code = re.sub(r"/\*.*?\*/", " ", code)
        if "/*" in code:
            in_comment = True
            code = code[: code.index("/*")]
        stripped = code.split("//", 1)[0].strip()
        if stripped.endswith("\\"):
            break  # a continued line: left to the file itself
        if _LINE_MARKER.match(stripped):
            continue
        directive = _PREAMBLE_DIRECTIVE.fullmatch(stripped) if stripped else None
        header = (directive["header"] or directive["local"]) if directive is not None else None
        if stripped and (directive is None or (header is not None and header.strip() not in (
                allowed if directive["header"] is not None else local))):
            break
        kept.append(line)
        if _CONDITIONAL_OPEN.match(stripped):
            depth += 1
        elif _CONDITIONAL_CLOSE.match(stripped):
            depth -= 1
        elif header is not None:
            headers.append(header.strip())
        if stripped:
            directives.append((stripped, depth))
        if depth == 0 and not in_comment:
            cut = (len(kept), len(directives), len(headers))
        if depth < 0:
            break
    if cut[2] == 0:
        return None
    return Opening("\n".join(kept[: cut[0]]) + "\n", tuple(directives[: cut[1]]), tuple(headers[: cut[2]]))


_GUARD_OPEN = re.compile(r"\s*#\s*ifndef\s+(\w+)\s*(?://.*)?")
_INCLUDE = re.compile(r"\s*#\s*include\s*<([^>\n]+)>")


def _guarded_block(lines: list[str], start: int) -> tuple[int, list[str]] | None:
    """Where the include-guarded block opening at ``lines[start]`` ends (``#ifndef G`` then ``#define G``, through
    its matching ``#endif``: a header's text put in front of a file, such as the verifier's copy-back recorder)
    and the standard headers it includes; None when no such block starts there."""
    guard = _GUARD_OPEN.fullmatch(lines[start])
    if guard is None:
        return None
    following = next((line for line in lines[start + 1 :] if line.strip()), "")
    if re.fullmatch(rf"\s*#\s*define\s+{guard[1]}\b.*", following) is None:
        return None
    depth = 0
    for index in range(start, len(lines)):
        if _CONDITIONAL_OPEN.match(lines[index]):
            depth += 1
        elif _CONDITIONAL_CLOSE.match(lines[index]):
            depth -= 1
            if depth == 0:
                included = [m[1].strip() for line in lines[start:index] if (m := _INCLUDE.match(line))]
                return index + 1, included
    return None


def precompiled_preamble(text: str, compiler: str, version: str, flags: Sequence[str],
                         source_folder: Path | None = None) -> list[str]:
    """``["-include", FILE]`` that makes a C/C++ compile of ``text`` with ``flags`` read its opening system
    headers (:func:`leading_headers`) from a precompiled copy, or ``[]`` (no such opening, pch off, or the
    copy cannot be built here). ``compiler``: the path or name run (gcc builds a C header, g++ a C++ one).
    A portable-tier file's opening includes its SIMT set (``#include "xpiler_simt/..."``): the copy is built
    from a set of its own and used only where the file's folder (``source_folder``, searched first for such an
    include) and the include folders hold that set's bytes or none of its files — then g++ knows the file's
    copies for the ones it already read (``#pragma once`` files are matched by their contents)."""
    if _disabled():
        return []
    opening = _opening(text, local=frozenset(simt_headers()))
    if opening is None:
        return []
    preamble, headers = opening.unit(), opening.headers
    portable = any(header in simt_headers() for header in headers)
    if portable and (source_folder is None or not all(
            holds_the_set_or_none(Path(place)) for place in {str(source_folder), *_include_folders(flags)})):
        return []
    headers = tuple(header for header in headers if header not in simt_headers())
    # A project's include folders and macros are left out of the copy's key and build, so one copy serves every
    # file (each sits in its own folder, passed with -I): a standard header is not looked for in them unless one
    # holds a file of that name (then no copy: the project's header is what the file means), and g++ itself
    # refuses a copy whose headers a -D macro would change, reading the plain text instead.
    folders = _include_folders(flags)
    if any((Path(folder) / header).exists() for folder in folders for header in headers):
        return []
    shaping = [f for f in _without_project_flags(header_flags(flags)) if f != "-c"]
    language = "c-header" if os.path.basename(compiler) in ("gcc", "cc") else "c++-header"
    key = stable_key("pch-preamble-v2", preamble, shaping, language, compiler, version,
                     simt_digest() if portable else "")
    folder = cache_root() / "pch" / key[:24]
    stub = folder / "xpiler_preamble.h"
    gch = folder / "xpiler_preamble.h.gch"
    plain = language.removesuffix("-header")
    if portable and not gch.is_file() and not (folder / "failed").exists():
        try:  # the set beside the stub, where its quoted includes are found
            for name, text in simt_headers().items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                atomic_write(folder / name, text.encode("utf-8"))
        except OSError:
            return []
    built = build_once(gch, preamble, lambda partial: [compiler, *shaping, "-x", language, str(stub), "-o",
                                                       str(partial)], stub, PCH_TIMEOUT_S, PCH_MEMORY_BYTES,
                       refusal=lambda: _read_twice_differs(preamble, folder,
                                                           lambda file: [compiler, *shaping, "-x", plain, str(file)]))
    return ["-include", str(stub)] if built and not _shadowed(folder, folders) else []


def precompiled_offload_preamble(text: str, compiler: str, version: str, flags: Sequence[str]) -> list[str]:
    """The flags that make a hipcc (clang) compile of ``text`` with ``flags`` read its opening standard and HIP
    headers from precompiled copies — one for the device side, one for the host side, each named to its side with
    ``-Xarch_device``/``-Xarch_host`` — or ``[]``. Parsing ``hip_runtime.h`` twice (once per side) was most of
    a HIP compile check (4.7 of 5.2 s on a vector add; 1.5 s with the copies, the same object file).
    Unlike g++, clang uses a copy whatever macros or optimization level the compile has, so every flag but the
    include folders is part of the copy's key and build; the copies are built without timestamps
    (``-fno-pch-timestamp``), so a rewrite of the stub by a parallel builder does not invalidate them."""
    if _disabled():
        return []
    opening = _opening(text, _STANDARD_HEADERS | _HIP_HEADERS)
    if opening is None:
        return []
    # the copy holds the opening through its first HIP header (outside conditionals): hip_runtime.h is nearly all
    # of the time, and the rest of an opening varies from file to file (each variant would be a copy to build)
    through = next((i + 1 for i, (code, depth) in enumerate(opening.directives)
                    if depth == 0 and (found := _PREAMBLE_DIRECTIVE.fullmatch(code)) is not None
                    and (found["header"] or "").strip() in _HIP_HEADERS), None)
    preamble, headers = opening.unit(through), opening.headers
    folders = _include_folders(flags)
    if any((Path(folder) / header).exists() for folder in folders for header in headers):
        return []
    shaping = [f for f in _without(header_flags(flags), (*_FOLDER_OPTIONS, "-o")) if f != "-c"]
    out: list[str] = []
    for side, extra in (("device", ["--cuda-device-only", "-emit-llvm"]), ("host", ["--cuda-host-only"])):
        key = stable_key("pch-offload-v2", preamble, shaping, side, compiler, version)
        folder = cache_root() / "pch" / key[:24]
        stub = folder / "xpiler_preamble.h"

        def command(partial: Path, extra: list[str] = extra, stub: Path = stub) -> list[str]:
            return [compiler, *shaping, *extra, "-x", "hip", "-c", str(stub), "-Xclang", "-emit-pch", "-Xclang",
                    "-fno-pch-timestamp", "-o", str(partial)]

        def preprocess(file: Path, only: str = extra[0]) -> list[str]:
            return [compiler, *shaping, only, "-x", "hip", str(file)]

        def refusal(folder: Path = folder, preprocess: Callable[[Path], list[str]] = preprocess) -> str | None:
            return _read_twice_differs(preamble, folder, preprocess, {"HIP_PLATFORM": "amd"})

        if not build_once(folder / "xpiler_preamble.h.pch", preamble, command, stub, PCH_TIMEOUT_S, PCH_MEMORY_BYTES,
                          {"HIP_PLATFORM": "amd"}, refusal) or _shadowed(folder, folders):
            return []
        out += [f"-Xarch_{side}", f"-include{stub}"]  # clang reads FILE.pch for -include FILE when it is there
    return out


_PRAGMA_TARGET = re.compile(r"\s*#\s*pragma\s+GCC\s+target\b")


def _read_twice_differs(preamble: str, folder: Path, preprocess: Callable[[Path], list[str]],
                        env: dict[str, str] | None = None) -> str | None:
    """Why the opening cannot be read twice without changing the program (the preprocessor's verdict), or None.
    A conditional that tests a macro the opening defines later takes another branch the second time
    (``#if W > 4`` before ``#define W 8``), so the declarations (``-E``) and the final macros (``-dM``) of the
    opening read twice must equal those of one reading; the opening's own ``#pragma GCC target`` lines, which
    set the same target again, are compared as a set. The same run lists every header the opening reads
    (``-H``), kept beside the copy for :func:`_shadowed`."""
    outputs: dict[str, list[str]] = {}
    for name, text in (("once", preamble), ("twice", preamble + preamble)):
        file = folder / f"xpiler_{name}.h"
        atomic_write(file, text.encode())
        for mode in ("-P", "-dM"):
            listing = ["-H"] if (name, mode) == ("once", "-P") else []  # every header read, for _shadowed
            try:
                proc = children.run([*preprocess(file), "-E", mode, *listing], capture_output=True, text=True,
                                    errors="replace",
                                    timeout=PCH_TIMEOUT_S, cwd=folder, memory_bytes=PCH_MEMORY_BYTES,
                                    env=dict(os.environ, LC_ALL="C", **(env or {})))
            except (OSError, subprocess.TimeoutExpired) as error:
                return f"the preprocessor did not run: {error}"
            if proc.returncode != 0:
                return proc.stderr or "the preprocessor failed"
            if listing:
                read = sorted({m[1] for line in proc.stderr.splitlines() if (m := _HEADER_READ.match(line))})
                atomic_write(folder / HEADERS_READ, "".join(f"{path}\n" for path in read).encode())
            lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
            pragmas = sorted({line for line in lines if _PRAGMA_TARGET.match(line)})
            rest = [line for line in lines if not _PRAGMA_TARGET.match(line)]
            outputs[name + mode] = pragmas + (sorted(rest) if mode == "-dM" else rest)
    for mode in ("-P", "-dM"):
        if outputs["once" + mode] != outputs["twice" + mode]:
            return f"the opening read twice is not the same program (preprocessor {mode})"
    return None


_FOLDER_OPTIONS = ("-I", "-isystem", "-idirafter")
_MACRO_OPTIONS = ("-D", "-U")
HEADERS_READ = "xpiler_headers_read.txt"
_HEADER_READ = re.compile(r"^\.+ (\S.*)$")  # a line of -H: dots for the depth, then the header's path


def _shadowed(copy_folder: Path, include_folders: Sequence[str]) -> bool:
    """Whether a project folder searched for ``<...>`` holds a file at the name under which any header the copy
    read could be included (each tail of its path: ``bits/types.h``, ``types.h``) with other bytes than that
    header's: the plain compile would read the project's file there — also for a header that a standard one
    includes — so the copy is not the program. Over-cautious by design (a tail that was not the include name
    also counts). No record: shadowed."""
    if not include_folders:
        return False
    tails = _tails_read(copy_folder)
    if tails is None:
        return True
    for folder in include_folders:
        try:
            top = set(os.listdir(folder))
        except OSError:
            continue
        for tail, read in tails.items():
            there = Path(folder) / tail
            if tail.split("/", 1)[0] in top and there.exists() and not any(_same_bytes(there, p) for p in read):
                return True
    return False


def _same_bytes(one: Path, other: str) -> bool:
    try:
        return one.read_bytes() == Path(other).read_bytes()
    except OSError:
        return False


@functools.lru_cache(maxsize=64)
def _tails_read(copy_folder: Path) -> dict[str, tuple[str, ...]] | None:
    """Each tail of the path of each header a copy read (its list is written once, with the copy), with the
    paths it is a tail of, or None without a list."""
    try:
        paths = (copy_folder / HEADERS_READ).read_text().split("\n")
    except OSError:
        return None
    tails: dict[str, list[str]] = {}
    for path in paths:
        parts = Path(path).parts[1:]
        for i in range(len(parts)):
            tails.setdefault("/".join(parts[i:]), []).append(path)
    return {tail: tuple(read) for tail, read in tails.items()}


def _include_folders(flags: Sequence[str]) -> list[str]:
    """The folders ``flags`` search for ``<...>`` headers (``-I``, ``-isystem``, ``-idirafter``; joined or apart)."""
    out: list[str] = []
    for i, flag in enumerate(flags):
        for option in _FOLDER_OPTIONS:
            if flag == option and i + 1 < len(flags):
                out.append(flags[i + 1])
            elif flag.startswith(option) and len(flag) > len(option):
                out.append(flag[len(option):])
    return out


def _without_project_flags(flags: Sequence[str]) -> list[str]:
    """``flags`` without include folders and macro definitions."""
    return _without(flags, (*_FOLDER_OPTIONS, *_MACRO_OPTIONS))


def include_line(header: str) -> str:
    """The line that includes ``header`` (a path or a name on the include path)."""
    return f'#include "{header}"\n' if os.path.isabs(header) else f"#include <{header}>\n"


def build_once(target: Path, unit_text: str, command: Callable[[Path], list[str]], unit: Path, timeout: float,
               memory_bytes: int, env: dict[str, str] | None = None,
               refusal: Callable[[], str | None] | None = None) -> bool:
    """Whether ``target`` (a file under the cache) exists, built now when it does not: ``unit_text`` written to
    ``unit`` and ``command(partial)`` run to a fresh name renamed into place, so parallel workers race safely;
    a failure — or the reason ``refusal`` gives, asked first — is remembered beside it (``failed``) and not tried
    again."""
    folder = target.parent
    failed = folder / "failed"
    if target.is_file():
        return True
    if failed.exists():
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        reason = refusal() if refusal is not None else None
        if reason is not None:
            atomic_write(failed, reason.encode())
            return False
        atomic_write(unit, unit_text.encode())
        partial = folder / f".{secrets.token_hex(6)}{target.suffix}"
        proc = children.run(command(partial), capture_output=True, text=True, errors="replace", timeout=timeout,
                            cwd=folder, memory_bytes=memory_bytes, env=dict(os.environ, LC_ALL="C", **(env or {})))
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
