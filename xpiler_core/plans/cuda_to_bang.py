"""CUDA → Cambricon BANG C, verified on the CPU model of the MLU.

Steps (each an AST pass; a refusal is reported, never a silent miscompile):

1. ``detensorization`` + ``loop_recovery`` (shared with CUDA → CPU): kernels become block loops over
   explicit thread loops (barriers split them; shared memory becomes block-local arrays).
2. ``bang_binding``: the block loops are shared out round-robin over ``taskId``/``taskDim`` (a Union1
   launch of 4 × clusters tasks); the entry becomes an ``extern "C" __mlu_global__`` kernel, host launches
   become ``<<<dim, type, queue>>>``.
3. ``bang_matmul``: threads that each compute one ``sum_k X[row][k] * Y[k][col]`` (found from the thread's
   dataflow) become ``__bang_matmul`` over zero-padded NRAM tiles and WRAM filter tiles.
   ``bang_pool``: threads that each reduce one full window of a plane (sum, average, maximum) become
   ``__bang_sumpool``/``avgpool``/``maxpool`` with 16 planes as the channels of an HWC tile.
4. ``bang_tensorize``: contiguous element-wise thread loops become NRAM tiles filled by ``__memcpy``
   (tile size from the NRAM capacity of the configured MLU generation), ``__bang_*`` vector intrinsics where
   every operation has one, a scalar loop on the NRAM tile where one has none. Loops it cannot prove
   element-wise stay scalar loops over GDRAM (correct, slow) and are named in the manifest.
5. ``bang_reduce``: per-thread strided accumulations become NRAM reductions.
6. ``bang_pipeline``: GDRAM→NRAM tile loops are double-buffered with ``__memcpy_async`` + ``__sync_io``.

Verification: the candidate is built with the MLU model (g++, on-chip capacity check of the generation)
and run on the spec's cases against the numpy reference (``verify/bang.py``).
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from xpiler_core import ast as A
from xpiler_core.diagnostics import Span
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, PassRecord, Unresolved
from xpiler_core.passes.support.bang_prelude import TASKS, bang_prelude
from xpiler_core.passes.support.cpu_prelude import PRELUDE
from xpiler_core.plans._hip import source_warp as source_warp_of
from xpiler_core.plans._project import ProjectFiles
from xpiler_core.plans.cuda_to_cpu import recovery_params_from_spec, run_ast_passes, spec_with_launch_args
from xpiler_core.printer import print_module
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.translation import (
    Evidence,
    TestSet,
    TranslateOptions,
    TranslationResult,
    finish_translation,
    gather_evidence,
)

DEFAULT_PASSES = ["detensorization", "loop_recovery", "bang_binding", "bang_matmul", "bang_pool", "bang_tensorize",
                  "bang_reduce", "bang_pipeline"]
def translate_to_bang(
    text: str,
    path: str,
    spec: Any | None = None,
    pass_params: dict[str, dict[str, Any]] | None = None,
    passes: list[str] | None = None,
    generation: str | None = None,
) -> tuple[str | None, list[PassRecord], PassContext]:
    """:func:`translate_unit` on a text (for callers that hold no parsed unit)."""
    return translate_unit(ParsedUnit(text, path, detect_dialect(text, path)), spec, pass_params, passes, generation)


def translate_unit(
    unit: ParsedUnit,
    spec: Any | None = None,
    pass_params: dict[str, dict[str, Any]] | None = None,
    passes: list[str] | None = None,
    generation: str | None = None,
) -> tuple[str | None, list[PassRecord], PassContext]:
    """The BANG C candidate (``None`` when a required step refused) and one record per pass."""
    module = unit.module
    path = unit.path
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.BANG, file=path)
    params = recovery_params_from_spec(module, spec, pass_params)
    entry = ""
    if spec is not None and spec.kind != "host":
        entry = spec.entry
    params.setdefault("bang_binding", {}).setdefault("entry", entry)
    from xpiler_core.runtime.bang.build import get_generation

    gen = get_generation(generation)
    params.setdefault("bang_tensorize", {}).setdefault("nram_bytes", gen.capacity_bytes("nram"))
    params.setdefault("bang_matmul", {}).setdefault("nram_bytes", gen.capacity_bytes("nram"))
    params["bang_matmul"].setdefault("wram_bytes", gen.capacity_bytes("wram"))
    params.setdefault("bang_pipeline", {}).setdefault("nram_bytes", gen.capacity_bytes("nram"))
    params.setdefault("bang_pool", {}).setdefault("nram_bytes", gen.capacity_bytes("nram"))
    out, records = run_ast_passes(module, passes or DEFAULT_PASSES, ctx, params)
    for required in ("loop_recovery", "bang_binding"):
        record = next((r for r in records if r["name"] == required), None)
        if record is not None and record["refused"]:
            ctx.unresolved.append(Unresolved(record["refused"], Span.empty(), required))
            return None, records, ctx
    # device functions of the source are MLU device functions (loop recovery spells them as host C)
    device_names = {f.name for f in module.functions() if f.is_device}
    items = tuple(
        A.replace(item, qualifiers=("__mlu_func__", *(q for q in item.qualifiers
                                                      if q not in ("static", "inline", "__forceinline__", "__mlu_func__"))))
        if isinstance(item, A.Function) and item.name in device_names else item
        for item in out.items
    )
    printed = print_module(A.replace(out, dialect=Dialect.BANG, items=items), Dialect.BANG)
    if PRELUDE not in printed:
        ctx.unresolved.append(Unresolved("the recovered module lost its support prelude", Span.empty(), "prelude"))
        return None, records, ctx
    return printed.replace(PRELUDE, bang_prelude()), records, ctx


def intrinsics_used(candidate: str) -> list[str]:
    """The BANG intrinsics and copy forms a candidate calls, sorted."""
    return sorted(set(re.findall(r"\b(__bang_\w+|__memcpy_async|__memcpy|__sync_io)\s*\(", candidate)))


def launch_params_used(records: list[PassRecord]) -> str:
    for r in records:
        if r["name"] == "loop_recovery" and not r["refused"]:
            return str(r["params"].get("launch_params") or "")
    return ""


def verify_bang(candidate: str, spec: Any, records: list[PassRecord], seed: int = 0,
                cancel: CancelToken | None = None, generation: str | None = None) -> tuple[Any, str]:
    """Run the candidate on the model against the spec; returns (BangSpecReport, note)."""
    from xpiler_core.verify.bang import run_bang_spec

    note = ""
    with tempfile.TemporaryDirectory(prefix="xpiler-bang-") as tmp:
        test_spec = spec
        extra = launch_params_used(records)
        if extra:
            test_spec = spec_with_launch_args(spec, extra, Path(tmp))
            note = f"the grid is not a function of the kernel's parameters: {extra} are extra trailing parameters"
        report_ = run_bang_spec(test_spec, candidate, seed=seed, cancel=cancel, generation=generation)
    return report_, note


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    reference: ParsedUnit | None = None,
) -> TranslationResult:
    """``reference``: the source the automatic tests run (default: ``unit`` itself); the HIP → BANG plan passes
    the original HIP, which runs at its own warp size."""
    from xpiler_core.verify.targets import BangRunner

    started = time.perf_counter()
    original = reference or unit
    report(progress, 0.0, f"translating {Path(unit.path).name} ({original.dialect.value}->bang)")
    project = ProjectFiles.of(original, options, Dialect.BANG)
    own = project if original is unit else ProjectFiles.of(unit, options, Dialect.BANG)
    inlined_text, inlined = own.inline_device_headers()
    whole = own.with_units_inlined(inlined_text, inlined)
    work = unit if whole == unit.text else unit.with_text(whole)
    source_warp = source_warp_of(options, original.dialect)
    evidence = Evidence(verify=options.verify)
    with tempfile.TemporaryDirectory(prefix="xpiler-bang-spec-") as tmp:
        # the tests come first: the launch they use seeds loop recovery of a bare kernel
        tests = project.test_set(options, Path(tmp) / "auto", allow_shim=False) if options.verify else TestSet([])
        tests.program = False  # the MLU model runs kernels, not host programs with main
        if tests.auto and tests.sizes_guessed and tests.specs and tests.specs[0].kind == "kernel":
            # a launch the tests chose (the code fixes no grid) would be bound into the BANG kernel, which then
            # computes only those blocks: no tests rather than an output that is right only at them
            tests = dataclasses.replace(tests, specs=[], reason=(
                f"{tests.reason}; but the code fixes no grid, and the BANG kernel binds its launch: give --spec "
                "with the grid the kernel is launched with"))
        if len(tests.specs) > 1:
            # one spec's launch seeds the translation of its kernel: the others' would run at a launch nobody chose
            kernels = len(tests.specs) + len(tests.untested)
            tests = dataclasses.replace(tests, specs=[], untested=[], reason=(
                f"the file has {kernels} kernels and no host code, and the BANG translation binds the launch of "
                "one kernel, the one its tests name: give --spec for the kernel to check"))
        spec = tests.specs[0] if tests.specs else None
        candidate, records, ctx = translate_unit(work, spec, options.pass_params, options.passes)
        if candidate is not None and options.verify:
            runner = BangRunner(warp_size=source_warp, source_build=project.source_build())
            launch = launch_params_used(records)
            checked = tests
            if spec is not None and launch:
                checked = dataclasses.replace(tests, specs=[spec_with_launch_args(spec, launch, Path(tmp) / "launch")])
                ctx.notes.append(f"the grid is not a function of the kernel's parameters: {launch} are extra "
                                 "trailing parameters")
            report(progress, 0.5, "building and running on the MLU model")
            evidence = gather_evidence(candidate, checked, runner, seed=options.seed, time_limit_s=options.run_time_limit_s, cancel=cancel,
                                       progress=progress, shrink=False)
            evidence.facts.update(runner.facts)
            evidence.facts.update({"intrinsics": intrinsics_used(candidate), "tasks": TASKS, "task_type": "union1"})
    result = finish_translation(
        text=original.text, path=unit.path, source=original.dialect, target=Dialect.BANG, options=options,
        candidate=candidate, records=records, evidence=evidence, unresolved=ctx.unresolved,
        diagnostics=[*project.missing_includes(), *ctx.diagnostics], notes=ctx.notes, started=started,
        warp_size=None, includes=project.headers, project=project.config, source_build=project.source_build())
    report(progress, 1.0, result.status.value)
    return result
