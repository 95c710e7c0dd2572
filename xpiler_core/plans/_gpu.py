"""What CUDA → HIP and HIP → CUDA share: passes on the CST, then the evidence.

Evidence is a real compiler's verdict on the candidate (hipcc for HIP, nvcc for CUDA) and a run of the
candidate on the SIMT-on-CPU runtime at the target's warp size, on the same inputs as the source (run at
its own warp size) or a numpy reference from a test spec (``translation.gather_evidence``). Without a spec,
tests are built from the code (``verify/autospec.py``) or, for a program with ``main``, the whole program
runs (``verify/program.py``); when neither is possible the result says "compiled-not-executed".
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.passes.driver import run_passes
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.translation import (
    Evidence,
    Status,
    TranslateOptions,
    TranslationResult,
    decide_status,
    finish_translation,
    gather_evidence,
    output_display_name,
    sha256_text,
)


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


def gpu_plan(
    direction: GpuDirection,
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None,
    cancel: CancelToken | None,
) -> TranslationResult:
    from xpiler_core.plans._project import ProjectFiles
    from xpiler_core.verify.targets import GpuRunner

    started = time.perf_counter()
    text, path = unit.text, unit.path
    report(progress, 0.0, f"translating {Path(path).name} ({direction.name})")
    pass_names = list(options.passes) if options.passes is not None else list(direction.default_passes)
    target_warp = options.warp_size or direction.target_warp
    project = ProjectFiles.of(unit, options, direction.target)
    attempts: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xpiler-spec-") as tmp:
        tests = project.test_set(options, Path(tmp)) if options.verify else None
        for label, overlay in candidate_variants(direction, text, pass_names, options):
            params = {name: {**options.pass_params.get(name, {}), **extra} for name, extra in overlay.items()}
            params = {**options.pass_params, **params}
            ctx = PassContext(source_dialect=direction.source, target=direction.target, warp_size=target_warp,
                              file=path, project_names=project.declared_names(),
                              defines=project.config.define_values())
            run = run_passes(SourceUnit(text, direction.source, path), pass_names, ctx, params, cancel=cancel,
                             progress=progress)
            if run.refused is not None and overlay:
                attempts.append({"candidate": label, "status": "refused", "reason": "a pass refused this variant"})
                continue
            assert isinstance(run.unit, SourceUnit)
            companions = project.translate_headers(direction, pass_names, params, target_warp, cancel)
            companions.update(project.translate_units(direction, pass_names, params, target_warp, cancel))
            candidate = project.rewrite_includes(run.unit.text, path)
            seconds_passes = time.perf_counter() - started
            report(progress, 0.3,
                   f"passes applied: {', '.join(r['name'] for r in run.records if r['changed']) or 'none'}")
            evidence = Evidence(verify=options.verify)
            if options.verify and tests is not None:
                runner = GpuRunner(direction.target, target_warp, direction.source_warp,
                                   build=project.candidate_build(candidate, companions),
                                   source_build=project.source_build(),
                                   display_name=output_display_name(options, path))
                evidence = gather_evidence(candidate, tests, runner, seed=options.seed, time_limit_s=options.run_time_limit_s, cancel=cancel,
                                           progress=progress,
                                           program_check=project.program_check(runner, target_warp, cancel))
            status, reason = decide_status(evidence, ctx.unresolved)
            attempts.append({"candidate": label, "params": params, "status": status.value, "reason": reason,
                             "candidate_sha256": sha256_text(candidate)})
            if status is Status.VERIFIED:
                break
    options_used = dataclasses.replace(options, pass_params=params)  # the chosen variant's: what replay redoes
    result = finish_translation(
        text=text, path=path, source=direction.source, target=direction.target, options=options_used,
        candidate=candidate, records=run.records, evidence=evidence, unresolved=ctx.unresolved,
        diagnostics=[*project.missing_includes(), *ctx.diagnostics], notes=ctx.notes, started=started,
        warp_size=target_warp,
        timings={"passes": seconds_passes}, candidates=attempts, includes=project.headers, project=project.config,
        companions=companions, source_build=project.source_build())
    report(progress, 1.0, result.status.value)
    return result


def candidate_variants(
    direction: GpuDirection, text: str, pass_names: list[str], options: TranslateOptions
) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """Translations to try in order; the first verified one wins (the last one is the fallback).

    CUDA → HIP warp code written against ``warpSize`` with shuffles only might be right on the full
    64-lane wavefront as written ("native", faster on AMD): tried first when plausible, with the exact
    32-lane form ("lanes32") as the fallback. The user's explicit strategy is never second-guessed.
    """
    from xpiler_core.passes.gpu.warp_size import native_is_plausible

    if (direction.target is Dialect.HIP and options.verify and "warp_size" in pass_names
            and "strategy" not in options.pass_params.get("warp_size", {}) and native_is_plausible(text)):
        return [("native", {"warp_size": {"strategy": "native"}}), ("lanes32", {})]
    return [("default", {})]
