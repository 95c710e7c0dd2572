"""HIP sources on the CUDA plans: the HIP runtime API back to CUDA names (the mapping tables, run backwards), then
a CUDA plan with loop recovery at the HIP warp size (64 unless the options say otherwise), so code written for
64-lane wavefronts keeps its meaning; automatic tests run the original HIP, at its warp size, as the reference.
Shared by HIP → CPU and HIP → BANG."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.passes.driver import run_passes
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.translation import TranslateOptions, TranslationResult

#: The renaming, after matrix-core calls become wavefront-exact helpers: the other semantic HIP → CUDA passes
#: would turn 64-lane code into 32-lane code.
RENAME_PASSES = ["matrix_cores", "api_map"]
HIP_WARP = 64


class CudaPlan(Protocol):
    def __call__(self, unit: ParsedUnit, options: TranslateOptions, progress: ProgressFn | None,
                 cancel: CancelToken | None, reference: ParsedUnit | None = None) -> TranslationResult: ...


def source_warp(options: TranslateOptions, source: Dialect) -> int:
    """The warp size the source runs at: the loop-recovery option, else HIP's 64 or CUDA's 32."""
    return int(options.pass_params.get("loop_recovery", {}).get("warp_size") or
               (HIP_WARP if source is Dialect.HIP else 32))


def translate_as_cuda(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None,
    cancel: CancelToken | None,
    cuda_plan: CudaPlan,
) -> TranslationResult:
    """``cuda_plan`` on the HIP unit renamed to CUDA, recovered at the HIP warp size, checked against the HIP."""
    report(progress, 0.0, "mapping HIP API names to CUDA")
    warp = options.warp_size or HIP_WARP
    ctx = PassContext(source_dialect=Dialect.HIP, target=Dialect.CUDA, warp_size=warp, file=unit.path)
    run = run_passes(SourceUnit(unit.text, Dialect.HIP, unit.path), RENAME_PASSES, ctx, {}, cancel=cancel)
    assert isinstance(run.unit, SourceUnit)
    recovery = {"warp_size": warp, **options.pass_params.get("loop_recovery", {})}
    inner = dataclasses.replace(options, pass_params={**options.pass_params, "loop_recovery": recovery})
    renamed = ParsedUnit(run.unit.text, unit.path, Dialect.CUDA)
    result = cuda_plan(renamed, inner, progress, cancel, reference=unit)
    result.passes_applied[:0] = run.records
    result.diagnostics[:0] = ctx.diagnostics
    result.unresolved[:0] = ctx.unresolved
    result.manifest["passes"] = result.passes_applied
    return result
