"""CUDA → HIP: semantic passes for AMD, then the table-driven API mapping, then hipcc + runtime at warp 64."""

from __future__ import annotations

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.plans._gpu import GpuDirection, gpu_plan
from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.translation import TranslateOptions, TranslationResult

# Order matters: inline PTX first (it may produce shuffles), then warp semantics on CUDA spellings, then
# the constructs with AMD-specific meaning, and the renames last.
DEFAULT_PASSES = [
    "cuda_build_macros",
    "inline_ptx",
    "warp_size",
    "tensor_cores",
    "cooperative_groups",
    "intrinsics_compat",
    "wider_overloads",
    "member_qualifiers",
    "launch_bounds",
    "api_map",
]

DIRECTION = GpuDirection(
    source=Dialect.CUDA,
    target=Dialect.HIP,
    default_passes=DEFAULT_PASSES,
    source_warp=32,
    target_warp=64,
)


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    return gpu_plan(DIRECTION, unit, options, progress, cancel)
