"""The harness: build a program for the CPU, run it on a spec's cases, compare with the reference.

A *program* is source text + dialect + entry + kind. CUDA/HIP programs run on the SIMT runtime (a
``__global__`` entry is launched with the spec's grid/block; a ``host`` entry is an ``extern "C"``
function); C programs are built with gcc/g++ -O2 -fopenmp and called the same way. Every run happens in a
child process in a temp dir with time and memory limits (:mod:`xpiler_core.runtime.sandbox`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import resource
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xpiler_core import ast as A
from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect
from xpiler_core.progress import CancelToken
from xpiler_core.project import BuildSettings
from xpiler_core.runtime.build import BuildResult, build_library
from xpiler_core.runtime.entry import ENTRY_SYMBOL, kernel_entry_glue
from xpiler_core.runtime.sandbox import CallArg, CallResult, call_library
from xpiler_core.verify.compare import compare_arrays
from xpiler_core.verify.entry_shim import add_entry_shim
from xpiler_core.verify.expr import ExprError, evaluate_int
from xpiler_core.verify.gpu_reference import (
    GPU_ENTRY_SYMBOL,
    build_gpu_library,
    gpu_error,
    gpu_kernel_glue,
    require_gpu,
)
from xpiler_core.verify.inputs import case_inputs, to_view
from xpiler_core.verify.reference import SandboxedReference
from xpiler_core.verify.spec import ArgSpec, KernelSpec
from xpiler_core.verify.toolchains import is_cplusplus


@dataclass
class CaseResult:
    sizes: dict[str, int]
    passed: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mismatches: int = 0
    first_mismatch: tuple[int, ...] | None = None
    output_name: str | None = None
    expected: float | None = None
    got: float | None = None
    error: str | None = None
    seconds: float = 0.0
    stdout: str = ""
    # the reference (the source program, or the spec's numpy function) failed at this case: it is no test
    source_failed: bool = False
    note: str = ""  # how the case was judged when not element by element (an order the source does not fix)

    def summary(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items()) or "-"
        if self.error:
            return f"[{sizes}] ERROR: {self.error}"
        if self.passed:
            return f"[{sizes}] ok (max abs err {self.max_abs_err:.3g}, max rel err {self.max_rel_err:.3g})"
        return (
            f"[{sizes}] MISMATCH in '{self.output_name}': {self.mismatches} elements, first at "
            f"{self.first_mismatch}: expected {self.expected!r}, got {self.got!r} "
            f"(max abs err {self.max_abs_err:.3g}, max rel err {self.max_rel_err:.3g})"
        )


@dataclass
class SpecReport:
    passed: bool
    cases: list[CaseResult] = field(default_factory=list)
    build_error: str | None = None
    seconds: float = 0.0
    warp_size: int = 32
    reference_error: str | None = None  # the reference source does not build on the runtime

    @property
    def tested(self) -> list[CaseResult]:
        """The cases that are tests (the reference produced its outputs there)."""
        return [c for c in self.cases if not c.source_failed]

    @property
    def dropped(self) -> list[CaseResult]:
        return [c for c in self.cases if c.source_failed]

    def first_failure(self, limit: int = 240) -> str:
        """The first failing case in one line (its error or mismatch), or "" when every case passed."""
        if self.build_error:
            first = self.build_error.strip().splitlines()
            return ("build failed: " + first[0])[:limit] if first else "build failed"
        failing = next((c for c in self.tested if not c.passed), None)
        if failing is None:
            return ""
        line = " ".join(failing.summary().split())
        return line if len(line) <= limit else line[: limit - 1] + "…"

    def summary(self) -> str:
        if self.build_error:
            return f"build failed:\n{self.build_error}"
        ok = sum(c.passed for c in self.cases)
        head = f"{'PASS' if self.passed else 'FAIL'}: {ok}/{len(self.cases)} cases (warp size {self.warp_size}, {self.seconds:.2f} s)"
        return "\n".join([head, *(f"  {c.summary()}" for c in self.cases)])


@dataclass
class Program:
    text: str
    dialect: Dialect
    entry: str
    kind: str  # "kernel" | "host"
    warp_size: int
    display_name: str


@dataclass
class BuiltProgram:
    program: Program
    build: BuildResult
    on_gpu: bool = False  # built with nvcc for this machine's CUDA device (--reference gpu)


def default_warp_size(dialect: Dialect) -> int:
    return 64 if dialect is Dialect.HIP else 32


def build_program(program: Program, spec: KernelSpec, workdir: Path, build: BuildSettings | None = None) -> BuiltProgram:
    if build is not None and build.device == "gpu":
        return _build_gpu_program(program, spec, workdir, build)
    glue = ""
    if program.kind == "kernel" and program.dialect in (Dialect.CUDA, Dialect.HIP):
        glue = kernel_entry_glue(program.entry, [(a.dtype, a.is_buffer) for a in spec.args])
    elif program.kind == "kernel":
        raise XpilerError(
            f"a {program.dialect.value} program cannot have a kernel entry; use kind = 'host'", str(spec.path)
        )
    built = build_library(
        program.text,
        program.dialect,
        workdir,
        warp_size=program.warp_size,
        display_name=program.display_name,
        extra=glue,
        cplusplus_c=program.dialect is Dialect.C and is_cplusplus(program.text),
        build=build,
    )
    return BuiltProgram(program, built)


def _build_gpu_program(program: Program, spec: KernelSpec, workdir: Path, build: BuildSettings) -> BuiltProgram:
    if program.dialect is not Dialect.CUDA:
        raise XpilerError(f"--reference gpu runs CUDA sources; this one is {program.dialect.value}", str(spec.path))
    require_gpu(str(spec.path))
    glue = gpu_kernel_glue(program.entry, [(a.dtype, a.is_buffer) for a in spec.args]) \
        if program.kind == "kernel" else ""
    built = build_gpu_library(program.text, workdir, display_name=program.display_name, extra=glue, build=build)
    return BuiltProgram(program, built, on_gpu=True)


def launch_config(spec: KernelSpec, case: Mapping[str, Any]) -> tuple[int, ...]:
    try:
        grid = [evaluate_int(g, case) for g in spec.grid][:3]
        block = [evaluate_int(b, case) for b in spec.block][:3]
        smem = evaluate_int(spec.shared_bytes, case)
    except ExprError as exc:
        raise XpilerError(f"launch configuration: {exc}", str(spec.path)) from None
    grid += [1] * (3 - len(grid))
    block += [1] * (3 - len(block))
    return (*grid, *block, smem)


def run_program(
    built: BuiltProgram,
    spec: KernelSpec,
    inputs: Mapping[str, Any],
    case: Mapping[str, Any],
    workdir: Path,
    cancel: CancelToken | None = None,
    env: dict[str, str] | None = None,
) -> CallResult:
    assert built.build.library is not None
    args = []
    for a in spec.args:
        if a.is_buffer:
            args.append(CallArg(a.name, a.dtype, array=np.array(inputs[a.name], copy=True)))
        else:
            args.append(CallArg(a.name, a.dtype, value=inputs[a.name]))
    outputs = [a.name for a in spec.args if a.is_output]
    program = built.program
    is_kernel = program.kind == "kernel"
    if built.on_gpu:
        # a CUDA context maps far more address space than any limit the runtime's runs live under
        called = call_library(built.build.library, GPU_ENTRY_SYMBOL if is_kernel else program.entry,
                              "gpu-kernel" if is_kernel else "host", args, outputs, workdir,
                              config=launch_config(spec, case) if is_kernel else (1, 1, 1, 1, 1, 1, 0),
                              timeout_s=spec.timeout_s, kernel_hint=program.entry, cancel=cancel,
                              memory_bytes=resource.RLIM_INFINITY)
        named = gpu_error(called.stderr) if not called.ok else None
        return dataclasses.replace(called, error=named) if named else called
    return call_library(
        built.build.library,
        ENTRY_SYMBOL if is_kernel else program.entry,
        "kernel" if is_kernel else "host",
        args,
        outputs,
        workdir,
        config=launch_config(spec, case) if is_kernel else (1, 1, 1, 1, 1, 1, 0),
        timeout_s=spec.timeout_s,
        kernel_hint=program.entry,
        cancel=cancel,
        env=env,
    )


# The schedules a source program runs under again when a candidate's outputs differ from its own: its blocks
# one after another in launch order, and in the opposite order (every race between blocks decided both ways;
# the first run, blocks spread over the cores, may have happened to decide them either way).
OTHER_SCHEDULES = ({"XPILER_THREADS": "1"}, {"XPILER_BLOCK_ORDER": "reverse", "XPILER_THREADS": "1"})
Expectation = Callable[[int, dict[str, Any], Mapping[str, Any], Path], "dict[str, np.ndarray] | str"]
# what the reference gave, per (which run of it, case index, seed): runs of one spec against many candidates
# (repair's screening) ask the reference for the same outputs every time
ExpectationStore = dict[tuple[str, int, int], "dict[str, np.ndarray]"]


def _remembered(expect: Expectation, store: ExpectationStore | None, tag: str, seed: int) -> Expectation:
    if store is None:
        return expect

    def expected_for(i: int, case: dict[str, Any], inputs: Mapping[str, Any], workdir: Path) -> dict[str, np.ndarray] | str:
        key = (tag, i, seed)
        if key in store:
            return store[key]
        got = expect(i, case, inputs, workdir)
        if not isinstance(got, str):  # a failure is asked again: it may be a time limit of this call's
            store[key] = got
        return got

    return expected_for
# A host-entry source run once more with its fresh device memory poisoned (runtime/.../device_heap.h), blocks
# in launch order; when that changes an output, the same order unpoisoned tells a read of memory nothing wrote
# from a schedule-dependent result.
# the reference again with every byte of fresh memory different from its plain run: device allocations poisoned
# (plain: zero-filled), shared arrays zero-filled (plain: poisoned, NaN for floats)
POISONED = {"XPILER_DEVICE_FILL": "poison", "XPILER_SHARED_FILL": "zero", "XPILER_THREADS": "1"}
UNINITIALIZED = "the source reads memory it never wrote"


def _load_reference(spec: KernelSpec) -> SandboxedReference:
    """The spec's numpy reference, loaded in a child process with the spec's time limit (it is user code)."""
    assert spec.reference is not None
    module_part, _, func_name = spec.reference.partition(":")
    path = spec.path.parent / module_part
    if not path.is_file() or not func_name:
        raise XpilerError(
            f"reference {spec.reference!r}: expected 'file.py:function' next to the spec", str(spec.path)
        )
    return SandboxedReference(path.resolve(), func_name, spec.timeout_s, str(spec.path))


def reference_outputs(
    fn: Callable[..., Any], spec: KernelSpec, inputs: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    kwargs: dict[str, Any] = {}
    for a in spec.args:
        if a.role in ("in", "inout"):
            kwargs[a.name] = to_view(np.array(inputs[a.name], copy=True), a.dtype)
        elif a.role == "scalar":
            kwargs[a.name] = inputs[a.name]
    result = fn(**kwargs)
    outs = [a.name for a in spec.args if a.is_output]
    if isinstance(result, dict):
        return {k: np.asarray(v) for k, v in result.items()}
    if isinstance(result, tuple | list):
        return {name: np.asarray(v) for name, v in zip(outs, result, strict=False)}
    if len(outs) != 1:
        raise XpilerError(
            f"reference returned one array but the spec has {len(outs)} outputs", str(spec.path)
        )
    return {outs[0]: np.asarray(result)}


def _compare_case(
    spec: KernelSpec, sizes: dict[str, int], expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]
) -> CaseResult:
    worst: CaseResult | None = None
    total_abs = total_rel = 0.0
    for a in spec.args:
        if not a.is_output or a.name not in expected:
            continue
        got_view = to_view(got[a.name], a.dtype)
        exp_view = (
            to_view(expected[a.name], a.dtype)
            if expected[a.name].dtype == np.uint16 and a.dtype == "bfloat16"
            else expected[a.name]
        )
        c = compare_arrays(
            exp_view,
            got_view,
            a.atol if a.atol is not None else spec.atol,
            a.rtol if a.rtol is not None else spec.rtol,
        )
        total_abs = max(total_abs, c.max_abs_err)
        total_rel = max(total_rel, c.max_rel_err)
        if not c.passed and worst is None:
            worst = CaseResult(
                sizes,
                False,
                c.max_abs_err,
                c.max_rel_err,
                c.mismatches,
                c.first_mismatch,
                a.name,
                c.expected,
                c.got,
                c.error,
            )
    if worst is not None:
        worst.max_abs_err, worst.max_rel_err = total_abs, total_rel
        return worst
    return CaseResult(sizes, True, total_abs, total_rel)


def _select_cases(spec: KernelSpec, cases: list[int] | None) -> list[int]:
    indices = list(range(len(spec.cases))) if cases is None else cases
    for i in indices:
        if not 0 <= i < len(spec.cases):
            raise XpilerError(f"case {i} does not exist (the spec has {len(spec.cases)})", str(spec.path))
    return indices


def _sizes(case: Mapping[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in case.items() if isinstance(v, int | float)}


def _run_cases(
    spec: KernelSpec,
    candidate: BuiltProgram,
    expected_for: Callable[[int, dict[str, Any], Mapping[str, Any], Path], dict[str, np.ndarray] | str],
    indices: list[int],
    seed: int,
    cancel: CancelToken | None,
    workdir: Path,
    other_schedules: Sequence[Expectation] = (),
    poisoned: tuple[Expectation, Expectation] | None = None,
    candidate_env: dict[str, str] | None = None,
) -> list[CaseResult]:
    """Each case: the reference's outputs, the candidate's, compared. ``other_schedules``: the reference program
    run again under other block orders, asked only when the candidate differs (see :func:`_judge_order`);
    ``poisoned``: the reference program with its fresh device memory poisoned, and without the poison in the
    same block order, run on the first case the reference computes (see :func:`_uninitialized_read`)."""
    results = []
    for i in indices:
        if cancel is not None:
            cancel.check()
        case = spec.cases[i]
        sizes = _sizes(case)
        started = time.monotonic()
        inputs = case_inputs(spec, case, i, seed)
        expected = expected_for(i, case, inputs, workdir / f"ref{i}")
        if isinstance(expected, str):
            results.append(CaseResult(sizes, False, error=expected, seconds=time.monotonic() - started,
                                      source_failed=True))
            continue
        if poisoned is not None:
            defect = uninitialized_defect(spec, sizes, expected, poisoned, i, case, inputs, workdir)
            if defect is not None:
                results.append(CaseResult(sizes, False, error=defect, seconds=time.monotonic() - started,
                                          source_failed=True))
                continue  # checked again at the next case: sizes that are a guess may be wrong in one case only
            # once it computes without: a source that reads unwritten memory does so at the first case it runs
            poisoned = None
        run = run_program(candidate, spec, inputs, case, workdir / f"case{i}", cancel, candidate_env)
        if not run.ok:
            results.append(
                CaseResult(
                    sizes, False, error=run.error, seconds=time.monotonic() - started, stdout=run.stdout
                )
            )
            if spec.cases_are_alternatives:
                break
            continue
        result = judged_by_schedule(spec, sizes, expected, run.outputs, other_schedules, i, case, inputs, workdir)
        result.seconds = time.monotonic() - started
        result.stdout = run.stdout
        results.append(result)
        if spec.cases_are_alternatives:
            break  # the first alternative the source runs clean at is the test
    return results


def poisoned_expectations(ref_built: BuiltProgram, spec: KernelSpec,
                          cancel: CancelToken | None) -> tuple[Expectation, Expectation] | None:
    """The reference program run with its fresh device memory poisoned and its shared arrays zeroed, and in the
    same block order without that (see :func:`uninitialized_defect`); None where it does not apply: a GPU run,
    or a kernel that is not CUDA/HIP (its memory is not the runtime's)."""
    program = ref_built.program
    if ref_built.on_gpu or (program.kind != "host" and program.dialect not in (Dialect.CUDA, Dialect.HIP)):
        return None
    return (_program_expectation(ref_built, spec, cancel, POISONED),
            _program_expectation(ref_built, spec, cancel, OTHER_SCHEDULES[0]))


def uninitialized_defect(spec: KernelSpec, sizes: dict[str, int], expected: Mapping[str, np.ndarray],
                         poisoned: tuple[Expectation, Expectation], i: int, case: dict[str, Any],
                         inputs: Mapping[str, Any], workdir: Path) -> str | None:
    """The source's defect when its outputs at case ``i`` depend on what its fresh device memory or shared
    arrays hold."""
    with_poison, in_order = poisoned
    return _uninitialized_read(spec, sizes, expected, with_poison(i, case, inputs, workdir / f"ref{i}-poison"),
                               functools.partial(in_order, i, case, inputs, workdir / f"ref{i}-in-order"))


def _uninitialized_read(spec: KernelSpec, sizes: dict[str, int], first: Mapping[str, np.ndarray],
                        poisoned: dict[str, np.ndarray] | str,
                        in_order: Callable[[], dict[str, np.ndarray] | str]) -> str | None:
    """The source's outputs change when its fresh device memory and shared arrays hold other bytes: it reads
    memory it never wrote (a GPU returns whatever that memory last held), named as its defect. None when they do
    not change, or when the same run without the poison (``in_order``: the poisoned run's block order) changes
    them alike: then the schedule decides them, not the memory."""
    if isinstance(poisoned, str):
        return None  # the poisoned run failed: its own failure is judged where the source runs normally

    def differ(a: ArgSpec, base: Mapping[str, np.ndarray]) -> bool:
        return a.name in base and not _compare_case(_only(spec, a), sizes, {a.name: base[a.name]},
                                                    {a.name: poisoned[a.name]}).passed

    changed = [a for a in spec.args if a.is_output and a.name in poisoned and differ(a, first)]
    if not changed:
        return None
    ordered = in_order()
    if isinstance(ordered, str):
        return None
    changed = [a for a in changed if differ(a, ordered)]
    return _uninitialized_message(changed, first, poisoned) if changed else None


def _only(spec: KernelSpec, arg: ArgSpec) -> KernelSpec:
    return dataclasses.replace(spec, args=[arg])


def _uninitialized_message(differs: list[ArgSpec], first: Mapping[str, np.ndarray],
                           poisoned: Mapping[str, np.ndarray]) -> str:
    a = differs[0]
    x, y = np.ravel(first[a.name]), np.ravel(poisoned[a.name])
    changed = np.flatnonzero(~((x == y) | (np.isnan(x) & np.isnan(y))) if x.dtype.kind == "f" else x != y) \
        if x.shape == y.shape else np.array([0])
    where = f"{changed.size} of {x.size} elements, first at index {int(changed[0])}" if changed.size else "its shape"
    return (f"{UNINITIALIZED}: its output '{a.name}' changes with what freshly allocated device memory or "
            f"unwritten shared memory holds ({where}; a run with other bytes there) — a GPU returns whatever that "
            "memory last held")


def judged_by_schedule(spec: KernelSpec, sizes: dict[str, int], expected: Mapping[str, np.ndarray],
                       got: Mapping[str, np.ndarray], other_schedules: Sequence[Expectation], i: int,
                       case: dict[str, Any], inputs: Mapping[str, Any], workdir: Path) -> CaseResult:
    """The candidate's outputs at case ``i`` compared with the reference's; where they differ, the reference runs
    again under ``other_schedules`` (see :func:`_judge_order`)."""
    result = _compare_case(spec, sizes, expected, got)
    if not result.passed and other_schedules:
        again = [other(i, case, inputs, workdir / f"ref{i}-other{k}") for k, other in enumerate(other_schedules)]
        runs = [a for a in again if not isinstance(a, str)]
        if runs:
            result = _judge_order(spec, sizes, expected, runs, got, result)
    return result


def with_entry_shim(spec: KernelSpec, text: str, entry: str) -> str:
    """``text`` with the spec's forwarder to its entry appended, when the entry under test is the spec's and
    the text does not define it (the forwarder is built with the candidate only)."""
    if spec.entry_shim and entry == spec.entry and f"{entry}(" not in text:
        return f"{text}\n{spec.entry_shim}\n"
    return text


def _judge_order(spec: KernelSpec, sizes: dict[str, int], first: Mapping[str, np.ndarray],
                 others: list[dict[str, np.ndarray]], got: Mapping[str, np.ndarray], failed: CaseResult) -> CaseResult:
    """The candidate differs from the source, but does the source itself agree with itself under another
    schedule? An output the source writes in an order that depends on which block wins a race (stream
    compaction through an atomic counter) is compared as a multiset; one whose values themselves change with
    the schedule cannot be compared at all and is left out, and the note says so. An output the source writes
    the same way in every schedule is still compared element by element."""
    def same(x: np.ndarray, y: np.ndarray, a: ArgSpec) -> bool:
        return compare_arrays(x, y, a.atol if a.atol is not None else spec.atol,
                              a.rtol if a.rtol is not None else spec.rtol).passed

    unstable = [a for a in spec.args if a.is_output and a.name in first
                and any(a.name in o and not same(first[a.name], o[a.name], a) for o in others)]
    if not unstable:
        return failed
    ordered: dict[str, np.ndarray] = {}
    as_multiset: list[str] = []
    left_out: list[str] = []
    for a in spec.args:
        if not a.is_output or a.name not in first:
            continue
        if a not in unstable:
            ordered[a.name] = first[a.name]
            continue
        one = np.sort(np.ravel(first[a.name]))
        if all(same(one, np.sort(np.ravel(o[a.name])), a) for o in others if a.name in o):
            as_multiset.append(a.name)
        else:
            left_out.append(a.name)
    expected = dict(ordered)
    observed = {k: v for k, v in got.items() if k in ordered}
    for name in as_multiset:
        expected[name] = np.sort(np.ravel(first[name]))
        observed[name] = np.sort(np.ravel(got[name]))
    checked = dataclasses.replace(spec, args=[
        dataclasses.replace(a, shape=[str(int(np.size(first[a.name])))]) if a.name in as_multiset else a
        for a in spec.args if not (a.is_output and a.name in left_out)])
    result = _compare_case(checked, sizes, expected, observed)
    notes = []
    if as_multiset:
        notes.append(f"{', '.join(as_multiset)}: the source writes the elements in an order that depends on the "
                     "schedule (two runs of it differ only in order); compared as a multiset")
    if left_out:
        notes.append(f"{', '.join(left_out)}: the source computes different values under another schedule; not "
                     "compared")
    result.note = "; ".join(notes)
    return result


def _program(
    spec: KernelSpec, text: str, dialect: Dialect, entry: str, kind: str, warp: int | None, display: str
) -> Program:
    if kind == "host" and dialect is Dialect.C and "<" in entry:
        entry = A.instance_symbol(entry)  # a template kernel's instance, exported under a C name
    if spec.entry_shim:
        text = with_entry_shim(spec, text, entry)
    elif kind == "host":
        # a host entry with C++ linkage cannot be found by dlsym under its source name: call it through a
        # forwarder with C linkage
        as_cplusplus = dialect is not Dialect.C or is_cplusplus(text)
        shimmed = add_entry_shim(text, dialect, entry, display, built_as_cplusplus=as_cplusplus)
        if shimmed is not None:
            text, entry = shimmed
    return Program(text, dialect, entry, kind, warp or default_warp_size(dialect), display)


def run_spec(
    spec: KernelSpec,
    *,
    candidate_text: str | None = None,
    candidate_dialect: Dialect | None = None,
    candidate_entry: str | None = None,
    candidate_kind: str | None = None,
    warp_size: int | None = None,
    cases: list[int] | None = None,
    seed: int = 0,
    cancel: CancelToken | None = None,
    build: BuildSettings | None = None,
    reference_build: BuildSettings | None = None,
    candidate_env: dict[str, str] | None = None,
    expectations: ExpectationStore | None = None,
) -> SpecReport:
    """Run the spec's source (or a candidate) on every case and compare with the reference. ``build``: the
    project settings of the program under test; ``reference_build``: those of a reference source;
    ``candidate_env``: environment variables of the runs of the program under test (not of the reference's);
    ``expectations``: the reference's outputs kept across calls with this spec (the caller keeps the store to
    one spec and one reference)."""
    bang_path = "candidate.mlu"
    if candidate_text is None and spec.source_dialect() is Dialect.BANG:  # the spec's own BANG source
        candidate_text, candidate_dialect, bang_path = spec.source_text(), Dialect.BANG, spec.source.name
    if candidate_text is not None and candidate_dialect is Dialect.BANG:  # BANG C runs on the MLU model
        from xpiler_core.verify.bang import run_bang_spec

        return run_bang_spec(spec, candidate_text, entry=candidate_entry, kind=candidate_kind, cases=cases,
                             seed=seed, cancel=cancel, path=bang_path)
    started = time.monotonic()
    indices = _select_cases(spec, cases)
    if candidate_text is None:
        text, dialect, display = spec.source_text(), spec.source_dialect(), spec.source.name
        warp = warp_size or spec.warp_size
    else:
        text = candidate_text
        dialect = candidate_dialect or spec.source_dialect()
        display = f"candidate{dialect.suffix}"
        warp = warp_size
    program = _program(
        spec, text, dialect, candidate_entry or spec.entry, candidate_kind or spec.kind, warp, display
    )
    with tempfile.TemporaryDirectory(prefix="xpiler-test-") as tmp, contextlib.ExitStack() as closing:
        workdir = Path(tmp)
        built = build_program(program, spec, workdir / "build", build)
        if not built.build.ok:
            return SpecReport(
                False, [], built.build.log or "build failed", time.monotonic() - started, program.warp_size
            )
        expected_for: Callable[[int, dict[str, Any], Mapping[str, Any], Path], dict[str, np.ndarray] | str]
        other_schedules: list[Expectation] = []
        poisoned: tuple[Expectation, Expectation] | None = None
        if spec.reference is not None:
            reference = _load_reference(spec)
            closing.callback(reference.close)
            expected_for = _numpy_expectation(reference, spec)
        else:
            assert spec.reference_source is not None
            ref_text = spec.reference_source.read_text(encoding="utf-8")
            from xpiler_core.dialect import detect_dialect

            ref_dialect = detect_dialect(ref_text, str(spec.reference_source))
            if ref_dialect is Dialect.BANG:
                # a BANG C source runs on the MLU model, as the job the translation's host entry launches
                from xpiler_core.runtime.bang.run import BangWorker
                from xpiler_core.verify.bang import bang_source_expectation

                worker = closing.enter_context(BangWorker(timeout_s=spec.timeout_s))
                expected_for = bang_source_expectation(spec, ref_text, spec.reference_source.name,
                                                       spec.reference_entry or spec.entry, worker)
            else:
                ref_program = _program(
                    spec,
                    ref_text,
                    ref_dialect,
                    spec.reference_entry or spec.entry,
                    spec.reference_kind or spec.kind,
                    None,
                    spec.reference_source.name,
                )
                ref_built = build_program(ref_program, spec, workdir / "build-ref", reference_build)
                if not ref_built.build.ok:
                    return SpecReport(False, [], None, time.monotonic() - started, program.warp_size,
                                      reference_error=ref_built.build.log or "build failed")
                expected_for = _program_expectation(ref_built, spec, cancel)
                other_schedules = [_remembered(_program_expectation(ref_built, spec, cancel, env), expectations,
                                               f"schedule {k}", seed) for k, env in enumerate(OTHER_SCHEDULES)]
                if (fresh := poisoned_expectations(ref_built, spec, cancel)) is not None:
                    # the same block order unpoisoned is the first other schedule, already remembered
                    poisoned = (_remembered(fresh[0], expectations, "poisoned", seed), other_schedules[0])
        expected_for = _remembered(expected_for, expectations, "plain", seed)
        results = _run_cases(spec, built, expected_for, indices, seed, cancel, workdir, other_schedules, poisoned,
                             candidate_env)
    return _report(results, time.monotonic() - started, program.warp_size)


def _report(results: list[CaseResult], seconds: float, warp_size: int) -> SpecReport:
    """Passed when every case the reference could produce passed (and there was at least one)."""
    tested = [r for r in results if not r.source_failed]
    return SpecReport(bool(tested) and all(r.passed for r in tested), results, None, seconds, warp_size)


def _numpy_expectation(
    fn: Callable[..., Any], spec: KernelSpec
) -> Callable[[int, dict[str, Any], Mapping[str, Any], Path], dict[str, np.ndarray] | str]:
    def expected_for(
        i: int, case: dict[str, Any], inputs: Mapping[str, Any], _: Path
    ) -> dict[str, np.ndarray] | str:
        try:
            return reference_outputs(fn, spec, inputs)
        except XpilerError:
            raise
        except Exception as exc:  # the reference is user code: a failing case, not a crash
            return f"reference raised {exc!r}"

    return expected_for


def _program_expectation(
    ref_built: BuiltProgram, spec: KernelSpec, cancel: CancelToken | None = None,
    env: dict[str, str] | None = None,
) -> Callable[[int, dict[str, Any], Mapping[str, Any], Path], dict[str, np.ndarray] | str]:
    def expected_for(
        i: int, case: dict[str, Any], inputs: Mapping[str, Any], workdir: Path
    ) -> dict[str, np.ndarray] | str:
        run = run_program(ref_built, spec, inputs, case, workdir, cancel, env)
        if not run.ok:
            return f"reference program failed: {run.error}"
        return run.outputs

    return expected_for


def differential(
    spec: KernelSpec,
    *,
    a_text: str,
    a_dialect: Dialect,
    a_warp: int | None,
    b_text: str,
    b_dialect: Dialect,
    b_warp: int | None,
    b_entry: str | None = None,
    b_kind: str | None = None,
    cases: list[int] | None = None,
    seed: int = 0,
    cancel: CancelToken | None = None,
    a_build: BuildSettings | None = None,
    b_build: BuildSettings | None = None,
) -> SpecReport:
    """Run program a and program b on the same inputs; b passes where its outputs match a's."""
    started = time.monotonic()
    indices = _select_cases(spec, cases)
    a = _program(spec, a_text, a_dialect, spec.entry, spec.kind, a_warp, f"a{a_dialect.suffix}")
    b = _program(
        spec, b_text, b_dialect, b_entry or spec.entry, b_kind or spec.kind, b_warp, f"b{b_dialect.suffix}"
    )
    with tempfile.TemporaryDirectory(prefix="xpiler-diff-") as tmp:
        workdir = Path(tmp)
        built_a = build_program(a, spec, workdir / "build-a", a_build)
        if not built_a.build.ok:
            return SpecReport(False, [], None, time.monotonic() - started, b.warp_size,
                              reference_error=built_a.build.log or "build failed")
        built_b = build_program(b, spec, workdir / "build-b", b_build)
        if not built_b.build.ok:
            return SpecReport(
                False, [], built_b.build.log or "build failed", time.monotonic() - started, b.warp_size
            )
        poisoned = (_program_expectation(built_a, spec, cancel, POISONED),
                    _program_expectation(built_a, spec, cancel, OTHER_SCHEDULES[0])) if a.kind == "host" else None
        results = _run_cases(
            spec, built_b, _program_expectation(built_a, spec, cancel), indices, seed, cancel, workdir,
            poisoned=poisoned,
        )
    return _report(results, time.monotonic() - started, b.warp_size)
