"""HIP → BANG: the HIP runtime API back to CUDA names (the HIP → CPU plan's renaming), then the CUDA → BANG plan
with loop recovery at the HIP warp size (64 unless the options say otherwise), so code written for 64-lane
wavefronts keeps its meaning; automatic tests run the original HIP, at warp 64, as the reference."""

from __future__ import annotations

import dataclasses

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.passes.driver import run_passes
from xpiler_core.plans import cuda_to_bang
from xpiler_core.plans.hip_to_cpu import HIP_WARP, RENAME_PASSES
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.translation import TranslateOptions, TranslationResult


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    report(progress, 0.0, "mapping HIP API names to CUDA")
    warp = options.warp_size or HIP_WARP
    ctx = PassContext(source_dialect=Dialect.HIP, target=Dialect.CUDA, warp_size=warp, file=unit.path)
    run = run_passes(SourceUnit(unit.text, Dialect.HIP, unit.path), RENAME_PASSES, ctx, {}, cancel=cancel)
    assert isinstance(run.unit, SourceUnit)
    recovery = {"warp_size": warp, **options.pass_params.get("loop_recovery", {})}
    inner = dataclasses.replace(options, pass_params={**options.pass_params, "loop_recovery": recovery})
    renamed = ParsedUnit(run.unit.text, unit.path, Dialect.CUDA)
    result = cuda_to_bang.plan(renamed, inner, progress, cancel, reference=unit)
    result.passes_applied[:0] = run.records
    result.diagnostics[:0] = ctx.diagnostics
    result.unresolved[:0] = ctx.unresolved
    result.manifest["passes"] = result.passes_applied
    return result
