"""C → CUDA on the CPU outputs of the suite: nvcc accepts the result and it matches the numpy reference on
the SIMT runtime at warp 32; plain C parallel loops bind to threads with a remainder guard."""

from __future__ import annotations

import ctypes
import glob
import tempfile
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.plans.c_to_cuda import translate_to_cuda
from xpiler_core.plans.cuda_to_cpu import _launch_params_used, spec_with_launch_args, translate_to_cpu
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec
from xpiler_core.verify.toolchains import compile_check

ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"
ALL_SPECS = sorted(glob.glob(str(ROOT / "*" / "*" / "spec.toml")))
SUBSET = ["activation/relu", "reduction/sum", "matrix/gemm", "reduction/l2norm", "normalization/layernorm"]


def round_trip(spec_path: str) -> None:
    spec = load_spec(spec_path)
    cpu, records, _ = translate_to_cpu(spec.source.read_text(), str(spec.source), spec)
    assert cpu is not None
    cuda, ctx = translate_to_cuda(cpu, "cpu_output.cpp")
    assert cuda is not None, ctx.unresolved
    verdict = compile_check(cuda, Dialect.CUDA)
    assert verdict.ok, verdict.stderr
    launch = _launch_params_used(records)
    with tempfile.TemporaryDirectory() as tmp:
        test_spec = spec_with_launch_args(spec, launch, Path(tmp)) if launch else spec
        report = run_spec(test_spec, candidate_text=cuda, candidate_dialect=Dialect.CUDA, candidate_entry=spec.entry,
                          candidate_kind="host", warp_size=32)
    assert report.passed, report.summary()


@pytest.mark.parametrize("name", SUBSET)
def test_c_to_cuda_on_cpu_outputs(name: str) -> None:
    round_trip(str(ROOT / name / "spec.toml"))


@pytest.mark.slow
@pytest.mark.parametrize("spec_path", ALL_SPECS, ids=lambda p: Path(p).parent.name)
def test_c_to_cuda_whole_suite(spec_path: str) -> None:
    round_trip(spec_path)


