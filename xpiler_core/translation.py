"""The vocabulary every direction speaks: options, pass records, evidence, one status decision, the result
and the manifest.

Plans produce a candidate and their pass records; :func:`gather_evidence` checks a candidate (the target's
real compiler, then the test cases or the whole program) through a :class:`TargetRunner` from
``verify/targets.py``; :func:`decide_status` is the only place a status is decided; :func:`build_manifest`
writes the one manifest schema (``schema`` = :data:`MANIFEST_SCHEMA`) that ``xpiler replay``, the editor and
the tuner read back with :func:`read_manifest`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict

from xpiler_core import __version__
from xpiler_core.diagnostics import Diagnostic, Severity, Span, XpilerError
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassRecord, Unresolved
from xpiler_core.progress import Cancelled, CancelToken, ProgressFn, report
from xpiler_core.runtime.sandbox import is_timeout

if TYPE_CHECKING:
    from xpiler_core.frontend.model import KernelModel
    from xpiler_core.project import BuildSettings, ProjectConfig
    from xpiler_core.verify.harness import CaseResult, SpecReport
    from xpiler_core.verify.program import ProgramReport
    from xpiler_core.verify.spec import KernelSpec
    from xpiler_core.verify.toolchains import CompileVerdict

MANIFEST_SCHEMA = 1
MANIFEST_DIR = ".xpiler"


class Status(StrEnum):
    """What a translation's evidence supports. ``ERROR`` is the tool's own failure (its harness, a crash),
    never a verdict on the translation."""

    VERIFIED = "verified"
    NOT_EXECUTED = "compiled-not-executed"
    UNRESOLVED = "unresolved"
    ERROR = "error"


#: Exit codes of ``xpiler translate`` / ``replay`` per status (documented in README.md); 1 is a user error
#: (unreadable file, bad flags), 2 a usage error.
EXIT_CODES: dict[Status, int] = {Status.VERIFIED: 0, Status.UNRESOLVED: 3, Status.NOT_EXECUTED: 4, Status.ERROR: 5}


@dataclass
class TranslateOptions:
    target: Dialect
    warp_size: int | None = None  # the target's warp size for execution (HIP default 64)
    spec_path: str | None = None
    verify: bool = True
    seed: int = 0
    passes: list[str] | None = None  # None: the plan's default pass list
    proposer: str = "rules"  # "rules" | "llm" | "rules-then-llm" (xpiler_core/llm)
    # per-pass parameters, pass name -> {param: value}; recorded in the manifest
    pass_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    llm: Any | None = None  # an xpiler_core.llm.LLMConfig; None: the XPILER_LLM_* environment variables
    repair: bool = True  # try a local SMT repair (xpiler_core/repair) when the candidate fails its spec
    source_dialect: Dialect | None = None  # None: detected from the code compiled for the source platform
    project: ProjectConfig | None = None  # include dirs, defines, program arguments (xpiler_core/project.py)
    output_path: str | None = None  # where the translation is written (compiler messages name that file)
    cpu_tier: str = "auto"  # CPU targets: "auto" (structural, the portable tier under it) or "portable" only
    keep_going: bool = False  # translate a source whose syntax errors its compiler confirms (what parses)

    @property
    def run_time_limit_s(self) -> float | None:
        """The user's bound on each program or test run (``--timeout``, ``[run] timeout_s``), or None."""
        return self.project.timeout_s if self.project is not None and self.project.timeout_s else None


@dataclass
class TestSet:
    """What a candidate is tested on: specs (each a set of cases), or a whole program, or nothing (with why)."""

    specs: list[KernelSpec] = field(default_factory=list)
    auto: bool = True  # built from the code, not given by the user
    reason: str = ""  # how the tests were built, or why none could be
    untested: list[str] = field(default_factory=list)  # parts of the file no test reaches, with why
    spec_toml: str | None = None  # an automatic spec's text (recorded for replay and for the user)
    spec_path: str | None = None
    program: bool = False  # the source is a whole program: run it and the translation (verify/program.py)
    dropped_cases: list[str] = field(default_factory=list)  # cases at which the source itself fails
    sizes_guessed: bool = False  # automatic tests whose sizes the code does not fix (fixed-shape kernels)
    sizes_solved: bool = False  # ... found from the kernels' built-in shape (verify/shape_solve.py)
    error: str = ""  # building the tests failed in xpiler itself (a bug of ours; the translation is still written)


@dataclass
class Evidence:
    """What checking a candidate found. Filled by :func:`gather_evidence`, read by :func:`decide_status`."""

    verify: bool = True
    compile: CompileVerdict | None = None
    tests: SpecReport | None = None
    baseline: SpecReport | None = None  # the source against the spec's reference (hand-written specs)
    program: ProgramReport | None = None  # whole-program runs of the source and the translation
    spec_info: dict[str, Any] | None = None
    minimal_case: CaseResult | None = None  # the smallest failing case a shrink found
    note: str = ""
    untested: list[str] = field(default_factory=list)
    harness_error: str = ""  # our own machinery failed: never the translation's fault
    source_build_error: str = ""  # the source itself does not build with its own toolchain (first error)
    seconds_compile: float = 0.0
    seconds_tests: float = 0.0
    seconds_checks: float = 0.0  # the whole compile-and-test phase (the two overlap)
    facts: dict[str, Any] = field(default_factory=dict)  # target facts for the manifest (MLU usage, …)


class TargetRunner(Protocol):
    """How a target judges a candidate: its real compiler and a run of the spec's cases."""

    target: Dialect
    warp_size: int

    def compile(self, text: str) -> CompileVerdict: ...

    def run(self, spec: KernelSpec, text: str, seed: int, cancel: CancelToken | None,
            cases: list[int] | None = None) -> SpecReport: ...

    def run_source(self, spec: KernelSpec, seed: int, cancel: CancelToken | None,
                   cases: list[int] | None = None) -> SpecReport: ...


