"""How two runs of a whole program are judged the same: exit status, the program's own verdict, output lines
with numbers within the tolerance, timing lines (and the rows of a timing table) ignored, lines that differ
between two runs of the source itself ignored, files written compared."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xpiler_core.project import ProjectConfig
from xpiler_core.verify.program import ProgramRun, compare_runs, lines_match


def run(stdout: str, exit_code: int = 0, files: dict[str, bytes] | None = None) -> ProgramRun:
    return ProgramRun(True, exit_code=exit_code, stdout=stdout, files=files or {})


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), st.floats(min_value=0.0, max_value=1.0))
def test_numbers_within_the_tolerance_match(value: float, fraction: float) -> None:
    near = value * (1 + 1e-4 * fraction)  # within rtol 1e-3
    assert lines_match(f"sum = {value!r}", f"sum = {near!r}", 1e-5, 1e-3)
    assert not lines_match(f"sum = {value!r}", f"sum = {value * 1.1 + 1.0!r}", 1e-5, 1e-3)


def test_text_between_numbers_must_agree() -> None:
    assert not lines_match("max 3", "min 3", 1e-5, 1e-3)
    assert not lines_match("a 1 2", "a 1", 1e-5, 1e-3)


def test_exit_status_and_own_verdict() -> None:
    assert not compare_runs(run("PASS\n"), run("PASS\n", exit_code=1), None).matched
    report = compare_runs(run("checking...\nPASS\n"), run("checking...\nFAIL\n"), None)
    assert not report.matched and "FAIL" in report.reason


def test_verdicts_in_the_spellings_programs_print() -> None:
    # a public tutorial's sort prints "Sorting uncessfull: ..." when its check fails
    from xpiler_core.verify.program import own_verdict

    for failed in ("Sorting uncessfull: h_data[0] = 7 > h_data[1] = 3", "Test unsuccessful", "unsucessful run",
                   "Result = FAIL", "2 mismatches"):
        assert own_verdict(failed) == "FAIL", failed
    for passed in ("Sorting Successful!", "Test PASSED", "0 errors, test passed"):
        assert own_verdict(passed) == "PASS", passed


def test_a_source_whose_own_verdict_changes_between_runs_is_not_blamed_on_the_translation() -> None:
    # e.g. a check that reads past an allocation: PASS once, FAIL when run again
    verdicts = iter(["FAIL\n", "PASS\n"])
    report = compare_runs(run("PASS\n"), run("FAIL\n"), None, lambda *_: run(next(verdicts)))
    assert not report.matched and report.source_failed and "different verdicts" in report.reason
    # a source that keeps its verdict: the different verdict is the translation's
    report = compare_runs(run("PASS\n"), run("FAIL\n"), None, lambda *_: run("PASS\n"))
    assert not report.matched and not report.source_failed and "the translation FAIL" in report.reason


def test_timing_lines_and_timing_table_rows_are_ignored_but_labels_compared() -> None:
    source = ("Kernel time: 1.25 ms\n        Routine      Bandwidth (GB/s)\n           copy      310.5\n"
              "      transpose      120.2\n\nchecksum 42\n")
    same = ("Kernel time: 9.75 ms\n        Routine      Bandwidth (GB/s)\n           copy      0.32\n"
            "      transpose      0.36\n\nchecksum 42\n")
    assert compare_runs(run(source), run(same), ProjectConfig()).matched
    wrong_label = same.replace("transpose", "*** FAILED ***")
    assert not compare_runs(run(source), run(wrong_label), ProjectConfig()).matched
    wrong_result = same.replace("checksum 42", "checksum 41")
    assert not compare_runs(run(source), run(wrong_result), ProjectConfig()).matched


def test_lines_that_differ_between_two_source_runs_are_ignored() -> None:
    source, again, candidate = run("seed 17\nresult 5\n"), run("seed 99\nresult 5\n"), run("seed 3\nresult 5\n")
    assert not compare_runs(source, candidate, None).matched
    assert compare_runs(source, candidate, None, rerun_source=lambda *_: again).matched
    assert not compare_runs(source, run("seed 3\nresult 6\n"), None, rerun_source=lambda *_: again).matched


def test_a_bare_time_that_two_source_runs_happen_to_agree_on_is_run_again() -> None:
    # polybench prints "GPU Time in seconds:" then the number alone; two runs of the source can agree on it
    source = run("GPU Time in seconds:\n0.067588\nsum 42\n")
    reruns = iter([run("GPU Time in seconds:\n0.067590\nsum 42\n"),
                   run("GPU Time in seconds:\n0.071204\nsum 42\n")])
    candidate = run("GPU Time in seconds:\n0.068200\nsum 42\n")
    assert compare_runs(source, candidate, None, rerun_source=lambda *_: next(reruns)).matched
    stable = run("GPU Time in seconds:\n0.067588\nsum 42\n")  # the source agrees with itself every time
    # the number is the label's value, a time: ignored however stable (a different result still counts)
    assert compare_runs(source, candidate, None, rerun_source=lambda *_: stable).matched
    assert not compare_runs(source, run("GPU Time in seconds:\n0.068200\nsum 41\n"), None,
                            rerun_source=lambda *_: stable).matched


def test_files_written_are_compared() -> None:
    assert compare_runs(run("", files={"out.txt": b"1.0 2.0\n"}), run("", files={"out.txt": b"1.0 2.0\n"}), None).matched
    assert not compare_runs(run("", files={"out.txt": b"1 2\n"}), run("", files={"out.txt": b"1 3\n"}), None).matched
    assert not compare_runs(run("", files={"out.txt": b"1\n"}), run(""), None).matched


def test_the_device_name_line_is_ignored_however_labelled() -> None:
    # what cudaGetDeviceProperties names the device on the runtime and in the CPU prelude
    source = "Device : xpiler CPU runtime\nMatrix size: 1024 1024\nchecksum 42\n"
    candidate = "Device : xpiler CPU\nMatrix size: 1024 1024\nchecksum 42\n"
    assert compare_runs(run(source), run(candidate), ProjectConfig()).matched
    assert not compare_runs(run(source), run(candidate.replace("1024 1024", "1024 512")), ProjectConfig()).matched


def test_programs_that_print_and_write_nothing_compared_are_said_so() -> None:
    # the exit status alone: agreeing, but nothing of what the kernels computed was compared
    silent = compare_runs(run(""), run(""), None)
    assert silent.matched and silent.nothing_compared and "nothing to compare" in silent.summary()
    timing_only = compare_runs(run("Time: 1.25 ms\n"), run("Time: 9.5 ms\n"), None)
    assert timing_only.matched and timing_only.nothing_compared
    assert not compare_runs(run("sum 3\n"), run("sum 3\n"), None).nothing_compared
    assert not compare_runs(run("", files={"o.txt": b"1\n"}), run("", files={"o.txt": b"1\n"}), None).nothing_compared
    assert not compare_runs(run("PASSED\n"), run("PASSED\n"), None).nothing_compared


def test_a_program_with_nothing_compared_is_not_verified(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from xpiler_core.dialect import Dialect
    from xpiler_core.pipeline import TranslateOptions, translate

    source = r"""
