"""One translation, end to end: direction → plan → passes → candidate → evidence → result + manifest.

``translate`` reads the source once into a :class:`ParsedUnit`, detects its dialect from the code compiled
for the source platform (``--from`` overrides it) and hands the unit to
``xpiler_core/plans/<src>_to_<dst>.py`` (a new direction is a new plan file, not an edit here). The LLM
proposer and the SMT repair hooks run around the plan; every result, manifest and status comes from
:mod:`xpiler_core.translation`. ``write_outputs`` writes the translation, its translated headers and the
manifest that ``xpiler replay`` redoes.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, XpilerError
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, SourceUnit, Unresolved
from xpiler_core.passes.driver import run_passes
from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.safe_io import UnsafePath, write_confined
from xpiler_core.translation import (
    MANIFEST_DIR,
    Manifest,
    Status,
    TranslateOptions,
    TranslationResult,
    max_error,
    minimal_failing_case,
    output_suffix,
    report_dict,
    sha256_text,
    suggested_output_path,
    verdict_dict,
)

__all__ = ["MANIFEST_DIR", "Manifest", "PassOutcome", "Status", "TranslateOptions", "TranslationResult",
           "direction_name", "max_error", "minimal_failing_case", "output_suffix", "plan_for", "report_dict",
           "run_pass", "sha256_text", "suggested_output_path", "translate", "verdict_dict", "write_outputs",
           "check_output_path", "SourceSyntaxErrors"]


@dataclass
class PassOutcome:
    text: str
    diagnostics: list[Diagnostic]
    refused: str | None
    unresolved: list[Unresolved] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def direction_name(source: Dialect, target: Dialect) -> str:
    return f"{source.value}_to_{target.value}"


def plan_for(source: Dialect, target: Dialect, path: str) -> Any:
    """The plan module of a direction, or an error naming the direction we lack."""
    module_name = f"xpiler_core.plans.{direction_name(source, target)}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise XpilerError(f"no translation plan from {source.value.upper()} to {target.value.upper()}", path) from None


def translate(
    text: str,
    path: str,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    """Translate ``text`` (read from ``path``) to ``options.target`` with the direction's plan."""
    if not text.strip():
        raise XpilerError("the file is empty: nothing to translate", path)
    source = options.source_dialect or detect_dialect(text, path)
    if source is options.target:
        raise XpilerError(f"the source is already {source.value.upper()} (give --from if it is not)", path)
    plan_module = plan_for(source, options.target, path)
    unit = ParsedUnit(text, path, source)
    if not options.keep_going:
        _stop_on_syntax_errors(unit, options)
    # ---- LLM proposer hook (xpiler_core/llm): off unless a proposer other than "rules" is set ----
    if options.proposer != "rules":
        from xpiler_core.llm.hook import translate_with_proposer

        proposed: TranslationResult = translate_with_proposer(plan_module.plan, unit, options, progress, cancel)
        return proposed
    # ---- end of LLM proposer hook ----
    result: TranslationResult = plan_module.plan(unit, options, progress, cancel)
    _report_syntax_errors(result, unit)
    # ---- SMT repair hook (xpiler_core/repair): a candidate failing its spec gets one local repair attempt
    # before it is reported unresolved; the attempt is recorded in manifest["repair"] ----
    if options.repair:
        from xpiler_core.repair.hook import repair_translation, should_repair

        if should_repair(result, options):
            result = repair_translation(result, options, progress, cancel)
    # ---- end of SMT repair hook ----
    return result


