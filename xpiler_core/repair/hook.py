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
from xpiler_core.translation import TranslateOptions, TranslationResult
from xpiler_core.verify.spec import load_spec

DEFAULT_BUDGET_S = 15.0  # the pipeline waits for it; the CLI and the editor allow more


def should_repair(result: TranslationResult, options: TranslateOptions) -> bool:
    evidence = result.evidence
    if evidence is not None and evidence.baseline is not None and not evidence.baseline.passed:
        return False  # the source itself fails the spec: nothing trustworthy to repair towards
    return (
        bool(options.spec_path)
        and options.verify
        and result.tests is not None
        and not result.tests.passed
        and not result.tests.build_error
        and not result.unresolved
    )


def repair_translation(
    result: TranslationResult, options: TranslateOptions, progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    """The translation result, repaired and re-verified when a one-expression repair exists. The repaired
    text goes through the same evidence and status decision as any candidate."""
    # the engine (z3, the kernel model) is imported only when a repair is attempted
    from xpiler_core.repair.engine import repair_candidate
    from xpiler_core.translation import (
        Status,
        TestSet,
        decide_status,
        gather_evidence,
        report_dict,
        sha256_text,
        verdict_dict,
    )
    from xpiler_core.verify.targets import runner_for

    assert options.spec_path is not None
    if progress is not None:
        progress(0.9, "repair: localizing the failing candidate")
    spec = load_spec(options.spec_path)
    attempt = repair_candidate(
        result.output_text, result.suggested_output_path, spec, dialect=result.target,
        warp_size=options.warp_size, seed=options.seed, initial_report=result.tests,
        budget_s=DEFAULT_BUDGET_S, progress=progress, cancel=cancel,
    )
    record: dict[str, Any] = {**attempt.to_manifest(), "before_sha256": sha256_text(result.output_text)}
    if attempt.text is not None:
        record["after_sha256"] = sha256_text(attempt.text)
    manifest = result.manifest
    manifest["repair"] = record
    if not attempt.repaired or attempt.text is None:
        return result
    warp = options.warp_size or (64 if result.target.value == "hip" else None)
    runner = runner_for(result.target, warp, 64 if result.source_dialect.value == "hip" else 32)
    evidence = gather_evidence(attempt.text, TestSet([spec], auto=False, spec_path=options.spec_path), runner,
                               seed=options.seed, time_limit_s=options.run_time_limit_s, cancel=cancel, shrink=False)
    status, reason = decide_status(evidence, result.unresolved)
    record["compile_ok"] = bool(evidence.compile is not None and evidence.compile.ok)
    if status is not Status.VERIFIED:
        record["status"] = "rejected"
        record["message"] = f"the repaired text does not verify: {reason}"
        return result
    edits = "; ".join(f"`{e.old}` → `{e.new}`" for e in attempt.edits)
    cases = evidence.tests.cases if evidence.tests is not None else []
    summary = f"verified after SMT repair ({edits}): {sum(c.passed for c in cases)}/{len(cases)} cases pass"
    manifest["candidate_sha256"] = sha256_text(attempt.text)
    manifest["outcome"].update({"status": status.value, "reason": summary, "compile": verdict_dict(evidence.compile),
                                "tests": report_dict(evidence.tests), "repaired_from_status": Status(result.status).value})
    return replace(result, output_text=attempt.text, status=status, summary=summary, reason="", tests=evidence.tests,
                   compile=evidence.compile, manifest=manifest, evidence=evidence)
