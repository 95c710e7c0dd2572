"""HIP → CPU: the HIP runtime API back to CUDA names (the mapping tables, run backwards), then the CUDA → CPU
plan with loop recovery at the HIP warp size (64 unless the options say otherwise), so code written for
64-lane wavefronts keeps its meaning; automatic tests run the original HIP as the reference, at warp 64."""

from __future__ import annotations

import dataclasses

from xpiler_core.frontend.dialect import Dialect
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.pipeline import TranslateOptions, TranslationResult, apply_passes
from xpiler_core.plans import cuda_to_cpu
from xpiler_core.progress import CancelToken, ProgressFn, report

#: Only the renaming: the semantic HIP → CUDA passes would turn 64-lane code into 32-lane code.
RENAME_PASSES = ["api_map"]
HIP_WARP = 64


def plan(
    text: str,
    path: str,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    report(progress, 0.0, "mapping HIP API names to CUDA")
    warp = options.warp_size or HIP_WARP
    ctx = PassContext(source_dialect=Dialect.HIP, target=Dialect.CUDA, warp_size=warp, file=path)
    unit, rename_records = apply_passes(SourceUnit(text, Dialect.HIP, path), RENAME_PASSES, ctx, {}, cancel)
    recovery = {"warp_size": warp, **options.pass_params.get("loop_recovery", {})}
    inner = dataclasses.replace(options, pass_params={**options.pass_params, "loop_recovery": recovery})
    result = cuda_to_cpu.plan(unit.text, path, inner, progress, cancel, reference=(text, Dialect.HIP))
    result.source_dialect = Dialect.HIP
    result.passes_applied = [*rename_records, *result.passes_applied]
    result.summary = result.summary.replace("cuda->cpu", "hip->cpu", 1)
    result.manifest["direction"] = "hip->cpu"
    result.manifest["source"]["sha256"] = cuda_to_cpu.sha256_text(text)
    result.manifest["passes"] = result.passes_applied
    result.manifest["warp_size"] = warp
    result.diagnostics[:0] = ctx.diagnostics
    result.unresolved[:0] = ctx.unresolved
    return result
