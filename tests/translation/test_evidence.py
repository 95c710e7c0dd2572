"""Gathering evidence (``translation.gather_evidence``): the target compiler's verdict and the tests run side by
side, the tests count only when the candidate compiles, a failed compile stops the tests, and the caller's
cancellation still stops everything. The runners here are stand-ins whose calls record what happened; the rule
they are checked against is the one stated above, not the code's output."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from xpiler_core import translation
from xpiler_core.dialect import Dialect
from xpiler_core.progress import Cancelled, CancelToken
from xpiler_core.translation import gather_evidence
from xpiler_core.verify.harness import CaseResult, SpecReport
from xpiler_core.verify.spec import KernelSpec, load_spec
from xpiler_core.verify.toolchains import CompileVerdict

SPEC = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "reduction" / "sum" / "spec.toml"
WAIT_S = 30.0  # a bound on waiting for the other side, never a timing claim: the tests pass long before it


@dataclass
class Runner:
    """``compile`` returns ``compiles`` once ``release_compile`` is set; ``run`` polls its token until
    ``release_run`` is set (or the token says stop)."""

    compiles: bool = True
    target: Dialect = Dialect.C
    warp_size: int = 32
    run_started: threading.Event = field(default_factory=threading.Event)
    release_compile: threading.Event = field(default_factory=threading.Event)
    release_run: threading.Event = field(default_factory=threading.Event)
    stopped_by_token: bool = False

    def compile(self, text: str) -> CompileVerdict:
        self.release_compile.wait(WAIT_S)
        return CompileVerdict(self.compiles, "g++", "12", [], "" if self.compiles else "x.cpp:1:1: error: no")

    def run(self, spec: KernelSpec, text: str, seed: int, cancel: CancelToken | None,
            cases: list[int] | None = None) -> SpecReport:
        self.run_started.set()
        while not self.release_run.wait(0.01):
            if cancel is not None and cancel.cancelled:
                self.stopped_by_token = True
                cancel.check()
        return SpecReport(True, [CaseResult({"n": 8}, True)])

    def run_source(self, spec: KernelSpec, seed: int, cancel: CancelToken | None,
                   cases: list[int] | None = None) -> SpecReport:
        return SpecReport(True, [])


@pytest.fixture(scope="module")
def tests() -> translation.TestSet:
    return translation.TestSet([load_spec(SPEC)], auto=False, spec_path=str(SPEC))


def test_the_tests_run_while_the_compiler_judges(tests: translation.TestSet) -> None:
    """The compile check is held until the tests have started: run one after the other, the tests never start
    and the compile check waits out its bound."""
    runner = Runner()
    runner.release_run.set()

    def compile_after_tests_start(text: str) -> CompileVerdict:
        assert runner.run_started.wait(WAIT_S), "the tests did not start before the compile check ended"
        return CompileVerdict(True, "g++", "12", [], "")

    runner.compile = compile_after_tests_start  # type: ignore[method-assign]
    evidence = gather_evidence("int main;", tests, runner)
    assert evidence.compile is not None and evidence.compile.ok
    assert evidence.tests is not None and evidence.tests.passed


def test_a_failed_compile_stops_the_tests_and_they_do_not_count(tests: translation.TestSet) -> None:
    runner = Runner(compiles=False)
    runner.release_compile.set()  # the compiler answers at once; the tests would run until released
    evidence = gather_evidence("int main;", tests, runner)
    assert evidence.compile is not None and not evidence.compile.ok
    assert runner.stopped_by_token
    assert evidence.tests is None and evidence.program is None and evidence.note == ""


def test_a_failed_compile_discards_tests_that_finished_first(tests: translation.TestSet) -> None:
    runner = Runner(compiles=False)
    runner.release_run.set()

    def compile_after_tests(text: str) -> CompileVerdict:
        runner.run_started.wait(WAIT_S)
        return CompileVerdict(False, "g++", "12", [], "x.cpp:1:1: error: no")

    runner.compile = compile_after_tests  # type: ignore[method-assign]
    evidence = gather_evidence("int main;", tests, runner)
    assert evidence.compile is not None and not evidence.compile.ok
    assert evidence.tests is None


def test_the_callers_cancel_still_stops_the_run(tests: translation.TestSet) -> None:
    runner = Runner()
    runner.release_compile.set()
    cancel = CancelToken()
    threading.Thread(target=lambda: (runner.run_started.wait(WAIT_S), cancel.cancel()), daemon=True).start()
    with pytest.raises(Cancelled):
        gather_evidence("int main;", tests, runner, cancel=cancel)
    assert runner.stopped_by_token


def test_without_tests_only_the_compiler_judges() -> None:
    runner = Runner()
    runner.release_compile.set()
    evidence = gather_evidence("int main;", translation.TestSet(reason="a kernel-only file"), runner)
    assert evidence.compile is not None and evidence.compile.ok
    assert not runner.run_started.is_set()
    assert evidence.note == "no tests: a kernel-only file"
