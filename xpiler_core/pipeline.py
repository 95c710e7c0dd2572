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

from xpiler_core.diagnostics import Diagnostic, XpilerError
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, SourceUnit, Unresolved
from xpiler_core.passes.driver import run_passes
from xpiler_core.progress import CancelToken, ProgressFn
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
           "run_pass", "sha256_text", "suggested_output_path", "translate", "verdict_dict", "write_outputs"]


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
    source = options.source_dialect or detect_dialect(text, path)
    if source is options.target:
        raise XpilerError(f"the source is already {source.value.upper()} (give --from if it is not)", path)
    plan_module = plan_for(source, options.target, path)
    unit = ParsedUnit(text, path, source)
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


def write_outputs(
    result: TranslationResult, output_path: str | None = None, manifest_path: str | None = None
) -> tuple[Path, Path]:
    """Write the translation and its manifest; never over the source. Returns (output, manifest) paths.

    A result without output text writes only the manifest (an existing file at the output path is kept).

    The manifest always goes to ``.xpiler/<output name>.json`` next to the output, and also to
    ``manifest_path`` when given.
    """
    out = Path(output_path or result.suggested_output_path)
    source = Path(result.source_path)
    if source.exists() and out.exists() and out.resolve() == source.resolve():
        raise XpilerError("refusing to write the translation over its source file", str(out))
    if out.resolve() == source.resolve():
        raise XpilerError("refusing to write the translation over its source file", str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    result.manifest.setdefault("output", {})
    if result.output_text:
        out.write_text(result.output_text, encoding="utf-8")
        result.manifest["output"].update({"path": str(out), "sha256": sha256_text(result.output_text)})
        written_headers: dict[str, str] = {}
        for name, text in result.companions.items():
            # translated headers go beside the output under their new names, never over a source file
            dest = (out.parent / name).resolve()
            if out.parent.resolve() not in dest.parents or dest.exists() and dest.read_text(
                    encoding="utf-8", errors="replace") != text and _is_source_file(dest, result):
                raise XpilerError(f"refusing to write the translated header over {dest}", str(dest))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
            written_headers[str(dest)] = sha256_text(text)
        if written_headers:
            result.manifest["output"]["headers"] = written_headers
    else:
        # no candidate (refused or unresolved before any code was produced): nothing replaces what is there
        result.manifest["output"].update({"path": None, "sha256": None})
    blob = json.dumps(result.manifest, indent=2, sort_keys=True, default=str)
    default_manifest = out.parent / MANIFEST_DIR / (out.name + ".json")
    default_manifest.parent.mkdir(parents=True, exist_ok=True)
    default_manifest.write_text(blob, encoding="utf-8")
    written = default_manifest
    if manifest_path:
        extra = Path(manifest_path)
        if extra.resolve() == source.resolve():
            raise XpilerError("refusing to write the manifest over the source file", str(extra))
        extra.parent.mkdir(parents=True, exist_ok=True)
        extra.write_text(blob, encoding="utf-8")
        written = extra
    return out, written

