"""A program that prints nothing to compare (a benchmark that prints its timings only) is judged by the data it
copies back from the device: the runtime records each device-to-host copy, and so does the CPU translation's
verification build; float data agree within the tolerance, other data byte for byte, and a copy the source
itself changes under another schedule is not held against the translation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.verify.program import CopyBack, ProgramRun, compare_programs, compare_runs, copies_difference

TIMING_ONLY = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void scale(const float* x, float* y, int* hits, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = x[i] * 2.5f + 1.0f; if (y[i] > 40.0f) atomicAdd(hits, 1); }
}
int main() {
  const int n = 1000;
  static float hx[n], hy[n];
  int hits = 0;
  for (int i = 0; i < n; ++i) hx[i] = (i % 37) * 0.5f;
  float *x, *y; int* h;
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float)); cudaMalloc(&h, sizeof(int));
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(h, 0, sizeof(int));
  cudaEvent_t a, b; float ms = 0;
  cudaEventCreate(&a); cudaEventCreate(&b); cudaEventRecord(a);
  scale<<<(n + 127) / 128, 128>>>(x, y, h, n);
  cudaEventRecord(b); cudaEventSynchronize(b); cudaEventElapsedTime(&ms, a, b);
  cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(&hits, h, sizeof(int), cudaMemcpyDeviceToHost);
  printf("kernel time: %.3f ms\n", ms);
  cudaFree(x); cudaFree(y); cudaFree(h);
  return 0;
}
"""


def run(copies: list[CopyBack]) -> ProgramRun:
    return ProgramRun(True, exit_code=0, stdout="time: 1.5 ms\n", copies=copies)


def floats(values: list[float]) -> CopyBack:
    data = np.asarray(values, dtype=np.float32).tobytes()
    return CopyBack(len(data), "f", data)


def ints(values: list[int]) -> CopyBack:
    data = np.asarray(values, dtype=np.int32).tobytes()
    return CopyBack(len(data), "i", data)


def test_float_copies_agree_within_the_tolerance_and_integers_exactly() -> None:
    assert copies_difference([floats([1.0, 2.0])], [floats([1.0000001, 2.0])], 1e-5, 1e-3, set()) is None
    assert "element 1" in str(copies_difference([floats([1.0, 2.0])], [floats([1.0, 2.5])], 1e-5, 1e-3, set()))
    assert copies_difference([floats([np.nan])], [floats([np.nan])], 1e-5, 1e-3, set()) is None
    # an integer that differs in its last bit differs, although as a float its bits would be "close"
    assert copies_difference([ints([1 << 30])], [ints([(1 << 30) + 1])], 1e-5, 1e-3, set()) is not None
    assert "2 device-to-host copies" in str(copies_difference([ints([1]), ints([2])], [ints([1])], 0, 0, set()))
    assert "moves 8 bytes" in str(copies_difference([ints([1])], [ints([1, 2])], 0, 0, set()))


def test_a_silent_program_is_judged_by_its_copies() -> None:
    same = compare_runs(run([floats([1.0, 2.0]), ints([3])]), run([floats([1.0, 2.0]), ints([3])]), None)
    assert same.matched and not same.nothing_compared and same.copies_compared == 2
    assert "device-to-host" in same.summary()
    wrong = compare_runs(run([floats([1.0, 2.0]), ints([3])]), run([floats([1.0, 2.0]), ints([4])]), None)
    assert not wrong.matched and not wrong.source_failed and "copy 2 of 2" in wrong.reason


def test_a_copy_the_source_changes_under_another_schedule_is_not_compared() -> None:
    # the last block to write wins: the source's own result depends on the block order
    source, other_order = run([ints([7]), floats([1.0])]), run([ints([0]), floats([1.0])])
    report = compare_runs(source, run([ints([3]), floats([1.0])]), None, lambda *_: other_order)
    assert report.matched and report.copies_compared == 1
    # a stable copy that differs is still the translation's
    report = compare_runs(source, run([ints([7]), floats([2.0])]), None, lambda *_: other_order)
    assert not report.matched and "copy 2 of 2" in report.reason


@pytest.mark.parametrize("target", [Dialect.C, Dialect.HIP])
def test_a_program_printing_only_its_timing_verifies_by_what_it_copies_back(tmp_path: Path, target: Dialect) -> None:
    result = translate(TIMING_ONLY, str(tmp_path / "timing.cu"), TranslateOptions(target))
    assert result.status == "verified", result.summary
    assert "2 device-to-host copies they make agree" in result.reason + str(result.summary)


def wrong_translation(text: str, target: Dialect) -> str:
    wrong, count = re.subn(r"2\.5f?", "2.5f + 0.01f", text)
    assert count, text
    return wrong


def wrong_translation_report(program: str, tmp_path: Path, target: Dialect) -> str:
    """Why the program check rejects a translation of ``program`` with its scale factor changed."""
    source = tmp_path / "program.cu"
    source.write_text(program)
    right = translate(program, str(source), TranslateOptions(target))
    assert right.output_text
    report = compare_programs(program, str(source), Dialect.CUDA, wrong_translation(right.output_text, target),
                              target, config=None, source_build=None, candidate_build=None, source_warp=32,
                              target_warp=64 if target is Dialect.HIP else 32)
    assert not report.matched and not report.source_failed
    return report.reason


@pytest.mark.parametrize("target", [Dialect.C, Dialect.HIP])
def test_a_wrong_translation_of_a_silent_program_is_caught(tmp_path: Path, target: Dialect) -> None:
    reason = wrong_translation_report(TIMING_ONLY, tmp_path, target)
    assert "copied back to the host differs: copy 1 of 2" in reason, reason


