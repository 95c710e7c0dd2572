"""Counted while loops as for loops: the rewritten functions compute what the originals compute (both built by
gcc and run on the same inputs: the compiler's reading of the original is the reference), the loops that
qualify become for loops, and those that would change meaning (a continue that skips the step, a counter read
after the loop, a second write of the counter) stay while loops."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes.support.counted_while import counted_whiles_as_fors
from xpiler_core.printer import print_module

LOOPS = r"""
void stride(float* y, int s, int n, int k) {           /* converted */
    int i = s;
    while (i < n) { y[i] += 1.0f + i; i += k; }
}
void down(float* y, int s, int n, int k) {             /* converted: i = i - k */
    long i = n - 1;
    while (i >= s) { y[i] = y[i] * 2.0f + 1.0f; i = i - k; }
}
void inner_continue(float* y, int s, int n, int k) {   /* converted: the continue is the inner loop's */
    int i = s;
    while (i < n) { for (int q = 0; q < 3; ++q) { if (q == 1) continue; y[i] += q; } i++; }
}
void own_continue(float* y, int s, int n, int k) {     /* kept: the continue skips the step */
    int i = s;
    while (i < n) { if (i % 3 == 0) { y[i] = -1.0f; i += k + 1; continue; } y[i] += 2.0f; i += k; }
}
void read_after(float* y, int s, int n, int k) {       /* kept: the counter is read after the loop */
    int i = s;
    while (i < n) { y[i] += 3.0f; i += k; }
    if (i - k >= 0 && i - k < n) y[i - k] += 100.0f;
}
void written_inside(float* y, int s, int n, int k) {   /* kept: the body writes the counter besides its step */
    int i = s;
    while (i < n) { y[i] += 4.0f; if (y[i] > 6.0f) i += 1; i += k; }
}
"""
CONVERTED = {"stride", "down", "inner_continue"}
KEPT = {"own_continue", "read_after", "written_inside"}
F32P = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")


def _functions(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r"void (\w+)\(.*?\n}\n", text, re.S)}


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, ctypes.CDLL, str]:
    from tests.conftest import build_c

    rewritten = print_module(counted_whiles_as_fors(lower_text(LOOPS, "loops.c", Dialect.C)), Dialect.C)
    original = build_c(LOOPS, tmp_path_factory.mktemp("original"))
    converted = build_c(rewritten, tmp_path_factory.mktemp("converted"))
    for lib in (original, converted):
        for name in CONVERTED | KEPT:
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = [F32P, ctypes.c_int, ctypes.c_int, ctypes.c_int], None
    return original, converted, rewritten


def test_the_loops_that_qualify_and_only_those_become_for_loops(libs: tuple[ctypes.CDLL, ctypes.CDLL, str]) -> None:
    bodies = _functions(libs[2])
    assert set(bodies) == CONVERTED | KEPT
    for name in CONVERTED:
        assert "while" not in bodies[name] and "for (" in bodies[name], bodies[name]
    for name in KEPT:
        assert "while (" in bodies[name], bodies[name]


@settings(max_examples=60, deadline=None)
@given(s=st.integers(0, 20), n=st.integers(0, 64), k=st.integers(1, 9),
       name=st.sampled_from(sorted(CONVERTED | KEPT)))
def test_the_rewritten_functions_compute_what_the_originals_do(libs: tuple[ctypes.CDLL, ctypes.CDLL, str], s: int,
                                                               n: int, k: int, name: str) -> None:
    original, converted, _ = libs
    start = np.arange(64, dtype=np.float32) % 5
    expected, got = start.copy(), start.copy()
    getattr(original, name)(expected, s, n, k)
    getattr(converted, name)(got, s, n, k)
    np.testing.assert_array_equal(got, expected)


def test_a_grid_stride_while_loop_is_flattened_like_the_for_loop(tmp_path: Path) -> None:
    """The CPU plan reads a grid-stride loop spelled with while as it reads the for loop: grid_flatten takes it."""
    from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

    source = r"""
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  while (i < n) { y[i] = a * x[i] + y[i]; i += blockDim.x * gridDim.x; }
}
"""
    text, records, _ctx = translate_to_cpu(source, "saxpy.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "grid_flatten")
    assert record["changed"], record
