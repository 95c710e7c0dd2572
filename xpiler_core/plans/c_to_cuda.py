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

import tempfile
import time
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.frontend.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes._cpu_prelude import PRELUDE
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


def translate_to_cuda(text: str, path: str, params: dict[str, Any] | None = None) -> tuple[str | None, PassContext]:
    """The CUDA candidate (``None`` with the reason in ``ctx.unresolved`` when binding refuses)."""
    body = text.replace(PRELUDE, "") if PRELUDE in text else text
    module = lower_text(body, path, Dialect.C)
    ctx = PassContext(source_dialect=Dialect.C, target=Dialect.CUDA, file=path)
    binding = get_pass("loop_binding")
    try:
        out = binding.apply(module, {**binding.INFO.defaults(), **(params or {})}, ctx)
    except PassRefused as refusal:
        ctx.unresolved.append(Unresolved(refusal.reason, refusal.span or Span.empty(), "loop_binding"))
        return None, ctx
    return print_module(out, Dialect.CUDA), ctx


def bound_functions(candidate: str) -> list[str]:
    """The host functions the candidate launches a bound kernel from (``NAME`` for each ``NAME_kernel``)."""
    import re

    return list(dict.fromkeys(re.findall(r"__global__\s+void\s+([A-Za-z_]\w*)_kernel\s*\(", candidate)))


def plan(
    text: str,
    path: str,
    options: TranslateOptions,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TranslationResult:
    from xpiler_core.verify.harness import run_spec
    from xpiler_core.verify.spec import load_spec
    from xpiler_core.verify.toolchains import compile_check

    status: Status
    started = time.perf_counter()
    report(progress, 0.0, f"translating {Path(path).name} (c->cuda)")
    candidate, ctx = translate_to_cuda(text, path, options.pass_params.get("loop_binding"))
    verdict = tests = None
    reason = ""
    warp = options.warp_size or 32
    if candidate is None:
        status, reason, candidate = "unresolved", ctx.unresolved[-1].reason, ""
    elif not options.verify:
        status, reason = "unresolved", "verification was turned off: not compiled, not executed"
    else:
        report(progress, 0.4, "compiling with nvcc")
        verdict = compile_check(candidate, Dialect.CUDA)
        if not verdict.ok:
            status, reason = "failed", "the candidate does not compile with nvcc"
        else:
            untested: list[str] = []
            shown_entry = ""
            with tempfile.TemporaryDirectory(prefix="xpiler-c2cuda-") as tmp:
                specs: list[Any] = [load_spec(options.spec_path)] if options.spec_path else []
                if not specs:
                    # every function that became a kernel launch is tested on its own against the C source
                    from xpiler_core.verify import autospec

                    for name in bound_functions(candidate):
                        built = autospec.build_spec(text, path, Dialect.C, Path(tmp) / name, entry=name)
                        if built.spec_path is None:
                            untested.append(f"{name}: {built.reason}")
                        else:
                            specs.append(load_spec(str(built.spec_path)))
                for spec in specs:
                    report(progress, 0.6, f"running tests of {spec.entry} at warp size {warp}")
                    one = run_spec(spec, candidate_text=candidate, candidate_dialect=Dialect.CUDA,
                                   candidate_entry=spec.entry, candidate_kind="host", warp_size=warp,
                                   seed=options.seed, cancel=cancel)
                    if tests is None or (tests.passed and not one.passed):
                        tests, shown_entry = one, spec.entry  # the report shown: the first failing one
            if tests is None:
                status, reason = "compiled-not-executed", "no test spec could be built for this file"
            elif not tests.passed:
                status, reason = "failed", f"the candidate's {shown_entry} does not match the reference"
            elif untested:
                status, reason = "compiled-not-executed", "not every function was tested: " + "; ".join(untested)
            else:
                status = "verified"
    seconds = time.perf_counter() - started
    diagnostics = list(ctx.diagnostics)
    if reason:
        diagnostics.append(Diagnostic(Severity.WARNING, "translate.status", reason, Span.empty(), path))
    records = [{"name": "loop_binding", "changed": bool(candidate), "refused": reason if not candidate else None,
                "notes": ctx.notes}]
    manifest = {"xpiler": xpiler_version(), "direction": "c->cuda", "source": {"path": path, "sha256": sha256_text(text)},
                "passes": records, "status": status, "reason": reason, "compile": verdict_dict(verdict),
                "tests": report_dict(tests), "host": host_info(), "seconds": round(seconds, 4),
                "spec": options.spec_path, "warp_size": warp}
    report(progress, 1.0, status)
    return TranslationResult(
        source_path=path, source_dialect=Dialect.C, target=Dialect.CUDA, output_text=candidate,
        suggested_output_path=suggested_output_path(path, Dialect.CUDA), status=status,
        summary=f"{status}: c->cuda" + (f" ({reason})" if reason else ""), passes_applied=records,
        compile=verdict, tests=tests, diagnostics=diagnostics, unresolved=list(ctx.unresolved), manifest=manifest,
        seconds=seconds,
    )
