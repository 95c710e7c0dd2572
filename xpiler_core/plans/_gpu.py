"""What CUDA → HIP and HIP → CUDA share: passes on the CST, then the evidence.

Evidence is a real compiler's verdict on the candidate (hipcc for HIP, nvcc for CUDA) and a run of the
candidate on the SIMT-on-CPU runtime at the target's warp size, on the same inputs as the source (run at
its own warp size) or a numpy reference from a test spec. Without a spec, tests are built from the code
(``verify/autospec.py``); when that is not possible the result says "compiled-not-executed".
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.frontend.dialect import Dialect
from xpiler_core.passes.base import PassContext, SourceUnit, Unresolved
from xpiler_core.pipeline import (
    Status,
    TranslateOptions,
    TranslationResult,
    apply_passes,
    host_info,
    max_error,
    minimal_failing_case,
    report_dict,
    sha256_text,
    suggested_output_path,
    unresolved_dict,
    verdict_dict,
    xpiler_version,
)
from xpiler_core.progress import CancelToken, ProgressFn, report


@dataclass(frozen=True)
class GpuDirection:
    source: Dialect
    target: Dialect
    default_passes: list[str]
    source_warp: int
    target_warp: int

    @property
    def name(self) -> str:
        return f"{self.source.value}->{self.target.value}"


@dataclass
class Evidence:
    compile: Any | None = None
    tests: Any | None = None
    baseline: Any | None = None  # the source against the spec's reference (spec runs only)
    spec_info: dict[str, Any] | None = None
    minimal_case: Any | None = None  # a CaseResult on sizes shrunk from the smallest failing case
    note: str = ""
    seconds_compile: float = 0.0
    seconds_tests: float = 0.0


def gpu_plan(
    direction: GpuDirection,
    text: str,
    path: str,
    options: TranslateOptions,
    progress: ProgressFn | None,
    cancel: CancelToken | None,
) -> TranslationResult:
    started = time.perf_counter()
    report(progress, 0.0, f"translating {Path(path).name} ({direction.name})")
    pass_names = list(options.passes) if options.passes is not None else list(direction.default_passes)
    target_warp = options.warp_size or direction.target_warp
    attempts: list[dict[str, Any]] = []
    for label, overlay in candidate_variants(direction, text, pass_names, options):
        params = {name: {**options.pass_params.get(name, {}), **extra} for name, extra in overlay.items()}
        params = {**options.pass_params, **params}
        ctx = PassContext(source_dialect=direction.source, target=direction.target, warp_size=target_warp, file=path)
        unit, records = apply_passes(SourceUnit(text, direction.source, path), pass_names, ctx, params, cancel)
        if any(r["refused"] for r in records) and overlay:
            attempts.append({"candidate": label, "status": "refused", "reason": "a pass refused this variant"})
            continue
        candidate = unit.text
        seconds_passes = time.perf_counter() - started
        report(progress, 0.3, f"passes applied: {', '.join(r['name'] for r in records if r['changed']) or 'none'}")
        evidence = Evidence()
        if options.verify:
            evidence = verify_candidate(direction, text, path, candidate, options, target_warp, progress, cancel)
        status, reason = decide_status(options, evidence, ctx.unresolved)
        attempts.append({"candidate": label, "params": params, "status": status, "reason": reason,
                         "candidate_sha256": sha256_text(candidate)})
        if status == "verified":
            break
    diagnostics = list(ctx.diagnostics)
    if reason:
        diagnostics.append(Diagnostic(Severity.WARNING if status != "verified" else Severity.INFO,
                                      "translate.status", reason, Span.empty(), path))
    seconds = time.perf_counter() - started
    summary = make_summary(direction, records, evidence, status, reason, seconds, target_warp)
    manifest = make_manifest(direction, text, path, candidate, options, records, evidence, status, reason,
                             ctx.unresolved, target_warp,
                             {"passes": round(seconds_passes, 4), "compile": round(evidence.seconds_compile, 4),
                              "tests": round(evidence.seconds_tests, 4), "total": round(seconds, 4)})
    manifest["candidates"] = attempts
    manifest["options"]["pass_params"] = params  # the chosen candidate's parameters: what replay redoes
    report(progress, 1.0, f"{status}")
    return TranslationResult(
        source_path=path,
        source_dialect=direction.source,
        target=direction.target,
        output_text=candidate,
        suggested_output_path=suggested_output_path(path, direction.target),
        status=status,
        summary=summary,
        passes_applied=records,
        compile=evidence.compile,
        tests=evidence.tests,
        diagnostics=diagnostics,
        unresolved=list(ctx.unresolved),
        manifest=manifest,
        seconds=seconds,
    )


def candidate_variants(
    direction: GpuDirection, text: str, pass_names: list[str], options: TranslateOptions
) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """Translations to try in order; the first verified one wins (the last one is the fallback).

    CUDA → HIP warp code written against ``warpSize`` with shuffles only might be right on the full
    64-lane wavefront as written ("native", faster on AMD): tried first when plausible, with the exact
    32-lane form ("lanes32") as the fallback. The user's explicit strategy is never second-guessed.
    """
    from xpiler_core.passes.warp_size import native_is_plausible

    if (direction.target is Dialect.HIP and options.verify and "warp_size" in pass_names
            and "strategy" not in options.pass_params.get("warp_size", {}) and native_is_plausible(text)):
        return [("native", {"warp_size": {"strategy": "native"}}), ("lanes32", {})]
    return [("default", {})]


def verify_candidate(
    direction: GpuDirection,
    text: str,
    path: str,
    candidate: str,
    options: TranslateOptions,
    target_warp: int,
    progress: ProgressFn | None,
    cancel: CancelToken | None,
) -> Evidence:
    evidence = Evidence()
    try:
        from xpiler_core.verify.toolchains import compile_check
    except ImportError as exc:  # the harness room is not there: say so, never pretend
        evidence.note = f"compile check unavailable ({exc})"
        return evidence
    report(progress, 0.35, f"compiling with the {direction.target.value.upper()} toolchain and testing")

    def timed_compile() -> tuple[Any, float]:
        started = time.perf_counter()
        return compile_check(candidate, direction.target), time.perf_counter() - started

    # The compiler's verdict and the runtime tests are independent: run them side by side.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(timed_compile)
        try:
            _run_tests(direction, text, path, candidate, options, target_warp, progress, cancel, evidence)
        finally:
            evidence.compile, evidence.seconds_compile = pending.result()
    return evidence


def _run_tests(
    direction: GpuDirection,
    text: str,
    path: str,
    candidate: str,
    options: TranslateOptions,
    target_warp: int,
    progress: ProgressFn | None,
    cancel: CancelToken | None,
    evidence: Evidence,
) -> None:
    if cancel is not None:
        cancel.check()
    try:
        from xpiler_core.verify.harness import run_spec
        from xpiler_core.verify.spec import load_spec
    except ImportError as exc:
        evidence.note = f"test harness unavailable ({exc})"
        return
    from xpiler_core.verify import autospec

    report(progress, 0.6, f"running tests at warp size {target_warp}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="xpiler-spec-") as tmp:
        if options.spec_path:
            spec = load_spec(options.spec_path)
            evidence.spec_info = {"path": str(Path(options.spec_path).resolve()), "auto": False,
                                  "sha256": sha256_text(Path(options.spec_path).read_text(encoding="utf-8"))}
        else:
            built = autospec.build_spec(text, path, direction.source, Path(tmp), allow_shim=True)
            if built.spec_path is None:
                evidence.note = f"no tests: {built.reason}"
                evidence.spec_info = {"auto": True, "built": False, "reason": built.reason}
                evidence.seconds_tests = time.perf_counter() - t0
                return
            spec = load_spec(str(built.spec_path))
            evidence.spec_info = {"auto": True, "built": True, "reason": built.reason, "spec_toml": built.spec_text}
        entry = getattr(spec, "entry", None)
        kind = getattr(spec, "kind", None)
        evidence.tests = run_spec(
            spec,
            candidate_text=candidate,
            candidate_dialect=direction.target,
            candidate_entry=entry,
            candidate_kind=kind,
            warp_size=target_warp,
            seed=options.seed,
            cancel=cancel,
        )
        if not evidence.tests.passed and not evidence.spec_info.get("auto"):
            # does the source itself match the reference? If not, the comparison means nothing
            evidence.baseline = run_spec(spec, warp_size=direction.source_warp, seed=options.seed, cancel=cancel)
        if not evidence.tests.passed and (evidence.baseline is None or evidence.baseline.passed):
            evidence.minimal_case = shrink_failing_case(direction, spec, candidate, target_warp, options.seed,
                                                        evidence.tests, bool(evidence.spec_info.get("auto")), cancel)
        evidence.spec_info["tolerance"] = _tolerance_of(spec)
        evidence.spec_info["case_shapes"] = _case_shapes(spec)
        evidence.spec_info["args"] = [
            {"name": a.name, "dtype": a.dtype, "role": a.role, "shape": [str(x) for x in a.shape],
             "init": a.init} for a in getattr(spec, "args", [])
        ]
        evidence.spec_info["cases"] = [dict(c.sizes) for c in evidence.tests.cases]
    evidence.seconds_tests = time.perf_counter() - t0


MAX_SHRINK_STEPS = 6


def shrink_failing_case(
    direction: GpuDirection,
    spec: Any,
    candidate: str,
    target_warp: int,
    seed: int,
    report: Any,
    reference_is_source: bool,
    cancel: CancelToken | None,
) -> Any | None:
    """Halve the sizes of the smallest failing case while the translation still fails on them.

    A smaller case counts only if it is a fair test: with a numpy reference, the source must pass it at its
    own warp size (else the sizes broke an assumption of the kernel, not of the translation). Returns the
    smallest failing CaseResult found (possibly the original one).
    """
    import dataclasses

    from xpiler_core.verify.harness import run_spec

    best = minimal_failing_case(report)
    if best is None or best.error:
        return best
    sizes = dict(best.sizes)
    for _ in range(MAX_SHRINK_STEPS):
        smaller = {k: max(1, v // 2) for k, v in sizes.items()}
        if smaller == sizes:
            break
        trial = dataclasses.replace(spec, cases=[smaller])
        try:
            got = run_spec(trial, candidate_text=candidate, candidate_dialect=direction.target, warp_size=target_warp,
                           seed=seed, cancel=cancel)
            if got.passed or not got.cases or got.cases[0].error:
                break
            if not reference_is_source:
                source_run = run_spec(trial, warp_size=direction.source_warp, seed=seed, cancel=cancel)
                if not source_run.passed:
                    break
        except Exception:  # noqa: BLE001 - a size the spec's expressions reject ends the search
            break
        best, sizes = got.cases[0], smaller
    return best


def _case_shapes(spec: Any) -> list[dict[str, list[int]]]:
    """Each case's buffer shapes, evaluated (the manifest's record of the inputs' shapes)."""
    from xpiler_core.verify.expr import evaluate_int

    shapes: list[dict[str, list[int]]] = []
    for case in getattr(spec, "cases", []):
        try:
            shapes.append({a.name: [evaluate_int(d, case) for d in a.shape] for a in spec.args if a.role != "scalar"})
        except Exception:  # noqa: BLE001 - a shape the evaluator rejects is recorded as unknown
            shapes.append({})
    return shapes


