"""Real compilers judge compile success: nvcc (CUDA), hipcc (HIP), gcc/g++ (C/C++).

``compile_check`` compiles (no linking) in a temp dir with a time and memory limit, caches the verdict in
the ``compile`` diskcache keyed by source hash + toolchain version + flags + the project's headers, and maps the compiler's
messages to :class:`Diagnostic` objects at the user's line and column.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from xpiler_core import __version__
from xpiler_core.cache import caching_disabled, get_cache, stable_key
from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.project import BuildSettings
from xpiler_core.runtime import children
from xpiler_core.runtime.pch import precompiled_offload_preamble, precompiled_preamble

COMPILE_TIMEOUT_S = 300.0
COMPILE_MEMORY_BYTES = 8 * 1024**3


@dataclass(frozen=True)
class Toolchain:
    name: str  # "nvcc" | "hipcc" | "gcc" | "g++"
    path: str
    version: str


@dataclass
class CompileVerdict:
    ok: bool
    toolchain: str
    version: str
    command: list[str]
    stderr: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False


_VERSION_PATTERNS = {
    "nvcc": re.compile(r"release ([\d.]+)"),
    "hipcc": re.compile(r"HIP version: ([\w.\-]+)"),
    "gcc": re.compile(r"\(.*?\) ([\d.]+)"),
    "g++": re.compile(r"\(.*?\) ([\d.]+)"),
}


@cache
def _probe(name: str) -> Toolchain | None:
    path = shutil.which(name)
    if path is None:
        return None
    env = dict(os.environ, HIP_PLATFORM="amd") if name == "hipcc" else None
    try:
        proc = children.run([path, "--version"], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout + proc.stderr
    m = _VERSION_PATTERNS[name].search(text)
    version = m.group(1) if m else (text.strip().splitlines() or ["unknown"])[0]
    return Toolchain(name, path, version)


def forget_toolchains() -> None:
    """Look the compilers up again (after PATH changed: the editor's toolchain settings)."""
    _probe.cache_clear()


def detect_toolchains() -> dict[str, Toolchain]:
    """The installed compilers among nvcc, hipcc, gcc, g++, with versions."""
    found = {}
    for name in ("nvcc", "hipcc", "gcc", "g++"):
        tc = _probe(name)
        if tc is not None:
            found[name] = tc
    return found


_CPLUSPLUS = re.compile(
    r'extern\s+"C"|\btemplate\s*<|::|\bnamespace\b|\bclass\s+\w+\s*[:{]|#\s*include\s*[<"][\w/]*\b[a-z_]+[>"]'
    r'|#\s*include\s*"xpiler_simt/')  # the portable tier's SIMT headers are C++


def is_cplusplus(cpu_text: str) -> bool:
    """Whether a CPU file is C++ (a scope operator, a template, a namespace, a class, ``extern "C"``, an
    extension-less standard header such as ``<cstdio>``, the portable tier's headers): the one test every build of CPU output uses."""
    return bool(_CPLUSPLUS.search(cpu_text))


def default_toolchain(dialect: Dialect, cplusplus: bool = False) -> str:
    return {Dialect.CUDA: "nvcc", Dialect.HIP: "hipcc"}.get(dialect, "g++" if cplusplus else "gcc")


def _command(
    toolchain: str, path: str, src: str, obj: str, flags: tuple[str, ...]
) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, LC_ALL="C")
    if toolchain == "nvcc":
        return [path, "-arch=sm_80", "-std=c++17", "-c", src, "-o", obj, *flags], env
    if toolchain == "hipcc":
        env["HIP_PLATFORM"] = "amd"
        return [path, "--offload-arch=gfx90a", "-std=c++17", "-c", src, "-o", obj, *flags], env
    if toolchain == "g++":
        return [path, "-O2", "-fopenmp", "-std=c++17", "-c", src, "-o", obj, *flags], env
    return [path, "-O2", "-fopenmp", "-c", src, "-o", obj, *flags], env


_GCC_DIAG = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<sev>fatal error|error|warning|note):\s*(?P<msg>.*)$"
)
_NVCC_DIAG = re.compile(
    r"^(?P<file>[^(\n]+)\((?P<line>\d+)\):\s*(?P<sev>error|warning|remark)[^:]*:\s*(?P<msg>.*)$"
)


def parse_diagnostics(stderr: str, source_name: str, display_name: str) -> list[Diagnostic]:
    """Compiler messages about the source file, as diagnostics at 0-based (line, column)."""
    out: list[Diagnostic] = []
    for line in stderr.splitlines():
        m = _GCC_DIAG.match(line) or _NVCC_DIAG.match(line)
        if m is None:
            continue
        file = m.group("file").strip()
        if os.path.basename(file) not in (os.path.basename(source_name), display_name):
            continue
        sev_word = m.group("sev")
        severity = (
            Severity.ERROR
            if "error" in sev_word
            else Severity.WARNING
            if sev_word == "warning"
            else Severity.INFO
        )
        ln = max(int(m.group("line")) - 1, 0)
        col = max(int(m.groupdict().get("col") or 1) - 1, 0)
        out.append(
            Diagnostic(
                severity,
                f"compile.{sev_word.replace(' ', '-')}",
                m.group("msg").strip(),
                Span(0, 0, ln, col, ln, col),
                display_name,
                source="compiler",
            )
        )
    return out




