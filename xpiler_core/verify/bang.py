"""BANG C candidates in the harness: run a ``.mlu`` candidate on the MLU CPU model against a spec.

The spec's arguments are passed in order (buffers as GDRAM pointers, scalars by value). A ``kernel``
candidate is a ``__mlu_global__`` launched with ``task_dim`` tasks of ``task_type`` (the spec's CUDA grid
and block describe the source, not the BANG launch, which the translation chooses); a ``host``
candidate is an ``extern "C"`` host function that launches its kernels itself. Inputs, reference and
comparison are the harness's own, so a BANG candidate is judged exactly like a CUDA/HIP/C one.
Build failures include NRAM/WRAM/SRAM capacity violations of the configured generation.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xpiler_core.passes.support.bang_prelude import TASKS
from xpiler_core.progress import CancelToken
from xpiler_core.runtime.bang.build import build_bang, format_build_errors
from xpiler_core.runtime.bang.call import run_bang_kernel
from xpiler_core.runtime.bang.run import BangWorker
from xpiler_core.verify.harness import (
    OTHER_SCHEDULES,
    CaseResult,
    SpecReport,
    _load_reference,
    _numpy_expectation,
    _program,
    _program_expectation,
    _select_cases,
    _sizes,
    build_program,
    judged_by_schedule,
    poisoned_expectations,
    uninitialized_defect,
    with_entry_shim,
)
from xpiler_core.verify.inputs import case_inputs
from xpiler_core.verify.spec import KernelSpec

DEFAULT_TASK_DIM = (TASKS, 1, 1)  # four clusters of four cores, a Union1 launch
DEFAULT_TASK_TYPE = "union1"
# scalars passed to a host function (integer registers: 64-bit values, a pointer-sized handle such as a queue
# or stream among them, go as a long)
_HOST_SCALARS = {"int32": "int", "int64": "long", "float32": "float", "float64": "double", "uint32": "int",
                 "uint64": "long"}


@dataclass
class BangSpecReport(SpecReport):
    """A :class:`SpecReport` plus what the MLU model's build said about on-chip memory."""

    capacity_violations: list[str] = field(default_factory=list)
    onchip_usage: dict[str, dict[str, int]] = field(default_factory=dict)
    generation: str = ""


def _kernel_args(spec: KernelSpec, inputs: dict[str, Any]) -> list[Any]:
    args: list[Any] = []
    for a in spec.args:
        if a.is_buffer:
            args.append(np.array(inputs[a.name], copy=True))
        else:
            args.append(np.dtype(a.dtype).type(inputs[a.name]))
    return args


def _host_args(spec: KernelSpec, inputs: dict[str, Any]) -> list[Any]:
    args: list[Any] = []
    for a in spec.args:
        if a.is_buffer:
            args.append(np.array(inputs[a.name], copy=True))
        else:
            kind = _HOST_SCALARS.get(a.dtype)
            if kind is None:
                raise ValueError(f"scalar argument {a.name} of type {a.dtype} cannot be passed to a host function")
            args.append((kind, inputs[a.name]))
    return args


def run_bang_spec(
    spec: KernelSpec,
    candidate_text: str,
    *,
    entry: str | None = None,
    kind: str | None = None,
    task_dim: tuple[int, int, int] = DEFAULT_TASK_DIM,
    task_type: str = DEFAULT_TASK_TYPE,
    generation: str | None = None,
    cases: list[int] | None = None,
    seed: int = 0,
    cancel: CancelToken | None = None,
    path: str = "candidate.mlu",
) -> BangSpecReport:
    """Run a BANG C candidate on the spec's cases and compare with the numpy reference (or the reference
    source on the SIMT runtime)."""
    started = time.monotonic()
    indices = _select_cases(spec, cases)
    entry = entry or spec.entry
    kind = kind or spec.kind
    candidate_text = with_entry_shim(spec, candidate_text, entry)  # as on every other target
    build = build_bang(candidate_text, path=path, generation=generation)
    violations = [v.diagnostic.format() for v in build.capacity_violations]
    if not build.ok or build.output is None:
        return BangSpecReport(False, [], format_build_errors(build) or "build failed", time.monotonic() - started, 0,
                              capacity_violations=violations, onchip_usage=build.usage, generation=build.generation)
    with tempfile.TemporaryDirectory(prefix="xpiler-bang-ref-") as tmp:
        expectation = _expectation(spec, Path(tmp), cancel)
        if isinstance(expectation, str):
            return BangSpecReport(False, [], None, time.monotonic() - started, 0, reference_error=expectation,
                                  capacity_violations=violations, onchip_usage=build.usage, generation=build.generation)
        expected_for, poisoned, other_schedules = expectation
        results = _run_cases(spec, candidate_text, build.output, expected_for, indices, entry, kind, task_dim,
                             task_type, generation, seed, cancel, path, Path(tmp), poisoned, other_schedules)
    tested = [r for r in results if not r.source_failed]
    return BangSpecReport(bool(tested) and all(r.passed for r in tested), results, None,
                          time.monotonic() - started, 0, capacity_violations=violations, onchip_usage=build.usage,
                          generation=build.generation)


