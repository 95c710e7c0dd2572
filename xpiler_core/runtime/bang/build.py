"""Build BANG C sources against the CPU model of the MLU (``include/xpiler_bang.h``) with g++.

Nothing in the source is masked: g++ sees the header's macros for ``__mlu_global__``, ``__nram__`` and
the rest. The only source change is the launch rewrite ``K<<<dim, type, queue>>>(args)`` →
``::xpiler::launch(K, dim, type, queue)(args)`` (the runtime's rewrite when it exists, else a local one),
plus a ``#line`` directive so compiler and model messages name the user's file and lines.

After linking, the on-chip variables (linker sections ``xpiler_nram`` …) are read back from the symbol
table and their sizes checked against the selected MLU generation (``runtime/bang/generations.json``); an
over-capacity kernel is a build error located at the declaration of its largest buffer.

The compiler runs in a child process with time and memory limits; built artefacts are cached under
the xpiler cache root, keyed on everything that affects them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from xpiler_core.cache import cache_root, caching_disabled, stable_key
from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.runtime import children
from xpiler_core.runtime.build import header_hash
from xpiler_core.runtime.pch import with_precompiled
from xpiler_core.tables import c_library_functions

INCLUDE_DIR = Path(__file__).resolve().parents[1] / "include"
HEADER = INCLUDE_DIR / "xpiler_bang.h"
GENERATIONS_FILE = Path(__file__).resolve().parent / "generations.json"
SPACES = ("nram", "wram", "sram", "ldram")
COMPILE_TIMEOUT_S = 180
COMPILE_MEMORY_BYTES = 4 << 30


@dataclass(frozen=True)
class Generation:
    """One MLU generation's on-chip capacities (KiB) and alignment regime."""

    name: str
    arch: int
    nram_kib: int
    wram_kib: int
    sram_kib: int
    ldram_kib: int
    cores_per_cluster: int
    strict_alignment: bool

    def capacity_bytes(self, space: str) -> int:
        return int(getattr(self, f"{space}_kib")) * 1024

    def defines(self) -> list[str]:
        return [
            f"-D__BANG_ARCH__={self.arch}",
            f"-D__MLU_NRAM_SIZE__={self.nram_kib}",
            f"-D__MLU_WRAM_SIZE__={self.wram_kib}",
            f"-D__MLU_SRAM_SIZE__={self.sram_kib}",
            f"-DXPILER_BANG_LDRAM_KIB={self.ldram_kib}",
            f"-DXPILER_BANG_CORES_PER_CLUSTER={self.cores_per_cluster}",
            f"-DXPILER_BANG_STRICT_ALIGN={1 if self.strict_alignment else 0}",
        ]


@lru_cache(maxsize=1)
def _generation_table() -> tuple[str, dict[str, Generation]]:
    data = json.loads(GENERATIONS_FILE.read_text(encoding="utf-8"))
    table = {name: Generation(name=name, **row) for name, row in data["generations"].items()}
    return str(data["default"]), table


def generations() -> dict[str, Generation]:
    """All known generations by name (``MLU270``, ``MLU290``, ``MLU370``, ``MLU590``)."""
    return dict(_generation_table()[1])


def get_generation(name: str | None = None) -> Generation:
    """The named generation (case-insensitive), or the table's default when ``name`` is None."""
    default, table = _generation_table()
    key = (name or default).upper()
    if key not in table:
        raise ValueError(f"unknown MLU generation {name!r}; known: {', '.join(sorted(table))}")
    return table[key]


# ----- launch rewrite -------------------------------------------------------------------------------
_CALLEE_BEFORE = re.compile(r"([A-Za-z_][\w:]*(?:\s*<[^<>;(){}]*>)?)\s*$")


