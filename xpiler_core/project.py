"""The project a file belongs to, found the way compilers and clangd find it.

Build flags come from, in order (later ones add to or override earlier ones):

1. ``compile_commands.json`` in the file's folder or the nearest folder above it (clangd's convention;
   also ``build/compile_commands.json`` there): the entry for the file, else one for a file in the same folder;
   ``-I``/``-isystem``/``-iquote``/``--include-path``, ``-D``/``--define-macro``, ``-U``, ``-std=``;
2. ``xpiler.toml`` in the file's folder or above (``[build] include_dirs, defines, std``;
   ``[run] args, stdin, timeout_s``; ``[compare] atol, rtol, ignore``) — paths relative to that file;
3. what the user gives on the command line or in the editor's settings (``-I``, ``-D``, ``--std``).

Quoted includes resolve from the including file's folder first, then the include dirs; angle includes from
the include dirs only (system headers are the toolchain's and are never read or translated).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import XpilerError, toml_error

PROJECT_FILE = "xpiler.toml"
COMPILE_COMMANDS = "compile_commands.json"
# Lines of program output that carry timings or addresses, ignored when two runs are compared.
DEFAULT_IGNORE = (
    r"(?i)\b(time|elapsed|duration|throughput|bandwidth|gflops?|tflops?|gb/s|ms|usec|sec(onds?)?|us)\b",
    # a ratio of two timings (``CPU vs Shared speedup: 0.06x``): as unstable as the timings, and a run with
    # poisoned memory printing 0.05x must not read as the source depending on that memory
    r"(?i)\b(speed-?ups?|faster|slower)\b",
    r"(?i)\b0x[0-9a-f]{6,}\b",
    # what a program prints about the device it found: it differs between the runtime and the CPU
    r"(?i)\b(device|gpu)\b.*\b(name|compute capabilit|multi-?processors?|sm[ _]?\d|clock|driver|version)",
    r"(?i)\b(cuda|hip) (driver|runtime) version\b",
    # the device name itself (cudaDeviceProp::name), however the program labels it: the runtime's and the CPU
    # prelude's names differ
    r"\bxpiler CPU\b",
)
MAX_HEADER_BYTES = 4 * 1024 * 1024
MAX_INCLUDE_FILES = 400
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


@dataclass(frozen=True)
class ProjectConfig:
    """Build and run settings of one file's project (absolute paths)."""

    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # NAME or NAME=VALUE
    undefines: tuple[str, ...] = ()
    std: str | None = None  # e.g. "c++17"
    program_args: tuple[str, ...] = ()
    stdin: str | None = None
    timeout_s: float | None = None
    atol: float | None = None
    rtol: float | None = None
    ignore: tuple[str, ...] = ()  # extra regular expressions for output lines to ignore
    # the program's other translation units (absolute paths): built with the file into one program
    sources: tuple[str, ...] = ()
    origins: tuple[str, ...] = field(default=(), compare=False)  # where the settings came from (for messages)
    # where the source runs as the reference: "runtime" (the SIMT runtime) or "gpu" (nvcc and this machine's
    # CUDA device). Only the user's own command line sets it: it is neither read from a workspace's settings
    # nor written to a manifest (a replay runs on the runtime unless the user asks again)
    reference_device: str = "runtime"

    def compile_flags(self) -> list[str]:
        """Flags for nvcc, hipcc, gcc and g++ (all accept -I, -D, -U, -std=)."""
        flags = [f"-I{d}" for d in self.include_dirs]
        flags += [f"-D{d}" for d in self.defines]
        flags += [f"-U{u}" for u in self.undefines]
        if self.std:
            flags.append(f"-std={self.std}")
        return flags

    def define_values(self) -> dict[str, str]:
        """The macros ``-D`` defines, as the compiler sees them (``-DN`` is ``N`` = 1; ``-U`` removes one)."""
        values: dict[str, str] = {}
        for d in self.defines:
            name, eq, value = d.partition("=")
            values[name.strip()] = value if eq else "1"
        for u in self.undefines:
            values.pop(u, None)
        return values

    def to_dict(self) -> dict[str, Any]:
        return {"include_dirs": list(self.include_dirs), "defines": list(self.defines),
                "undefines": list(self.undefines), "std": self.std, "program_args": list(self.program_args),
                "stdin": self.stdin, "timeout_s": self.timeout_s, "atol": self.atol, "rtol": self.rtol,
                "ignore": list(self.ignore), "sources": list(self.sources), "origins": list(self.origins)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProjectConfig:
        def strings(key: str) -> tuple[str, ...]:
            value = data.get(key) or []
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        def number(key: str) -> float | None:
            value = data.get(key)
            return float(value) if isinstance(value, (int, float)) else None

        return cls(include_dirs=strings("include_dirs"), defines=strings("defines"),
                   undefines=strings("undefines"), std=data.get("std") if isinstance(data.get("std"), str) else None,
                   program_args=strings("program_args"),
                   stdin=data.get("stdin") if isinstance(data.get("stdin"), str) else None,
                   timeout_s=number("timeout_s"), atol=number("atol"), rtol=number("rtol"),
                   ignore=strings("ignore"), sources=strings("sources"), origins=strings("origins"))

    def merged(self, other: ProjectConfig) -> ProjectConfig:
        """``other`` over this one: lists are appended (duplicates dropped), scalars replaced when set."""

        def join(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*a, *b)))

        return ProjectConfig(
            include_dirs=join(self.include_dirs, other.include_dirs), defines=join(self.defines, other.defines),
            undefines=join(self.undefines, other.undefines), std=other.std or self.std,
            program_args=other.program_args or self.program_args, stdin=other.stdin or self.stdin,
            timeout_s=other.timeout_s or self.timeout_s,
            atol=other.atol if other.atol is not None else self.atol,
            rtol=other.rtol if other.rtol is not None else self.rtol,
            ignore=join(self.ignore, other.ignore), sources=join(self.sources, other.sources),
            origins=join(self.origins, other.origins),
            reference_device=other.reference_device if other.reference_device != "runtime" else self.reference_device)

    @property
    def ignore_patterns(self) -> tuple[str, ...]:
        return (*DEFAULT_IGNORE, *self.ignore)