def _tolerance_of(spec: Any) -> dict[str, Any]:
    return {"atol": getattr(spec, "atol", None), "rtol": getattr(spec, "rtol", None)}


def decide_status(options: TranslateOptions, ev: Evidence, unresolved: list[Unresolved]) -> tuple[Status, str]:
    """Verified only with a passing compile and passing tests and nothing left unresolved."""
    if not options.verify:
        # nothing was compiled or run: not even "compiled-not-executed" would be true
        return "unresolved", "verification was turned off: not compiled, not executed"
    if ev.compile is None:
        return "unresolved", ev.note or "no compile verdict"
    if not ev.compile.ok:
        first = (ev.compile.stderr or "").strip().splitlines()
        return "unresolved", "the target compiler rejects the translation" + (f": {first[0]}" if first else "")
    if ev.baseline is not None and not ev.baseline.passed:
        why = ev.baseline.first_failure()
        return "unresolved", ("the source itself does not match the spec's reference; nothing to compare against"
                              + (f": {why}" if why else ""))
    if ev.tests is None:
        if unresolved:
            return "unresolved", f"{len(unresolved)} construct(s) unresolved; " + (ev.note or "not executed")
        return "compiled-not-executed", ev.note or "compiled, not executed"
    if ev.tests.build_error:
        return "unresolved", f"the runtime could not build the translation: {ev.tests.build_error.splitlines()[0]}"
    if not ev.tests.passed:
        case = ev.minimal_case or minimal_failing_case(ev.tests)
        where = ""
        if case is not None:
            where = f" (smallest failing case {case.sizes}"
            where += f": {case.error})" if case.error else (
                f": {case.mismatches} mismatches, first at {case.first_mismatch} of {case.output_name}, "
                f"expected {case.expected}, got {case.got})")
        return "unresolved", "the translation computes different results" + where
    if unresolved:
        return "unresolved", f"tests pass but {len(unresolved)} construct(s) are unresolved"
    return "verified", ""


