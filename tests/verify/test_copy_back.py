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


@pytest.mark.parametrize("target", [Dialect.C, Dialect.HIP])
def test_a_wrong_translation_of_a_silent_program_is_caught(tmp_path: Path, target: Dialect) -> None:
    source = tmp_path / "timing.cu"
    source.write_text(TIMING_ONLY)
    right = translate(TIMING_ONLY, str(source), TranslateOptions(target))
    assert right.output_text
    report = compare_programs(TIMING_ONLY, str(source), Dialect.CUDA, wrong_translation(right.output_text, target),
                              target, config=None, source_build=None, candidate_build=None, source_warp=32,
                              target_warp=64 if target is Dialect.HIP else 32)
    assert not report.matched and not report.source_failed
    assert "copied back to the host differs: copy 1 of 2" in report.reason, report.reason
