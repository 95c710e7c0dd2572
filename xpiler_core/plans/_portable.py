"""The portable CPU tier: the floor under the structural CUDA/HIP → CPU translation.

A kernel the structural passes refuse (or whose structural candidate does not verify) is still emitted as
CPU C++ that runs it correctly: the source itself, its launches and dynamic shared arrays rewritten
(``runtime/rewrite.py``), compiled against the SIMT header set written beside the output in ``xpiler_simt/``
(threads as loops, fibers only where barriers and warp collectives need them; portable ``ucontext`` fibers,
no library to link). It is the same execution model the SIMT runtime tests kernels with, so it is exact
but slow; the result says which tier each file got and why the structural tier was refused.
"""

from __future__ import annotations

import re

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.support.build_macros import as_source_build_saw
from xpiler_core.runtime.rewrite import rewrite_for_cpu
from xpiler_core.runtime.simt_set import SIMT_DIR

# CUDA/HIP headers the SIMT set provides: a portable file includes the set's own copy.
_SHIM_INCLUDE = re.compile(r'^([ \t]*#[ \t]*include[ \t]*)[<"]((?:cuda|hip|cooperative_groups|mma|math_constants|'
                           r'device_|rocwmma|cuComplex|cublas)[\w./]*)[>"]', re.MULTILINE)


def launcher(kernel: A.Function, entry: str, grid: str, block: str, shared: str, extra: str = "",
             callee: str = "") -> str:
    """An ``extern "C"`` function that launches ``kernel`` (as ``callee`` spells it: a template's
    instantiation) over its own parameters with the given shape (C expressions over those parameters and
    ``extra`` trailing ones)."""
    params = [p for p in kernel.params if isinstance(p, A.Param) and p.name]
    from xpiler_core.printer import print_node

    decls = [print_node(p, Dialect.CUDA) for p in params]
    if extra:
        decls += [f"int {name.strip()}" for name in extra.split(",") if name.strip()]
    args = ", ".join(p.name or "" for p in params)
    return (f'\n/* xpiler: the launch the tests use, as a function the CPU can call */\n'
            f'extern "C" void {entry}({", ".join(decls)}) {{\n'
            f"    {callee or kernel.name}<<<dim3({grid}), dim3({block}), {shared or '0'}>>>({args});\n"
            f"    cudaDeviceSynchronize();\n}}\n")


def portable_candidate(source: str, dialect: Dialect, warp: int, reason: str, tail: str = "") -> str:
    """The CPU C++ file of the portable tier for ``source`` (CUDA or HIP) plus ``tail`` (a launcher)."""
    body = _SHIM_INCLUDE.sub(lambda m: f'{m.group(1)}"{SIMT_DIR}/{m.group(2)}"', source + tail)
    body = as_source_build_saw(rewrite_for_cpu(body, dialect).text)  # the checks build it with -fopenmp
    hip = dialect is Dialect.HIP
    runtime = f"{SIMT_DIR}/hip/hip_runtime.h" if hip else f"{SIMT_DIR}/cuda_runtime.h"
    why = " ".join(reason.split())[:300]
    macros = ("#define __HIPCC__ 1\n#define __HIP_PLATFORM_AMD__ 1\n#define XPILER_DIALECT_HIP 1\n" if hip
              else "#define __CUDACC__ 1\n")
    return (
        "/* xpiler portable tier: this file runs the GPU code below on the CPU through the SIMT header set in\n"
        f"   {SIMT_DIR}/ (threads as loops, fibers where barriers and warp collectives need them); exact, not fast.\n"
        f"   The structural translation was refused: {why.replace('*/', '* /')}\n"
        f"   Build: g++ -std=c++17 -O2 -fno-strict-aliasing -pthread FILE.cpp (the headers are found beside it). */\n"
        "#ifndef XPILER_UCONTEXT\n#define XPILER_UCONTEXT 1\n#endif\n"
        f"#ifndef XPILER_WARP_SIZE\n#define XPILER_WARP_SIZE {warp}\n#endif\n"
        f"{macros}#include \"{runtime}\"\n#line 1\n{body}"
    )