__global__ void twice(float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2; }
int main() {
  float* a;
  cudaMalloc(&a, 64 * sizeof(float));
  twice<<<2, 32>>>(a, 64);
  cudaDeviceSynchronize();
  cudaFree(a);
  return 0;
}
"""
    result = translate(source, str(tmp_path / "silent.cu"), TranslateOptions(Dialect.C))
    assert result.status == "compiled-not-executed", result.summary
    assert "anything to compare" in result.reason


def test_an_ignored_device_line_does_not_mask_the_results_under_it() -> None:
    # the device line is ignored (its name differs between the runtime and the CPU prelude) and has columns
    # apart by several spaces; it is no timing table's header: the sums under it are still compared
    source = ("./prog starting reduction at device 0: xpiler CPU runtime     with array size 16384  grid 128 block 128\n"
              "cpu reduce          : 2089065\nreduceSmem          : 2089065 <<<grid 128 block 128>>>\n")
    wrong = source.replace("xpiler CPU runtime", "xpiler CPU").replace("Smem          : 2089065", "Smem          : 233293")
    report = compare_runs(run(source), run(wrong), ProjectConfig())
    assert not report.matched and "233293" in report.reason


def test_a_rerun_of_the_source_cut_short_makes_no_line_unstable() -> None:
    # a rerun under another schedule may not finish (a spin-wait between blocks run on one thread): the lines
    # it never printed are not lines that vary, and the translation's different result is still its own
    source, candidate = run("phase 1\nresult 5\n"), run("phase 1\nresult 6\n")
    cut = ProgramRun(True, exit_code=None, stdout="phase 1\n", timed_out=True, seconds=120.0)
    report = compare_runs(source, candidate, None, rerun_source=lambda *_: cut)
    assert not report.matched and "result 6" in report.reason


def test_a_value_announced_by_an_ignored_label_and_rates_per_second_are_timing() -> None:
    """polybench prints ``GPU Time in seconds:`` and the number on the next line; the CUDA Handbook's spinlock
    prints ``operations per second (in millions): 0.68``. Both are times: the poisoned run of the source (which
    asks whether its output depends on unwritten memory) differed there and blamed the source. A bare number
    after a label that is not a time, or an announced value that is not a bare number, is still compared."""
    from xpiler_core.verify.program import uninitialized_read

    source = run("GPU Time in seconds:\n0.069396\nSpinlock operations per second (in millions): 0.68\nsum 42\n")
    poisoned = run("GPU Time in seconds:\n0.069493\nSpinlock operations per second (in millions): 0.71\nsum 42\n")
    assert uninitialized_read(source, poisoned, lambda *_: source, ProjectConfig()) is None
    assert compare_runs(source, poisoned, ProjectConfig()).matched
    assert not compare_runs(run("Result:\n12\n"), run("Result:\n13\n"), ProjectConfig()).matched
    assert not compare_runs(run("Time in seconds:\nsum 42\n"), run("Time in seconds:\nsum 41\n"),
                            ProjectConfig()).matched


def test_speedup_lines_are_timing_lines() -> None:
    """A public transpose sample prints ``CPU vs Shared speedup: 0.06x`` (a ratio of its own timings): a run
    printing 0.05x agrees, even when the source's own two runs happened to print the same ratio."""
    source = "Matrix size: 1024x1024\nCPU vs Naive speedup: 0.29x\nCPU vs Shared speedup: 0.06x\nchecksum 42\n"
    other = "Matrix size: 1024x1024\nCPU vs Naive speedup: 0.31x\nCPU vs Shared speedup: 0.05x\nchecksum 42\n"
    report = compare_runs(run(source), run(other), None, lambda *_: run(source))
    assert report.matched, report.reason
    assert report.lines_ignored == 2
    # the data lines beside them are still compared
    assert not compare_runs(run(source), run(other.replace("checksum 42", "checksum 41")), None,
                            lambda *_: run(source)).matched