def make_summary(direction: GpuDirection, records: list[dict[str, Any]], ev: Evidence, status: str, reason: str,
                 seconds: float, target_warp: int) -> str:
    changed = [r["name"] for r in records if r["changed"]]
    lines = [f"{direction.source.value.upper()} → {direction.target.value.upper()}: "
             f"passes applied: {', '.join(changed) if changed else 'none'}"]
    if ev.compile is not None:
        lines.append(f"compile ({getattr(ev.compile, 'toolchain', '?')} {getattr(ev.compile, 'version', '')}): "
                     f"{'ok' if ev.compile.ok else 'FAILED'} in {ev.seconds_compile:.2f} s")
    if ev.tests is not None:
        passed = sum(1 for c in ev.tests.cases if c.passed)
        against = "source" if ev.spec_info and ev.spec_info.get("auto") else "reference"
        err = max_error(ev.tests)
        lines.append(f"tests: {passed}/{len(ev.tests.cases)} cases passed at warp size {target_warp} vs the "
                     f"{against}" + (f", max abs error {err:.3g}" if err is not None else ""))
    elif ev.note:
        lines.append(ev.note)
    lines.append(f"status: {status}" + (f" — {reason}" if reason and status != 'verified' else "")
                 + f" ({seconds:.2f} s)")
    return "\n".join(lines)


