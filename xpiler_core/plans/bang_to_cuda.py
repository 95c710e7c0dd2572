"""BANG C → CUDA: the ``bang_detensorize`` pass (tasks become blocks, intrinsics scalar loops or helpers),
verified with nvcc and on the SIMT runtime at warp 32 against the spec's reference, or without a spec against
the source run on the MLU model (tests built from the kernel)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.bang.bang_detensorize import translate_bang_to_cuda
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.passes.driver import run_passes
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.translation import (
    Evidence,
    TranslateOptions,
    TranslationResult,
    build_test_set,
    finish_translation,
    gather_evidence,
    output_display_name,
)

DEFAULT_PASSES = ["bang_detensorize"]

__all__ = ["DEFAULT_PASSES", "plan", "translate_bang_to_cuda"]


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    from xpiler_core.verify.targets import GpuRunner

    started = time.perf_counter()
    report(progress, 0.0, f"translating {Path(unit.path).name} (bang->cuda)")
    ctx = PassContext(source_dialect=Dialect.BANG, target=Dialect.CUDA, file=unit.path)
    run = run_passes(SourceUnit(unit.text, Dialect.BANG, unit.path), options.passes or DEFAULT_PASSES, ctx,
                     options.pass_params, cancel=cancel)
    assert isinstance(run.unit, SourceUnit)
    candidate = None if run.refused is not None else run.unit.text
    evidence = Evidence(verify=options.verify)
    if candidate is not None and options.verify:
        with tempfile.TemporaryDirectory(prefix="xpiler-bang-spec-") as tmp:
            # the user's spec, else tests from the kernel: the source on the MLU model is their reference
            tests = build_test_set(unit.text, unit.path, Dialect.BANG, options, Path(tmp) / "auto", allow_shim=False)
            tests.program = False  # the MLU model runs kernels, not programs with main
            runner = GpuRunner(Dialect.CUDA, options.warp_size or 32, 32,
                               display_name=output_display_name(options, unit.path))
            report(progress, 0.4, "compiling with nvcc")
            evidence = gather_evidence(candidate, tests, runner, seed=options.seed,
                                       time_limit_s=options.run_time_limit_s, cancel=cancel, progress=progress,
                                       shrink=False)
    result = finish_translation(
        text=unit.text, path=unit.path, source=Dialect.BANG, target=Dialect.CUDA, options=options,
        candidate=candidate, records=run.records, evidence=evidence, unresolved=ctx.unresolved,
        diagnostics=ctx.diagnostics, notes=ctx.notes, started=started, warp_size=options.warp_size or 32,
        refused=run.refused["refused"] or "" if run.refused else "")
    report(progress, 1.0, result.status.value)
    return result
