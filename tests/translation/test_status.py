"""The one status decision (``translation.decide_status``): what each kind of evidence supports, against
hand-built evidence (the reference is the rule itself: verified only with a passing compile and passing
tests or agreeing programs, and nothing unresolved; our own harness failing is never the translation's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.diagnostics import Span
from xpiler_core.passes.base import Unresolved
from xpiler_core.translation import EXIT_CODES, Evidence, Status, decide_status, first_compiler_error
from xpiler_core.verify.harness import CaseResult, SpecReport
from xpiler_core.verify.program import ProgramReport, ProgramRun
from xpiler_core.verify.toolchains import CompileVerdict


def verdict(ok: bool, stderr: str = "") -> CompileVerdict:
    return CompileVerdict(ok, "g++", "12", [], stderr)


def report(passed: bool) -> SpecReport:
    case = CaseResult({"n": 8}, passed, mismatches=0 if passed else 3, output_name="y", expected=1.0, got=2.0,
                      first_mismatch=(2,))
    return SpecReport(passed, [case])


def test_verified_needs_compile_tests_and_nothing_unresolved() -> None:
    assert decide_status(Evidence(compile=verdict(True), tests=report(True)), []) == (Status.VERIFIED, "")
    status, reason = decide_status(Evidence(compile=verdict(True), tests=report(True)),
                                   [Unresolved("no mapping", Span.empty())])
    assert status is Status.UNRESOLVED and "1 construct" in reason


def test_compile_failure_names_the_first_error_not_a_warning() -> None:
    stderr = "In file included from x.h:1,\nx.cu:3:1: warning: unused\nx.cu:7:5: error: 'foo' was not declared\n"
    status, reason = decide_status(Evidence(compile=verdict(False, stderr)), [])
    assert status is Status.UNRESOLVED and reason.endswith("x.cu:7:5: error: 'foo' was not declared")
    assert first_compiler_error(stderr) == "x.cu:7:5: error: 'foo' was not declared"


@pytest.mark.parametrize(("stderr", "missing"), [
    ("util.hip.h:9:10: fatal error: 'hipblas/hipblas.h' file not found\n", "hipblas/hipblas.h"),
    ("k.cu:2:10: fatal error: cufft.h: No such file or directory\n", None),  # not a library subfolder: maybe ours
    ("k.hip:4:10: fatal error: 'hiprand/hiprand_kernel.h' file not found\n", "hiprand/hiprand_kernel.h"),
    ("k.hip:1:10: fatal error: 'util/common.h' file not found\n", None),  # the project's own header
])
def test_a_missing_library_header_is_said_to_be_this_machines(stderr: str, missing: str | None) -> None:
    status, reason = decide_status(Evidence(compile=verdict(False, stderr)), [])
    assert status is Status.UNRESOLVED
    assert (f"not installed here ({missing})" in reason) == (missing is not None), reason


@pytest.mark.parametrize(("stderr", "first"), [
    # nvcc warnings come first; the assembler's error is the reason (shared memory over the limit)
    ("k.cu(26): warning #177-D: declared but never referenced\nptxas error   : Entry function 'f' uses too much "
     "shared data\n", "ptxas error   : Entry function 'f' uses too much shared data"),
    ("k.cu(9): warning #550-D: set but never used\nk.cu(171): error: identifier \"x\" is undefined\n",
     'k.cu(171): error: identifier "x" is undefined'),
    ("In file included from a.c:1:\nb.h:2:10: fatal error: c.h: No such file or directory\n",
     "b.h:2:10: fatal error: c.h: No such file or directory"),
    ("a.c:1: warning: the word terror: is not an error line\n", "a.c:1: warning: the word terror: is not an error line"),
])
def test_first_error_line_of_each_toolchain(stderr: str, first: str) -> None:
    assert first_compiler_error(stderr) == first


def test_untested_code_is_compiled_not_executed() -> None:
    status, reason = decide_status(Evidence(compile=verdict(True), note="no tests: no host entry"), [])
    assert status is Status.NOT_EXECUTED and "no host entry" in reason


def test_wrong_results_are_unresolved_with_the_case() -> None:
    status, reason = decide_status(Evidence(compile=verdict(True), tests=report(False)), [])
    assert status is Status.UNRESOLVED and "3 mismatches" in reason


def test_our_harness_failing_is_an_error_of_ours() -> None:
    status, reason = decide_status(Evidence(compile=verdict(True), harness_error="KeyError: 'x'"), [])
    assert status is Status.ERROR and "not in the translation" in reason


def test_a_source_program_that_cannot_run_is_not_blamed_on_the_translation() -> None:
    run = ProgramRun(True, exit_code=1, stderr="segmentation fault")
    program = ProgramReport(run, None, False, True, "exits with status 1")
    status, reason = decide_status(Evidence(compile=verdict(True), program=program), [])
    assert status is Status.NOT_EXECUTED and "source program itself" in reason


def test_agreeing_programs_verify_and_differing_ones_do_not() -> None:
    run = ProgramRun(True, exit_code=0, stdout="PASS\n")
    agree = ProgramReport(run, run, True, False, "", "PASS")
    assert decide_status(Evidence(compile=verdict(True), program=agree), [])[0] is Status.VERIFIED
    differ = ProgramReport(run, run, False, False, "output line 2 differs")
    assert decide_status(Evidence(compile=verdict(True), program=differ), [])[0] is Status.UNRESOLVED


def test_exit_codes_are_distinct() -> None:
    assert len(set(EXIT_CODES.values())) == len(Status) and EXIT_CODES[Status.VERIFIED] == 0


# A kernel too long to emulate within the user's time limit: its source is not defective, so the result must
# not say it fails; it says the run did not finish and how to allow it.
SLOW = r"""
#include <cuda_runtime.h>
__global__ void spin(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float acc = 0.0f;
    for (long long k = 0; k < 4000000000LL; ++k) acc += x[(i + k) % n] * 1e-9f;
    y[i] = acc;
  }
}
extern "C" void spin_kernel(float* x, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  spin<<<(n + 63) / 64, 64>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""


def test_a_source_too_long_to_emulate_is_not_called_defective(tmp_path: Path) -> None:
    from xpiler_core.dialect import Dialect
    from xpiler_core.pipeline import TranslateOptions, translate
    from xpiler_core.project import ProjectConfig

    source = tmp_path / "spin.cu"
    source.write_text(SLOW)
    options = TranslateOptions(Dialect.C, project=ProjectConfig(timeout_s=1.0), repair=False)
    result = translate(SLOW, str(source), options)
    assert result.status is Status.NOT_EXECUTED, result.summary
    assert "did not finish within the time limit" in result.reason and "--timeout" in result.reason
    assert "fails" not in result.reason and "defective" not in result.reason


def test_a_translated_program_that_runs_out_of_time_is_not_said_to_behave_differently() -> None:
    source = ProgramRun(True, exit_code=0, stdout="sum 3\n", seconds=6.8)
    slow = ProgramRun(True, exit_code=None, timed_out=True, seconds=120.0)
    report = ProgramReport(source, slow, False, False, f"the translated program {slow.failure()}")
    evidence = Evidence(compile=verdict(True), program=report)
    status, reason = decide_status(evidence, [])
    assert status is Status.UNRESOLVED
    assert "did not finish within the time limit (120 s; the source took 6.8 s)" in reason
    assert "behaves differently" not in reason


UNIT_MAIN = r"""#include <cstdio>
extern "C" bool check_gold(const int* data, int n);  // declared bool here, int in the other unit (as NVIDIA's
__global__ void fill(int* x) { x[threadIdx.x] = threadIdx.x; }  // simpleAtomicIntrinsics does): each unit builds
int main() {
  int *d, h[32];
  cudaMalloc(&d, sizeof h);
  fill<<<1, 32>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%s\n", check_gold(h, 32) ? "PASS" : "FAIL");
  return 0;
}
"""
UNIT_GOLD = r"""extern "C" int check_gold(const int* data, int n);
extern "C" int check_gold(const int* data, int n) {
  for (int i = 0; i < n; ++i) if (data[i] != i) return 0;
  return 1;
}
"""


def test_units_that_build_apart_but_not_as_one_unit_are_not_called_a_broken_source(tmp_path: Path) -> None:
    """nvcc builds each unit on its own (checked here), so 'the source itself does not build' would be false:
    the failure is xpiler's one-translation-unit build, and neither side is judged."""
    import json
    import subprocess

    from xpiler_core.cli import main

    source, unit = tmp_path / "main.cu", tmp_path / "gold.cpp"
    source.write_text(UNIT_MAIN)
    unit.write_text(UNIT_GOLD)
    for part in (source, unit):
        built = subprocess.run(["nvcc", "-c", str(part), "-o", str(tmp_path / (part.stem + ".o"))],
                               capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stderr
    output = tmp_path / "main.cpp"
    main(["translate", str(source), "--unit", str(unit), "--to", "cpu", "-o", str(output)])
    manifest = json.loads((tmp_path / ".xpiler" / "main.cpp.json").read_text())
    summary = json.dumps(manifest["outcome"])
    assert "the source itself does not build" not in summary
    assert "do not combine" in summary and "each builds on its own" in summary