class SourceSyntaxErrors(XpilerError):
    """The source does not compile: its syntax errors, each at its line and column, and what the source's own
    compiler said (the translation is not attempted)."""

    def __init__(self, errors: list[Diagnostic], path: str, confirmed_by: str | None,
                 compiler_errors: list[Diagnostic] | None = None) -> None:
        first = errors[0]
        super().__init__(first.message, path, first.span.start_line, first.span.start_col)
        self.errors = errors
        self.confirmed_by = confirmed_by
        self.compiler_errors = compiler_errors or []

    def format(self) -> str:
        lines = [d.format() for d in self.errors]
        lines += [f"{d.format().replace(': error: ', f': note: {self.confirmed_by}: ', 1)}"
                  for d in self.compiler_errors[:5]]
        who = f" ({self.confirmed_by} agrees)" if self.confirmed_by else ""
        lines.append(f"{self.file}: error: the source has {len(self.errors)} syntax error(s){who}; nothing was "
                     "translated (fix them, or give --keep-going to translate what parses)")
        return "\n".join(lines)


def _stop_on_syntax_errors(unit: ParsedUnit, options: TranslateOptions) -> None:
    """Raise :class:`SourceSyntaxErrors` when the source has syntax errors its own compiler confirms.

    The grammar is not the compiler: what it cannot read in a file the source's compiler accepts (a qualifier
    or type macro, a construct of a newer standard) is our limit, not the user's error, so the translation goes
    on and the diagnostics say where. With no compiler for the source here, the grammar's errors stand. The
    grammar's locations are shown (they name the column; nvcc names only the line), the compiler's as notes."""
    from xpiler_core.frontend.source import syntax_diagnostics

    errors = syntax_diagnostics(unit.parsed.tree, unit.path, limit=20)
    if not errors:
        return
    from xpiler_core.project import build_settings, load_project
    from xpiler_core.verify.toolchains import compile_check, default_toolchain, is_cplusplus

    if unit.dialect is Dialect.BANG:
        raise SourceSyntaxErrors(errors, unit.path, None)
    toolchain = default_toolchain(unit.dialect, is_cplusplus(unit.text))
    project = load_project(unit.path, options.project)
    verdict = compile_check(unit.text, unit.dialect, toolchain=toolchain, flags=("-fsyntax-only",)
                            if toolchain in ("gcc", "g++") else (), display_name=unit.path,
                            build=build_settings(project, unit.path, unit.text))
    if verdict.version == "not installed":
        raise SourceSyntaxErrors(errors, unit.path, None)
    if verdict.ok:
        return
    # the compiler agrees only where it also stops near one of them: a file it cannot build for another reason
    # (a library header missing on this machine, say) is no confirmation of what the grammar misread
    grammar_lines = {d.span.start_line for d in errors}
    agreeing = [d for d in verdict.diagnostics if d.severity is Severity.ERROR
                and d.file in (unit.path, "") and "No such file" not in d.message
                and any(abs(d.span.start_line - line) <= 3 for line in grammar_lines)]
    if agreeing:
        raise SourceSyntaxErrors(errors, unit.path, toolchain,
                                 [d for d in verdict.diagnostics if d.severity is Severity.ERROR])


def _report_syntax_errors(result: TranslationResult, unit: ParsedUnit) -> None:
    """Syntax errors of the source go first in the result's diagnostics, each at its line and column; when the
    translation did not verify they are named as the likely cause in the summary."""
    from xpiler_core.frontend.source import syntax_diagnostics

    errors = syntax_diagnostics(unit.parsed.tree, unit.path, limit=20)
    if not errors:
        return
    result.diagnostics[:0] = errors
    if result.status is not Status.VERIFIED:
        first = errors[0]
        where = f"{first.span.start_line + 1}:{first.span.start_col + 1}"
        result.summary += f" — the source has {len(errors)} syntax error(s), first at {where}: {first.message}"


def run_pass(name: str, text: str, path: str, params: dict[str, Any], target: Dialect) -> PassOutcome:
    """Run one pass on ``text`` (``xpiler pass`` and the editor's "Run pass: <name>"); a refusal is reported,
    not raised. An AST pass's result is printed in ``target``."""
    source = detect_dialect(text, path)
    ctx = PassContext(source_dialect=source, target=target, file=path)
    run = run_passes(SourceUnit(text, source, path), [(name, params)], ctx)
    record = run.records[-1]
    if record["refused"] is not None:
        return PassOutcome(text, ctx.diagnostics, record["refused"], ctx.unresolved, ctx.notes)
    if isinstance(run.unit, SourceUnit):
        new_text = run.unit.text
    else:
        from xpiler_core.printer import print_module

        new_text = print_module(run.unit, target)
    return PassOutcome(new_text, ctx.diagnostics, None, ctx.unresolved, ctx.notes)