def gather_evidence(
    candidate: str,
    tests: TestSet,
    runner: TargetRunner,
    *,
    seed: int = 0,
    cancel: CancelToken | None = None,
    progress: ProgressFn | None = None,
    shrink: bool = True,
    program_check: Callable[[str], ProgramReport] | None = None,
    time_limit_s: float | None = None,
) -> Evidence:
    """Compile ``candidate`` with the target's compiler and run it on ``tests``; never raises for a failing
    candidate (a harness fault becomes ``harness_error``). ``time_limit_s`` (the user's ``--timeout``) bounds
    every case run, whatever the spec says."""
    if time_limit_s:
        tests = dataclasses.replace(tests, specs=[
            dataclasses.replace(s, timeout_s=min(s.timeout_s, time_limit_s)) for s in tests.specs])
    evidence = Evidence(untested=list(tests.untested), harness_error=tests.error)
    evidence.spec_info = _spec_info(tests)
    report(progress, 0.35, f"compiling with the {runner.target.value.upper()} toolchain")
    if not tests.specs and not (tests.program and program_check is not None):
        started = time.perf_counter()
        evidence.compile = runner.compile(candidate)
        evidence.seconds_compile = evidence.seconds_checks = time.perf_counter() - started
        if evidence.compile.ok:
            evidence.note = f"no tests: {tests.reason}" if tests.reason else "no tests"
        return evidence
    # The target compiler's verdict and the test builds are independent compiles of the same text: they run
    # side by side (a cold translate spent both one after the other). The tests stop when the verdict is a
    # failure; their results count only when the candidate compiles.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="xpiler-compile") as pool:
        started = time.perf_counter()
        compiling = pool.submit(_timed, runner.compile, candidate)
        tests_cancel = _UntilBroken(cancel, compiling)
        try:
            _run_tests(candidate, tests, runner, seed, tests_cancel, progress, shrink, program_check, evidence)
        except Cancelled:
            if cancel is not None and cancel.cancelled:
                raise
        evidence.seconds_tests = time.perf_counter() - started
        evidence.compile, evidence.seconds_compile = compiling.result()
        evidence.seconds_checks = time.perf_counter() - started
    if not evidence.compile.ok:
        return Evidence(untested=list(tests.untested), harness_error=tests.error, spec_info=_spec_info(tests),
                        compile=evidence.compile, seconds_compile=evidence.seconds_compile,
                        seconds_checks=evidence.seconds_checks, facts=evidence.facts)
    if cancel is not None:
        cancel.check()
    return evidence


def _timed(compile_text: Callable[[str], CompileVerdict], text: str) -> tuple[CompileVerdict, float]:
    started = time.perf_counter()
    verdict = compile_text(text)
    return verdict, time.perf_counter() - started


class _UntilBroken(CancelToken):
    """Cancelled when the caller cancels or the concurrent compile check comes back failed."""

    def __init__(self, caller: CancelToken | None, compiling: Future[tuple[CompileVerdict, float]]) -> None:
        super().__init__()
        self._caller, self._compiling = caller, compiling

    @property
    def cancelled(self) -> bool:
        if self._caller is not None and self._caller.cancelled:
            return True
        return self._compiling.done() and (self._compiling.exception() is not None
                                           or not self._compiling.result()[0].ok)


def _run_tests(candidate: str, tests: TestSet, runner: TargetRunner, seed: int, cancel: CancelToken,
               progress: ProgressFn | None, shrink: bool, program_check: Callable[[str], ProgramReport] | None,
               evidence: Evidence) -> None:
    """The candidate's tests (the whole program's run, else the kernel specs), into ``evidence``."""
    try:
        if tests.program and program_check is not None:
            report(progress, 0.6, "running the source program and the translation")
            evidence.program = program_check(candidate)
            # the program cannot run here (arguments, input files, a library): its kernels still can; but when
            # it ran and its own check failed, the runtime did not compute what the GPU does, and kernel tests
            # would compare the translation with that same wrong computation
            # (nor when the runtime caught the source reading or writing out of bounds: that is the verdict)
            if evidence.program.source_failed and tests.specs and evidence.program.verdict != "FAIL" \
                    and not source_defect(evidence.program.reason):
                evidence.facts["program"] = evidence.program.to_dict()
                evidence.note = (f"the source program {evidence.program.reason} on the runtime; its kernels were "
                                 "tested instead")
                evidence.program = None
                _run_specs(candidate, tests, runner, seed, cancel, progress, shrink, evidence)
        else:
            _run_specs(candidate, tests, runner, seed, cancel, progress, shrink, evidence)
    except Cancelled:
        raise
    except XpilerError as exc:
        # a test that cannot be run as written (a spec whose shapes the case makes impossible): the translation
        # is still written, and says why nothing ran
        evidence.tests = None
        evidence.note = f"the tests could not be run: {exc.format()}"
    except Exception as exc:  # noqa: BLE001 - our harness failed: say so, never blame the translation
        evidence.harness_error = f"{type(exc).__name__}: {exc}"


def _run_specs(candidate: str, tests: TestSet, runner: TargetRunner, seed: int, cancel: CancelToken | None,
               progress: ProgressFn | None, shrink: bool, evidence: Evidence) -> None:
    shown: SpecReport | None = None
    shown_spec: KernelSpec | None = None
    passing = 0
    for spec in tests.specs:
        report(progress, 0.6, f"running tests of {spec.entry} at warp size {runner.warp_size}")
        got = runner.run(spec, candidate, seed, cancel)
        passing += got.passed
        if shown is None or (shown.passed and not got.passed):
            shown, shown_spec = got, spec  # the report shown: the first failing one
    if len(tests.specs) > 1:
        evidence.facts["test_sets"] = {"run": len(tests.specs), "passed": passing,
                                       "shown": shown_spec.reference_entry or shown_spec.entry if shown_spec else ""}
    evidence.tests = shown
    assert shown is not None and shown_spec is not None
    spec = shown_spec
    if not shown.passed and not tests.auto and not shown.build_error:
        # does the source itself match the reference? If not, the comparison means nothing
        evidence.baseline = runner.run_source(spec, seed, cancel)
    if shrink and not shown.passed and not shown.build_error and (evidence.baseline is None
                                                                   or evidence.baseline.passed):
        evidence.minimal_case = shrink_failing_case(runner, spec, candidate, seed, shown, tests.auto, cancel)
    if evidence.spec_info is not None:
        evidence.spec_info.update(_spec_facts(spec, shown))


MAX_SHRINK_STEPS = 6


