"""Build CUDA/HIP/C source into a CPU shared library (cached).

CUDA and HIP go through :func:`rewrite_for_cpu` and g++ -O2 -std=c++17 against ``runtime/include``; C goes
through gcc -O2 -fopenmp unchanged (built again with -march=native when GCC says the x86 intrinsics it calls
need instruction sets the default build lacks; such builds are cached per CPU). The shared object is cached in the ``runtime-build``
diskcache under a key of source hash, header hash, flags and compiler version, and copied into the caller's
directory.

A tuning candidate may carry its own optimization flags for C builds (``extra_flags``, or
:func:`candidate_flags` around code that builds it indirectly, such as the test harness), so the build that
is verified and the build that is timed are the same; without them the default build is unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from xpiler_core import __version__
from xpiler_core.cache import caching_disabled, get_cache, stable_key
from xpiler_core.dialect import Dialect
from xpiler_core.project import BuildSettings
from xpiler_core.runtime import children
from xpiler_core.runtime.engine_lib import EXTERN_FLAG, engine_library, link_flags, place_engine
from xpiler_core.runtime.pch import precompiled_preamble, with_precompiled
from xpiler_core.runtime.rewrite import rewrite_for_cpu

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
COMPILE_TIMEOUT_S = 180.0
COMPILE_MEMORY_BYTES = 4 * 1024**3
# Optimization flags a tuning candidate was chosen with; appended to C builds made while they are set.
# GCC's messages for x86 intrinsics whose instruction set the build does not enable
ISA_REQUIRED = re.compile(r"needs isa option|target specific option mismatch|inlining failed in call to "
                          r"'always_inline' '\w*(_mm\w*|__builtin_ia32\w*)")


@lru_cache(maxsize=1)
def host_cpu_flags() -> str:
    """The instruction-set flags of this CPU (a build for the machine is cached per machine)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return hashlib.sha256(line.encode()).hexdigest()
    except OSError:
        pass
    return ""


_CANDIDATE_FLAGS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("candidate_flags", default=())


@contextlib.contextmanager
def candidate_flags(flags: tuple[str, ...]) -> Iterator[None]:
    """C builds made inside this block (in this thread) get ``flags`` after the default ones."""
    token = _CANDIDATE_FLAGS.set(tuple(flags))
    try:
        yield
    finally:
        _CANDIDATE_FLAGS.reset(token)


@dataclass
class BuildResult:
    ok: bool
    library: Path | None
    log: str
    command: list[str]
    cached: bool
    seconds: float


@lru_cache(maxsize=8)
def compiler_version(compiler: str) -> str:
    try:
        out = children.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    return out.stdout.splitlines()[0] if out.stdout else "unknown"


def header_hash() -> str:
    """Hash of every runtime header (a header edit invalidates every cached build). The texts are read again
    only when a header's size or modification time changed."""
    stamps = tuple((str(p.relative_to(INCLUDE_DIR)), st.st_size, st.st_mtime_ns)
                   for p in sorted(INCLUDE_DIR.rglob("*")) if p.is_file() and (st := p.stat()))
    return _header_hash(stamps)