Expectation = Callable[[int, dict[str, Any], Mapping[str, Any], Path], "dict[str, np.ndarray] | str"]
_Expected = tuple[Expectation, tuple[Expectation, Expectation] | None, list[Expectation]]


def _expectation(spec: KernelSpec, workdir: Path, cancel: CancelToken | None) -> _Expected | str:
    """Expected outputs per case: the numpy reference, or the reference source run on the SIMT runtime
    (differential testing, as the harness does for automatic specs) with its poisoned runs (a source that reads
    memory it never wrote is the source's defect, as on every target) and its runs under the other block
    orders (asked only when the candidate differs: an output the schedule decides is not the translation's)."""
    if spec.reference is not None:
        return _numpy_expectation(_load_reference(spec), spec), None, []
    if spec.reference_source is None:
        return "the spec has neither a numpy reference nor a reference source"
    from xpiler_core.dialect import detect_dialect

    ref_text = spec.reference_source.read_text(encoding="utf-8")
    ref_program = _program(spec, ref_text, detect_dialect(ref_text, str(spec.reference_source)),
                           spec.reference_entry or spec.entry, spec.reference_kind or spec.kind, None,
                           spec.reference_source.name)
    ref_built = build_program(ref_program, spec, workdir / "build-ref")
    if not ref_built.build.ok:
        return "reference source failed to build:\n" + ref_built.build.log
    return (_program_expectation(ref_built, spec, cancel), poisoned_expectations(ref_built, spec, cancel),
            [_program_expectation(ref_built, spec, cancel, env) for env in OTHER_SCHEDULES])


def bang_source_expectation(spec: KernelSpec, source_text: str, source_name: str, entry: str,
                            worker: BangWorker) -> Expectation:
    """Expected outputs per case: a BANG C kernel (the source of a translation) run on the MLU model as the
    job the translation's host entry launches (``DEFAULT_TASK_DIM`` tasks of ``DEFAULT_TASK_TYPE``)."""

    def expected_for(i: int, case: dict[str, Any], inputs: Mapping[str, Any], _: Path) -> dict[str, np.ndarray] | str:
        run = run_bang_kernel(source_text, entry, _kernel_args(spec, dict(inputs)), dim=DEFAULT_TASK_DIM,
                              task_type=DEFAULT_TASK_TYPE, path=source_name, worker=worker)
        if not run.ok:
            return f"the source on the MLU model: {run.error or 'the launch failed'}"
        return {a.name: arr for a, arr in zip(spec.args, run.arrays, strict=False) if a.is_output and arr is not None}

    return expected_for


def _run_cases(spec: KernelSpec, candidate_text: str, library: Path, expected_for: Expectation, indices: list[int],
               entry: str, kind: str, task_dim: tuple[int, int, int], task_type: str, generation: str | None,
               seed: int, cancel: CancelToken | None, path: str, workdir: Path,
               poisoned: tuple[Expectation, Expectation] | None = None,
               other_schedules: Sequence[Expectation] = ()) -> list[CaseResult]:
    results: list[CaseResult] = []
    with BangWorker(timeout_s=spec.timeout_s) as worker:
        for i in indices:
            if cancel is not None:
                cancel.check()
            case = spec.cases[i]
            sizes = _sizes(case)
            case_started = time.monotonic()
            inputs = case_inputs(spec, case, i, seed)
            expected = expected_for(i, case, inputs, workdir / f"ref{i}")
            if isinstance(expected, str):
                results.append(CaseResult(sizes, False, error=expected, source_failed=True))
                continue
            if poisoned is not None:
                defect = uninitialized_defect(spec, sizes, expected, poisoned, i, case, inputs, workdir)
                if defect is not None:
                    results.append(CaseResult(sizes, False, error=defect, source_failed=True))
                    continue
                poisoned = None  # a source that reads unwritten memory does so at the first case it runs
            if kind == "kernel":
                run = run_bang_kernel(candidate_text, entry, _kernel_args(spec, inputs), dim=task_dim,
                                      task_type=task_type, generation=generation, path=path, worker=worker)
                error, arrays = (None if run.ok else run.error or "the launch failed"), run.arrays
            else:
                call = worker.call(str(library), entry, _host_args(spec, inputs), timeout_s=spec.timeout_s)
                error, arrays = call.error, call.arrays
            if error is not None:
                results.append(CaseResult(sizes, False, error=error, seconds=time.monotonic() - case_started))
                continue
            got = {a.name: arr for a, arr in zip(spec.args, arrays, strict=False) if a.is_output and arr is not None}
            result = judged_by_schedule(spec, sizes, expected, got, other_schedules, i, case, inputs, workdir)
            result.seconds = time.monotonic() - case_started
            results.append(result)
    return results
