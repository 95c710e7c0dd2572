"""HIP → BANG: the HIP runtime API back to CUDA names, then the CUDA → BANG plan with loop recovery at the HIP warp
size (64 unless the options say otherwise), so code written for 64-lane wavefronts keeps its meaning; automatic
tests run the original HIP, at warp 64, as the reference (``plans/_hip.py``)."""

from __future__ import annotations

from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.plans import cuda_to_bang
from xpiler_core.plans._hip import translate_as_cuda
from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.translation import TranslateOptions, TranslationResult


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    return translate_as_cuda(unit, options, progress, cancel, cuda_to_bang.plan)
