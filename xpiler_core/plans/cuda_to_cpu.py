"""CUDA → CPU (C++ with OpenMP and SIMD): detensorize → grid reduce → loop recovery → reduction idiom → grid
flatten → loop binding, each step verified (a candidate that fails is retried without the reassociating /
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

import re
import tempfile
import time
from pathlib import Path
from typing import Any

from xpiler_core import ast as A
from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.frontend.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused, Unresolved
from xpiler_core.pipeline import (
    Status,
    TranslateOptions,
    TranslationResult,
    host_info,
    report_dict,
    sha256_text,
    suggested_output_path,
    verdict_dict,
    xpiler_version,
)
from xpiler_core.printer import print_module
from xpiler_core.progress import CancelToken, ProgressFn, report

DEFAULT_PASSES = ["detensorization", "grid_reduce", "block_reduce", "loop_recovery", "device_mirrors",
                  "reduction_idiom", "grid_flatten", "loop_binding"]
# Optional steps that reassociate floating point or restructure code: dropped first when a candidate fails.
_DROP_FIRST = ("grid_reduce", "block_reduce", "device_mirrors", "reduction_idiom", "grid_flatten")


def recovery_params_from_spec(
    module: A.Module, spec: Any | None, pass_params: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """A copy of ``pass_params`` with loop recovery seeded from the spec's launch (user values win)."""
    params = {k: dict(v) for k, v in (pass_params or {}).items()}
    if spec is None:
        return params
    recovery = params.setdefault("loop_recovery", {})
    for key, value in spec_launch_params(spec, module.function(spec.entry)).items():
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


