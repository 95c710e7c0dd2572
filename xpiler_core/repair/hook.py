"""Pipeline integration: one local SMT repair attempt on a translation whose tests failed.

Called by ``pipeline.translate`` before a failing candidate is declared unresolved. The repaired text is
accepted only with the same evidence a translation needs: the target compiler's verdict and every spec
case passing. Whatever happens, the attempt (before/after, the solver's model, time) goes into the
manifest under ``"repair"``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.repair.engine import repair_candidate
from xpiler_core.verify.spec import load_spec
from xpiler_core.verify.toolchains import compile_check

DEFAULT_BUDGET_S = 15.0  # the pipeline waits for it; the CLI and the editor allow more


def should_repair(result: Any, options: Any) -> bool:
    tests = getattr(result, "tests", None)
    outcome = (getattr(result, "manifest", None) or {}).get("outcome") or {}
    baseline = outcome.get("baseline")
    if isinstance(baseline, dict) and baseline.get("passed") is False:
        return False  # the source itself fails the spec: nothing trustworthy to repair towards
    return (
        bool(getattr(options, "spec_path", None))
        and getattr(options, "verify", True)
        and tests is not None
        and not tests.passed
        and not tests.build_error
        and not getattr(result, "unresolved", None)
    )


def repair_translation(
    result: Any, options: Any, progress: ProgressFn | None = None, cancel: CancelToken | None = None
) -> Any:
    """The translation result, repaired and re-verified when a one-expression repair exists."""
    if progress is not None:
        progress(0.9, "repair: localizing the failing candidate")
    spec = load_spec(options.spec_path)
    attempt = repair_candidate(
        result.output_text, result.suggested_output_path, spec, dialect=result.target,
        warp_size=options.warp_size, seed=options.seed, initial_report=result.tests,
        budget_s=DEFAULT_BUDGET_S, progress=progress, cancel=cancel,
    )
    record: dict[str, Any] = {**attempt.to_manifest(), "before_sha256": _sha(result.output_text)}
    if attempt.text is not None:
        record["after_sha256"] = _sha(attempt.text)
    manifest = dict(result.manifest)
    manifest["repair"] = record
    if not attempt.repaired or attempt.text is None:
        return replace(result, manifest=manifest)
    verdict = compile_check(attempt.text, result.target)
    record["compile_ok"] = bool(verdict.ok)
    if not verdict.ok:
        record["status"] = "rejected"
        record["message"] = "the repaired text does not compile with the target toolchain"
        return replace(result, manifest=manifest)
    from xpiler_core.pipeline import report_dict, sha256_text, verdict_dict

    edits = "; ".join(f"`{e.old}` → `{e.new}`" for e in attempt.edits)
    status = "verified"
    cases = attempt.report.cases if attempt.report is not None else []
    summary = f"verified after SMT repair ({edits}): {sum(c.passed for c in cases)}/{len(cases)} cases pass"
    manifest["candidate_sha256"] = sha256_text(attempt.text)
    outcome = dict(manifest.get("outcome") or {})
    outcome.update({
        "status": status, "reason": summary, "compile": verdict_dict(verdict), "tests": report_dict(attempt.report),
        "repaired_from_status": result.status,
    })
    manifest["outcome"] = outcome
    return replace(
        result, output_text=attempt.text, status=status, summary=summary, tests=attempt.report,
        compile=verdict, manifest=manifest,
    )


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()