def test_plain_c_parallel_loop_binds_with_guard(tmp_path: Path) -> None:
    text = ('extern "C" void scale(float* y, const float* x, float a, int n) {\n'
            "#pragma omp parallel for\n  for (int i = 0; i < n; ++i) y[i] = a * x[i];\n}\n")
    cuda, ctx = translate_to_cuda(text, "scale.c")
    assert cuda is not None, ctx.unresolved
    assert "__global__" in cuda and "blockIdx.x" in cuda and "<<<" in cuda
    assert compile_check(cuda, Dialect.CUDA).ok
    from xpiler_core.runtime.build import build_library

    built = build_library(cuda, Dialect.CUDA, tmp_path, display_name="scale.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    fp = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
    lib.scale.argtypes = [fp, fp, ctypes.c_float, ctypes.c_int]
    for n in (1, 255, 257, 1000):  # partial last block: the guard must hold
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        y = np.full(n + 8, 7.0, np.float32)
        lib.scale(y, x, 2.0, n)
        np.testing.assert_allclose(y[:n], 2 * x, rtol=1e-6)
        assert (y[n:] == 7.0).all()


def test_a_carried_scalar_that_is_not_a_sum_runs_on_one_thread(tmp_path: Path) -> None:
    # a product carried across iterations cannot be split over threads: the loop keeps its order on one GPU
    # thread (correct, not fast), and the note says why
    from xpiler_core.runtime.build import build_library

    text = ('extern "C" void total(const float* x, float* out, int n) {\n  float s = 1.0f;\n'
            "#pragma omp parallel for\n  for (int i = 0; i < n; ++i) s *= x[i];\n  out[0] = s;\n}\n")
    cuda, ctx = translate_to_cuda(text, "total.c")
    assert cuda is not None, ctx.unresolved
    assert "<<<1, 1>>>" in cuda and any("carried" in note and "on one thread" in note for note in ctx.notes)
    built = build_library(cuda, Dialect.CUDA, tmp_path, display_name="total.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    x = np.random.default_rng(2).uniform(0.5, 1.5, 37).astype(np.float32)
    out = np.zeros(1, np.float32)
    lib.total(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int(37))
    np.testing.assert_allclose(out[0], np.prod(x.astype(np.float64)), rtol=1e-5)


PLAIN_C = """#include <math.h>
void softplus(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = logf(1.0f + expf(x[i]));
}
void rowsum(const float* a, float* s, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += a[r * cols + c];
    s[r] = acc;
  }
}
"""


def test_unmarked_independent_loops_bind_and_run_like_numpy(tmp_path: Path) -> None:
    """No OpenMP pragma: loops whose iterations provably touch disjoint memory still become kernels, every
    function of the file; the CUDA runs on the SIMT runtime and matches numpy."""
    from xpiler_core.pipeline import TranslateOptions, translate
    from xpiler_core.runtime.build import build_library

    result = translate(PLAIN_C, str(tmp_path / "plain.c"), TranslateOptions(target=Dialect.CUDA))
    assert result.status == "verified", result.summary  # each function tested against the C source
    assert result.output_text.count("__global__") == 2
    built = build_library(result.output_text, Dialect.CUDA, tmp_path, display_name="plain.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    fp = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
    lib.softplus.argtypes = [fp, fp, ctypes.c_int]
    lib.rowsum.argtypes = [fp, fp, ctypes.c_int, ctypes.c_int]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    y = np.zeros_like(x)
    lib.softplus(x, y, 1000)
    np.testing.assert_allclose(y, np.log1p(np.exp(x.astype(np.float64))), rtol=1e-5, atol=1e-6)
    a = rng.standard_normal((37, 300)).astype(np.float32)
    s = np.zeros(37, np.float32)
    lib.rowsum(a, s, 37, 300)
    np.testing.assert_allclose(s, a.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("body", [
    "for (int i = 1; i < n; ++i) y[i] = y[i - 1] + x[i];",           # carried through memory
    "for (int i = 0; i < n; ++i) y[i / 2] = x[i];",                   # several iterations, one element
    "for (int i = 0; i < n; ++i) y[idx[i]] += x[i];",                 # scatter: indices may repeat
    "for (int i = 0; i < n; ++i) { y[i] = x[i]; y[i + 1] += 1.0f; }",  # neighbour written
    "for (int i = 0; i < n; ++i) *(y + i) = x[i];",                   # not a subscript
])
def test_loops_with_possible_cross_iteration_writes_are_not_bound(body: str) -> None:
    # never split over threads: either left untranslated, or kept in order on one GPU thread
    text = f"void f(float* y, const float* x, const int* idx, int n) {{\n  {body}\n}}\n"
    cuda, ctx = translate_to_cuda(text, "f.c")
    if cuda is None:
        assert "provably parallel" in ctx.unresolved[-1].reason or "carried" in ctx.unresolved[-1].reason
    else:
        assert "<<<1, 1>>>" in cuda and "blockDim" not in cuda, cuda


SUMS = """
void dot(const float* x, const float* y, float* out, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += x[i] * y[i];
  out[0] = s;
}
double one_minus_sumsq(const double* x, int n) {
  double acc = 1.0;
#pragma omp parallel for reduction(+:acc)
  for (int i = 0; i < n; ++i) { double v = x[i]; acc = acc - v * v; }
  return acc;
}
"""


def test_sum_reductions_bind_with_atomics_and_match_numpy(tmp_path: Path) -> None:
    """A scalar only updated by ``+=``/``-=`` across iterations is a sum: each thread adds its part to a
    managed accumulator, the host adds it to the scalar after the launch and runs the statements after the
    loop. The CUDA runs on the SIMT runtime and matches numpy."""
    from xpiler_core.pipeline import TranslateOptions, translate
    from xpiler_core.runtime.build import build_library

    result = translate(SUMS, str(tmp_path / "sums.c"), TranslateOptions(target=Dialect.CUDA))
    assert result.status == "verified", result.summary
    assert result.output_text.count("atomicAdd") == 2
    built = build_library(result.output_text, Dialect.CUDA, tmp_path, display_name="sums.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    f32 = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
    f64 = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
    lib.dot.argtypes = [f32, f32, f32, ctypes.c_int]
    lib.one_minus_sumsq.argtypes = [f64, ctypes.c_int]
    lib.one_minus_sumsq.restype = ctypes.c_double
    rng = np.random.default_rng(7)
    for n in (1, 300, 4097):
        x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        out = np.zeros(1, np.float32)
        lib.dot(x, y, out, n)
        np.testing.assert_allclose(out[0], np.dot(x.astype(np.float64), y), rtol=1e-4, atol=1e-4)
        xd = rng.standard_normal(n)
        assert abs(lib.one_minus_sumsq(xd, n) - (1.0 - np.sum(xd * xd))) < 1e-9 * max(1.0, n)


NESTS_C = """#include <math.h>
static float cube(float v) { return v * v * v; }
/* a flattened 3-D nest, extents in local constants, the index in a local variable, a helper function */
extern "C" void nest(const float* x, float* y) {
  int d0 = 3, d1 = 4, d2 = 5;
  for (int i = 0; i < d0; i++)
    for (int j = 0; j < d1; j++)
      for (int k = 0; k < d2; k++) {
        int index = i * d1 * d2 + j * d2 + k;
        y[index] = cube(x[index]) + 1.0f;
      }
}
/* rows normalized in place (several indices of one array, sibling scopes reuse a name) */
extern "C" void rownorm(float* x, float* out) {
  for (int r = 0; r < 6; r++) {
    float m = x[r * 7];
    for (int c = 1; c < 7; c++) { int at = r * 7 + c; if (x[at] > m) m = x[at]; }
    for (int c = 0; c < 7; c++) { int at = r * 7 + c; x[at] = expf(x[at] - m); }
    float s = 0.0f;
    for (int c = 0; c < 7; c++) { int at = r * 7 + c; s += x[at]; }
    for (int c = 0; c < 7; c++) { int at = r * 7 + c; out[at] = x[at] / s; }
  }
}
/* an initialization loop, then a reduction into one element: two kernels in order, the second on one thread */
extern "C" void colmax(const float* x, float* out, float* best) {
  for (int j = 0; j < 8; j++) out[j] = -INFINITY;
  for (int j = 0; j < 8; j++)
    for (int i = 0; i < 4; i++)
      if (x[i * 8 + j] > out[j]) out[j] = x[i * 8 + j];
  best[0] = -INFINITY;
  for (int j = 0; j < 8; j++) if (out[j] > best[0]) best[0] = out[j];
}
"""


def test_nests_in_place_rows_and_ordered_parts_run_like_numpy(tmp_path: Path) -> None:
    from xpiler_core.runtime.build import build_library

    text, ctx = translate_to_cuda(NESTS_C, "nests.cpp")
    assert text is not None, ctx.unresolved
    assert "__host__ __device__" in text  # the helper runs on the GPU
    assert "colmax_kernel2<<<1, 1>>>" in text  # the reduction into one element, on one thread, after the others
    assert compile_check(text, Dialect.CUDA).ok
    built = build_library(text, Dialect.CUDA, tmp_path, display_name="nests.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    rng = np.random.default_rng(1)
    x = rng.standard_normal(60).astype(np.float32)
    y = np.zeros(60, np.float32)
    lib.nest(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data))
    np.testing.assert_allclose(y, x.astype(np.float64) ** 3 + 1, rtol=1e-5, atol=1e-5)
    rows = rng.standard_normal((6, 7)).astype(np.float32)
    out = np.zeros((6, 7), np.float32)
    before = rows.astype(np.float64)  # the call updates the rows in place
    lib.rownorm(ctypes.c_void_p(rows.ctypes.data), ctypes.c_void_p(out.ctypes.data))
    e = np.exp(before - before.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, (e / e.sum(axis=1, keepdims=True)), rtol=1e-5, atol=1e-6)
    m = rng.standard_normal((4, 8)).astype(np.float32)
    col, best = np.zeros(8, np.float32), np.zeros(1, np.float32)
    lib.colmax(*(ctypes.c_void_p(a.ctypes.data) for a in (m, col, best)))
    np.testing.assert_array_equal(col, m.max(axis=0))
    assert best[0] == m.max()


def test_an_inner_loop_that_accumulates_is_not_collapsed_into_threads() -> None:
    # the outer loop is parallel (row i writes y[i] alone); its inner loop adds into y[i] on every iteration:
    # threads over j would race on y[i] (the CPU runtime runs them in turn and would not show it)
    text = ('extern "C" void rows(const float* x, float* y, int n, int m) {\n'
            "  for (int i = 0; i < n; ++i)\n    for (int j = 0; j < m; ++j) y[i] += x[i * m + j];\n}\n")
    cuda, ctx = translate_to_cuda(text, "rows.c")
    assert cuda is not None, ctx.unresolved
    kernel = cuda[cuda.index("__global__"):cuda.index("extern")]
    assert "threadIdx.y" not in kernel and "for (int j = 0; j < m; ++j)" in kernel


def test_an_entry_named_like_a_cuda_c_builtin_keeps_its_symbol(tmp_path: Path) -> None:
    # CUDA declares max/min with C linkage; the C program's own `max` keeps its symbol through an asm label
    text = ('extern "C" void max(const float* x, float* out, int n) {\n'
            "  float best = -3.0e38f;\n  for (int i = 0; i < n; ++i) if (x[i] > best) best = x[i];\n"
            "  out[0] = best;\n}\n")
    cuda, ctx = translate_to_cuda(text, "max.c")
    assert cuda is not None, ctx.unresolved
    assert compile_check(cuda, Dialect.CUDA).ok
    from xpiler_core.runtime.build import build_library

    built = build_library(cuda, Dialect.CUDA, tmp_path, display_name="max.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    x = np.random.default_rng(3).standard_normal(77).astype(np.float32)
    out = np.zeros(1, np.float32)
    lib.max(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int(77))
    assert out[0] == x.max()


def test_host_only_standard_math_becomes_device_code(tmp_path: Path) -> None:
    # libstdc++'s integral sqrt overload and std::max/std::min are constexpr host templates nvcc rejects in a
    # kernel: the translation must compile and keep the standard's semantics (std::max(NaN, x) is NaN,
    # std::max(x, NaN) is x, unlike fmaxf)
    from xpiler_core.runtime.build import build_library

    text = ('#include <cmath>\n#include <algorithm>\n'
            'extern "C" void clampscale(const float* x, const float* y, float* hi, float* lo, int n, int d) {\n'
            "#pragma omp parallel for\n  for (int i = 0; i < n; ++i) {\n"
            "    const float s = 1.0f / sqrt(d);\n"
            "    hi[i] = std::max(x[i], y[i]) * s;\n    lo[i] = std::min(x[i], y[i]) * s;\n  }\n}\n")
    cuda, ctx = translate_to_cuda(text, "clampscale.cpp")
    assert cuda is not None, ctx.unresolved
    verdict = compile_check(cuda, Dialect.CUDA)
    assert verdict.ok, verdict.stderr
    built = build_library(cuda, Dialect.CUDA, tmp_path, display_name="clampscale.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    n, d = 64, 7
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x[3], y[5] = np.nan, np.nan
    hi, lo = np.zeros(n, np.float32), np.zeros(n, np.float32)
    lib.clampscale(*(ctypes.c_void_p(a.ctypes.data) for a in (x, y, hi, lo)), ctypes.c_int(n), ctypes.c_int(d))
    s = np.float32(1.0 / np.sqrt(np.float64(d)))
    std_max = np.array([b if a < b else a for a, b in zip(x, y, strict=True)], np.float32)
    std_min = np.array([b if b < a else a for a, b in zip(x, y, strict=True)], np.float32)
    np.testing.assert_array_equal(hi, std_max * s)
    np.testing.assert_array_equal(lo, std_min * s)


ROW_SQUARES = """
__global__ void row_squares(const float* x, float* y, int cols) {
  extern __shared__ float ss[];
  const float* xr = x + (size_t)blockIdx.x * cols;
  ss[threadIdx.x] = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) ss[threadIdx.x] += xr[c] * xr[c];
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < blockDim.x; ++k) ss[0] += ss[k];
    y[blockIdx.x] = ss[0];
  }
}
extern "C" void row_squares_host(const float* x, float* y, int rows, int cols, int threads) {
  row_squares<<<rows, threads, threads * sizeof(float)>>>(x, y, cols);
}
"""


@pytest.mark.parametrize("threads", [32, 64])
def test_cpu_tiled_loops_and_block_level_updates_come_back_as_threads(tmp_path: Path, threads: int) -> None:
    """A CPU output whose block-strided loop was tiled (``for (xp_tx = 0; xp_tx < lim; ...)`` alone at block
    level) and whose thread-0 tail became block-level code updating shared memory (``ss[0] += ss[k]``): back in
    CUDA each tile iteration is one thread's and the update runs once per block, so the row sums of squares are
    numpy's (run on the SIMT runtime at warp 32, ragged widths)."""
    from xpiler_core.runtime.build import build_library

    cpu, _, _ = translate_to_cpu(ROW_SQUARES, "row_squares.cu")
    assert cpu is not None and "xp_ti_cb" in cpu  # the plan tiles the strided loop
    cuda, ctx = translate_to_cuda(cpu, "row_squares.cpp")
    assert cuda is not None, ctx.unresolved
    built = build_library(cuda, Dialect.CUDA, tmp_path, display_name="row_squares.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    fp = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
    lib.row_squares_host.argtypes = [fp, fp, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    rng = np.random.default_rng(threads)
    for rows, cols in ((3, 1), (5, 100), (7, 333)):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        y = np.zeros(rows, np.float32)
        lib.row_squares_host(x, y, rows, cols, threads)
        np.testing.assert_allclose(y, (x.astype(np.float64) ** 2).sum(axis=1), rtol=1e-4, atol=1e-5)