def host_isa() -> str:
    """The vector extensions the output is compiled for: AVX2/FMA/F16C when this CPU has them (the CPU
    output is built for the machine it runs on, like -march=native), else the compiler's baseline."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return ""
    return "avx2,fma,f16c" if {"avx2", "fma", "f16c"} <= flags else ""


def gcc_verdict(candidate: str) -> Any:
    """The GNU compiler's verdict on a candidate: g++ when it is C++ (the prelude, ``extern "C"``), as the
    harness builds it, else gcc."""
    from xpiler_core.verify.toolchains import compile_check

    cplusplus = 'extern "C"' in candidate or "namespace" in candidate or "template" in candidate
    return compile_check(candidate, Dialect.C, toolchain="g++" if cplusplus else None, flags=("-fopenmp",))


def run_ast_passes(
    module: A.Module, names: list[str], ctx: PassContext, params: dict[str, dict[str, Any]]
) -> tuple[A.Module, list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    for name in names:
        mod = get_pass(name)
        merged = {**mod.INFO.defaults(), **params.get(name, {})}
        started = time.perf_counter()
        before = module
        try:
            module = mod.apply(module, merged, ctx)
            refused = None
        except PassRefused as refusal:
            refused = refusal.reason
            where = refusal.span
        else:
            where = None
        records.append({"name": name, "params": merged, "changed": module != before, "refused": refused,
                        "seconds": round(time.perf_counter() - started, 4)})
        if where is not None and where != Span.empty():
            records[-1]["span"] = where.to_dict()  # where the refusal points in the source
    return module, records


def translate_to_cpu(
    text: str, path: str, spec: Any | None = None, pass_params: dict[str, dict[str, Any]] | None = None,
    passes: list[str] | None = None,
) -> tuple[str | None, list[dict[str, Any]], PassContext]:
    """The candidate text (``None`` when loop recovery refused) and the pass records."""
    module = lower_text(text, path)
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file=path)
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


def plan(
    text: str,
    path: str,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    reference: tuple[str, Dialect] | None = None,
) -> TranslationResult:
    """``reference``: the text and dialect automatic tests run as the reference (default: ``text`` as CUDA);
    the HIP → CPU plan passes the original HIP, which runs at its own warp size."""
    from xpiler_core.verify.harness import run_spec
    from xpiler_core.verify.spec import load_spec
    status: Status
    started = time.perf_counter()
    report(progress, 0.0, f"translating {Path(path).name} (cuda->cpu)")
    spec = load_spec(options.spec_path) if options.spec_path else None
    pass_names = list(options.passes or DEFAULT_PASSES)
    candidate, records, ctx = translate_to_cpu(text, path, spec, options.pass_params, pass_names)
    verdict = tests = None
    reason = ""
    tmp_spec: Any = None
    # The spec built from the source lives as long as the plan: a retry verifies against the same one.
    autospec_dir: tempfile.TemporaryDirectory[str] | None = None

    def verify(cand: str, recs: list[dict[str, Any]]) -> tuple[Any, Any, str]:
        """(compile verdict, test report, note) for one candidate."""
        nonlocal tmp_spec, autospec_dir
        verdict = gcc_verdict(cand)
        if not verdict.ok:
            return verdict, None, ""
        if cancel is not None:
            cancel.check()
        report(progress, 0.6, "running tests")
        note = ""
        with tempfile.TemporaryDirectory(prefix="xpiler-cpu-") as tmp:
            if spec is None and tmp_spec is None:
                from xpiler_core.verify import autospec

                autospec_dir = tempfile.TemporaryDirectory(prefix="xpiler-autospec-")
                ref_text, ref_dialect = reference or (text, Dialect.CUDA)
                built = autospec.build_spec(ref_text, path, ref_dialect, Path(autospec_dir.name), allow_shim=True)
                if built.spec_path is not None:
                    tmp_spec = load_spec(str(built.spec_path))
            test_spec = spec or tmp_spec
            if (spec is None and test_spec is not None and test_spec.kind == "kernel"
                    and not re.search(rf'extern "C" void {re.escape(test_spec.entry)}\s*\(', cand)):
                # the automatic tests launch the kernel itself, but the candidate keeps the file's own host code
                # (or exports the kernel with its launch): test the same kernel translation through a wrapper
                # with the tests' launch, built by the same passes
                variant, variant_recs, _ = translate_to_cpu(text, path, test_spec, options.pass_params,
                                                            [r["name"] for r in recs])
                if variant is not None and gcc_verdict(variant).ok:
                    cand, recs = variant, variant_recs
                    note = (f"tests ran kernel {test_spec.entry} through a wrapper with the tests' launch; the "
                            "output keeps the file's own launch code")
            launch_params = _launch_params_used(recs)
            if test_spec is not None and launch_params:
                test_spec = spec_with_launch_args(test_spec, launch_params, Path(tmp))
                note = note or (f"the grid is not a function of the kernel's parameters: {launch_params} are extra "
                        "trailing parameters of the output function")
            tests = None
            exported = re.findall(r"^void\s+([A-Za-z_]\w*)\s*\(\s*dim3\s+xp_grid\b", cand, re.MULTILINE)
            if exported and (test_spec is None or test_spec.entry in exported):
                # exported with its launch configuration (nothing said how to launch it): the tests' entry
                # takes the kernel's own arguments only, so they cannot call it
                note = (f"{', '.join(exported)} exported with the launch configuration as leading arguments; "
                        "give --spec (grid and block) to have it tested")
            elif test_spec is not None:
                tests = run_spec(test_spec, candidate_text=cand, candidate_dialect=Dialect.C,
                                 candidate_entry=test_spec.entry, candidate_kind="host", seed=options.seed,
                                 cancel=cancel)
        return verdict, tests, note

    if candidate is None:
        status = "unresolved"
        reason = ctx.unresolved[-1].reason if ctx.unresolved else "loop recovery refused"
        candidate = ""
    elif not options.verify:
        status, reason = "unresolved", "verification was turned off: not compiled, not executed"
    else:
        report(progress, 0.4, "compiling with gcc")
        verdict, tests, reason = verify(candidate, records)
        optional = pass_names[pass_names.index("loop_recovery") + 1:] if "loop_recovery" in pass_names else []
        droppable = [n for n in _DROP_FIRST if any(r["name"] == n and r["changed"] for r in records)]
        if droppable and (not verdict.ok or (tests is not None and not tests.passed)):
            # each step is verified: first retry without the reassociating steps, keeping the others
            kept_names = [n for n in pass_names if n not in droppable]
            retry, retry_records, _ = translate_to_cpu(text, path, spec, options.pass_params, kept_names)
            if retry is not None:
                v2, t2, note2 = verify(retry, retry_records)
                if v2.ok and t2 is not None and t2.passed:
                    ctx.notes.append(f"{', '.join(droppable)} output failed verification; kept the candidate "
                                     "without it")
                    candidate, records, verdict, tests, reason = retry, retry_records, v2, t2, note2
        if optional and (not verdict.ok or (tests is not None and not tests.passed)):
            # each step is verified: fall back to the candidate before the optional steps
            base_names = [n for n in pass_names[: pass_names.index("loop_recovery") + 1] if n not in _DROP_FIRST]
            fallback, base_records, base_ctx = translate_to_cpu(text, path, spec, options.pass_params, base_names)
            if fallback is not None:
                v2, t2, note2 = verify(fallback, base_records)
                if v2.ok and t2 is not None and t2.passed:
                    ctx.notes.append(f"{', '.join(optional)} output failed verification; kept the candidate "
                                     "after loop_recovery")
                    candidate, records, verdict, tests, reason = fallback, base_records, v2, t2, note2
        if not verdict.ok:
            status, reason = "failed", "the candidate does not compile with gcc"
        elif tests is None:
            status, reason = "compiled-not-executed", reason or "no test spec could be built for this file"
        elif tests.passed and not ctx.unresolved:
            status = "verified"
        else:
            why = tests.first_failure() if not tests.passed else ""
            status, reason = "failed", "the candidate does not match the reference" + (f": {why}" if why else "")
    if autospec_dir is not None:
        autospec_dir.cleanup()
    seconds = time.perf_counter() - started
    applied = ", ".join(r["name"] for r in records if r["changed"]) or "none"
    summary = f"{status}: cuda->cpu, passes {applied}" + (f" ({reason})" if reason else "")
    diagnostics = list(ctx.diagnostics)
    if reason:
        diagnostics.append(Diagnostic(Severity.WARNING, "translate.status", reason, Span.empty(), path))
    manifest = {
        "xpiler": xpiler_version(), "direction": "cuda->cpu", "source": {"path": path, "sha256": sha256_text(text)},
        "passes": records, "status": status, "reason": reason, "compile": verdict_dict(verdict),
        "tests": report_dict(tests), "host": host_info(), "seconds": round(seconds, 4),
        "spec": options.spec_path, "notes": list(ctx.notes),
    }
    report(progress, 1.0, status)
    return TranslationResult(
        source_path=path, source_dialect=Dialect.CUDA, target=Dialect.C, output_text=candidate,
        suggested_output_path=suggested_output_path(path, Dialect.C), status=status, summary=summary,
        passes_applied=records, compile=verdict, tests=tests, diagnostics=diagnostics, unresolved=list(ctx.unresolved),
        manifest=manifest, seconds=seconds,
    )


def _launch_params_used(records: list[dict[str, Any]]) -> str:
    for r in records:
        if r["name"] == "loop_recovery" and not r["refused"]:
            return str(r["params"].get("launch_params") or "")
    return ""
