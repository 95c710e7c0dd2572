"""The project around the file a plan translates: its settings, its local headers, and how both reach the
compilers, the tests and the output.

* Settings: ``project.load_project`` (compile_commands.json, xpiler.toml, the user's -I/-D/--std).
* Local headers with CUDA/HIP code are translated with the file (GPU targets: written beside the output
  under the target's naming, the includes rewritten) or inlined into it (CPU and BANG targets, whose plans
  need every kernel in one module); others stay as they are and are found through the source's folder.
* Tests: the user's spec; else, for a program with ``main``, the whole program (``verify/program.py``),
  with automatic kernel tests as the fallback when the source program itself cannot run; else automatic
  kernel tests; else nothing, with the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span, XpilerError
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.passes.driver import run_passes
from xpiler_core.progress import CancelToken
from xpiler_core.project import (
    BuildSettings,
    ProjectConfig,
    build_settings,
    load_project,
    local_includes,
    unit_static_renames,
)
from xpiler_core.translation import TestSet, TranslateOptions, build_test_set

_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b", re.MULTILINE)


def _conditional(text: str, offset: int) -> bool:
    """Whether ``offset`` lies inside an #if/#ifdef/#ifndef block (an include guard does not count)."""
    depth = 0
    guard = re.match(r"\s*(?:(?://[^\n]*|/\*.*?\*/)\s*)*#[ \t]*ifndef\b", text, re.S) is not None
    for match in _CONDITIONAL.finditer(text, 0, offset):
        depth += -1 if match.group(1) == "endif" else 1
    return depth > (1 if guard else 0)


def _system_header(name: str) -> bool:
    """A header the compiler finds without the project (``"stdio.h"`` written with quotes)."""
    return any((Path(folder) / name).is_file() for folder in ("/usr/include", "/usr/local/include"))


_INCLUDE_LINE = re.compile(r'^([ \t]*#[ \t]*include[ \t]*)([<"])([^>"\n]+)([>"])', re.MULTILINE)
# Code a header must hold to be translated with the file (else it is plain C/C++ and stays as it is).
_DEVICE_CODE = re.compile(r"\b(__global__|__device__|__shared__|__constant__|threadIdx|blockIdx|__syncthreads|"
                          r"__shfl\w*|atomic[A-Z]\w*|cuda[A-Z]\w*|hip[A-Z]\w*|__half2?|__nv_bfloat16)\b|<<<")
COMPANION_SUFFIX = {Dialect.HIP: ".hip.h", Dialect.CUDA: ".cuh", Dialect.C: ".cpu.h", Dialect.BANG: ".mlu.h"}


def companion_name(include: str, target: Dialect) -> str:
    """The name a translated header gets: ``common.cuh`` → ``common.hip.h`` (same folder)."""
    path = Path(include)
    stem = path.name.split(".", 1)[0]
    return str(path.with_name(stem + COMPANION_SUFFIX[target]))


# (what followed the include on its line, a comment, follows the end marker)
_INLINED_START = re.compile(r"^\s*/\* xpiler: (.+?) inlined \*/$")
_INLINED_END = re.compile(r"^/\* end of (.+?) \*/")
_UNIT_START = re.compile(r"^/\* xpiler: the program's unit (.+) \*/$")


def inlined_origin(text: str, line: int, own: str) -> tuple[str, int]:
    """Where 0-based ``line`` of a text built by :meth:`ProjectFiles.inline_device_headers` (and
    :meth:`ProjectFiles.with_units_inlined`) comes from: the file as the source names it (``own`` for the unit
    itself) and its 0-based line there, read off the markers that inlining leaves."""
    stack: list[list[str | int]] = [[own, 0]]
    for index, content in enumerate(text.split("\n")):
        start = _INLINED_START.match(content)
        unit = _UNIT_START.match(content)
        end = _INLINED_END.match(content)
        if unit is not None:
            stack = [[unit.group(1), -1]]  # the marker line is not the unit's: its first line follows
        elif start is not None:
            if index == line:
                break
            stack[-1][1] = int(stack[-1][1]) + 1  # the include line the header's text replaced
            stack.append([start.group(1), 0])
            continue
        elif end is not None and len(stack) > 1 and stack[-1][0] == end.group(1):
            stack.pop()
            continue
        if index == line:
            break
        stack[-1][1] = int(stack[-1][1]) + 1
    name, at = stack[-1]
    return str(name), max(int(at), 0)


