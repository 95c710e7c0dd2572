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


def test_binding_refuses_a_carried_scalar_that_is_not_a_sum() -> None:
    text = ('extern "C" void total(const float* x, float* out, int n) {\n  float s = 1.0f;\n'
            "#pragma omp parallel for\n  for (int i = 0; i < n; ++i) s *= x[i];\n  out[0] = s;\n}\n")
    cuda, ctx = translate_to_cuda(text, "total.c")
    assert cuda is None
    assert "carried" in ctx.unresolved[-1].reason


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
    text = f"void f(float* y, const float* x, const int* idx, int n) {{\n  {body}\n}}\n"
    cuda, ctx = translate_to_cuda(text, "f.c")
    assert cuda is None
    assert "provably parallel" in ctx.unresolved[-1].reason or "carried" in ctx.unresolved[-1].reason


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