def _case_dict(case: Any | None) -> dict[str, Any] | None:
    if case is None:
        return None
    return {"sizes": dict(case.sizes), "mismatches": case.mismatches,
            "first_mismatch": list(case.first_mismatch) if case.first_mismatch is not None else None,
            "output_name": case.output_name, "expected": case.expected, "got": case.got, "error": case.error,
            "max_abs_err": case.max_abs_err}


def make_manifest(
    direction: GpuDirection,
    text: str,
    path: str,
    candidate: str,
    options: TranslateOptions,
    records: list[dict[str, Any]],
    ev: Evidence,
    status: str,
    reason: str,
    unresolved: list[Unresolved],
    target_warp: int,
    timings: dict[str, float],
) -> dict[str, Any]:
    toolchains: dict[str, Any] = {}
    if ev.compile is not None:
        toolchains[str(getattr(ev.compile, "toolchain", "target"))] = getattr(ev.compile, "version", None)
    try:
        from xpiler_core.verify.toolchains import detect_toolchains

        for name, info in (detect_toolchains() or {}).items():
            toolchains.setdefault(str(name), getattr(info, "version", info) if not isinstance(info, str) else info)
    except Exception:  # noqa: BLE001 - the manifest records what is known; detection failing is not fatal
        pass
    return {
        "xpiler_version": xpiler_version(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "direction": direction.name,
        "source": {"path": str(Path(path).resolve()) if Path(path).exists() else path,
                   "dialect": direction.source.value, "sha256": sha256_text(text)},
        "candidate_sha256": sha256_text(candidate),
        "options": {"target": direction.target.value, "warp_size": target_warp, "source_warp": direction.source_warp,
                    "spec_path": options.spec_path, "verify": options.verify, "seed": options.seed,
                    "passes": [r["name"] for r in records], "pass_params": options.pass_params,
                    "proposer": options.proposer},
        "passes": records,
        "toolchains": toolchains,
        "host": host_info(),
        "seed": options.seed,
        "spec": ev.spec_info,
        "outcome": {
            "status": status,
            "reason": reason,
            "compile": verdict_dict(ev.compile),
            "baseline": report_dict(ev.baseline),
            "tests": report_dict(ev.tests),
            "max_abs_err": max_error(ev.tests),
            "minimal_failing_case": _case_dict(ev.minimal_case),
            "note": ev.note,
            "unresolved": [unresolved_dict(u, path) for u in unresolved],
        },
        "timings": timings,
    }