def _shown(stderr: str, neutral: str, display: str) -> str:
    """Compiler output with the compiled file called by the name the user knows (the output file)."""
    return stderr if neutral == display else re.sub(rf"(?<![\w/.]){re.escape(neutral)}(?=[:(])", display, stderr)


def _run_compiler(cmd: list[str], env: dict[str, str], tmp: str, src: str, suffix: str, name: str) -> tuple[bool, str]:
    """Whether ``cmd`` compiled, and its messages with the neutral file name (a cached verdict is shown under
    whatever name the caller gives)."""
    try:
        proc = children.run(cmd, capture_output=True, text=True, errors="replace", timeout=COMPILE_TIMEOUT_S,
                            cwd=tmp, env=env, memory_bytes=COMPILE_MEMORY_BYTES)
    except subprocess.TimeoutExpired:
        return False, f"input{suffix}:1:1: error: {name} timed out after {COMPILE_TIMEOUT_S:.0f} s"
    return proc.returncode == 0, (proc.stderr + proc.stdout).replace(src, "input" + suffix).replace(tmp + "/", "")


def compile_check(
    text: str,
    dialect: Dialect,
    toolchain: str | None = None,
    flags: tuple[str, ...] = (),
    display_name: str | None = None,
    build: BuildSettings | None = None,
) -> CompileVerdict:
    """Compile ``text`` with the dialect's real compiler (or ``toolchain``); the verdict is cached by the
    text, the flags, the toolchain's version, the project's flags and files and every local header read."""
    name = toolchain or default_toolchain(dialect)
    suffix = {"nvcc": ".cu", "hipcc": ".hip", "g++": ".cpp", "gcc": ".c"}.get(name, dialect.suffix)
    display = display_name or f"input{suffix}"
    tc = _probe(name)
    if tc is None:
        return CompileVerdict(
            False,
            name,
            "not installed",
            [],
            f"{name} is not installed",
            [
                Diagnostic(
                    Severity.ERROR, "compile.no-toolchain", f"{name} is not installed", Span.empty(), display
                )
            ],
        )
    all_flags = (*flags, *(build.flags if build is not None else ()))
    key = stable_key("compile_check", __version__, text, name, tc.version, list(all_flags),
                     build.key() if build is not None else [])
    cache = get_cache("compile")
    if not caching_disabled():
        hit = cache.get(key)
        if isinstance(hit, dict):
            return CompileVerdict(
                hit["ok"],
                name,
                tc.version,
                hit["command"],
                _shown(hit["stderr"], "input" + suffix, display),
                parse_diagnostics(hit["stderr"], "input" + suffix, display),
                hit["seconds"],
                True,
            )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="xpiler-cc-") as tmp:
        src = os.path.join(tmp, "input" + suffix)
        obj = os.path.join(tmp, "input.o")
        unit_text = build.with_units(text) if build is not None else text
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(unit_text)
        if build is not None:
            build.write_files(Path(tmp))
        cmd, env = _command(name, tc.path, src, obj, all_flags)
        shown_cmd = [c.replace(tmp + "/", "") for c in cmd]
        # the file's opening standard (and HIP) headers read from a precompiled copy
        at = cmd.index(src)
        shaping = [*cmd[1:at], *all_flags]
        preamble = (precompiled_preamble(unit_text, tc.path, tc.version, shaping, Path(tmp)) if name in ("g++", "gcc")
                    else precompiled_offload_preamble(unit_text, tc.path, tc.version, shaping)
                    if name == "hipcc" else [])
        ok, stderr = _run_compiler([*cmd[:at], *preamble, *cmd[at:]], env, tmp, src, suffix, name)
        if not ok and name == "hipcc" and preamble:
            # clang has no fallback of its own for a copy it cannot use: a failure is confirmed on the plain text,
            # so a verdict of "does not compile" is always the compiler's on the file as written
            ok, stderr = _run_compiler(cmd, env, tmp, src, suffix, name)
    seconds = time.monotonic() - started
    cache.set(key, {"ok": ok, "command": shown_cmd, "stderr": stderr, "seconds": seconds})
    return CompileVerdict(
        ok,
        name,
        tc.version,
        shown_cmd,
        _shown(stderr, "input" + suffix, display),
        parse_diagnostics(stderr, "input" + suffix, display),
        seconds,
        False,
    )
