"""One translation, end to end: direction → plan → passes → candidate → verification → result + manifest.

``translate`` detects the source dialect and hands the work to ``xpiler_core/plans/<src>_to_<dst>.py``
(a new direction is a new plan file, not an edit here). The helpers below are what plans share: running
passes, checking candidates with the real compiler and the runtime, and writing the manifest that
``xpiler replay`` uses to redo a run.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from xpiler_core import __version__
from xpiler_core.diagnostics import Diagnostic, Severity, Span, XpilerError
from xpiler_core.frontend.dialect import Dialect, detect_dialect
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused, SourceUnit, Unresolved
from xpiler_core.progress import CancelToken, ProgressFn

Status = Literal["verified", "compiled-not-executed", "unresolved", "failed"]
MANIFEST_DIR = ".xpiler"


@dataclass
class TranslateOptions:
    target: Dialect
    warp_size: int | None = None  # the target's warp size for execution (HIP default 64)
    spec_path: str | None = None
    verify: bool = True
    seed: int = 0
    passes: list[str] | None = None  # None: the plan's default pass list
    proposer: str = "rules"  # "rules" | "llm" | "rules-then-llm" (xpiler_core/llm)
    # per-pass parameters, pass name -> {param: value}; recorded in the manifest
    pass_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    llm: Any | None = None  # an xpiler_core.llm.LLMConfig; None: the XPILER_LLM_* environment variables
    repair: bool = True  # try a local SMT repair (xpiler_core/repair) when the candidate fails its spec


@dataclass
class TranslationResult:
    source_path: str
    source_dialect: Dialect
    target: Dialect
    output_text: str
    suggested_output_path: str
    status: Status
    summary: str
    passes_applied: list[dict[str, Any]]
    compile: Any | None  # CompileVerdict
    tests: Any | None  # SpecReport
    diagnostics: list[Diagnostic]
    unresolved: list[Unresolved]
    manifest: dict[str, Any]
    seconds: float


@dataclass
class PassOutcome:
    text: str
    diagnostics: list[Diagnostic]
    refused: str | None
    unresolved: list[Unresolved] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def direction_name(source: Dialect, target: Dialect) -> str:
    return f"{source.value}_to_{target.value}"


def translate(
    text: str,
    path: str,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    """Translate ``text`` (read from ``path``) to ``options.target`` with the direction's plan."""
    source = detect_dialect(text, path)
    if source is options.target:
        raise XpilerError(f"the source is already {source.value.upper()}", path)
    module_name = f"xpiler_core.plans.{direction_name(source, options.target)}"
    try:
        plan_module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise XpilerError(
            f"no translation plan from {source.value.upper()} to {options.target.value.upper()}", path
        ) from None
    # ---- LLM proposer hook (xpiler_core/llm, issue 10): off unless a proposer other than "rules" is set ----
    if options.proposer != "rules":
        from xpiler_core.llm.hook import translate_with_proposer

        proposed: TranslationResult = translate_with_proposer(plan_module.plan, text, path, options, progress, cancel)
        return proposed
    # ---- end of LLM proposer hook ----
    result: TranslationResult = plan_module.plan(text, path, options, progress, cancel)
    _report_syntax_errors(result, text, path, source)
    # ---- SMT repair hook (xpiler_core/repair, issue 8): a candidate failing its spec gets one local repair
    # attempt before it is reported unresolved; the attempt is recorded in manifest["repair"] ----
    if options.repair:
        from xpiler_core.repair.hook import repair_translation, should_repair

        if should_repair(result, options):
            result = repair_translation(result, options, progress, cancel)
    # ---- end of SMT repair hook ----
    return result


def _report_syntax_errors(result: TranslationResult, text: str, path: str, source: Dialect) -> None:
    """Syntax errors of the source go first in the result's diagnostics, each at its line and column; when the
    translation did not verify they are named as the likely cause in the summary."""
    from xpiler_core.frontend.source import parse_text, syntax_diagnostics

    errors = syntax_diagnostics(parse_text(text, path, source).tree, path, limit=20)
    if not errors:
        return
    result.diagnostics[:0] = errors
    if result.status != "verified":
        first = errors[0]
        where = f"{first.span.start_line + 1}:{first.span.start_col + 1}"
        result.summary += f" — the source has {len(errors)} syntax error(s), first at {where}: {first.message}"


def run_pass(name: str, text: str, path: str, params: dict[str, Any], target: Dialect) -> PassOutcome:
    """Run one pass on ``text`` (the server's "Run pass: <name>"); a refusal is reported, not raised."""
    module = get_pass(name)
    source = detect_dialect(text, path)
    ctx = PassContext(source_dialect=source, target=target, file=path)
    merged = {**module.INFO.defaults(), **params}
    try:
        out = module.apply(SourceUnit(text, source, path), merged, ctx)
    except PassRefused as refusal:
        return PassOutcome(text, ctx.diagnostics, refusal.reason, ctx.unresolved, ctx.notes)
    new_text = out.text if isinstance(out, SourceUnit) else text
    return PassOutcome(new_text, ctx.diagnostics, None, ctx.unresolved, ctx.notes)


