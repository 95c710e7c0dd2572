"""Conditions on the CUDA version (``#if CUDART_VERSION >= 9000``) read as nvcc read them.

hipcc defines no CUDA version, so without this a HIP port takes the branch written for an old or missing
CUDA (often ``printf("requires CUDA 2.2"); exit(...)``) where the source took the other one.
"""

from __future__ import annotations

from typing import Any

from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit
from xpiler_core.passes.support.build_macros import as_source_build_saw

INFO = PassInfo(
    name="cuda_build_macros",
    summary="#if/#ifdef on CUDART_VERSION/__CUDACC_VER_MAJOR__ fixed to their value in the source's nvcc build",
    kind="cst",
    directions=("cuda->hip",),
)


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    text = as_source_build_saw(module.text)
    if text == module.text:
        return module
    ctx.notes.append("cuda_build_macros: conditions on the CUDA version read as the source's build (CUDA 12.0)")
    return SourceUnit(text, module.dialect, module.path)