# the same program, but it copies nothing back: only its device buffers, as freed, hold what the kernels computed
FREES_ONLY = re.sub(r"  cudaMemcpy\(hy.*\n  cudaMemcpy\(&hits.*\n", "", TIMING_ONLY)
# a vector-typed buffer (float4: compared as floats) and a buffer freed through a void pointer (bytes)
VECTOR_FREES = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void spin(float4* p, unsigned* bits, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v = p[i];
    p[i] = make_float4(v.y * 0.5f + 1.0f, v.z - v.x, v.w * v.w, v.x + 2.5f);
    bits[i] = (unsigned)i * 2654435761u;
  }
}
int main() {
  const int n = 300;
  static float4 h[n];
  for (int i = 0; i < n; ++i) h[i] = make_float4(i * 0.25f, i % 7, 1.0f / (i + 1), -i * 0.125f);
  float4* p; unsigned* bits;
  cudaMalloc(&p, n * sizeof(float4)); cudaMalloc(&bits, n * sizeof(unsigned));
  cudaMemcpy(p, h, n * sizeof(float4), cudaMemcpyHostToDevice);
  spin<<<(n + 63) / 64, 64>>>(p, bits, n);
  cudaDeviceSynchronize();
  printf("done in %.3f ms\n", 0.5);
  cudaFree(p); cudaFree((void*)bits);
  return 0;
}
"""


def test_device_buffers_as_freed_are_compared_only_where_nothing_is_copied_back() -> None:
    def freed(copy: CopyBack) -> CopyBack:
        return CopyBack(copy.size, copy.element, copy.data, freed=True)

    # copies back and frees: the copies judge (a freed scratch buffer that differs is not looked at)
    source = run([floats([1.0]), freed(ints([5]))])
    report = compare_runs(source, run([floats([1.0]), freed(ints([6]))]), None)
    assert report.matched and report.copies_compared == 1
    # frees only: the buffers judge
    report = compare_runs(run([freed(floats([1.0, 2.0]))]), run([freed(floats([1.0, 2.0]))]), None)
    assert report.matched and report.copies_compared == 1 and "device buffer the kernels wrote" in report.summary()
    # a buffer freed as the host left it agrees whatever the kernels computed, and a CPU translation may read an
    # input in place instead of allocating it: it is left out on both sides
    unchanged = CopyBack(8, "f", floats([1.0, 2.0]).data, freed=True, unchanged=True)
    report = compare_runs(run([unchanged]), run([unchanged]), None)
    assert report.matched and report.nothing_compared
    written = freed(floats([3.0]))
    assert compare_runs(run([unchanged, written]), run([written]), None).copies_compared == 1
    # a translation whose kernels leave a buffer the source's kernels wrote as it was
    report = compare_runs(run([unchanged, written]), run([unchanged, CopyBack(4, "f", written.data, True, True)]), None)
    assert not report.matched and "frees 1 device buffers its kernels wrote, the translation 0" in report.reason
    report = compare_runs(run([freed(floats([1.0, 2.0]))]), run([freed(floats([1.0, 2.5]))]), None)
    assert not report.matched and "device buffers, as freed or at exit, differ: device buffer 1 of 1" in report.reason
    report = compare_runs(run([freed(ints([1])), freed(ints([2]))]), run([freed(ints([1]))]), None)
    assert not report.matched and "frees 2 device buffers its kernels wrote" in report.reason
    # a buffer of pointers holds addresses, which differ between any two runs: its length alone is compared
    pointers = [CopyBack(8, "p", bytes(range(8)), freed=True)], [CopyBack(8, "p", bytes(range(8, 16)), freed=True)]
    assert compare_runs(run(pointers[0]), run(pointers[1]), None).matched


@pytest.mark.parametrize(("target", "program"), [(Dialect.C, FREES_ONLY), (Dialect.HIP, FREES_ONLY),
                                                (Dialect.C, VECTOR_FREES)], ids=["cpu", "hip", "cpu-float4"])
def test_a_program_that_copies_nothing_back_verifies_by_its_freed_buffers(tmp_path: Path, target: Dialect,
                                                                          program: str) -> None:
    assert "cudaMemcpy(hy" not in FREES_ONLY
    result = translate(program, str(tmp_path / "frees.cu"), TranslateOptions(target))
    assert result.status == "verified", result.summary
    assert "2 device buffers the kernels wrote agree as freed or at exit" in result.reason + str(result.summary)


# the same program, but it never frees its buffers either: they are read as they are when it exits
NEVER_FREED = FREES_ONLY.replace("  cudaFree(x); cudaFree(y); cudaFree(h);\n", "")


@pytest.mark.parametrize("target", [Dialect.C])  # HIP runs on the same recorder (runtime/include/xpiler/copyback.h)
def test_a_program_that_never_frees_verifies_by_its_buffers_at_exit(tmp_path: Path, target: Dialect) -> None:
    assert "cudaFree" not in NEVER_FREED
    result = translate(NEVER_FREED, str(tmp_path / "kept.cu"), TranslateOptions(target))
    assert result.status == "verified", result.summary  # before: compiled, not executed (nothing to compare)
    assert "2 device buffers the kernels wrote agree as freed or at exit" in result.reason + str(result.summary)
    (tmp_path / "wrong").mkdir()
    reason = wrong_translation_report(NEVER_FREED, tmp_path / "wrong", target)
    assert "device buffers, as freed or at exit, differ" in reason, reason


@pytest.mark.parametrize("target", [Dialect.C, Dialect.HIP])
def test_a_wrong_translation_of_a_program_that_copies_nothing_back_is_caught(tmp_path: Path, target: Dialect) -> None:
    reason = wrong_translation_report(FREES_ONLY, tmp_path, target)
    assert "device buffers, as freed or at exit, differ: device buffer 1 of 2" in reason, reason