# ---- shared by plans ----------------------------------------------------------------------------------


def apply_passes(
    unit: SourceUnit,
    names: list[str],
    ctx: PassContext,
    pass_params: dict[str, dict[str, Any]],
    cancel: CancelToken | None = None,
) -> tuple[SourceUnit, list[dict[str, Any]]]:
    """Run CST passes in order; returns the final unit and one record per pass (name, params, notes)."""
    records: list[dict[str, Any]] = []
    for name in names:
        if cancel is not None:
            cancel.check()
        module = get_pass(name)
        params = {**module.INFO.defaults(), **pass_params.get(name, {})}
        notes_before, unresolved_before = len(ctx.notes), len(ctx.unresolved)
        started = time.perf_counter()
        before = unit.text
        try:
            unit = module.apply(unit, params, ctx)
            refused = None
        except PassRefused as refusal:
            refused = refusal.reason
            ctx.diagnostics.append(
                Diagnostic(Severity.WARNING, f"{name}.refused", refusal.reason, refusal.span or Span.empty(), ctx.file)
            )
        records.append(
            {
                "name": name,
                "params": params,
                "changed": unit.text != before,
                "refused": refused,
                "notes": ctx.notes[notes_before:],
                "unresolved": len(ctx.unresolved) - unresolved_before,
                "seconds": round(time.perf_counter() - started, 4),
            }
        )
    return unit, records


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def host_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "machine": platform.machine(), "system": platform.system(),
            "python": platform.python_version()}


# The CPU target's output uses C++ headers (<cmath>, a namespace) and is built with g++: name it so.
_OUTPUT_SUFFIX: dict[Dialect, str] = {Dialect.C: ".cpp"}


def output_suffix(target: Dialect) -> str:
    """File suffix of a translation to ``target`` (``.cpp`` for the CPU target, else the dialect's own)."""
    return _OUTPUT_SUFFIX.get(target, target.suffix)


def suggested_output_path(path: str, target: Dialect) -> str:
    p = Path(path)
    suffix = output_suffix(target)
    candidate = p.with_suffix(suffix)
    if candidate == p:
        candidate = p.with_name(p.stem + ".xpiler" + suffix)
    return str(candidate)


def verdict_dict(verdict: Any | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {
        "ok": bool(getattr(verdict, "ok", False)),
        "toolchain": getattr(verdict, "toolchain", None),
        "version": getattr(verdict, "version", None),
        "command": getattr(verdict, "command", None),
        "seconds": getattr(verdict, "seconds", None),
        "cached": getattr(verdict, "cached", None),
        "stderr": (getattr(verdict, "stderr", "") or "")[:4000],
    }


def report_dict(report: Any | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {
        "passed": bool(report.passed),
        "warp_size": getattr(report, "warp_size", None),
        "build_error": (report.build_error or "")[:4000] or None,
        "seconds": getattr(report, "seconds", None),
        "cases": [
            {
                "sizes": dict(c.sizes),
                "passed": bool(c.passed),
                "max_abs_err": _finite(c.max_abs_err),
                "max_rel_err": _finite(c.max_rel_err),
                "mismatches": c.mismatches,
                "first_mismatch": list(c.first_mismatch) if c.first_mismatch is not None else None,
                "output_name": c.output_name,
                "expected": _finite(c.expected),
                "got": _finite(c.got),
                "error": c.error,
            }
            for c in report.cases
        ],
    }


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value


def max_error(report: Any | None) -> float | None:
    if report is None or not report.cases:
        return None
    errors = [c.max_abs_err for c in report.cases if c.max_abs_err is not None]
    return max(errors) if errors else None


def minimal_failing_case(report: Any | None) -> Any | None:
    """The failing case with the fewest elements (the smallest reproduction the run found)."""
    if report is None:
        return None
    failing = [c for c in report.cases if not c.passed]
    if not failing:
        return None

    def weight(case: Any) -> int:
        total = 1
        for value in case.sizes.values():
            total *= max(1, int(value))
        return total

    return min(failing, key=weight)


def unresolved_dict(item: Unresolved, path: str) -> dict[str, Any]:
    return {
        "reason": item.reason,
        "construct": item.construct,
        "location": f"{path}:{item.span.start_line + 1}:{item.span.start_col + 1}",
        "span": item.span.to_dict(),
    }


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


def xpiler_version() -> str:
    return __version__