def _is_source_file(dest: Path, result: TranslationResult) -> bool:
    """Whether ``dest`` is one of the files the translation read (the source or one of its headers)."""
    read = {str(Path(result.source_path).resolve()), *result.manifest["source"].get("includes", {})}
    return str(dest) in read


def check_output_path(source_path: str, output_path: str | None, target: Dialect,
                      manifest_path: str | None = None) -> Path:
    """Before any work: the path the translation will be written to, or an error saying why it cannot be —
    the source itself, a symbolic link, or a folder where nothing can be created. (A run that takes minutes
    must not end by losing its result to a path that was never writable.)"""
    from xpiler_core.safe_io import writable_folder_problem

    out = Path(output_path or suggested_output_path(source_path, target))
    source = Path(source_path)
    if out.resolve() == source.resolve():
        raise XpilerError("refusing to write the translation over its source file", str(out))
    if out.is_symlink():
        raise UnsafePath(f"refusing to write {out}: it is a symbolic link (xpiler never writes through links; "
                         "remove it or choose another output with -o)", str(out))
    if out.is_dir():
        raise XpilerError("the output path is a folder; give a file name", str(out))
    problem = writable_folder_problem(out.parent)
    if problem:
        raise XpilerError(f"cannot write the translation: {problem}", str(out))
    if manifest_path:
        extra = Path(manifest_path)
        if extra.resolve() == source.resolve():
            raise XpilerError("refusing to write the manifest over the source file", str(extra))
        problem = writable_folder_problem(extra.parent)
        if problem:
            raise XpilerError(f"cannot write the manifest: {problem}", str(extra))
    return out


def write_outputs(
    result: TranslationResult, output_path: str | None = None, manifest_path: str | None = None,
    root: Path | None = None,
) -> tuple[Path, Path]:
    """Write the translation and its manifest; never over the source, never through a symbolic link, never
    outside ``root`` (default: the output's folder). Returns (output, manifest) paths.

    A result without output text writes only the manifest (an existing file at the output path is kept).

    The manifest always goes to ``.xpiler/<output name>.json`` next to the output, and also to
    ``manifest_path`` when given.
    """
    out = Path(output_path or result.suggested_output_path)
    source = Path(result.source_path)
    if out.resolve() == source.resolve():
        raise XpilerError("refusing to write the translation over its source file", str(out))
    folder = out.parent
    confine = root or folder
    result.manifest.setdefault("output", {})
    if result.output_text:
        write_confined(out, result.output_text, confine)
        result.manifest["output"].update({"path": str(out), "sha256": sha256_text(result.output_text)})
        written_headers: dict[str, str] = {}
        for name, text in result.companions.items():
            # translated headers go beside the output under their new names, never over a source file
            dest = folder / name
            if _is_source_file(dest.resolve(), result):
                raise XpilerError(f"refusing to write the translated header over {dest}", str(dest))
            write_confined(dest, text, confine)
            written_headers[str(dest.resolve())] = sha256_text(text)
        if written_headers:
            result.manifest["output"]["headers"] = written_headers
    else:
        # no candidate (refused or unresolved before any code was produced): nothing replaces what is there
        result.manifest["output"].update({"path": None, "sha256": None})
    blob = json.dumps(result.manifest, indent=2, sort_keys=True, default=str)
    default_manifest = folder / MANIFEST_DIR / (out.name + ".json")
    write_confined(default_manifest, blob, confine)
    written = default_manifest
    if manifest_path:
        extra = Path(manifest_path)
        if extra.resolve() == source.resolve():
            raise XpilerError("refusing to write the manifest over the source file", str(extra))
        write_confined(extra, blob)
        written = extra
    return out, written
