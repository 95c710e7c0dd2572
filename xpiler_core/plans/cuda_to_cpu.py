"""CUDA → CPU (C++ with OpenMP and SIMD): detensorize → grid/block reduce → loop recovery → CPU GEMM → device
mirrors → affine indices → reduction idiom → thread interchange → partial accumulators → grid flatten → loop
binding, each step verified (a candidate that fails is retried without the reassociating /
restructuring steps, then without every optional step).

The output is an ``extern "C"`` function with the CUDA host entry's parameters, or for a bare kernel a
function over the kernel's parameters (the test spec's argument order). The launch shape of a bare kernel
comes from the spec (its grid/block expressions rewritten over the kernel's parameters), else from
``__launch_bounds__`` and the kernel's guards; when neither gives it, the plan says so.

Verification: gcc/g++ compile verdict, then the candidate runs on the spec's cases against its numpy
reference (or, with no spec, differentially against the source on the SIMT runtime via an automatic spec).
Optional steps (binding variants) are kept only when the candidate still passes.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpiler_core import ast as A
from xpiler_core.diagnostics import Span
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.source import parse_text
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes.base import PassContext, PassRecord, Unresolved
from xpiler_core.passes.driver import run_passes
from xpiler_core.passes.support.build_macros import as_source_build_saw
from xpiler_core.passes.support.cst import fold_decided_branches_in_functions
from xpiler_core.plans._hip import source_warp as source_warp_of
from xpiler_core.plans._portable import launcher, portable_candidate
from xpiler_core.plans._project import ProjectFiles, inlined_origin
from xpiler_core.printer import print_module, print_node
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.runtime.rewrite import device_arch_resolved
from xpiler_core.runtime.simt_set import simt_headers
from xpiler_core.translation import (
    Evidence,
    TestSet,
    TranslateOptions,
    TranslationResult,
    direction_label,
    finish_translation,
    gather_evidence,
    output_display_name,
)
from xpiler_core.verify.spec import KernelSpec
from xpiler_core.verify.targets import gcc_verdict, host_isa

DEFAULT_PASSES = ["detensorization", "grid_reduce", "block_reduce", "loop_recovery", "cpu_gemm", "device_mirrors",
                  "affine_index", "reduction_idiom", "tree_reduce", "thread_zero", "thread_interchange",
                  "partial_accumulators", "grid_flatten", "loop_binding", "nan_free_extrema", "delinearize",
                  "periodic_operands", "unroll_pragmas", "boundary_split", "block_constants"]
# Optional steps that reassociate floating point or restructure code: dropped first when a candidate fails.
_DROP_FIRST = ("block_constants", "boundary_split", "grid_reduce", "block_reduce", "cpu_gemm", "device_mirrors", "affine_index",
               "delinearize", "periodic_operands", "reduction_idiom", "tree_reduce", "thread_zero", "thread_interchange",
               "partial_accumulators",
               "grid_flatten")


def as_the_build_sees_it(own: ProjectFiles, project: ProjectFiles) -> tuple[str, list[str]]:
    """The text the CPU plan translates — ``own``'s with its local headers of device code inlined, the program's
    other units too (one module, every kernel), conditions read as the GPU build read them, and the project's
    switches inside function bodies (``#ifndef NO_BOUND_CHECK``) as its build sets them — and the headers inlined.
    ``project``: the files of the source the tests run (``own``'s own, except for HIP through CUDA)."""
    inlined_text, inlined = own.inline_device_headers()
    whole = device_arch_resolved(as_source_build_saw(own.with_units_inlined(inlined_text, inlined)), own.unit.dialect)
    whole = fold_decided_branches_in_functions(parse_text(whole, own.unit.path, own.unit.dialect),
                                               project.defined_macros())
    return whole, inlined


def recovery_params_from_spec(
    module: A.Module, spec: Any | None, pass_params: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """A copy of ``pass_params`` with loop recovery seeded from the spec's launch (user values win)."""
    params = {k: dict(v) for k, v in (pass_params or {}).items()}
    if spec is None:
        return params
    recovery = params.setdefault("loop_recovery", {})
    # a template kernel's instance (``gemm<128, 8>``) is launched through its template
    for key, value in spec_launch_params(spec, module.function(spec.entry.partition("<")[0].strip())).items():
        recovery.setdefault(key, value)
    if spec.kind == "host":
        recovery.setdefault("wrapper", False)
    return params


def spec_launch_params(spec: Any, kernel: A.Function | None) -> dict[str, str]:
    """The spec's grid/block/shared_bytes as C expressions over the kernel's parameters ({} if impossible).

    A case variable maps to the scalar parameter whose spec value is exactly that variable.
    """
    if kernel is None or spec.kind != "kernel":
        return {}
    names = kernel.param_names()
    mapping: dict[str, str] = {}
    for arg, pname in zip(spec.args, names, strict=False):
        if arg.role == "scalar" and isinstance(arg.value, str) and re.fullmatch(r"[A-Za-z_]\w*", arg.value.strip()):
            mapping[arg.value.strip()] = pname

    def convert(expr: Any) -> str | None:
        text = str(expr).replace("//", "/")
        text = re.sub(r"\bceil_div\b", "xp_ceil_div", text)
        for ident in set(re.findall(r"[A-Za-z_]\w*", text)):
            if ident in ("xp_ceil_div", "min", "max"):
                continue
            if ident not in mapping:
                return None
        text = re.sub(r"[A-Za-z_]\w*", lambda m: mapping.get(m.group(0), m.group(0)), text)
        # xp_ceil_div(a, b) → ((a) + (b) - 1) / (b), nested calls resolved innermost first
        pattern = re.compile(r"xp_ceil_div\(([^(),]*(?:\([^()]*\))?[^(),]*),([^(),]*(?:\([^()]*\))?[^(),]*)\)")
        while "xp_ceil_div" in text:
            new = pattern.sub(lambda m: f"(({m.group(1)}) + ({m.group(2)}) - 1) / ({m.group(2)})", text)
            if new == text:
                return None
            text = new
        return text

    out: dict[str, str] = {"entry": spec.entry}
    grid: list[str | None] = [convert(g) for g in spec.grid]
    if any(g is None for g in grid):
        # the grid depends on sizes the kernel is not given (rows of a buffer): the wrapper takes it
        grid_names = [f"xp_grid_{axis}" for axis in "xyz"[: len(grid)]]
        grid = list(grid_names)
        out["launch_params"] = ", ".join(grid_names)
    block = [convert(b) for b in spec.block]
    smem = convert(spec.shared_bytes)
    if all(g is not None for g in grid):
        out["grid"] = ", ".join(g for g in grid if g is not None)
    if all(b is not None for b in block):
        out["block"] = ", ".join(b for b in block if b is not None)
    if smem is not None:
        out["shared_bytes"] = smem
    return out


def spec_with_launch_args(spec: Any, launch_params: str, workdir: Path) -> Any:
    """The spec extended by scalar arguments carrying the grid (its own expressions), for a wrapper that
    takes the launch shape; the reference is wrapped to ignore them."""
    import dataclasses

    from xpiler_core.verify.spec import ArgSpec

    names = [n.strip() for n in launch_params.split(",") if n.strip()]
    extra = [ArgSpec(name=n, dtype="int32", role="scalar", value=str(g)) for n, g in zip(names, spec.grid, strict=False)]
    if spec.reference is None:
        return dataclasses.replace(spec, args=[*spec.args, *extra])
    module_part, _, func = spec.reference.partition(":")
    original = (spec.path.parent / module_part).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    wrapper = workdir / "xp_launch_ref.py"
    wrapper.write_text(
        "import importlib.util\n"
        f"_spec = importlib.util.spec_from_file_location('xp_orig_ref', {str(original)!r})\n"
        "_mod = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_mod)\n"
        f"def reference(**kw):\n    for k in {names!r}:\n        kw.pop(k, None)\n"
        f"    return _mod.{func}(**kw)\n",
        encoding="utf-8",
    )
    return dataclasses.replace(spec, path=workdir / "spec.toml", reference="xp_launch_ref.py:reference",
                               args=[*spec.args, *extra])


def run_ast_passes(
    module: A.Module, names: list[str], ctx: PassContext, params: dict[str, dict[str, Any]]
) -> tuple[A.Module, list[PassRecord]]:
    """The plan's passes through the one driver (kept as a name the tuner and the BANG plan share)."""
    run = run_passes(module, names, ctx, params)
    assert isinstance(run.unit, A.Module)
    return run.unit, run.records


def translate_unit(
    unit: ParsedUnit, spec: Any | None = None, pass_params: dict[str, dict[str, Any]] | None = None,
    passes: list[str] | None = None, defines: Mapping[str, str] | None = None,
) -> tuple[str | None, list[PassRecord], PassContext]:
    """The candidate text (``None`` when loop recovery refused) and the pass records; ``defines``: the
    project's ``-D`` macros (passes may read their values, as the build sees them)."""
    module = unit.module
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file=unit.path, defines=dict(defines or {}))
    params = recovery_params_from_spec(module, spec, pass_params)
    params.setdefault("loop_binding", {}).setdefault("isa", host_isa())
    # the source's warp width (HIP: 64) reaches block_reduce as it reaches loop recovery
    if "warp_size" in params.get("loop_recovery", {}):
        params.setdefault("block_reduce", {}).setdefault("warp_size", params["loop_recovery"]["warp_size"])
    out, records = run_ast_passes(module, passes or DEFAULT_PASSES, ctx, params)
    recovery = next((r for r in records if r["name"] == "loop_recovery"), None)
    if recovery is not None and recovery["refused"]:
        where = Span(**recovery["span"]) if recovery.get("span") else Span.empty()
        ctx.unresolved.append(Unresolved(recovery["refused"], where, "loop_recovery"))
        return None, records, ctx
    return print_module(out, Dialect.C), records, ctx


def translate_to_cpu(
    text: str, path: str, spec: Any | None = None, pass_params: dict[str, dict[str, Any]] | None = None,
    passes: list[str] | None = None, defines: Mapping[str, str] | None = None,
) -> tuple[str | None, list[PassRecord], PassContext]:
    """:func:`translate_unit` on a text (for callers that hold no parsed unit)."""
    return translate_unit(ParsedUnit(text, path, detect_dialect(text, path)), spec, pass_params, passes, defines)


@dataclass
class _Checked:
    candidate: str
    records: list[PassRecord]
    evidence: Evidence
    note: str = ""


def plan(
    unit: ParsedUnit,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    reference: ParsedUnit | None = None,
) -> TranslationResult:
    """``reference``: the source automatic tests and whole-program runs use (default: ``unit`` itself); the
    HIP → CPU plan passes the original HIP, which runs at its own warp size."""
    from xpiler_core.verify.spec import load_spec
    from xpiler_core.verify.targets import CpuRunner

    started = time.perf_counter()
    original = reference or unit
    report(progress, 0.0, f"translating {Path(unit.path).name} ({direction_label(original.dialect, Dialect.C)})")
    project = ProjectFiles.of(original, options, Dialect.C)
    own = project if original is unit else ProjectFiles.of(unit, options, Dialect.C)
    whole, inlined = as_the_build_sees_it(own, project)
    c_units = project.plain_c_units()  # copied beside the output, built as C and linked
    inlined = inlined + [name for name in own.other_units()]
    work = unit if whole == unit.text else unit.with_text(whole)
    spec = load_spec(options.spec_path) if options.spec_path else None
    defines = project.config.define_values()
    pass_names = list(options.passes or DEFAULT_PASSES)
    portable_only = options.cpu_tier == "portable"
    if portable_only:  # the structural passes are not run: their output would be neither checked nor written
        candidate, records = None, list[PassRecord]()
        ctx = PassContext(source_dialect=work.dialect, target=Dialect.C, file=unit.path)
    else:
        candidate, records, ctx = translate_unit(work, spec, options.pass_params, pass_names, defines)
    if inlined:
        ctx.notes.append("headers with device code inlined into the translation: "
                         + ", ".join(Path(h).name for h in inlined))
    evidence = Evidence(verify=options.verify)
    source_warp = source_warp_of(options, original.dialect)
    with tempfile.TemporaryDirectory(prefix="xpiler-cpu-") as tmp:
        if candidate is not None and options.verify:
            tests = project.test_set(options, Path(tmp) / "auto")
            runner = CpuRunner(warp_size=source_warp, build=project.candidate_build(candidate, c_units),
                               display_name=output_display_name(options, unit.path),
                               source_build=project.source_build())

            def check(text: str, recs: list[PassRecord]) -> _Checked:
                runner.build = project.candidate_build(text, c_units)
                tested, tested_recs, specs, note = _tests_for(work, text, recs, tests, spec, options, Path(tmp), defines)
                program = project.program_check(runner, 1, cancel) if tests.program else None
                found = gather_evidence(tested, specs, runner, seed=options.seed, time_limit_s=options.run_time_limit_s, cancel=cancel,
                                        progress=progress, shrink=False, program_check=program)
                if note:
                    found.note = f"{found.note}; {note}" if found.note else note
                return _Checked(text, recs, found, note)

            report(progress, 0.4, "compiling with gcc")
            best = check(candidate, records)
            best = _fallbacks(best, work, spec, options, pass_names, ctx, check)
            candidate, records, evidence = best.candidate, best.records, best.evidence
        companions: dict[str, str] = dict(c_units)
        if options.verify and (candidate is None or not _passed(_Checked(candidate, records, evidence))):
            # the floor: the source on the SIMT header set, exact but slow (plans/_portable.py)
            refused = ("the portable tier was asked for (--tier portable)" if portable_only
                       else _structural_refusal(candidate, evidence, ctx, unit.path, work.text))
            tests = project.test_set(options, Path(tmp) / "auto-portable")
            runner = CpuRunner(warp_size=source_warp, source_build=project.source_build(),
                               display_name=output_display_name(options, unit.path))
            floor = _portable_attempt(original, work if original is unit else original, inlined, tests, spec, options,
                                      project, runner, source_warp, refused, Path(tmp), progress, cancel)
            compiles = floor is not None and floor.evidence.compile is not None and floor.evidence.compile.ok
            structural_builds = candidate is not None and evidence.compile is not None and evidence.compile.ok
            if floor is not None and (_passed(floor) or (not structural_builds and compiles)):
                ctx.notes.append(f"portable tier: {refused}")
                candidate, records, evidence = floor.candidate, floor.records, floor.evidence
                if _passed(floor):
                    ctx.unresolved.clear()  # what the structural tier could not lower, the floor runs as written
                companions = {**simt_headers(), **c_units}
        if not options.verify and candidate is None and not portable_only and project.has_main():
            # nothing will check this output: where the structural tier refuses a program (a construct a loop
            # over threads would change), the portable tier is written, exact by construction, and says why (a
            # kernel-only file stays unresolved: its portable form has no entry a caller could launch)
            refused = _structural_refusal(candidate, evidence, ctx, unit.path, work.text)
            source = work.text if inlined and work.dialect is original.dialect else original.text
            candidate = portable_candidate(source, original.dialect, source_warp, refused, "")
            companions = {**simt_headers(), **c_units}
            ctx.notes.append(f"portable tier: {refused}")
            evidence.facts.update({"tier": "portable", "structural_refusal": refused})
        if candidate is not None and options.verify:
            evidence.facts.setdefault("tier", "structural")
    result = finish_translation(
        text=original.text, path=unit.path, source=original.dialect, target=Dialect.C, options=options,
        candidate=candidate, records=records, evidence=evidence, unresolved=ctx.unresolved,
        diagnostics=[*project.missing_includes(), *ctx.diagnostics], notes=ctx.notes, started=started,
        warp_size=None, includes=project.headers, project=project.config,
        companions=companions, source_build=project.source_build())
    report(progress, 1.0, result.status.value)
    return result


def _names_template_types(kernel: A.Function) -> bool:
    """Whether a kernel's parameters are declared with its template's type parameters (``T const* A``): a
    launcher outside the template cannot declare them."""
    template = kernel.template or ""
    types = set(re.findall(r"(?:typename|class)\s+(\w+)", template))
    return any(p.type.base.replace("const", "").strip() in types for p in kernel.params if isinstance(p, A.Param))


def _structural_refusal(candidate: str | None, evidence: Evidence, ctx: PassContext, path: str,
                        translated: str) -> str:
    """Why the structural tier was not taken, with the construct's location in the user's file (or the header
    it is in: ``translated`` has the local headers inlined)."""
    if candidate is None and ctx.unresolved:
        item = ctx.unresolved[-1]
        where = ""
        if item.span != Span.empty():
            file, line = inlined_origin(translated, item.span.start_line, path)
            where = f" ({file}:{line + 1}:{item.span.start_col + 1})"
        return f"{item.reason}{where}"
    from xpiler_core.translation import decide_status

    why = decide_status(evidence, [])[1] or "the structural translation did not verify"
    # the structural output is not the file written: its compiler messages cannot name that file
    return re.sub(r"[\w./-]+\.(?:cpp|c):(\d+):\d+: ", r"its line \1: ", why)


def _portable_attempt(original: ParsedUnit, work: ParsedUnit, inlined: list[str], tests: TestSet, spec: Any,
                      options: TranslateOptions, project: ProjectFiles, runner: Any, warp: int, refused: str,
                      tmp: Path, progress: ProgressFn | None, cancel: CancelToken | None) -> _Checked | None:
    """The portable candidate and its evidence (``None`` when no test can reach it)."""
    source = work.text if inlined and work.dialect is original.dialect else original.text
    checked = tests
    tail = ""
    if not tests.program and tests.specs and any(s.kind == "kernel" for s in tests.specs):
        host_specs: list[KernelSpec] = []
        for number, kernel_spec in enumerate(tests.specs):
            if kernel_spec.kind != "kernel":
                host_specs.append(kernel_spec)
                continue
            # a template's instantiation (`gemm<96, 32>`): the template, launched as the spec spells it
            kernel = original.module.function(kernel_spec.entry) or original.module.function(
                kernel_spec.entry.split("<")[0].strip())
            launch = spec_launch_params(kernel_spec, kernel) if kernel is not None else {}
            if kernel is None or "grid" not in launch or "block" not in launch or _names_template_types(kernel):
                return None
            entry = "xp_launch_" + re.sub(r"\W+", "_", kernel_spec.entry).strip("_")
            tail += launcher(kernel, entry, launch["grid"], launch["block"], launch.get("shared_bytes", "0"),
                             launch.get("launch_params", ""), callee=kernel_spec.entry)
            # the launcher is the entry under test; the reference stays the kernel as the spec named it
            host_spec = dataclasses.replace(kernel_spec, entry=entry, kind="host",
                                            reference_entry=kernel_spec.reference_entry or kernel_spec.entry,
                                            reference_kind=kernel_spec.reference_kind or kernel_spec.kind)
            if launch.get("launch_params"):
                host_spec = spec_with_launch_args(host_spec, launch["launch_params"],
                                                  tmp / f"portable-launch{number}")
            host_specs.append(host_spec)
        checked = dataclasses.replace(tests, specs=host_specs)
    text = portable_candidate(source, original.dialect, warp, refused, tail)
    runner.build = project.candidate_build(text, {**simt_headers(), **project.plain_c_units()})
    program = project.program_check(runner, 1, cancel) if tests.program else None
    evidence = gather_evidence(text, checked, runner, seed=options.seed, time_limit_s=options.run_time_limit_s, cancel=cancel, progress=progress,
                               shrink=False, program_check=program)
    evidence.facts.update({"tier": "portable", "structural_refusal": refused})
    return _Checked(text, [], evidence)


def _passed(checked: _Checked) -> bool:
    ev = checked.evidence
    return bool(ev.compile is not None and ev.compile.ok and (
        (ev.tests is not None and ev.tests.passed) or (ev.program is not None and ev.program.matched)))


def _failed(checked: _Checked) -> bool:
    """The candidate itself failed (not: the source failed every test case, which no other candidate changes)."""
    ev = checked.evidence
    if ev.tests is not None and ev.tests.cases and not ev.tests.tested:
        return False
    return bool(ev.compile is not None and (not ev.compile.ok or (ev.tests is not None and not ev.tests.passed) or (
        ev.program is not None and not ev.program.matched and not ev.program.source_failed)))


def _fallbacks(best: _Checked, work: ParsedUnit, spec: Any, options: TranslateOptions, pass_names: list[str],
               ctx: PassContext, check: Any) -> _Checked:
    """Each step is verified: a failing candidate is retried without the reassociating steps, then with
    only the steps up to loop recovery."""
    if not _failed(best):
        return best
    droppable = [n for n in _DROP_FIRST if any(r["name"] == n and r["changed"] for r in best.records)]
    if droppable:
        kept = [n for n in pass_names if n not in droppable]
        retry, retry_records, _ = translate_unit(work, spec, options.pass_params, kept, ctx.defines)
        if retry is not None:
            again = check(retry, retry_records)
            if _passed(again):
                ctx.notes.append(f"{', '.join(droppable)} output failed verification; kept the candidate without it")
                return again
    if "loop_recovery" in pass_names:
        optional = pass_names[pass_names.index("loop_recovery") + 1:]
        base = [n for n in pass_names[: pass_names.index("loop_recovery") + 1] if n not in _DROP_FIRST]
        if optional:
            fallback, base_records, _ = translate_unit(work, spec, options.pass_params, base, ctx.defines)
            if fallback is not None:
                again = check(fallback, base_records)
                if _passed(again):
                    ctx.notes.append(f"{', '.join(optional)} output failed verification; kept the candidate "
                                     "after loop_recovery")
                    return again
    return best


def _exported(candidate: str) -> list[str]:
    """Kernels the candidate exports with their launch configuration as leading arguments."""
    return re.findall(r"^void\s+([A-Za-z_]\w*)\s*\(\s*dim3\s+xp_grid\b", candidate, re.MULTILINE)


def _tests_for(work: ParsedUnit, candidate: str, records: list[PassRecord], tests: TestSet, spec: Any,
               options: TranslateOptions, tmp: Path, defines: Mapping[str, str]) -> tuple[str, list[PassRecord],
                                                                                     TestSet, str]:
    """What to run the candidate on: the automatic tests launch a kernel the candidate may keep behind the
    file's own host code (then the same passes build a wrapper with the tests' launch) or take extra launch
    arguments; a kernel exported with its launch configuration cannot be called by them."""
    if tests.program:
        return candidate, records, tests, ""
    if len(tests.specs) > 1:
        return candidate, records, _through_exports(candidate, tests, work), ""
    note = ""
    test_spec = tests.specs[0] if tests.specs else None
    if (test_spec is not None and spec is None and test_spec.kind == "kernel"
            and not re.search(rf'extern "C" void {re.escape(test_spec.entry)}\s*\(', candidate)):
        variant, variant_recs, _ = translate_unit(work, test_spec, options.pass_params, [r["name"] for r in records],
                                                  defines)
        if variant is not None and gcc_verdict(variant).ok:
            candidate, records = variant, variant_recs
            note = (f"tests ran kernel {test_spec.entry} through a wrapper with the tests' launch; the output keeps "
                    "the file's own launch code")
    exported = _exported(candidate)
    if exported and (test_spec is None or test_spec.entry in exported):
        why = (f"{', '.join(exported)} exported with the launch configuration as leading arguments; give --spec "
               "(grid and block) to have it tested")
        if test_spec is None and tests.reason:
            # why no test was built comes first: it names the construct
            why = (f"{tests.reason} (the output exports {', '.join(exported)} with the launch configuration as "
                   "leading arguments)")
        return candidate, records, dataclasses.replace(tests, specs=[], reason=why), ""
    if test_spec is None:
        return candidate, records, tests, note
    launch_params = _launch_params_used(records)
    if launch_params:
        test_spec = spec_with_launch_args(test_spec, launch_params, tmp / f"launch{len(launch_params)}")
        note = note or (f"the grid is not a function of the kernel's parameters: {launch_params} are extra "
                        "trailing parameters of the output function")
    return candidate, records, dataclasses.replace(tests, specs=[test_spec]), note


def _through_exports(candidate: str, tests: TestSet, work: ParsedUnit) -> TestSet:
    """Tests of several kernels, each alone (a file of kernels only): a kernel the candidate binds to its launch
    (an ``extern "C"`` function of the kernel's name) is called as the tests of one kernel call it; one it exports
    with its launch configuration as leading arguments is called through an ``extern "C"`` forwarder that passes
    the spec's launch; any other is named as untested."""
    exported = set(_exported(candidate))
    kept: list[KernelSpec] = []
    forwarded: list[KernelSpec] = []
    untested = list(tests.untested)
    for spec in tests.specs:
        if re.search(rf'extern "C" void {re.escape(spec.entry)}\s*\(', candidate):
            kept.append(spec)
            continue
        kernel = work.module.function(spec.entry)
        launch = spec_launch_params(spec, kernel) if kernel is not None and spec.entry in exported else {}
        if kernel is None or "grid" not in launch or "block" not in launch or launch.get("launch_params"):
            untested.append(f"kernel {spec.entry}: the output does not export it with a launch its tests can give")
            continue
        forwarded.append(_forwarded(spec, kernel, launch))
    # one text of every forwarder, so that the candidate with it is one build whichever kernel's tests run
    shim = "\n".join(s.entry_shim or "" for s in forwarded)
    specs = kept + [dataclasses.replace(s, entry_shim=shim) for s in forwarded]
    return dataclasses.replace(tests, specs=specs, untested=untested)


def _forwarded(spec: KernelSpec, kernel: A.Function, launch: dict[str, str]) -> KernelSpec:
    """``spec`` (a kernel's) run through a forwarder, built with the candidate only, that calls the exported
    kernel with the spec's launch; the reference stays the source's kernel at that launch."""
    params = [p for p in kernel.params if isinstance(p, A.Param) and p.name]
    entry = f"xp_test_{kernel.name}"
    decls = ", ".join(print_node(p, Dialect.C) for p in params)
    args = ", ".join(["dim3(" + launch["grid"] + ")", "dim3(" + launch["block"] + ")",
                      f"(size_t)({launch.get('shared_bytes') or '0'})", *(str(p.name) for p in params)])
    shim = f'extern "C" void {entry}({decls}) {{ {kernel.name}({args}); }}'
    return dataclasses.replace(spec, entry=entry, kind="host", reference_entry=spec.reference_entry or spec.entry,
                               reference_kind=spec.reference_kind or spec.kind, entry_shim=shim)


def _launch_params_used(records: list[PassRecord]) -> str:
    for r in records:
        if r["name"] == "loop_recovery" and not r["refused"]:
            return str(r["params"].get("launch_params") or "")
    return ""
