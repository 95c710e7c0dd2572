"""C → CUDA: loop binding of the C code's parallel loops to blocks and threads, verified on the runtime.

Two shapes of input: plain C with ``#pragma omp parallel for`` loops (each becomes a ``__global__``
kernel with a remainder guard, launched by the original function), and loop-recovered C (the output of
CUDA → CPU: block loops bind to ``blockIdx``, thread loops to ``threadIdx`` with barriers between them,
per-thread arrays in shared memory). Evidence: nvcc's verdict and a run on the SIMT runtime at warp 32
against the spec's reference (``--spec``), or against the C source itself (an automatic spec).
Host entries receive pointers the kernels dereference: on a GPU they must be device-accessible
(``cudaMallocManaged``); the runtime shares memory, so the tests pass host arrays.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

from xpiler_core import ast as A
from xpiler_core.diagnostics import Span
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, PassRecord, Unresolved
from xpiler_core.passes.driver import run_passes
from xpiler_core.passes.support.cpu_prelude import PRELUDE
from xpiler_core.passes.support.reserved_names import CUDA_C_LINKAGE_NAMES, rename_reserved
from xpiler_core.printer import print_module
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.translation import (
    Evidence,
    TestSet,
    TranslateOptions,
    TranslationResult,
    build_test_set,
    finish_translation,
    gather_evidence,
    output_display_name,
)

DEFAULT_PASSES = ["x86_simd", "loop_binding", "device_cmath"]


def translate_unit(unit: ParsedUnit, params: dict[str, Any] | None = None,
                   passes: list[str] | None = None) -> tuple[str | None, list[PassRecord], PassContext]:
    """The CUDA candidate (``None`` with the reason in ``ctx.unresolved`` when binding refuses)."""
    ctx = PassContext(source_dialect=Dialect.C, target=Dialect.CUDA, file=unit.path)
    text, renaming = rename_reserved(unit.text, unit.path, Dialect.C, Dialect.CUDA)
    if renaming:
        unit = unit.with_text(text)
        ctx.notes.append("names CUDA declares, renamed in the C code: "
                         + ", ".join(f"{old} → {new}" for old, new in renaming.items()))
    module = unit.module
    run = run_passes(module, passes or DEFAULT_PASSES, ctx, {"loop_binding": params or {}}, stop_on_refusal=True)
    if run.refused is not None:
        span = Span(**run.refused["span"]) if run.refused.get("span") else Span.empty()
        ctx.unresolved.append(Unresolved(run.refused["refused"] or "refused", span, run.refused["name"]))
        return None, run.records, ctx
    assert isinstance(run.unit, A.Module)
    text = print_module(run.unit, Dialect.CUDA)
    return _keep_entry_symbols(text, run.unit, ctx), run.records, ctx


def _keep_entry_symbols(text: str, module: A.Module, ctx: PassContext) -> str:
    """A C-linkage entry whose name CUDA reserves is defined under another C++ name with an assembler label
    that keeps the symbol the caller links against (``void xp_c_max(...) __asm__("max")``)."""
    for fn in module.functions():
        if fn.linkage != "C" or fn.name not in CUDA_C_LINKAGE_NAMES or fn.body is None:
            continue
        head = re.search(rf'extern "C"([^;{{]*?)\b{fn.name}\s*(\([^)]*\))\s*\{{', text)
        if head is None:
            continue
        renamed = f"xp_c_{fn.name}"
        declaration = f'extern "C"{head.group(1)}{renamed}{head.group(2)} __asm__("{fn.name}");\n'
        definition = f'extern "C"{head.group(1)}{renamed}{head.group(2)} {{'
        text = text[:head.start()] + declaration + definition + text[head.end():]
        ctx.notes.append(f"{fn.name}: CUDA declares {fn.name} with C linkage; the entry is defined as {renamed} "
                         f"with the symbol {fn.name}")
    return text


def translate_to_cuda(text: str, path: str, params: dict[str, Any] | None = None) -> tuple[str | None, PassContext]:
    """:func:`translate_unit` on a text (the CPU prelude of a loop-recovered file is dropped first)."""
    body = text.replace(PRELUDE, "") if PRELUDE in text else text
    candidate, _, ctx = translate_unit(ParsedUnit(body, path, Dialect.C), params)
    return candidate, ctx


def bound_functions(candidate: str) -> list[str]:
    """The host functions the candidate launches a bound kernel from (``NAME`` for each ``NAME_kernel`` or, for a
    function bound part by part, ``NAME_kernel0``, ``NAME_kernel1``, …)."""
    return list(dict.fromkeys(re.findall(r"__global__\s+void\s+([A-Za-z_]\w*)_kernel\d*\s*\(", candidate)))


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    from xpiler_core.verify.spec import load_spec
    from xpiler_core.verify.targets import GpuRunner

    started = time.perf_counter()
    report(progress, 0.0, f"translating {Path(unit.path).name} (c->cuda)")
    body = unit if PRELUDE not in unit.text else unit.with_text(unit.text.replace(PRELUDE, ""))
    candidate, records, ctx = translate_unit(body, options.pass_params.get("loop_binding"), options.passes)
    warp = options.warp_size or 32
    evidence = Evidence(verify=options.verify)
    if candidate is not None and options.verify:
        with tempfile.TemporaryDirectory(prefix="xpiler-c2cuda-") as tmp:
            if options.spec_path:
                tests = TestSet([load_spec(options.spec_path)], auto=False, reason="the user's spec",
                                spec_path=options.spec_path)
            else:
                # every function that became a kernel launch is tested on its own against the C source
                tests = TestSet([], auto=True, reason="no function became a kernel launch")
                for name in bound_functions(candidate):
                    one = build_test_set(unit.text, unit.path, Dialect.C, options, Path(tmp) / name, entry=name,
                                         allow_shim=False)
                    if one.specs:
                        tests.specs.extend(one.specs)
                        tests.reason = "each bound function against the C source"
                    else:
                        tests.untested.append(f"{name}: {one.reason}")
                if not tests.specs and tests.untested:
                    tests.reason = "no automatic test could be built: " + "; ".join(tests.untested)
            runner = GpuRunner(Dialect.CUDA, warp, warp, kind="host",
                               display_name=output_display_name(options, unit.path))
            report(progress, 0.4, "compiling with nvcc")
            evidence = gather_evidence(candidate, tests, runner, seed=options.seed, time_limit_s=options.run_time_limit_s, cancel=cancel, progress=progress,
                                       shrink=False)
    result = finish_translation(
        text=unit.text, path=unit.path, source=Dialect.C, target=Dialect.CUDA, options=options, candidate=candidate,
        records=records, evidence=evidence, unresolved=ctx.unresolved, diagnostics=ctx.diagnostics, notes=ctx.notes,
        started=started, warp_size=warp)
    report(progress, 1.0, result.status.value)
    return result
