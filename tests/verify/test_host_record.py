"""Host entries run for real on the runtime: the record of their copies gives buffer lengths and directions.

References are independent of the recorder: the lengths the test sources are written to copy (stated here by
hand), the hipcc/g++ verdict on the translation and the source's own outputs (differential tests)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.verify.expr import evaluate_int
from xpiler_core.verify.host_record import PROBE_SETS, EntryParam, fit_length, record_entry

# Ordinary host spellings a pattern reader misses: a copy inside a helper template, casts, sizeof of an
# expression, a local byte count, an error-checking macro, a guard around everything, a pitched 2-D copy, a
# constant-memory upload, a signed char buffer, and a kernel that would never end if it ran.
HOST_SOURCE = r"""
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__constant__ float c_scale[4];

__global__ void spin(const int* flag, float* out, const signed char* q, int rows, int cols) {
  while (flag[0] == 0) { }
  int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows && c < cols) out[r * cols + c] = c_scale[0] * q[c];
}

template <typename T>
static T* to_device(const T* h, size_t count) {
  T* d = nullptr;
  CHECK(cudaMalloc(&d, count * sizeof(T)));
  CHECK(cudaMemcpy(d, h, count * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

extern "C" void probe_me(const int* flag, const float* scale, const signed char* q, float* out,
                         float* window, int rows, int cols, int k) {
  if (rows <= 0 || cols <= 0) return;
  const size_t total = static_cast<size_t>(rows) * cols;
  int* dflag = to_device(flag, 1);
  signed char* dq = to_device(q, static_cast<size_t>(cols));
  CHECK(cudaMemcpyToSymbol(c_scale, scale, 4 * sizeof(float)));
  float* dout; CHECK(cudaMalloc(&dout, total * sizeof *dout));
  dim3 block(64), grid((cols + 63) / 64, rows);
  spin<<<grid, block>>>(dflag, dout, dq, rows, cols);
  CHECK(cudaGetLastError());
  // the output comes back one row at a time, pitched
  CHECK(cudaMemcpy2D(out, cols * sizeof(float), dout, cols * sizeof(float), cols * sizeof(float), rows,
                     cudaMemcpyDeviceToHost));
  // a sliding window's output length
  CHECK(cudaMemcpy(window, dout, (cols - k + 1) * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dflag); cudaFree(dq); cudaFree(dout);
}
"""

PARAMS = [
    EntryParam("flag", "buffer", 4), EntryParam("scale", "buffer", 4), EntryParam("q", "buffer", 1),
    EntryParam("out", "buffer", 4), EntryParam("window", "buffer", 4), EntryParam("rows", "size"),
    EntryParam("cols", "size"), EntryParam("k", "size"),
]


def _lengths(formula: str, case: dict[str, int]) -> int:
    return evaluate_int(formula, case)


def test_record_gives_lengths_and_directions_of_real_host_code() -> None:
    recorded = record_entry(HOST_SOURCE, Dialect.CUDA, "probe.cu", "probe_me", PARAMS)
    assert not isinstance(recorded, str), recorded
    # what the source copies, written out by hand
    expected = {
        "flag": (lambda c: 1, {"in"}),
        "scale": (lambda c: 4, {"in"}),
        "q": (lambda c: c["cols"], {"in"}),
        "out": (lambda c: c["rows"] * c["cols"], {"out"}),
        "window": (lambda c: c["cols"] - c["k"] + 1, {"out"}),
    }
    assert set(recorded.shapes) == set(expected)
    held_out = {"rows": 211, "cols": 157, "k": 13}  # not a probe size: the formula, not a table, is right
    for name, (length, roles) in expected.items():
        for case in [*recorded.sizes_tried, held_out]:
            assert _lengths(recorded.shapes[name], case) == length(case), (name, recorded.shapes[name])
        assert recorded.roles[name] == roles, name
    # the kernel was recorded with its launch shape and not run (it would spin forever on the zero flag)
    first = recorded.sizes_tried[0]
    assert [launch.kernel for launch in recorded.launches] == ["spin"]
    assert recorded.launches[0].grid == (math.ceil(first["cols"] / 64), first["rows"], 1)
    assert recorded.launches[0].block == (64, 1, 1)


def test_entry_that_refuses_small_sizes_is_recorded_at_larger_ones() -> None:
    text = r"""
#include <cuda_runtime.h>
extern "C" void big_only(const float* x, float* y, int n) {
  if (n < 200) return;
  float* d; cudaMalloc(&d, n * sizeof(float));
  cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(y, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d);
}
"""
    recorded = record_entry(text, Dialect.CUDA, "big.cu", "big_only",
                            [EntryParam("x", "buffer", 4), EntryParam("y", "buffer", 4), EntryParam("n", "size")])
    assert not isinstance(recorded, str), recorded
    assert recorded.shapes == {"x": "n", "y": "n"}
    assert all(case["n"] >= 200 for case in recorded.sizes_tried)


_NAMES = ("m", "n", "k")


@st.composite
def _formulas(draw: st.DrawFn) -> tuple[str, object]:
    kind = draw(st.sampled_from(["const", "product", "offset", "window"]))
    if kind == "const":
        c = draw(st.integers(1, 5000))
        return str(c), lambda case: c
    subset = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3, unique=True))
    if kind == "product":
        c = draw(st.integers(1, 16))
        return "product", lambda case: c * math.prod(case[n] for n in subset)
    if kind == "offset":
        c = draw(st.integers(-10, 10))
        return "offset", lambda case: math.prod(case[n] for n in subset) + c
    a, b = draw(st.permutations(_NAMES))[:2]
    c = draw(st.integers(1, 20))
    return "window", lambda case: case[a] - case[b] + c


@settings(max_examples=200, deadline=None)
@given(_formulas())
def test_fitted_length_formula_predicts_held_out_sizes(formula: tuple[str, object]) -> None:
    _, length = formula
    assert callable(length)
    cases = [dict(zip(_NAMES, values, strict=False)) for values in PROBE_SETS]
    fitted = fit_length(cases, [length(c) for c in cases])
    assert fitted is not None
    for values in ((311, 257, 199), (1001, 67, 5), (64, 64, 64)):
        case = dict(zip(_NAMES, values, strict=True))
        assert evaluate_int(fitted, case) == length(case), fitted


def test_no_formula_for_lengths_that_fit_none() -> None:
    cases = [dict(zip(_NAMES, values, strict=False)) for values in PROBE_SETS]
    assert fit_length(cases, [c["m"] ** 2 + 1 for c in cases]) is None


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
def test_translation_of_helper_style_host_code_is_verified(tmp_path: Path) -> None:
    from xpiler_core.pipeline import translate
    from xpiler_core.translation import TranslateOptions

    src = tmp_path / "probe.cu"
    # the spinning kernel is not a test subject: give it an ending and check the whole entry against its source
    text = HOST_SOURCE.replace("while (flag[0] == 0) { }", "if (flag[0] == 7) return;")
    src.write_text(text, encoding="utf-8")
    result = translate(text, str(src), TranslateOptions(target=Dialect.HIP))
    assert result.status.value == "verified", result.reason
    spec = result.manifest.get("spec") or {}
    assert "what its copies touched in a run on the runtime" in str(spec.get("reason"))


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
def test_recorded_run_uses_the_projects_include_directories(tmp_path: Path) -> None:
    """The copies live in a header found only through the project's -I: the recorded run is built with the
    project's flags (it was built without them, failed, and the tests fell back to guessing every buffer had
    ``n`` elements: wrong for an output of ``2 * n``)."""
    from xpiler_core.pipeline import translate
    from xpiler_core.project import ProjectConfig
    from xpiler_core.translation import TranslateOptions

    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "dev_copy.h").write_text(
        "#pragma once\n#include <cuda_runtime.h>\n"
        "template <typename T> T* to_device(const T* h, size_t count) {\n"
        "  T* d = nullptr; cudaMalloc(&d, count * sizeof(T));\n"
        "  cudaMemcpy(d, h, count * sizeof(T), cudaMemcpyHostToDevice); return d; }\n"
        "template <typename T> void to_host(T* h, const T* d, size_t count) {\n"
        "  cudaMemcpy(h, d, count * sizeof(T), cudaMemcpyDeviceToHost); }\n", encoding="utf-8")
    text = r"""#include "dev_copy.h"
__global__ void pairs(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[2 * i] = x[i]; y[2 * i + 1] = -x[i]; }
}
extern "C" void run_pairs(const float* x, float* y, int n) {
  float* dx = to_device(x, static_cast<size_t>(n));
  float* dy; cudaMalloc(&dy, 2 * n * sizeof(float));
  pairs<<<(n + 127) / 128, 128>>>(dx, dy, n);
  to_host(y, dy, 2 * static_cast<size_t>(n));
  cudaFree(dx); cudaFree(dy);
}
"""
    src = tmp_path / "pairs.cu"
    src.write_text(text, encoding="utf-8")
    project = ProjectConfig(include_dirs=(str(tmp_path / "inc"),))
    result = translate(text, str(src), TranslateOptions(target=Dialect.HIP, project=project))
    assert result.status.value == "verified", result.reason
    spec = result.manifest.get("spec") or {}
    assert "y: 2 * n" in str(spec.get("reason")), spec.get("reason")
