"""HIP → CUDA: undo the 32-lane helpers, map the APIs back with the same tables, then nvcc + runtime at warp 32."""

from __future__ import annotations

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.plans._gpu import GpuDirection, gpu_plan
from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.translation import TranslateOptions, TranslationResult

DEFAULT_PASSES = ["matrix_cores", "warp_size", "tensor_cores", "intrinsics_compat", "api_map"]

DIRECTION = GpuDirection(
    source=Dialect.HIP,
    target=Dialect.CUDA,
    default_passes=DEFAULT_PASSES,
    source_warp=64,
    target_warp=32,
)


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    return gpu_plan(DIRECTION, unit, options, progress, cancel)