def _upward(start: Path, names: tuple[str, ...], stop_at_git: bool = True) -> Path | None:
    """The first of ``names`` found in ``start`` or a folder above it (stops at a repository root)."""
    folder = start
    while True:
        for name in names:
            candidate = folder / name
            if candidate.is_file():
                return candidate
        if stop_at_git and (folder / ".git").exists():
            return None
        if folder.parent == folder:
            return None
        folder = folder.parent


_SEPARATE_VALUE = {"-I": "include", "-isystem": "include", "-iquote": "include", "-idirafter": "include",
                   "--include-path": "include", "-D": "define", "--define-macro": "define", "-U": "undefine",
                   "--undefine-macro": "undefine", "-std": "std", "--std": "std"}
_JOINED_VALUE = (("-isystem", "include"), ("-iquote", "include"), ("-idirafter", "include"), ("-I", "include"),
                 ("-D", "define"), ("-U", "undefine"))


def flags_from_command(arguments: list[str], directory: Path) -> ProjectConfig:
    """Include dirs, defines and the standard of one compiler command line (gcc/clang/nvcc spellings)."""
    found: dict[str, list[str]] = {"include": [], "define": [], "undefine": [], "std": []}
    i = 0
    while i < len(arguments):
        arg = arguments[i]
        flag, eq, value = arg.partition("=")
        if arg in _SEPARATE_VALUE and i + 1 < len(arguments):
            found[_SEPARATE_VALUE[arg]].append(arguments[i + 1])
            i += 1
        elif eq and flag in _SEPARATE_VALUE and (flag.startswith("--") or flag == "-std"):
            found[_SEPARATE_VALUE[flag]].append(value)
        else:
            for prefix, kind in _JOINED_VALUE:
                if arg.startswith(prefix) and len(arg) > len(prefix):
                    found[kind].append(arg[len(prefix):])
                    break
        i += 1
    resolved = tuple(str((directory / d).resolve()) for d in found["include"])
    return ProjectConfig(include_dirs=resolved, defines=tuple(found["define"]), undefines=tuple(found["undefine"]),
                         std=found["std"][-1] if found["std"] else None)


