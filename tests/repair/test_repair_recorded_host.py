"""Repair through host code it does not interpret: the host entry runs for real on the runtime, recorded
(allocations, copies with their bytes, memsets, launches with their arguments), and the interpreter replays the
record and runs only the kernels. The host entry here has what defeated the old host interpreter: cudaError_t
checks, ``fprintf(stderr, …)``, a user macro, a host template launcher (``run_scale<128>``), ``sizeof *p``, a
memset to 0xFF, a host table copied to a ``__constant__`` array. Each seeded kernel bug is repaired, the fix checked
against the spec's numpy reference on other inputs (seed 7)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.repair import trace as TR
from xpiler_core.repair.engine import repair_candidate
from xpiler_core.repair.interp import Program
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.inputs import case_inputs
from xpiler_core.verify.spec import KernelSpec, load_spec

DATA = Path(__file__).resolve().parent / "data" / "recorded_host"

BUGS = [
    ("c_weights[i % 3]", "c_weights[i % 2]"),
    ("if (i < n)", "if (i < n - 1)"),
    ("blockIdx.x * blockDim.x + threadIdx.x", "blockIdx.x * blockDim.x + threadIdx.x + 1"),
    ("flags[i] != 0 ?", "flags[i] == 0 ?"),
]


def _assert_repaired(spec: KernelSpec, buggy: str) -> None:
    """The seeded bug fails the tests, is repaired, and the repair passes them on other inputs (seed 7)."""
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed, "the seeded bug is visible to the tests"
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=90.0, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text is not None and run_spec(spec, candidate_text=result.text, seed=7).passed


@pytest.mark.parametrize(("old", "new"), BUGS)
def test_kernel_bug_behind_real_host_code_is_repaired(old: str, new: str) -> None:
    spec = load_spec(DATA / "spec.toml")
    original = spec.source_text()
    assert original.count(old) == 1
    buggy = original.replace(old, new)
    _assert_repaired(spec, buggy)


def test_replay_of_the_record_computes_what_the_program_computes() -> None:
    """The replayed outputs equal what the program computes (numpy, written from the source by hand)."""
    spec = load_spec(DATA / "spec.toml")
    text = spec.source_text()
    case = {"n": 37}
    inputs = case_inputs(spec, case, 5, 0)
    run = TR.record_host_run(spec, text, Dialect.CUDA, spec.entry, None, inputs, case)
    assert isinstance(run, TR.HostRun), run
    kinds = [type(op).__name__ for op in run.record.ops]
    assert kinds.count("Launch") == 1 and "SymbolCopy" in kinds and "Memset" in kinds
    prog = Program.of(lower_text(text, str(spec.source), Dialect.CUDA))
    replayed = TR.replay(prog, run, dict(inputs))
    w = np.array([0.5, 2.0, -1.0], dtype=np.float32)[np.arange(37) % 3]
    expected = w * inputs["x"] + inputs["y"]
    got = np.array([float(v) for v in replayed["y"].data], dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


# A generated-style kernel with its shape built in (48 rows of 40, in the index math) behind a host entry that
# takes sizes: the tests' sizes are solved from the code (rows = 48, cols = 40), and the source is right there
# only, so repair's examples are those sizes as they are (shrinking them runs the kernel past its buffers).
FIXED_SHAPE = r"""
#include <cuda_runtime.h>
__global__ void __launch_bounds__(64) rowscale(const float* x, const float* w, float* y) {
  int r = blockIdx.x * 16 + (threadIdx.x >> 2);
  if (r < 48) {
    for (int c = (threadIdx.x & 3); c < 40; c += 4) {
      y[r * 40 + c] = x[r * 40 + c] * w[c];
    }
  }
}
extern "C" void rowscale_kernel(float* x, float* w, float* y, int rows, int cols) {
  float *dx, *dw, *dy;
  cudaMalloc(&dx, rows * cols * sizeof(float));
  cudaMalloc(&dw, cols * sizeof(float));
  cudaMalloc(&dy, rows * cols * sizeof(float));
  cudaMemcpy(dx, x, rows * cols * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w, cols * sizeof(float), cudaMemcpyHostToDevice);
  rowscale<<<(rows + 15) / 16, 64>>>(dx, dw, dy);
  cudaMemcpy(y, dy, rows * cols * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dw); cudaFree(dy);
}
"""


def test_examples_of_a_kernel_with_its_shape_built_in_are_the_solved_sizes(tmp_path: Path) -> None:
    """Shrunk sizes would be wrong for the source itself: with the buffers' lengths shrunk apart from the sizes
    the entry copies by, its copies read past the caller's buffers (host memory nothing checks) and the
    example's expected output is garbage."""
    from xpiler_core.repair.examples import tiny_cases
    from xpiler_core.verify.autospec import build_spec

    built = build_spec(FIXED_SHAPE, "rowscale.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert tiny_cases(spec, 1024) == [{k: int(v) for k, v in case.items()} for case in spec.cases]


@pytest.mark.parametrize(("old", "new"), [("w[c]", "w[c + 1]")])
def test_bug_in_a_kernel_with_its_shape_built_in_is_repaired(tmp_path: Path, old: str, new: str) -> None:
    from xpiler_core.verify.autospec import build_spec

    built = build_spec(FIXED_SHAPE, "rowscale.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None and "solved" in built.reason, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.cases_are_alternatives
    buggy = FIXED_SHAPE.replace(old, new)
    _assert_repaired(spec, buggy)


# Comparison flips that stop a loop from running or a guard from admitting threads. A row dot product whose
# 20-step loop lies under the guard (more steps than a hole-controlled loop may take: only a loop whose own
# condition depends on the hole is capped), and a window maximum whose inner loop's flipped condition leaves
# the failing run short (the step cap must not come from it) and whose float maximum defeats the symbolic
# encoding (the nearest completions are run instead, an operator flip before a new term in the bound).
ROW_DOT = r"""
#include <cuda_runtime.h>
__global__ void rowdot(float* a, float* v, float* out) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < 5) {
    float acc = 0.0f;
    for (int i = 0; i < 20; i++) {
      acc += a[row * 20 + i] * v[i];
    }
    out[row] = acc;
  }
}
extern "C" void rowdot_kernel(float* a, float* v, float* out, int rows, int cols) {
  float *da, *dv, *dout;
  cudaMalloc(&da, rows * cols * sizeof(float));
  cudaMalloc(&dv, cols * sizeof(float));
  cudaMalloc(&dout, rows * sizeof(float));
  cudaMemcpy(da, a, rows * cols * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dv, v, cols * sizeof(float), cudaMemcpyHostToDevice);
  int threads = 5;
  rowdot<<<(rows + threads - 1) / threads, threads>>>(da, dv, dout);
  cudaMemcpy(out, dout, rows * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(da); cudaFree(dv); cudaFree(dout);
}
"""

WINDOW_MAX = r"""
#include <cuda_runtime.h>
__global__ void __launch_bounds__(32) winmax(float* in, float* out) {
  float best = -3.4e38f;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      if (((int)threadIdx.x) < 8) {
        best = max(best, in[r * 24 + c * 8 + ((int)threadIdx.x)]);
      }
    }
  }
  if (((int)threadIdx.x) < 8) {
    out[((int)threadIdx.x)] = best;
  }
}
extern "C" void winmax_kernel(float* in, float* out, int channels, int window) {
  float *din, *dout;
  cudaMalloc(&din, channels * window * window * sizeof(float));
  cudaMalloc(&dout, channels * sizeof(float));
  cudaMemcpy(din, in, channels * window * window * sizeof(float), cudaMemcpyHostToDevice);
  winmax<<<(channels + 31) / 32, 32>>>(din, dout);
  cudaMemcpy(out, dout, channels * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(din); cudaFree(dout);
}
"""


# A serial minimum seeded from <cfloat>'s FLT_MAX whose 40-step loop a flipped condition stops from running: the
# fix runs the loop past the cap a hole-controlled loop gets from the failing run, so the nearest completions
# are run concretely.
SERIAL_MIN = r"""
#include <cuda_runtime.h>
#include <cfloat>
__global__ void serial_min(const float* x, float* out) {
  float best = FLT_MAX;
  for (int i = 0; i < 40; i++) {
    best = fminf(best, x[i]);
  }
  *out = best;
}
extern "C" void serial_min_kernel(const float* x, float* out) {
  float *dx, *dout;
  cudaMalloc(&dx, 40 * sizeof(float));
  cudaMalloc(&dout, sizeof(float));
  cudaMemcpy(dx, x, 40 * sizeof(float), cudaMemcpyHostToDevice);
  serial_min<<<1, 1>>>(dx, dout);
  cudaMemcpy(out, dout, sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dout);
}
"""


@pytest.mark.parametrize(("source", "old", "new"), [
    (ROW_DOT, "if (row < 5)", "if (row >= 5)"),
    (WINDOW_MAX, "c < 3;", "c >= 3;"),
    (SERIAL_MIN, "i < 40;", "i >= 40;"),
], ids=["guard_over_a_loop", "inner_loop_condition", "loop_past_its_cap"])
def test_a_flipped_comparison_is_repaired(tmp_path: Path, source: str, old: str, new: str) -> None:
    from xpiler_core.verify.autospec import build_spec

    built = build_spec(source, "kernel.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    _assert_repaired(load_spec(str(built.spec_path)), source.replace(old, new))


# Bugs in the host code itself (the launch's block size, the grid's rounding): the interpreter replays the host's
# record, so these holes are screened on the harness. An invalid block size launches nothing at all.
HOST_LAUNCH = r"""
#include <cuda_runtime.h>
__global__ void offset_square(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i] + 1.0f;
}
extern "C" void offset_square_entry(const float* x, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  const int threads = 256;
  int blocks = (n + threads - 1) / threads;
  offset_square<<<blocks, threads>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""


@pytest.mark.parametrize(("old", "new"), [("threads = 256", "threads = 2048"),
                                          ("(n + threads - 1) / threads", "(n + threads - 1) / threads - 1")])
def test_a_bug_in_the_host_code_is_repaired_on_the_harness(tmp_path: Path, old: str, new: str) -> None:
    from xpiler_core.verify.autospec import build_spec

    built = build_spec(HOST_LAUNCH, "offset_square.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert HOST_LAUNCH.count(old) == 1
    _assert_repaired(spec, HOST_LAUNCH.replace(old, new))


# A transpose of a built-in 20 x 28 shape whose output row length is a declared constant: written as the input's
# (28) by mistake, it breaks a guard and an index at once, and the right value is neither one off nor near.
MIXED_EXTENT = r"""
#include <cuda_runtime.h>
__global__ void flip(const float* in, float* out) {
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int in_cols = 28;
  int out_cols = 20;
  if (r < 28 && c < out_cols) {
    out[r * out_cols + c] = in[c * in_cols + r];
  }
}
extern "C" void flip_kernel(float* in, float* out, int rows, int cols) {
  float *din, *dout;
  cudaMalloc(&din, rows * cols * sizeof(float));
  cudaMalloc(&dout, rows * cols * sizeof(float));
  cudaMemcpy(din, in, rows * cols * sizeof(float), cudaMemcpyHostToDevice);
  dim3 block(8, 8);
  dim3 grid((rows + 7) / 8, (cols + 7) / 8);
  flip<<<grid, block>>>(din, dout);
  cudaMemcpy(out, dout, rows * cols * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(din); cudaFree(dout);
}
"""


def test_a_constant_mixed_up_with_another_extent_is_repaired(tmp_path: Path) -> None:
    from xpiler_core.verify.autospec import build_spec

    built = build_spec(MIXED_EXTENT, "flip.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    buggy = MIXED_EXTENT.replace("int out_cols = 20;", "int out_cols = 28;")
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed
    result = repair_candidate(buggy, str(spec.source), spec, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text is not None and run_spec(spec, candidate_text=result.text, seed=7).passed