def shrink_failing_case(runner: TargetRunner, spec: KernelSpec, candidate: str, seed: int, tests: SpecReport,
                        reference_is_source: bool, cancel: CancelToken | None) -> CaseResult | None:
    """Halve the sizes of the smallest failing case while the translation still fails on them.

    A smaller case counts only if it is a fair test: with a numpy reference, the source must pass it at its
    own warp size (else the sizes broke an assumption of the kernel, not of the translation)."""
    import dataclasses

    best = minimal_failing_case(tests)
    if best is None or best.error:
        return best
    sizes = dict(best.sizes)
    for _ in range(MAX_SHRINK_STEPS):
        smaller = {k: max(1, v // 2) for k, v in sizes.items()}
        if smaller == sizes:
            break
        trial = dataclasses.replace(spec, cases=[smaller])
        try:
            got = runner.run(trial, candidate, seed, cancel)
            if got.passed or not got.cases or got.cases[0].error:
                break
            if not reference_is_source and not runner.run_source(trial, seed, cancel).passed:
                break
        except Exception:  # noqa: BLE001 - a size the spec's expressions reject ends the search
            break
        best, sizes = got.cases[0], smaller
    return best


def minimal_failing_case(tests: SpecReport | None) -> CaseResult | None:
    """The failing case with the fewest elements (the smallest reproduction the run found)."""
    if tests is None:
        return None
    failing = [c for c in tests.tested if not c.passed]
    if not failing:
        return None

    def weight(case: CaseResult) -> int:
        total = 1
        for value in case.sizes.values():
            total *= max(1, int(value))
        return total

    return min(failing, key=weight)


def max_error(tests: SpecReport | None) -> float | None:
    if tests is None or not tests.tested:
        return None
    errors = [c.max_abs_err for c in tests.tested if c.max_abs_err is not None]
    return max(errors) if errors else None


def first_compiler_error(stderr: str) -> str:
    """The compiler's first error line (not a warning or an "In file included from" line)."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    for line in lines:
        # gcc/nvcc "file:line: error:", nvcc "file(line): error:", ptxas "ptxas error   : ..."
        if re.search(r"(^|[\s:)])(fatal )?error\s*:", line):
            return line
    return lines[0] if lines else ""


_NOT_FOUND = re.compile(r"""['"‘]?([\w./+-]+\.(?:h|hpp|cuh))['"’]? file not found|([\w./+-]+\.(?:h|hpp|cuh)): No such file""")


def missing_library_header(error: str) -> str | None:
    """The GPU library header a compiler error says it cannot find (``hipblas/hipblas.h``: a package this
    machine lacks, not a fault of the translation); None for another error or a header of the project."""
    from xpiler_core.tables import is_gpu_header

    m = _NOT_FOUND.search(error)
    header = m and (m.group(1) or m.group(2))
    return header if header and "/" in header and is_gpu_header(header) else None


def decide_status(evidence: Evidence, unresolved: list[Unresolved], *, produced: bool = True,
                  refused: str = "") -> tuple[Status, str]:
    """The one place a status is decided: verified only with a passing compile, passing tests (or a whole
    program that behaved as the source did) and nothing left unresolved."""
    if not produced:
        return Status.UNRESOLVED, refused or (unresolved[-1].reason if unresolved else "no translation produced")
    if not evidence.verify:
        # nothing was compiled or run: not even "compiled-not-executed" would be true
        return Status.UNRESOLVED, "verification was turned off: not compiled, not executed"
    if evidence.compile is None:
        return Status.UNRESOLVED, evidence.note or "no compile verdict"
    if not evidence.compile.ok:
        first = first_compiler_error(evidence.compile.stderr)
        rejected = f"the target toolchain rejects it ({evidence.compile.toolchain})" + (f": {first}" if first else "")
        missing = missing_library_header(first)
        if missing is not None:
            rejected = (f"a library header the output includes is not installed here ({missing}): the output was "
                        f"not compiled, so it is not judged; {rejected}")
        if evidence.source_build_error:
            return Status.UNRESOLVED, (f"the source itself does not build ({evidence.source_build_error}), so the "
                                       f"translation is not judged; {rejected}")
        if evidence.facts.get("units_combined_error"):
            return Status.UNRESOLVED, (
                "xpiler builds a program's units as one translation unit, and this program's do not combine "
                f"({evidence.facts['units_combined_error']}; each builds on its own): neither the source nor the "
                f"translation is judged; {rejected}")
        if unresolved:
            # what a pass could not translate is the likelier cause than the compiler's first complaint
            left = unresolved[0]
            return Status.UNRESOLVED, (f"{left.reason} (line {left.span.start_line + 1}:{left.span.start_col + 1} "
                                       f"of the source); {rejected}")
        return Status.UNRESOLVED, rejected
    if evidence.harness_error:
        return Status.ERROR, ("xpiler's own test harness failed (a bug in xpiler, not in the translation; please "
                              f"report it): {evidence.harness_error}")
    if evidence.program is not None:
        return _program_status(evidence, unresolved)
    if evidence.baseline is not None and not evidence.baseline.passed:
        defect = next((d for c in evidence.baseline.cases if (d := source_defect(c.error))), None)
        if defect is not None:
            return Status.NOT_EXECUTED, f"the source itself is defective, so the translation is not judged: {defect}"
        why = evidence.baseline.first_failure()
        return Status.UNRESOLVED, ("the source itself does not match the spec's reference; nothing to compare "
                                   "against" + (f": {why}" if why else ""))
    tests = evidence.tests
    if tests is not None and tests.reference_error:
        first = first_compiler_error(tests.reference_error)
        return Status.NOT_EXECUTED, ("the source itself does not build on the runtime, so nothing ran"
                                     + (f": {first}" if first else ""))
    guessed = bool((evidence.spec_info or {}).get("sizes_guessed"))
    defective = _source_defect_status(tests, guessed)
    if defective is not None:
        return defective
    if tests is not None and tests.cases and not tests.tested and all(is_timeout(c.error) for c in tests.cases):
        # the emulator's speed, not a defect of the source: say so, and how to allow it
        return Status.NOT_EXECUTED, ("not executed to the end: the source's run on the runtime (every thread "
                                     "emulated on the CPU) did not finish within the time limit at any test case, "
                                     f"so nothing was compared ({tests.cases[0].error}); give --timeout S to "
                                     "allow longer, or --spec with smaller sizes where its kernels take them")
    if tests is not None and tests.cases and not tests.tested and guessed:
        return Status.NOT_EXECUTED, (f"no test at sizes the source supports: its kernels have their shape built in "
                                     f"and take no size, and the source fails at every size guessed "
                                     f"({tests.cases[0].error}); give --spec with the sizes it is written for "
                                     "(xpiler spec init writes a draft)")
    if tests is not None and tests.cases and not tests.tested:
        return Status.NOT_EXECUTED, ("the source itself fails at every test case, so nothing was compared: "
                                     f"{tests.cases[0].error}")
    if tests is None:
        if unresolved:
            return Status.UNRESOLVED, f"{len(unresolved)} construct(s) unresolved; " + (evidence.note or
                                                                                        "not executed")
        return Status.NOT_EXECUTED, evidence.note or "compiled, not executed"
    if tests.build_error:
        first = first_compiler_error(tests.build_error)
        return Status.UNRESOLVED, "the runtime could not build the translation" + (f": {first}" if first else "")
    if not tests.passed:
        case = evidence.minimal_case or minimal_failing_case(tests)
        assert case is None or not case.source_failed
        where = ""
        if case is not None:
            where = f" (smallest failing case {case.sizes}"
            where += f": {case.error})" if case.error else (
                f": {case.mismatches} mismatches, first at {case.first_mismatch} of {case.output_name}, "
                f"expected {case.expected}, got {case.got})")
        return Status.UNRESOLVED, "the translation computes different results" + where
    if unresolved:
        return Status.UNRESOLVED, f"tests pass but {len(unresolved)} construct(s) are unresolved"
    if evidence.untested:
        return Status.NOT_EXECUTED, "not every function was tested: " + "; ".join(evidence.untested)
    return Status.VERIFIED, ""


# What the runtime reports when the source itself accesses memory out of bounds (runtime/.../device_heap.h),
# and what the harness reports when its outputs depend on memory it never wrote (verify/harness.py).
_SOURCE_DEFECT = re.compile(r"out-of-bounds (access|write) in [^:]*: byte \d+ of a buffer of \d+ bytes[^\n]*"
                            r"|the source reads (?:device )?memory it never wrote[^\n]*")


def source_defect(message: str | None) -> str | None:
    """The runtime's out-of-bounds report, or the harness's uninitialized-read report, inside ``message`` (a
    run's failure), or None."""
    found = _SOURCE_DEFECT.search(message or "")
    return found.group(0) if found else None


def _source_defect_status(tests: SpecReport | None, sizes_guessed: bool = False) -> tuple[Status, str] | None:
    """A case where the source itself read or wrote out of bounds: nothing is verified on the other cases (the
    source is not a reference there either: what it computes depends on memory it does not own). When the
    automatic tests had to guess the sizes of kernels whose shape is built in, the guess is what is wrong, and
    the cases the source did run clean at are the tests."""
    if sizes_guessed and tests is not None and tests.tested:
        return None
    for case in tests.dropped if tests is not None else []:
        defect = source_defect(case.error)
        if defect is not None:
            sizes = ", ".join(f"{k}={v}" for k, v in case.sizes.items())
            if sizes_guessed:
                return Status.NOT_EXECUTED, (
                    f"no test at sizes the source supports: its kernels have their shape built in and take no size, "
                    f"and at the sizes guessed ({sizes}) it is defective ({defect}): those sizes are not the ones it "
                    "is written for, or the source is wrong at any; give --spec with the sizes it is written for "
                    "(xpiler spec init writes a draft)")
            return Status.NOT_EXECUTED, (f"the source itself is defective, so the translation is not judged: {defect} "
                                         f"(test case {sizes})")
    return None


def _program_status(evidence: Evidence, unresolved: list[Unresolved]) -> tuple[Status, str]:
    run = evidence.program
    assert run is not None
    if run.source_failed:
        defect = source_defect(run.reason)
        if defect is not None:
            return Status.NOT_EXECUTED, f"the source program itself is defective: {defect}"
        where = "on this machine's GPU" if run.reference == "gpu" else "on the runtime"
        return Status.NOT_EXECUTED, f"the source program itself {run.reason} {where}"
    if not run.matched and run.candidate is not None and run.candidate.timed_out:
        # slower, not different: what it would have printed is unknown
        return Status.UNRESOLVED, (f"the translated program did not finish within the time limit "
                                   f"({run.candidate.seconds:.0f} s; the source took {run.source.seconds:.1f} s): "
                                   "its output is not judged")
    if not run.matched:
        return Status.UNRESOLVED, f"the translated program behaves differently: {run.reason}"
    if unresolved:
        return Status.UNRESOLVED, f"the programs agree but {len(unresolved)} construct(s) are unresolved"
    if run.nothing_compared and not (evidence.tests is not None and evidence.tests.passed):
        # the exit status alone says nothing of what the kernels computed
        return Status.NOT_EXECUTED, ("the programs ran and exit alike, but neither prints nor writes anything to "
                                     "compare: what the kernels computed is unchecked (print a result, or give "
                                     "--spec for a kernel)")
    return Status.VERIFIED, ""


# ------------------------------------------------------------------------------------------------ result


@dataclass
class TranslationResult:
    source_path: str
    source_dialect: Dialect
    target: Dialect
    output_text: str
    suggested_output_path: str
    status: Status
    summary: str
    passes_applied: list[PassRecord]
    compile: CompileVerdict | None
    tests: SpecReport | None
    diagnostics: list[Diagnostic]
    unresolved: list[Unresolved]
    manifest: Manifest
    seconds: float
    reason: str = ""
    evidence: Evidence | None = None
    # headers of the project translated with the file: output path relative to the output's folder → text
    companions: dict[str, str] = field(default_factory=dict)


# The CPU target's output uses C++ headers (<cmath>, a namespace) and is built with g++: name it so.
_OUTPUT_SUFFIX: dict[Dialect, str] = {Dialect.C: ".cpp"}


def output_suffix(target: Dialect) -> str:
    """File suffix of a translation to ``target`` (``.cpp`` for the CPU target, else the dialect's own)."""
    return _OUTPUT_SUFFIX.get(target, target.suffix)


def output_display_name(options: TranslateOptions, path: str) -> str:
    """The name compiler messages about the candidate use: the output file the user will open."""
    return Path(options.output_path or suggested_output_path(path, options.target)).name


def suggested_output_path(path: str, target: Dialect) -> str:
    p = Path(path)
    candidate = p.with_suffix(output_suffix(target))
    if candidate == p:
        candidate = p.with_name(p.stem + ".xpiler" + output_suffix(target))
    return str(candidate)


def direction_label(source: Dialect, target: Dialect) -> str:
    """``cuda->hip``, ``cuda->cpu`` (the CPU target is the C dialect), …"""
    names = {Dialect.C: "cpu"}
    src = "c" if source is Dialect.C else source.value
    return f"{src}->{names.get(target, target.value)}"


def make_summary(source: Dialect, target: Dialect, records: list[PassRecord], evidence: Evidence,
                 status: Status, reason: str, seconds: float, warp_size: int | None) -> str:
    """One summary format for every direction: passes, compile, tests, status."""
    changed = [r["name"] for r in records if r["changed"]]
    lines = [f"{direction_label(source, target)}: passes applied: {', '.join(changed) if changed else 'none'}"]
    warp_record = next((r for r in records if r["name"] == "warp_size" and r["changed"] or
                        r["name"] == "warp_size" and r["params"].get("strategy") == "native"), None)
    if warp_record is not None and target is Dialect.HIP and warp_size:
        lines.append("warp: the full 64-lane wavefront (the code is written against warpSize)"
                     if warp_record["params"].get("strategy") == "native" else
                     "warp: groups of 32 lanes kept within each 64-lane wavefront (the code's contract is 32 lanes)")
    if evidence.facts.get("tier") == "portable":
        lines.append(f"tier: portable (the source on the SIMT header set; structural tier refused: "
                     f"{evidence.facts.get('structural_refusal', '')})")
    if evidence.compile is not None:
        verdict = evidence.compile
        lines.append(f"compile ({verdict.toolchain} {verdict.version}): {'ok' if verdict.ok else 'FAILED'} "
                     f"in {evidence.seconds_compile:.2f} s")
    if evidence.program is not None:
        lines.append(f"program: {evidence.program.summary()}")
    elif evidence.tests is not None and not evidence.tests.build_error and evidence.tests.tested:
        tested = evidence.tests.tested
        passed = sum(1 for c in tested if c.passed)
        against = "source" if evidence.spec_info and evidence.spec_info.get("auto") else "reference"
        err = max_error(evidence.tests)
        at = f" at warp size {warp_size}" if warp_size else ""
        dropped = len(evidence.tests.dropped)
        lines.append(f"tests: {passed}/{len(tested)} cases passed{at} vs the {against}"
                     + (f", max abs error {err:.3g}" if err is not None else "")
                     + (f"; {dropped} case(s) dropped: the source itself fails there" if dropped else ""))
        if sets := evidence.facts.get("test_sets"):
            lines.append(f"tests: {sets['passed']}/{sets['run']} test sets passed (one per function; the cases "
                         f"above are {sets['shown']}'s)")
        if evidence.spec_info and evidence.spec_info.get("sizes_solved"):
            sizes = ", ".join(f"{k}={v}" for k, v in tested[0].sizes.items() if not k.startswith("xp_len_"))
            lines.append(f"note: tested at {sizes}: sizes solved from the kernels' built-in shape (the entry's "
                         "other sizes were not tested)")
        notes = list(dict.fromkeys(c.note for c in tested if c.note))
        lines.extend(f"note: {note}" for note in notes)
        if evidence.note:
            lines.append(f"note: {evidence.note}")
    elif evidence.note:
        lines.append(evidence.note)
    lines.append(f"status: {status.value}" + (f" — {reason}" if reason and status is not Status.VERIFIED else "")
                 + f" ({seconds:.2f} s)")
    return "\n".join(lines)


def status_diagnostics(status: Status, reason: str, path: str) -> list[Diagnostic]:
    if not reason:
        return []
    severity = Severity.INFO if status is Status.VERIFIED else Severity.WARNING
    return [Diagnostic(severity, "translate.status", reason, Span.empty(), path)]


# ------------------------------------------------------------------------------------------------ manifest


class SourceRecord(TypedDict):
    path: str
    dialect: str
    sha256: str
    includes: NotRequired[dict[str, str]]  # local headers read with the file: path → sha256
    project: NotRequired[dict[str, Any]]  # the settings it was built with (compile_commands.json, xpiler.toml, flags)


class OptionsRecord(TypedDict):
    """Everything replay needs to redo the run."""

    target: str
    source_dialect: str
    warp_size: int | None
    spec_path: str | None
    verify: bool
    seed: int
    passes: list[str]
    pass_params: dict[str, dict[str, Any]]
    proposer: str
    repair: bool
    project: NotRequired[dict[str, Any]]
    cpu_tier: NotRequired[str]
    keep_going: NotRequired[bool]


class OutcomeRecord(TypedDict):
    status: str
    reason: str
    compile: dict[str, Any] | None
    baseline: dict[str, Any] | None
    tests: dict[str, Any] | None
    program: dict[str, Any] | None
    max_abs_err: float | None
    minimal_failing_case: dict[str, Any] | None
    note: str
    untested: list[str]
    unresolved: list[dict[str, Any]]
    repaired_from_status: NotRequired[str]


class Manifest(TypedDict):
    """The one manifest schema, for every direction (``schema`` = :data:`MANIFEST_SCHEMA`)."""

    schema: int
    xpiler_version: str
    created: str
    direction: str
    source: SourceRecord
    candidate_sha256: str
    options: OptionsRecord
    passes: list[PassRecord]
    notes: list[str]
    toolchains: dict[str, str]
    host: dict[str, Any]
    seed: int
    spec: dict[str, Any] | None
    outcome: OutcomeRecord
    timings: dict[str, float]
    candidates: list[dict[str, Any]]
    facts: dict[str, Any]  # target-specific facts (MLU generation and on-chip usage, intrinsics, tiers)
    output: NotRequired[dict[str, Any]]
    repair: NotRequired[dict[str, Any]]
    proposer: NotRequired[dict[str, Any]]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def host_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "machine": platform.machine(), "system": platform.system(),
            "python": platform.python_version()}


def verdict_dict(verdict: CompileVerdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {"ok": bool(verdict.ok), "toolchain": verdict.toolchain, "version": verdict.version,
            "command": verdict.command, "seconds": verdict.seconds, "cached": verdict.cached,
            "stderr": (verdict.stderr or "")[:4000]}


def report_dict(tests: SpecReport | None) -> dict[str, Any] | None:
    if tests is None:
        return None
    return {
        "passed": bool(tests.passed),
        "warp_size": tests.warp_size,
        "build_error": (tests.build_error or "")[:4000] or None,
        "reference_error": (tests.reference_error or "")[:4000] or None,
        "seconds": tests.seconds,
        "cases": [case_dict(c) for c in tests.cases],
    }


def case_dict(case: CaseResult | None) -> dict[str, Any] | None:
    if case is None:
        return None
    return {"sizes": dict(case.sizes), "passed": bool(case.passed), "max_abs_err": _finite(case.max_abs_err),
            "max_rel_err": _finite(case.max_rel_err), "mismatches": case.mismatches,
            "first_mismatch": list(case.first_mismatch) if case.first_mismatch is not None else None,
            "output_name": case.output_name, "expected": _finite(case.expected), "got": _finite(case.got),
            "error": case.error, "source_failed": case.source_failed, **({"note": case.note} if case.note else {})}


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value


def unresolved_dict(item: Unresolved, path: str) -> dict[str, Any]:
    return {"reason": item.reason, "construct": item.construct,
            "location": f"{path}:{item.span.start_line + 1}:{item.span.start_col + 1}", "span": item.span.to_dict()}


def _spec_info(tests: TestSet) -> dict[str, Any]:
    info: dict[str, Any] = {"auto": tests.auto, "built": bool(tests.specs) or tests.program, "reason": tests.reason,
                            "sizes_guessed": tests.sizes_guessed, "sizes_solved": tests.sizes_solved}
    if tests.spec_toml is not None:
        info["spec_toml"] = tests.spec_toml
    if tests.spec_path is not None:
        info["path"] = str(Path(tests.spec_path).resolve())
        try:
            info["sha256"] = sha256_text(Path(tests.spec_path).read_text(encoding="utf-8"))
        except OSError:
            pass
    if tests.dropped_cases:
        info["dropped_cases"] = list(tests.dropped_cases)
    if tests.program:
        info["program"] = True
    return info


def _spec_facts(spec: KernelSpec, tests: SpecReport) -> dict[str, Any]:
    from xpiler_core.verify.expr import evaluate_int

    shapes: list[dict[str, list[int]]] = []
    for case in spec.cases:
        try:
            shapes.append({a.name: [evaluate_int(d, case) for d in a.shape] for a in spec.args if a.role != "scalar"})
        except Exception:  # noqa: BLE001 - a shape the evaluator rejects is recorded as unknown
            shapes.append({})
    return {
        "entry": spec.entry,
        "tolerance": {"atol": spec.atol, "rtol": spec.rtol},
        "case_shapes": shapes,
        "args": [{"name": a.name, "dtype": a.dtype, "role": a.role, "shape": [str(x) for x in a.shape],
                  "init": a.init} for a in spec.args],
        "cases": [dict(c.sizes) for c in tests.cases],
    }


def toolchain_versions(verdict: CompileVerdict | None) -> dict[str, str]:
    versions: dict[str, str] = {}
    if verdict is not None:
        versions[verdict.toolchain] = verdict.version
    try:
        from xpiler_core.verify.toolchains import detect_toolchains

        for name, info in detect_toolchains().items():
            versions.setdefault(str(name), info.version)
    except Exception:  # noqa: BLE001 - the manifest records what is known; detection failing is not fatal
        pass
    return versions


def build_manifest(
    *,
    source: Dialect,
    target: Dialect,
    text: str,
    path: str,
    candidate: str,
    options: TranslateOptions,
    records: list[PassRecord],
    evidence: Evidence,
    status: Status,
    reason: str,
    unresolved: list[Unresolved],
    notes: list[str],
    warp_size: int | None,
    timings: dict[str, float],
    includes: dict[str, str] | None = None,
    project: ProjectConfig | None = None,
) -> Manifest:
    source_record: SourceRecord = {"path": str(Path(path).resolve()) if Path(path).exists() else path,
                                   "dialect": source.value, "sha256": sha256_text(text)}
    if includes:
        source_record["includes"] = dict(includes)
    if project is not None:
        source_record["project"] = project.to_dict()
    options_record: OptionsRecord = {
        "target": target.value, "source_dialect": source.value, "warp_size": warp_size,
        "spec_path": options.spec_path, "verify": options.verify, "seed": options.seed,
        "passes": [r["name"] for r in records], "pass_params": options.pass_params, "proposer": options.proposer,
        "repair": options.repair,
    }
    if options.cpu_tier != "auto":
        options_record["cpu_tier"] = options.cpu_tier
    if options.keep_going:
        options_record["keep_going"] = True
    if options.project is not None:
        options_record["project"] = options.project.to_dict()
    outcome: OutcomeRecord = {
        "status": status.value, "reason": reason, "compile": verdict_dict(evidence.compile),
        "baseline": report_dict(evidence.baseline), "tests": report_dict(evidence.tests),
        "program": evidence.program.to_dict() if evidence.program is not None else None,
        "max_abs_err": max_error(evidence.tests), "minimal_failing_case": case_dict(evidence.minimal_case),
        "note": evidence.note, "untested": list(evidence.untested),
        "unresolved": [unresolved_dict(u, path) for u in unresolved],
    }
    return {
        "schema": MANIFEST_SCHEMA,
        "xpiler_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "direction": direction_label(source, target),
        "source": source_record,
        "candidate_sha256": sha256_text(candidate),
        "options": options_record,
        "passes": list(records),
        "notes": list(notes),
        "toolchains": toolchain_versions(evidence.compile),
        "host": host_info(),
        "seed": options.seed,
        "spec": evidence.spec_info,
        "outcome": outcome,
        "timings": {k: round(v, 4) for k, v in timings.items()},
        "candidates": [],
        "facts": dict(evidence.facts),
    }


_REQUIRED_KEYS = ("schema", "direction", "source", "options", "outcome", "candidate_sha256")


def read_manifest(data: object, path: str) -> Manifest:
    """``data`` (parsed JSON) as a manifest of this schema, or an error saying what is wrong with it."""
    if not isinstance(data, dict):
        raise XpilerError("not a manifest: the JSON is not an object", path)
    missing = [key for key in _REQUIRED_KEYS if key not in data]
    if missing:
        raise XpilerError(f"not a manifest: no '{missing[0]}' entry", path)
    if data["schema"] != MANIFEST_SCHEMA:
        raise XpilerError(f"manifest schema {data['schema']!r} is not supported by xpiler {__version__} "
                          f"(it reads schema {MANIFEST_SCHEMA})", path)
    options = data["options"]
    if not isinstance(options, dict):
        raise XpilerError("not a manifest: 'options' is not an object", path)
    for key in ("target", "source_dialect", "verify", "seed", "passes", "pass_params"):
        if key not in options:
            raise XpilerError(f"not a manifest: options has no '{key}'", path)
    dialects = {d.value for d in Dialect}
    for key in ("target", "source_dialect"):
        if options[key] not in dialects:
            raise XpilerError(f"not a manifest: options.{key} is {options[key]!r}, not one of "
                              f"{', '.join(sorted(dialects))}", path)
    checks: list[tuple[str, type | tuple[type, ...]]] = [
        ("seed", int), ("verify", bool), ("passes", list), ("pass_params", dict)]
    for key, kind in checks:
        if not isinstance(options[key], kind) or (kind is int and isinstance(options[key], bool)):
            raise XpilerError(f"not a manifest: options.{key} is {options[key]!r}", path)
    if not all(isinstance(p, str) for p in options["passes"]) or not all(
            isinstance(k, str) and isinstance(v, dict) for k, v in options["pass_params"].items()):
        raise XpilerError("not a manifest: options.passes / pass_params are malformed", path)
    if options.get("proposer", "rules") not in ("rules", "llm", "rules-then-llm"):
        raise XpilerError(f"not a manifest: options.proposer is {options.get('proposer')!r}", path)
    warp = options.get("warp_size")
    if warp is not None and (not isinstance(warp, int) or isinstance(warp, bool) or warp not in (32, 64)):
        raise XpilerError(f"not a manifest: options.warp_size is {warp!r}", path)
    source = data["source"]
    if not isinstance(source, dict) or not isinstance(source.get("path"), str) or not isinstance(
            source.get("sha256"), str):
        raise XpilerError("not a manifest: 'source' needs a path and a sha256", path)
    for key in ("outcome",):
        if not isinstance(data.get(key), dict) or not isinstance(data[key].get("status"), str):
            raise XpilerError(f"not a manifest: '{key}' has no status", path)
    manifest: Manifest = data  # type: ignore[assignment]  # checked above
    return manifest


def options_from_manifest(manifest: Manifest) -> TranslateOptions:
    from xpiler_core.project import ProjectConfig

    opts = manifest["options"]
    spec = manifest.get("spec") or {}
    project = opts.get("project")
    return TranslateOptions(
        target=Dialect(opts["target"]),
        warp_size=opts.get("warp_size"),
        spec_path=opts.get("spec_path") if not spec.get("auto", True) else None,
        verify=bool(opts["verify"]),
        seed=int(opts["seed"]),
        passes=list(opts["passes"]) or None,
        pass_params={k: dict(v) for k, v in opts["pass_params"].items()},
        proposer=str(opts.get("proposer", "rules")),
        repair=bool(opts.get("repair", True)),
        source_dialect=Dialect(opts["source_dialect"]),
        project=ProjectConfig.from_dict(project) if isinstance(project, dict) else None,
        cpu_tier=str(opts.get("cpu_tier", "auto")),
        keep_going=bool(opts.get("keep_going", False)),
    )


# ------------------------------------------------------------------------------------------------ plans' shared steps


def build_test_set(text: str, path: str, dialect: Dialect, options: TranslateOptions, workdir: Path, *,
                   entry: str | None = None, allow_shim: bool = True, model: KernelModel | None = None,
                   build: BuildSettings | None = None, kernel: str | None = None) -> TestSet:
    """The tests a translation is judged on: the user's spec, else one built from the code (written to
    ``workdir``, which must outlive the tests), else none with the reason. ``build``: the source's project
    settings (its host entry runs with them when the tests are built from a recorded run). A file of several
    kernels and no host code gets one spec per kernel (``kernel``: build only that one's)."""
    from xpiler_core.verify.spec import load_spec

    if options.spec_path:
        return TestSet([load_spec(options.spec_path)], auto=False, reason="the user's spec",
                       spec_path=options.spec_path)
    from xpiler_core.frontend.model import build_model
    from xpiler_core.frontend.source import parse_text
    from xpiler_core.verify import autospec

    if entry is None and kernel is None:
        try:
            model = model or build_model(parse_text(text, path, dialect))
        except Exception as exc:  # noqa: BLE001 - the test builder failed: ours to fix, the translation still stands
            return TestSet([], auto=True, reason="the automatic test builder failed",
                           error=f"automatic test builder: {type(exc).__name__}: {exc}")
        if names := autospec.separately_tested_kernels(model, dialect):
            return _kernel_by_kernel(names, text, path, dialect, options, workdir, model, build)
    try:
        built = autospec.build_spec(text, path, dialect, workdir, entry=entry, allow_shim=allow_shim, model=model,
                                    build=build, kernel=kernel)
    except XpilerError as exc:
        return TestSet([], auto=True, reason=f"no automatic test: {exc.message}")
    except Exception as exc:  # noqa: BLE001 - the test builder failed: ours to fix, the translation still stands
        return TestSet([], auto=True, reason="the automatic test builder failed",
                       error=f"automatic test builder: {type(exc).__name__}: {exc}")
    if built.spec_path is None:
        return TestSet([], auto=True, reason=built.reason)
    try:
        loaded = load_spec(str(built.spec_path))
    except XpilerError as exc:
        return TestSet([], auto=True, reason=f"the automatic test is not usable: {exc.message}")
    return TestSet([loaded], auto=True, reason=built.reason, spec_toml=built.spec_text,
                   sizes_guessed=built.sizes_guessed, sizes_solved=built.sizes_origin == "solved")


def _kernel_by_kernel(names: list[str], text: str, path: str, dialect: Dialect, options: TranslateOptions,
                      workdir: Path, model: KernelModel, build: BuildSettings | None) -> TestSet:
    """One automatic spec per kernel of a file of kernels only; a kernel none can be built for is named in
    ``untested`` (then the translation is not verified as a whole)."""
    tests = TestSet([], auto=True)
    texts: list[str] = []
    for name in names:
        one = build_test_set(text, path, dialect, options, workdir / name, model=model, build=build, kernel=name)
        if one.error:
            tests.error = one.error
        if not one.specs:
            tests.untested.append(f"kernel {name}: {one.reason}")
            continue
        tests.specs.extend(one.specs)
        texts.append(f"# kernel {name}\n{one.spec_toml or ''}")
        tests.sizes_guessed = tests.sizes_guessed or one.sizes_guessed
        tests.sizes_solved = tests.sizes_solved or one.sizes_solved
    tests.spec_toml = "\n".join(texts) if texts else None
    tested = len(tests.specs)
    tests.reason = (f"each of the file's {len(names)} kernels on its own (it has no host code that says which runs "
                    "first): " + (f"{tested} with tests built from its code" if tested else "none could be tested")
                    + ("; " + "; ".join(tests.untested) if tests.untested else ""))
    return tests


def _check_source_build(evidence: Evidence, text: str, source: Dialect, path: str,
                        build: BuildSettings | None) -> None:
    """When the target's compiler rejects the translation, whether the source builds with its own compiler
    (nvcc, hipcc with the project's settings ``build``; the MLU model for BANG C): a source that does not is said
    to, before the translation is blamed (a benchmark file that declares a name twice, or stores through a pointer
    to const). C sources are not asked (their builds need flags a file does not state: intrinsics' targets)."""
    if evidence.compile is None or evidence.compile.ok or evidence.source_build_error:
        return
    if source is Dialect.BANG:
        from xpiler_core.runtime.bang.build import build_bang, format_build_errors

        built = build_bang(text, path=Path(path).name or "source.mlu")
        if not built.ok:
            errors = format_build_errors(built).splitlines()
            evidence.source_build_error = f"on the MLU model: {errors[0] if errors else 'build failed'}"
        return
    if source not in (Dialect.CUDA, Dialect.HIP):
        return
    from xpiler_core.verify.toolchains import compile_check

    verdict = compile_check(text, source, build=build, display_name=Path(path).name or None)
    if not verdict.ok and source is Dialect.CUDA and "separate compilation mode" in verdict.stderr:
        # kernels launched from device code (dynamic parallelism) build only with relocatable device code, as
        # their project builds them: nvcc's own message says so
        verdict = compile_check(text, source, flags=("-rdc=true",), build=build,
                                display_name=Path(path).name or None)
    if not verdict.ok and verdict.version != "not installed" and " timed out after " not in verdict.stderr:
        first = first_compiler_error(verdict.stderr)
        if build is not None and build.unity and _units_build_apart(text, source, build, path):
            # each unit builds on its own, as the program's build compiles them: what fails is xpiler's one
            # translation unit of them all (two units that declare one name differently), not the source
            evidence.facts["units_combined_error"] = f"{verdict.toolchain} {verdict.version}" + (
                f": {first}" if first else "")
            return
        evidence.source_build_error = f"{verdict.toolchain} {verdict.version}" + (f": {first}" if first else "")
        evidence.facts["source_build_error"] = evidence.source_build_error


def _units_build_apart(text: str, source: Dialect, build: BuildSettings, path: str) -> bool:
    """Whether the file and each of the program's other units compile on their own with the source's compiler."""
    from xpiler_core.verify.toolchains import compile_check

    alone = dataclasses.replace(build, unity=(), c_units=())
    texts = dict(build.files)
    parts = [(text, Path(path).name or None)] + [(texts.get(u, ""), Path(u).name) for u in build.unity
                                                 if u not in build.c_units]
    return all(compile_check(part, source, build=alone, display_name=name).ok for part, name in parts)


def finish_translation(
    *,
    text: str,
    path: str,
    source: Dialect,
    target: Dialect,
    options: TranslateOptions,
    candidate: str | None,
    records: list[PassRecord],
    evidence: Evidence,
    unresolved: list[Unresolved],
    diagnostics: list[Diagnostic],
    notes: list[str],
    started: float,
    warp_size: int | None,
    timings: dict[str, float] | None = None,
    candidates: list[dict[str, Any]] | None = None,
    refused: str = "",
    includes: dict[str, str] | None = None,
    companions: dict[str, str] | None = None,
    project: ProjectConfig | None = None,
    source_build: BuildSettings | None = None,
) -> TranslationResult:
    """The result of a plan: the status decided once, the summary, the diagnostics and the manifest.
    ``source_build``: the source's project settings, to ask the source's own compiler about a source whose
    translation the target's compiler rejects."""
    if candidate is not None:
        _check_source_build(evidence, text, source, path, source_build)
    status, reason = decide_status(evidence, unresolved, produced=candidate is not None, refused=refused)
    missing = [d.message.split("'")[1] for d in diagnostics if d.code == "project.include" and "'" in d.message]
    if missing and status is not Status.VERIFIED:
        # whatever failed, a header the project's flags do not reach is the first thing to fix
        reason = f"{reason} (project header(s) not found: {', '.join(missing[:3])}; give -I DIR)"
    seconds = time.perf_counter() - started
    summary = make_summary(source, target, records, evidence, status, reason, seconds, warp_size)
    all_timings = {"compile": evidence.seconds_compile, "tests": evidence.seconds_tests,
                   "checks": evidence.seconds_checks, **(timings or {}),
                   "total": seconds}
    manifest = build_manifest(source=source, target=target, text=text, path=path, candidate=candidate or "",
                              options=options, records=records, evidence=evidence, status=status, reason=reason,
                              unresolved=unresolved, notes=notes, warp_size=warp_size, timings=all_timings,
                              includes={p: sha256_text(t) for p, t in (includes or {}).items()}, project=project)
    manifest["candidates"] = list(candidates or [])
    return TranslationResult(
        source_path=path, source_dialect=source, target=target, output_text=candidate or "",
        suggested_output_path=suggested_output_path(path, target), status=status, summary=summary,
        passes_applied=records, compile=evidence.compile, tests=evidence.tests,
        diagnostics=[*diagnostics, *status_diagnostics(status, reason, path)], unresolved=list(unresolved),
        manifest=manifest, seconds=seconds, reason=reason, evidence=evidence, companions=dict(companions or {}),
    )