def _local_rewrite_launches(text: str) -> str:
    """``K<<<a, b, c>>>(`` → ``::xpiler::launch(K, a, b, c)(``; keeps every newline in place."""
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("<<<", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        end = text.find(">>>", start + 3)
        callee = _CALLEE_BEFORE.search(text, max(pos, start - 400), start)
        if end < 0 or callee is None:
            out.append(text[pos : start + 3])
            pos = start + 3
            continue
        out.append(text[pos : callee.start(1)])
        config = text[start + 3 : end]
        out.append(f"::xpiler::launch({callee.group(1)}, {config})")
        pos = end + 3


def rewrite_launches(text: str) -> str:
    """The runtime's shared launch rewrite (``rewrite_for_cpu``) when it is available, else the local one.

    Both keep every newline in place, so line numbers survive.
    """
    try:
        from xpiler_core.dialect import Dialect
        from xpiler_core.runtime.rewrite import rewrite_for_cpu
    except ImportError:
        return _local_rewrite_launches(text)
    try:
        return rewrite_for_cpu(text, Dialect.BANG).text
    except Exception:  # a sibling module under construction must not break BANG builds
        return _local_rewrite_launches(text)


# The model's headers declare the C library's functions (tables/c_library.toml) with C linkage: a BANG kernel or
# device function of the same name declared ``extern "C"`` (``extern "C" __mlu_global__ void sin(float *, ...)``)
# compiles with cncc, whose device headers declare no such function, and collides with the host's declaration here
_C_LINKAGE_DEVICE_FUNCTION = re.compile(
    r'\bextern\s*"C"(?=\s*(?:__mlu_global__|__mlu_entry__|__mlu_func__|__mlu_device__)\b[^;{}()]*?\b(\w+)\s*\()'
)


def _own_linkage_for_library_names(text: str) -> tuple[str, dict[str, str]]:
    """``extern "C"`` blanked (same length, so lines and columns stay) on BANG functions named like a C library
    function, so that as C++ functions they overload the library's (on the device toolchain they do not meet
    it); with each such name, the text of its parameter list (a launch names its overload by it)."""
    params: dict[str, str] = {}
    out: list[str] = []
    pos = 0
    for m in _C_LINKAGE_DEVICE_FUNCTION.finditer(text):
        if m.group(1) not in c_library_functions():
            continue
        opening = text.index("(", m.end(1))
        depth, close = 0, opening
        for close in range(opening, len(text)):
            depth += {"(": 1, ")": -1}.get(text[close], 0)
            if depth == 0:
                break
        params[m.group(1)] = " ".join(text[opening + 1 : close].split())
        out += [text[pos : m.start()], re.sub(r"\S", " ", m.group(0))]
        pos = m.end()
    return "".join([*out, text[pos:]]), params


def prepare_source(text: str, path: str) -> str:
    """The text g++ compiles: launches rewritten, line numbers mapped back to ``path``."""
    escaped = path.replace("\\", "\\\\").replace('"', '\\"')
    text, overloaded = _own_linkage_for_library_names(text)
    text = rewrite_launches(text)
    for name, params in overloaded.items():  # the kernel, not the library's function of that name
        text = re.sub(rf"(::xpiler::launch\(\s*)({name})\b",
                      rf"\g<1>static_cast<void (*)({params.replace(chr(92), chr(92) * 2)})>(\g<2>)", text)
    return f'#line 1 "{escaped}"\n' + text


# ----- capacity check -------------------------------------------------------------------------------
@dataclass(frozen=True)
class OnChipSymbol:
    """One variable placed in an on-chip space by the model's qualifiers."""

    space: str  # "nram" | "wram" | "sram" | "ldram"
    name: str  # variable name (unqualified)
    function: str | None  # enclosing function (demangled, without parameters) or None at file scope
    size: int


@dataclass(frozen=True)
class CapacityViolation:
    space: str
    function: str | None
    used: int
    capacity: int
    generation: str
    symbols: tuple[OnChipSymbol, ...]
    diagnostic: Diagnostic


_OBJDUMP_LINE = re.compile(
    r"^[0-9a-fA-F]+\s+(?P<flags>.{7})\s+(?P<section>\S+)\s+(?P<size>[0-9a-fA-F]+)\s+(?:\.\w+\s+)?(?P<name>.+)$"
)
_ONCHIP_SECTION = re.compile(r"^xpiler_(nram|wram|sram|ldram)$")
_ONCHIP_DECL = re.compile(r"\b(__nram__|__wram__|__mlu_shared__|__ldram__)\b[^;=(){}]*?\b(\w+)\s*(?=[\[;=])")
_QUALIFIER_SPACE = {"__nram__": "nram", "__wram__": "wram", "__mlu_shared__": "sram", "__ldram__": "ldram"}


def _split_symbol(demangled: str) -> tuple[str | None, str]:
    """``f(float*, int)::buf`` → (``f``, ``buf``); ``ns::g`` → (None, ``ns::g``)."""
    marker = demangled.rfind(")::")
    if marker < 0:
        return None, demangled.strip()
    head, name = demangled[: marker + 1], demangled[marker + 3 :]
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        if head[i] == ")":
            depth += 1
        elif head[i] == "(":
            depth -= 1
            if depth == 0:
                return head[:i].strip(), name.strip()
    return head.strip(), name.strip()


def _object_symbols(binary: Path) -> list[tuple[str, OnChipSymbol]]:
    """(section, symbol) for every sized data object of a linked binary, from ``objdump -t -C``."""
    try:
        proc = children.run(["objdump", "-t", "-C", str(binary)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot read the symbol table of {binary}: {exc}") from None
    out: list[tuple[str, OnChipSymbol]] = []
    for line in proc.stdout.splitlines():
        m = _OBJDUMP_LINE.match(line.strip())
        if m is None or "O" not in m.group("flags"):
            continue
        size = int(m.group("size"), 16)
        if size == 0:
            continue
        function, name = _split_symbol(m.group("name"))
        section = m.group("section")
        space = _ONCHIP_SECTION.match(section)
        out.append((section, OnChipSymbol(space.group(1) if space else "", name, function, size)))
    return out


def read_onchip_symbols(binary: Path) -> list[OnChipSymbol]:
    """On-chip variables of a linked binary (objects in the ``xpiler_*`` sections)."""
    return [sym for _, sym in _object_symbols(binary) if sym.space]


def misplaced_onchip_declarations(binary: Path, source: str, path: str) -> list[Diagnostic]:
    """On-chip declarations g++ did not put on chip: function-local arrays in templates (GCC ignores
    section attributes there), which the model would otherwise treat as GDRAM."""
    declared = {m.group(2): m for m in _ONCHIP_DECL.finditer(source)}
    diags: list[Diagnostic] = []
    for section, sym in _object_symbols(binary):
        if sym.space or sym.function is None or sym.name not in declared:
            continue
        m = declared[sym.name]
        line = source.count("\n", 0, m.start())
        col = m.start() - (source.rfind("\n", 0, m.start()) + 1)
        message = (
            f"'{sym.name}' is declared {m.group(1)} inside '{sym.function}', but g++ placed it in {section}: "
            "on-chip arrays inside template functions are not supported by the BANG CPU model; declare the "
            "buffer in a non-template kernel or helper, or at file scope"
        )
        diags.append(Diagnostic(Severity.ERROR, "bang-onchip-template", message,
                                Span(m.start(), m.end(), line, col, line, col + len(m.group(0))), file=path))
    return diags


def _declaration_span(source: str, space: str, symbol: OnChipSymbol) -> Span:
    qualifier = {"nram": "__nram__", "wram": "__wram__", "sram": "__mlu_shared__", "ldram": "__ldram__"}[space]
    pattern = re.compile(rf"{qualifier}[^;{{}}]*?\b{re.escape(symbol.name.split('::')[-1])}\b")
    m = pattern.search(source)
    if m is None:
        return Span.empty()
    line = source.count("\n", 0, m.start())
    col = m.start() - (source.rfind("\n", 0, m.start()) + 1)
    end_line = source.count("\n", 0, m.end())
    end_col = m.end() - (source.rfind("\n", 0, m.end()) + 1)
    return Span(m.start(), m.end(), line, col, end_line, end_col)


def check_capacity(
    symbols: Sequence[OnChipSymbol], generation: Generation, source: str = "", path: str = "<input>"
) -> tuple[list[CapacityViolation], dict[str, dict[str, int]]]:
    """Per function: its own on-chip variables plus every file-scope one, against the capacity.

    Returns the violations and the usage table ``{function or "<file scope>": {space: bytes}}``.
    Buffers declared in helper functions count for the helper, not for the kernels calling it.
    """
    functions = sorted({s.function for s in symbols if s.function is not None})
    scopes: list[str | None] = list(functions) if functions else [None]
    usage: dict[str, dict[str, int]] = {}
    violations: list[CapacityViolation] = []
    for scope in scopes:
        label = scope if scope is not None else "<file scope>"
        usage[label] = {}
        for space in SPACES:
            members = tuple(s for s in symbols if s.space == space and (s.function is None or s.function == scope))
            used = sum(s.size for s in members)
            usage[label][space] = used
            capacity = generation.capacity_bytes(space)
            if used <= capacity:
                continue
            largest = max(members, key=lambda s: s.size)
            parts = ", ".join(f"{s.name} {s.size}" for s in sorted(members, key=lambda s: -s.size)[:6])
            where = f"kernel/function '{scope}'" if scope is not None else "file scope"
            message = (
                f"{space.upper()} capacity exceeded in {where}: {used} bytes declared ({parts}) > "
                f"{capacity} bytes ({capacity // 1024} KiB) of {generation.name} {space.upper()}"
            )
            diag = Diagnostic(
                Severity.ERROR,
                f"bang-{space}-capacity",
                message,
                _declaration_span(source, space, largest),
                file=path,
                data={"space": space, "used": used, "capacity": capacity, "generation": generation.name},
            )
            violations.append(CapacityViolation(space, scope, used, capacity, generation.name, members, diag))
    return violations, usage


# ----- build ------------------------------------------------------------------------------------------
@dataclass
class BangBuild:
    ok: bool
    output: Path | None
    command: list[str]
    stderr: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    capacity_violations: list[CapacityViolation] = field(default_factory=list)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    generation: str = ""
    seconds: float = 0.0
    cached: bool = False


_GXX_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|fatal error): (?P<msg>.*)$")


def _compiler_diagnostics(stderr: str, path: str) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    for line in stderr.splitlines():
        m = _GXX_DIAG.match(line)
        if m is None or m.group("file") != path:
            continue
        row, col = int(m.group("line")) - 1, int(m.group("col")) - 1
        severity = Severity.WARNING if m.group("sev") == "warning" else Severity.ERROR
        diags.append(Diagnostic(severity, "bang-compile", m.group("msg"), Span(0, 0, row, col, row, col), file=path))
    return diags




@lru_cache(maxsize=1)
def _compiler_version() -> str:
    try:
        return str(children.run(["g++", "--version"], capture_output=True, text=True, timeout=30).stdout).split("\n")[0]
    except (OSError, subprocess.SubprocessError):
        return "unknown"


MODEL_HEADERS = ("xpiler_bang.h", "bang.h", "cnrt.h", "mlu.h")


def _header_digest() -> str:
    """Digest of the headers a BANG build reads (other dialects' headers do not invalidate BANG builds)."""
    return stable_key(*((INCLUDE_DIR / name).read_text(encoding="utf-8") for name in MODEL_HEADERS))


def build_bang(
    text: str,
    *,
    path: str = "kernel.mlu",
    generation: str | None = None,
    shared: bool = True,
    flags: Sequence[str] = (),
    opt: str = "-O1",
) -> BangBuild:
    """Compile BANG C ``text`` into a shared library (or an executable with ``shared=False``)."""
    gen = get_generation(generation)
    started = time.monotonic()
    prepared = prepare_source(text, path)
    key = stable_key("bang-build-v2", prepared, gen.name, shared, list(flags), opt, _header_digest(), _compiler_version())
    cache_dir = cache_root() / "bang_build" / key
    artefact = cache_dir / ("libkernel.so" if shared else "kernel")
    record = cache_dir / "result.json"
    if not caching_disabled() and record.exists():
        cached = json.loads(record.read_text(encoding="utf-8"))
        if not cached["ok"] or artefact.exists():  # failed compiles are cached as well
            return _from_record(cached, artefact, text, path, gen, started)

    with tempfile.TemporaryDirectory(prefix="xpiler-bang-") as tmp:
        src = Path(tmp) / "kernel.mlu"
        src.write_text(prepared, encoding="utf-8")
        out = Path(tmp) / artefact.name
        model_flags = [
            # -fno-weak: inline helpers' on-chip statics stay in their sections (no comdat conflicts)
            "-std=c++17", opt, "-fno-strict-aliasing", "-fno-weak", "-I", str(INCLUDE_DIR), "-include", str(HEADER),
            *gen.defines(), *(["-fPIC", "-shared"] if shared else ["-rdynamic"]), *flags,
        ]  # fmt: skip
        # the model's header precompiled per generation and flags (the same program; only the parse is saved)
        header = with_precompiled(model_flags, model_flags, header_hash(), "g++", _compiler_version())
        command = ["g++", *header, "-x", "c++", str(src), "-x", "none", "-o", str(out), "-ldl"]
        recorded = ["g++", *model_flags, "-x", "c++", str(src), "-x", "none", "-o", str(out), "-ldl"]
        try:
            proc = children.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=tmp,
                                memory_bytes=COMPILE_MEMORY_BYTES)
            stderr, returncode = proc.stderr, proc.returncode
        except subprocess.TimeoutExpired:
            stderr, returncode = f"g++ did not finish within {COMPILE_TIMEOUT_S} s", -1
        except OSError as exc:
            stderr, returncode = f"cannot run g++: {exc}", -1
        ok = returncode == 0 and out.exists()
        if ok:
            cache_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out, artefact)
        else:
            cache_dir.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"ok": ok, "command": recorded, "stderr": stderr}), encoding="utf-8")
    return _from_record({"ok": ok, "command": recorded, "stderr": stderr}, artefact, text, path, gen, started,
                        cached=False)