def from_compile_commands(database: Path, file: Path) -> ProjectConfig | None:
    try:
        entries = json.loads(database.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(entries, list):
        return None
    target = file.resolve()
    same_folder: dict[str, Any] | None = None
    chosen: dict[str, Any] | None = None
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            continue
        directory = Path(str(entry.get("directory") or database.parent))
        entry_file = (directory / entry["file"]).resolve()
        if entry_file == target:
            chosen = entry
            break
        if same_folder is None and entry_file.parent == target.parent:
            same_folder = entry
    chosen = chosen or same_folder
    if chosen is None:
        return None
    directory = Path(str(chosen.get("directory") or database.parent))
    if isinstance(chosen.get("arguments"), list):
        arguments = [str(a) for a in chosen["arguments"]]
    elif isinstance(chosen.get("command"), str):
        try:
            arguments = shlex.split(chosen["command"])
        except ValueError:
            return None
    else:
        return None
    config = flags_from_command(arguments[1:], directory)
    return replace(config, origins=(str(database),))


def from_project_file(project_file: Path) -> ProjectConfig:
    try:
        data = tomllib.loads(project_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise XpilerError(f"cannot read project file: {exc}", str(project_file)) from None
    except tomllib.TOMLDecodeError as exc:
        raise toml_error(exc, str(project_file), "invalid project file") from None
    base = project_file.parent
    build = data.get("build") or {}
    run = data.get("run") or {}
    compare = data.get("compare") or {}

    def strings(table: dict[str, Any], key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
            raise XpilerError(f"[{key}] must be a list of strings", str(project_file))
        return tuple(str(v) for v in value)

    def number(table: dict[str, Any], key: str) -> float | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, (int, float)):
            raise XpilerError(f"'{key}' must be a number", str(project_file))
        return float(value)

    std = build.get("std")
    stdin = run.get("stdin")
    return ProjectConfig(
        include_dirs=tuple(str((base / d).resolve()) for d in strings(build, "include_dirs")),
        defines=strings(build, "defines"), undefines=strings(build, "undefines"),
        std=std if isinstance(std, str) else None, program_args=strings(run, "args"),
        stdin=stdin if isinstance(stdin, str) else None, timeout_s=number(run, "timeout_s"),
        atol=number(compare, "atol"), rtol=number(compare, "rtol"), ignore=strings(compare, "ignore"),
        sources=tuple(str((base / s).resolve()) for s in strings(build, "sources")), origins=(str(project_file),))


def load_project(path: str, given: ProjectConfig | None = None, search_root: str | None = None) -> ProjectConfig:
    """The settings for the file at ``path``: compile_commands.json, then xpiler.toml, then ``given``."""
    file = Path(path)
    config = ProjectConfig()
    if file.parent.exists():
        start = file.parent.resolve()
        database = _upward(start, (COMPILE_COMMANDS, f"build/{COMPILE_COMMANDS}"))
        if database is not None:
            found = from_compile_commands(database, file)
            if found is not None:
                config = config.merged(found)
        project_file = _upward(start, (PROJECT_FILE,))
        if project_file is None and search_root:
            candidate = Path(search_root) / PROJECT_FILE
            project_file = candidate if candidate.is_file() else None
        if project_file is not None:
            config = config.merged(from_project_file(project_file))
    if given is not None:
        config = config.merged(given)
    return config


def resolve_include(name: str, quoted: bool, including_file: Path, include_dirs: tuple[str, ...]) -> Path | None:
    """Where a compiler finds ``#include "name"`` (``quoted``) or ``<name>`` among the project's files."""
    folders = [including_file.parent] if quoted else []
    folders += [Path(d) for d in include_dirs]
    for folder in folders:
        candidate = folder / name
        if candidate.is_file():
            return candidate.resolve()
    return None


def local_includes(text: str, path: str, config: ProjectConfig | None) -> dict[str, str]:
    """Every project header the file includes, directly or not: absolute path → text. System and
    toolchain headers (not found in the file's folder or the include dirs) are left out."""
    dirs = config.include_dirs if config is not None else ()
    found: dict[str, str] = {}
    pending: list[tuple[str, Path]] = [(text, Path(path).resolve() if Path(path).exists() else Path(path))]
    while pending and len(found) < MAX_INCLUDE_FILES:
        body, where = pending.pop()
        for match in _INCLUDE.finditer(body):
            header = resolve_include(match.group(2).strip(), match.group(1) == '"', where, dirs)
            if header is None or str(header) in found:
                continue
            try:
                if header.stat().st_size > MAX_HEADER_BYTES:
                    continue
                content = header.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found[str(header)] = content
            pending.append((content, header))
    return found


# a file-scope static function or variable: `static` at the start of a line (members and locals are indented)
_FILE_STATIC = re.compile(r"^static\s+(?:(?:inline|const|constexpr|volatile|unsigned|signed|struct|__\w+__)\s+)*"
                          r"[A-Za-z_][\w:<>]*[\s*&]+(?:const\s+)?(\w+)\s*(?:\(|=|;|\[)", re.M)


def file_statics(text: str) -> set[str]:
    """The names a file defines at file scope as ``static`` (functions and variables), by their spelling."""
    return {m.group(1) for m in _FILE_STATIC.finditer(text)}


def unit_static_renames(first: str, units: list[str]) -> list[dict[str, str]]:
    """Per unit (texts, in the order one build joins them after ``first``): its file-scope statics that ``first``
    or an earlier unit defines too → the name they take for that unit (each unit had its own)."""
    seen = file_statics(first)
    renames: list[dict[str, str]] = []
    for k, text in enumerate(units):
        own = file_statics(text)
        renames.append({name: f"xpiler_unit{k + 1}_{name}" for name in sorted(own & seen)})
        seen |= own
    return renames


@dataclass(frozen=True)
class BuildSettings:
    """How one translation unit of a project is compiled: the project's flags (the source's own folder
    first, as for its quoted includes), files written beside the compiled text (translated headers), and
    the digests of every local header it reads (part of every cache key)."""

    flags: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # name relative to the compiled file → text
    depends: tuple[tuple[str, str], ...] = ()  # header path → sha256
    # the program's other units among ``files``: compiled with the text as one translation unit (a unity
    # build: each is included at the end of the text)
    unity: tuple[str, ...] = ()
    # those of ``unity`` written in C (``.c`` without CUDA): compiled as C on their own and linked, since C++
    # reads some valid C differently (a non-void function that ends without ``return``)
    c_units: tuple[str, ...] = ()
    device: str = "runtime"  # where a source build runs: the SIMT runtime, or "gpu" (--reference gpu)

    def with_units(self, text: str, *, separate_c: bool = False) -> str:
        """``text`` followed by the includes of the other units (unchanged when there are none);
        ``separate_c``: the C units are left out (the build compiles and links them apart). A unit's file-scope
        ``static`` names that an earlier unit (or ``text``) defines too are renamed for that unit alone (a
        macro around its include): each unit had its own in the program's build."""
        units = [u for u in self.unity if not (separate_c and u in self.c_units)]
        if not units:
            return text
        texts = dict(self.files)
        out = [text, "\n/* xpiler: the program's other units */\n"]
        for unit, renames in zip(units, unit_static_renames(text, [texts.get(u, "") for u in units]), strict=True):
            out += [f"#define {name} {new}\n" for name, new in renames.items()]
            out.append(f'#include "{unit}"\n')
            out += [f"#undef {name}\n" for name in renames]
        return "".join(out)

    def key(self) -> list[Any]:
        import hashlib

        files = [(name, hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()) for name, text in self.files]
        return [list(self.flags), files, [list(d) for d in self.depends], list(self.unity), list(self.c_units),
                self.device]

    def runtime_flags(self) -> list[str]:
        """The flags for a build on the CPU runtime: include dirs and macros (the runtime's own C++ standard
        stays, since its headers need it)."""
        return [f for f in self.flags if not f.startswith("-std=")]

    def depth_above(self) -> int:
        """How many folders up a file's name climbs (``../../shared/util.h``: 2): the build compiles the
        source that deep, so every name lands inside its folder."""
        def climbs(name: str) -> int:
            parts = Path(os.path.normpath(name)).parts
            return next((k for k, part in enumerate(parts) if part != ".."), len(parts))

        return max((climbs(name) for name, _ in self.files), default=0)

    def write_files(self, folder: Path, transform: Callable[[str], str] | None = None,
                    within: Path | None = None) -> None:
        """Write the files under ``folder`` (``transform``: how each text is prepared for the build; a name may
        climb out of ``folder`` up to ``within``, never further)."""
        bound = (within or folder).resolve()
        for name, text in self.files:
            dest = (folder / name).resolve()
            if bound not in dest.parents:
                continue  # a name that would leave the folder is never written
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(transform(text) if transform is not None else text, encoding="utf-8")


def build_settings(config: ProjectConfig | None, source_path: str | None, text: str,
                   files: dict[str, str] | None = None, unity: tuple[str, ...] = (),
                   c_units: tuple[str, ...] = (), device: str = "runtime") -> BuildSettings:
    """The settings to compile ``text`` (read from ``source_path``) or a translation of it; ``device``: where a
    source build runs (``config.reference_device`` for the source, never for a translation)."""
    import hashlib

    flags: list[str] = []
    if source_path and Path(source_path).parent.is_dir():
        flags.append(f"-I{Path(source_path).parent.resolve()}")
    if config is not None:
        flags += [f for f in config.compile_flags() if f not in flags]
    headers = local_includes(text, source_path or "<input>", config)
    for body in (files or {}).values():  # headers the translated companions include
        headers.update(local_includes(body, source_path or "<input>", config))
    depends = tuple(sorted((p, hashlib.sha256(t.encode("utf-8", errors="replace")).hexdigest())
                           for p, t in headers.items()))
    return BuildSettings(tuple(flags), tuple(sorted((files or {}).items())), depends, unity, c_units, device)