@dataclass
class ProjectFiles:
    unit: ParsedUnit
    config: ProjectConfig
    target: Dialect
    headers: dict[str, str] = field(default_factory=dict)  # every local header read: absolute path → text
    renamed: dict[str, str] = field(default_factory=dict)  # translated header path → companion name
    _declared: frozenset[str] | None = field(default=None, repr=False)
    _units: dict[str, str] | None = field(default=None, repr=False)
    unit_names: dict[str, str] = field(default_factory=dict)  # other unit path → its translation's name

    @classmethod
    def of(cls, unit: ParsedUnit, options: TranslateOptions, target: Dialect) -> ProjectFiles:
        config = load_project(unit.path, options.project)
        headers = local_includes(unit.text, unit.path, config)
        own = str(Path(unit.path).resolve())
        for path in config.sources:  # the headers the program's other units include are the project's too
            if path == own:
                continue
            try:
                text = Path(path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # other_units() names the unreadable unit
            for header, content in local_includes(text, path, config).items():
                headers.setdefault(header, content)
        return cls(unit, config, target, headers)

    # ----------------------------------------------------------------------------------------- build
    def source_build(self) -> BuildSettings:
        """The source's build: its device headers and the program's other units travel with it (a runtime
        build rewrites their launches; the units are built with the file as one translation unit)."""
        units = self.other_units()
        return build_settings(self.config, self.unit.path, self.unit.text, {**self.shadows(), **units},
                              unity=tuple(units), c_units=self._c_units(units), device=self.config.reference_device)

    def candidate_build(self, candidate: str, companions: dict[str, str]) -> BuildSettings:
        units = tuple(name for name in companions if name in self.unit_names.values())
        return build_settings(self.config, self.unit.path, candidate, {**self.shadows(), **companions}, unity=units,
                              c_units=self._c_units({n: companions[n] for n in units}))

    @staticmethod
    def _c_units(units: dict[str, str]) -> tuple[str, ...]:
        return tuple(n for n, t in units.items() if n.endswith(".c") and detect_dialect(t, n) is Dialect.C)

    def other_units(self) -> dict[str, str]:
        """The program's other translation units (``sources``): name relative to the file's folder → text."""
        if self._units is None:
            own = str(Path(self.unit.path).resolve())
            self._units = {}
            for path in self.config.sources:
                if path == own:
                    continue
                try:
                    text = Path(path).read_text(encoding="utf-8", errors="replace")
                except OSError as exc:
                    raise XpilerError(f"cannot read the program's unit: {exc.strerror}", path) from None
                self._units[self.relative_name(path)] = text
        return self._units

    def translate_units(self, direction: Any, pass_names: list[str], params: dict[str, dict[str, Any]], warp: int,
                        cancel: CancelToken | None) -> dict[str, str]:
        """GPU → GPU: the program's other units through the same passes, each beside the output under the
        target's suffix (``kernels.cu`` → ``kernels.hip``), their includes of translated headers rewritten."""
        out: dict[str, str] = {}
        base = Path(self.unit.path).resolve().parent
        for name, text in self.other_units().items():
            path = str((base / name).resolve())
            if detect_dialect(text, name) is Dialect.C:
                # plain C or C++ with no GPU code: copied beside the output as it is (and built as C)
                self.unit_names[path] = name
                out[name] = text
                continue
            ctx = PassContext(source_dialect=direction.source, target=direction.target, warp_size=warp, file=path,
                              project_names=self.declared_names(), defines=self.config.define_values())
            run = run_passes(SourceUnit(text, direction.source, path), pass_names, ctx, params, cancel=cancel)
            assert isinstance(run.unit, SourceUnit)
            target = str(Path(name).with_suffix(self.target.suffix if Path(name).suffix in (".cu", ".hip")
                                                else ".hip" + Path(name).suffix if self.target is Dialect.HIP
                                                else ".cu" + Path(name).suffix))
            self.unit_names[path] = target
            out[target] = self.rewrite_includes(run.unit.text, path)
        return out

    def plain_c_units(self) -> dict[str, str]:
        """The program's other units written in C (``.c``, no GPU code): name → text. They are not translated;
        they are copied beside the output and built as C (C++ reads some valid C differently)."""
        base = Path(self.unit.path).resolve().parent
        found: dict[str, str] = {}
        for name, text in self.other_units().items():
            if name.endswith(".c") and detect_dialect(text, name) is Dialect.C:
                self.unit_names[str((base / name).resolve())] = name
                found[name] = text
        return found

    def with_units_inlined(self, text: str, inlined: list[str] | tuple[str, ...] = ()) -> str:
        """CPU/BANG: the program's other units appended to the (header-inlined) text, so one module holds every
        kernel and every function the program calls (C units stay apart: :meth:`plain_c_units`). A header
        ``text`` (``inlined``: the headers in it) or an earlier unit inlined is not inlined again: one module
        holds one copy of its definitions (a ``static`` device function of a shared header included twice is a
        redefinition)."""
        plain_c = self.plain_c_units()
        units = {n: t for n, t in self.other_units().items() if n not in plain_c}
        if not units:
            return text
        from xpiler_core.frontend.source import parse_text
        from xpiler_core.passes.support.cst import rename_identifiers

        base = Path(self.unit.path).resolve().parent
        parts = [text]
        headers = set(inlined)
        renames = unit_static_renames(self.unit.text, list(units.values()))
        for (name, body), clashing in zip(units.items(), renames, strict=True):
            path = str((base / name).resolve())
            unit = ProjectFiles(ParsedUnit(body, path, self.unit.dialect), self.config, self.target,
                                local_includes(body, path, self.config))
            body_inlined, _ = unit.inline_device_headers(headers)
            # a file-scope static an earlier unit defines too: this unit's own, renamed (as the unity builds do)
            if clashing:
                body_inlined = rename_identifiers(parse_text(body_inlined, path, self.unit.dialect), clashing)
            parts.append(f"/* xpiler: the program's unit {name} */\n{body_inlined}")
        return "\n".join(parts)

    def relative_name(self, header_path: str) -> str:
        """How the source names a header: relative to its folder, else to the include dir holding it."""
        header = Path(header_path)
        for base in (Path(self.unit.path).resolve().parent, *(Path(d) for d in self.config.include_dirs)):
            if header.is_relative_to(base):
                return str(header.relative_to(base))
        return header.name

    def shadows(self) -> dict[str, str]:
        """The device headers a build writes rewritten beside the source, each under the path the source's
        includes reach it by (``../../shared/util.h`` for one outside its folder: runtime/build.py compiles
        the source deep enough that the path stays inside the build folder)."""
        base = Path(self.unit.path).resolve().parent
        out: dict[str, str] = {}
        for path, text in self.device_headers().items():
            name = self.relative_name(path)
            if name == Path(path).name and Path(path).parent != base and not any(
                    Path(path).is_relative_to(d) for d in self.config.include_dirs):
                name = os.path.relpath(path, base)
            out[name] = text
        return out

    # ----------------------------------------------------------------------------------------- headers
    def missing_includes(self) -> list[Diagnostic]:
        """A warning at each quoted include of the file (or of its headers) that no folder of the project holds:
        a compiler would stop there, and every later verdict depends on it."""
        from xpiler_core.project import resolve_include
        from xpiler_core.tables import is_gpu_header

        found: list[Diagnostic] = []
        files = [(self.unit.path, self.unit.text), *self.headers.items()]
        searched = ", ".join(["the including file's folder", *self.config.include_dirs])
        for path, text in files:
            where = Path(path).resolve() if Path(path).exists() else Path(path)
            for match in _INCLUDE_LINE.finditer(text):
                name = match.group(3).strip()
                if match.group(2) != '"' or is_gpu_header(name) or _conditional(text, match.start()):
                    continue  # an include under #if/#ifdef may not be compiled at all: no claim about it
                if resolve_include(name, True, where, self.config.include_dirs) is None and not _system_header(name):
                    start = match.start(3) - 1  # the opening quote
                    line = text.count("\n", 0, start)
                    col = start - (text.rfind("\n", 0, start) + 1)
                    end = start + len(match.group(3)) + 2
                    found.append(Diagnostic(
                        Severity.WARNING, "project.include",
                        f"'{name}' not found (searched {searched}); give -I DIR, or a compile_commands.json or "
                        "xpiler.toml with the project's include dirs",
                        Span(start, end, line, col, line, col + end - start), file=path))
        return found

    def defined_macros(self) -> frozenset[str]:
        """The macros the program's build defines: its files' ``#define``s (any branch) and its -D flags."""
        from xpiler_core.passes.support.cst import defined_macros

        return defined_macros(self.unit.text, *self.headers.values(), *self.other_units().values()) | frozenset(
            self.config.define_values())

    def declared_names(self) -> frozenset[str]:
        """Names the project's local headers declare (a ``cudaCheck`` macro, a ``cublasCheck`` helper): user
        code, which the API mapping must leave alone."""
        if self._declared is None:
            from xpiler_core.frontend.source import parse_text
            from xpiler_core.passes.support.cst import declared_names

            # a branch on a macro nothing of the project defines is not compiled: its declarations are not
            # the project's names (``#ifndef NO_CUDA … #else`` stand-ins for the CUDA API)
            defined = self.defined_macros()
            names: set[str] = set()
            for header_path, text in self.headers.items():
                names |= declared_names(parse_text(text, header_path, self.unit.dialect), defined)
            self._declared = frozenset(names)
        return self._declared

    def device_headers(self) -> dict[str, str]:
        """The local headers with GPU code (kernels, device functions, runtime calls) or that include a GPU
        toolchain's header (``#include <cuda.h>`` alone makes a header the target's compiler cannot read)."""
        from xpiler_core.tables import is_gpu_header

        return {p: t for p, t in self.headers.items()
                if _DEVICE_CODE.search(t) or any(is_gpu_header(m.group(3).strip()) for m in _INCLUDE_LINE.finditer(t))}

    def translate_headers(self, direction: Any, pass_names: list[str], params: dict[str, dict[str, Any]],
                          warp: int, cancel: CancelToken | None) -> dict[str, str]:
        """GPU → GPU: each local header with device code through the same passes; a header the passes change
        becomes a companion (name relative to the output's folder → text, its own includes of other
        companions rewritten) and :attr:`renamed` records it for :meth:`rewrite_includes`."""
        translated: dict[str, str] = {}
        for header_path, text in self.device_headers().items():
            ctx = PassContext(source_dialect=direction.source, target=direction.target, warp_size=warp,
                              file=header_path, project_names=self.declared_names(),
                              defines=self.config.define_values())
            run = run_passes(SourceUnit(text, direction.source, header_path), pass_names, ctx, params, cancel=cancel)
            assert isinstance(run.unit, SourceUnit)
            if run.unit.text != text:
                translated[header_path] = run.unit.text
        self.renamed = {p: companion_name(self.relative_name(p), self.target) for p in translated}
        return {self.renamed[p]: self.rewrite_includes(t, p) for p, t in translated.items()}

    def rewrite_includes(self, text: str, including: str) -> str:
        """``text`` (of the file at ``including``) with its includes of translated headers pointing at their
        companions (quoted, relative to the including file's own output)."""
        from xpiler_core.project import resolve_include

        if not self.renamed:
            return text
        where = Path(including).resolve() if Path(including).exists() else Path(including)
        own = self.renamed.get(str(where))
        start = os.path.dirname(own) if own else ""

        def replace(match: re.Match[str]) -> str:
            found = resolve_include(match.group(3).strip(), match.group(2) == '"', where, self.config.include_dirs)
            if found is None or str(found) not in self.renamed:
                return match.group(0)
            name = os.path.relpath(self.renamed[str(found)], start) if start else self.renamed[str(found)]
            return f'{match.group(1)}"{name}"'

        return _INCLUDE_LINE.sub(replace, text)

    def inline_device_headers(self, already: set[str] | None = None) -> tuple[str, list[str]]:
        """The unit's text with every local header that holds device code inlined at its first include
        (CPU/BANG plans see all kernels in one module), and the headers inlined. For CPU output, headers whose
        conditions test a macro only the CPU build defines are inlined too, to be read as the source's build
        read them (passes/support/build_macros.py). ``already``: headers an earlier part of the same module
        inlined (another unit of the program), which are not inlined again; it grows with this unit's."""
        from xpiler_core.passes.support.build_macros import tests_source_build_macros

        device = dict(self.device_headers())
        if self.target is Dialect.C:
            device.update({p: t for p, t in self.headers.items() if tests_source_build_macros(t)})
        if not device:
            return self.unit.text, []
        seen: set[str] = already if already is not None else set()
        before = set(seen)
        from xpiler_core.project import resolve_include

        def expand(text: str, where: Path, depth: int) -> str:
            def replace(match: re.Match[str]) -> str:
                found = resolve_include(match.group(3).strip(), match.group(2) == '"', where, self.config.include_dirs)
                if found is None or str(found) not in device:
                    return match.group(0)
                if str(found) in seen or depth > 20:
                    return f"/* {match.group(3).strip()}: already inlined above */"
                seen.add(str(found))
                body = expand(device[str(found)], found, depth + 1)
                body = re.sub(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", "", body, flags=re.MULTILINE)
                return f"/* xpiler: {match.group(3).strip()} inlined */\n{body}\n/* end of {match.group(3).strip()} */"

            return _INCLUDE_LINE.sub(replace, text)

        where = Path(self.unit.path).resolve() if Path(self.unit.path).exists() else Path(self.unit.path)
        return expand(self.unit.text, where, 0), sorted(seen - before)

    # ----------------------------------------------------------------------------------------- tests
    def has_main(self) -> bool:
        return any(f.name == "main" for f in self.unit.model.host_entries) or bool(
            re.search(r"^\s*(?:int|void)\s+main\s*\(", self.unit.text, re.MULTILINE))

    def test_set(self, options: TranslateOptions, workdir: Path, *, entry: str | None = None,
                 text: str | None = None, allow_shim: bool = True) -> TestSet:
        """The user's spec; else the whole program (with automatic kernel tests as the fallback); else
        automatic kernel tests."""
        source_text = text if text is not None else self.unit.text
        tests = build_test_set(source_text, self.unit.path, self.unit.dialect, options, workdir, entry=entry,
                               allow_shim=allow_shim, model=self.unit.model if text is None else None,
                               build=self.source_build())
        if options.spec_path or not self.has_main():
            return tests
        tests.program = True
        tests.reason = "the whole program (it has main), run as the source and as the translation"
        return tests

    def run_source(self, warp: int, cancel: CancelToken | None = None) -> Any:
        """One run of the source program on the runtime, built as a translation's checks build it
        (a :class:`~xpiler_core.verify.program.ProgramRun`)."""
        from xpiler_core.verify.program import run_program

        return run_program(self.unit.text, self.unit.path, self.unit.dialect, config=self.config,
                           build=self.source_build(), warp_size=warp, cancel=cancel)

    def program_check(self, runner: Any, warp: int, cancel: CancelToken | None,
                      candidate_build: Callable[[str], BuildSettings] | None = None
                      ) -> Callable[[str], Any] | None:
        """A check that runs the source program and the candidate program and compares them."""
        if not self.has_main():
            return None
        from xpiler_core.verify.program import compare_programs

        def check(candidate: str) -> Any:
            build = runner.build if candidate_build is None else candidate_build(candidate)
            return compare_programs(self.unit.text, self.unit.path, self.unit.dialect, candidate, self.target,
                                    config=self.config, source_build=self.source_build(), candidate_build=build,
                                    source_warp=runner.source_warp if hasattr(runner, "source_warp") else 32,
                                    target_warp=warp, cancel=cancel)

        return check