def _from_record(
    rec: dict[str, object], artefact: Path, text: str, path: str, gen: Generation, started: float, cached: bool = True
) -> BangBuild:
    ok = bool(rec["ok"]) and artefact.exists()
    stderr = str(rec["stderr"])
    command = [str(c) for c in rec["command"]] if isinstance(rec["command"], list) else []
    build = BangBuild(ok, artefact if ok else None, command, stderr, generation=gen.name, cached=cached)
    build.diagnostics = _compiler_diagnostics(stderr, path)
    if ok:
        violations, usage = check_capacity(read_onchip_symbols(artefact), gen, text, path)
        build.capacity_violations = violations
        build.usage = usage
        build.diagnostics.extend(v.diagnostic for v in violations)
        misplaced = misplaced_onchip_declarations(artefact, text, path)
        build.diagnostics.extend(misplaced)
        if violations or misplaced:
            build.ok = False
            build.output = None
    build.seconds = time.monotonic() - started
    return build


def format_build_errors(build: BangBuild) -> str:
    """Located error lines for users (``file:line:col: error: …``), or the compiler's stderr tail."""
    errors = [d.format() for d in build.diagnostics if d.severity is Severity.ERROR]
    if errors:
        return "\n".join(errors)
    return build.stderr.strip()[-4000:]