@lru_cache(maxsize=4)
def _header_hash(stamps: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for name, _, _ in stamps:
        h.update(name.encode())
        h.update((INCLUDE_DIR / name).read_bytes())
    return h.hexdigest()




def prepare_source(text: str, dialect: Dialect, display_name: str, extra: str = "") -> str:
    """The translation unit g++ sees: ``#line`` pragma, rewritten source, then generated glue."""
    body = rewrite_for_cpu(text, dialect).text if dialect in (Dialect.CUDA, Dialect.HIP) else text
    return f'#line 1 "{display_name}"\n{body}\n#line 1 "<xpiler-glue>"\n{extra}\n'


def build_flags(dialect: Dialect, warp_size: int, fibers: str = "fcontext") -> list[str]:
    # CUDA code type-puns through reinterpret_cast (a float4 read as four half2): nvcc keeps such code right,
    # GCC's type-based aliasing at -O2 does not, so neither the runtime nor CPU output builds assume it
    if dialect is Dialect.C:
        return ["-O2", "-fno-strict-aliasing", "-fopenmp", "-fPIC", "-shared", "-lm"]
    # -fstack-clash-protection probes every page of a large frame, so locals bigger than a fiber stack hit
    # the guard page (a reported stack overflow) instead of landing silently on a neighbouring stack.
    flags = [
        "-O2",
        "-fno-strict-aliasing",
        "-std=c++17",
        "-fPIC",
        "-shared",
        "-pthread",
        "-fstack-clash-protection",
        f"-I{INCLUDE_DIR}",
        f"-DXPILER_WARP_SIZE={warp_size}",
        "-w",
    ]
    if dialect is Dialect.HIP:
        flags += [
            "-DXPILER_DIALECT_HIP=1",
            "-D__HIPCC__",
            "-D__HIP_PLATFORM_AMD__",
            "-include",
            "hip/hip_runtime.h",
        ]
    else:
        flags += ["-D__CUDACC__", "-include", "cuda_runtime.h"]
    if fibers == "ucontext":
        flags.append("-DXPILER_UCONTEXT")
    return flags


def build_library(
    text: str,
    dialect: Dialect,
    out_dir: Path,
    *,
    warp_size: int = 32,
    display_name: str = "kernel.cu",
    extra: str = "",
    fibers: str = "fcontext",
    cplusplus_c: bool = False,
    extra_flags: tuple[str, ...] = (),
    build: BuildSettings | None = None,
    executable: bool = False,
) -> BuildResult:
    """Compile to ``out_dir/lib<hash>.so`` (an executable ``out_dir/prog<hash>`` for a whole program with
    ``main``); failures come back as a log, never as an exception.

    ``extra_flags`` (and those of an enclosing :func:`candidate_flags`) apply to C builds only. The
    project's files in ``build`` (headers beside the source) are written next to it, rewritten for the
    runtime like the source when they are CUDA/HIP."""
    started = time.monotonic()
    is_c = dialect is Dialect.C
    compiler = ("g++" if cplusplus_c else "gcc") if is_c else "g++"
    # a whole program's C units are compiled as C on their own and linked
    c_units = build.c_units if build is not None and executable else ()
    source = prepare_source(build.with_units(text, separate_c=bool(c_units)) if build is not None else text, dialect,
                            display_name, extra)
    flags = build_flags(dialect, warp_size, fibers)
    if executable:
        flags = [f for f in flags if f not in ("-fPIC", "-shared")]
    libs = [] if is_c else ["-lboost_context"] if fibers == "fcontext" else []
    engine = None if is_c else engine_library(flags, libs, header_hash(), compiler, compiler_version(compiler))
    if engine is not None:
        flags.append(EXTERN_FLAG)
    runtime_only = list(flags)  # what a precompiled runtime header is built with
    # the source is compiled this deep in out_dir, so that a project header it reaches by a path leaving its
    # folder (`#include "../../shared/util.h"`) is found at that path among the rewritten files too
    source_dir = out_dir
    for level in range(build.depth_above() if build is not None else 0):
        source_dir = source_dir / f"xp_level{level}"
    if executable:
        if not is_c:
            flags.append(f"-I{source_dir.resolve()}")  # rewritten project headers shadow the originals
    if is_c:
        flags += [f for f in (*_CANDIDATE_FLAGS.get(), *extra_flags) if f not in flags]
    if build is not None:  # the project's include dirs and macros, after the runtime's own headers
        flags += [f for f in build.runtime_flags() if f not in flags]
    key = stable_key(
        "runtime-build-v2",
        __version__,
        source,
        "" if is_c else header_hash(),
        flags,
        libs,
        compiler,
        compiler_version(compiler),
        build.key() if build is not None else [],
        executable,
        host_cpu_flags() if "-march=native" in flags else "",
        engine.name if engine is not None else "",
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    if engine is not None:  # the engine beside the program, which finds it there (cache hits included)
        libs = [*link_flags(place_engine(engine, out_dir)), *libs]
    library = out_dir / (f"prog{key[:16]}" if executable else f"lib{key[:16]}.so")
    cache = get_cache("runtime-build")

    def needs_isa(log: str) -> bool:
        return is_c and "-march=native" not in flags and ISA_REQUIRED.search(log) is not None

    def for_this_machine() -> BuildResult:
        """C written with x86 intrinsics needs their instruction sets: built again for this machine."""
        return build_library(text, dialect, out_dir, warp_size=warp_size, display_name=display_name, extra=extra,
                             fibers=fibers, cplusplus_c=cplusplus_c, extra_flags=(*extra_flags, "-march=native"),
                             build=build, executable=executable)

    suffix = (".cpp" if cplusplus_c else ".c") if is_c else ".cpp"
    src_path = source_dir / f"src{key[:16]}{suffix}"
    command = [compiler, *flags, str(src_path), "-o", str(library), *libs]
    if not is_c:  # the runtime's headers precompiled (same program; only the parse is saved)
        command = [compiler, *with_precompiled(flags, runtime_only, header_hash(), compiler,
                                               compiler_version(compiler)), str(src_path), "-o", str(library), *libs]
    if not caching_disabled():
        hit = cache.get(key)
        if isinstance(hit, dict):
            if hit.get("ok"):
                library.write_bytes(hit["library"])
                if executable:
                    library.chmod(0o755)
                return BuildResult(
                    True, library, hit.get("log", ""), command, True, time.monotonic() - started
                )
            failed = str(hit.get("log", ""))
            if not needs_isa(failed):
                return BuildResult(False, None, failed, command, True, time.monotonic() - started)
            return for_this_machine()
    source_dir.mkdir(parents=True, exist_ok=True)
    src_path.write_text(source, encoding="utf-8")
    if build is not None:
        build.write_files(source_dir, None if is_c else (lambda t: rewrite_for_cpu(t, dialect).text), within=out_dir)
    if c_units:
        objects, failure = _compile_c_units(c_units, source_dir, build.runtime_flags() if build is not None else [])
        if failure:
            cache.set(key, {"ok": False, "log": failure})
            return BuildResult(False, None, failure, command, False, time.monotonic() - started)
        command = [compiler, *flags, str(src_path), *objects, "-o", str(library), *libs]
    elif is_c:  # the file's opening standard headers read from a precompiled copy (same program, parsed once)
        command = [compiler, *flags, *precompiled_preamble(source, compiler, compiler_version(compiler), flags,
                                                                src_path.parent),
                   str(src_path), "-o", str(library), *libs]
    try:
        proc = children.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=COMPILE_TIMEOUT_S,
            cwd=out_dir,
            memory_bytes=COMPILE_MEMORY_BYTES,
            env=dict(os.environ, LC_ALL="C"),  # ASCII quotes in messages
        )
        ok = proc.returncode == 0 and library.exists()
        log = (proc.stderr + proc.stdout).replace(str(src_path), display_name)
    except subprocess.TimeoutExpired:
        ok, log = False, f"{display_name}:1:1: error: compilation timed out after {COMPILE_TIMEOUT_S:.0f} s"
    except OSError as exc:
        ok, log = False, f"{display_name}:1:1: error: cannot run {compiler}: {exc.strerror}"
    entry: dict[str, object] = {"ok": ok, "log": log}
    if ok:
        entry["library"] = library.read_bytes()
    cache.set(key, entry)
    if not ok and needs_isa(log):
        return for_this_machine()
    return BuildResult(ok, library if ok else None, log, command, False, time.monotonic() - started)


def _compile_c_units(units: tuple[str, ...], folder: Path, project_flags: list[str]) -> tuple[list[str], str]:
    """Each C unit (written in ``folder``) compiled with gcc to an object: (objects, "" or the build log)."""
    objects: list[str] = []
    for unit in units:
        obj = folder / f"{Path(unit).name}.o"
        command = ["gcc", "-O2", "-fno-strict-aliasing", "-w", *project_flags, "-c", str(folder / unit), "-o", str(obj)]
        try:
            proc = children.run(command, capture_output=True, text=True, errors="replace", timeout=COMPILE_TIMEOUT_S,
                                cwd=folder, memory_bytes=COMPILE_MEMORY_BYTES)
        except subprocess.TimeoutExpired:
            return [], f"{unit}:1:1: error: compilation timed out after {COMPILE_TIMEOUT_S:.0f} s"
        if proc.returncode != 0:
            return [], proc.stderr + proc.stdout
        objects.append(str(obj))
    return objects, ""


def copy_library(result: BuildResult, dest: Path) -> Path:
    """Copy a built library somewhere else (e.g. a per-run temp dir)."""
    assert result.library is not None
    shutil.copy2(result.library, dest)
    return dest


def default_threads() -> int:
    return os.cpu_count() or 1
