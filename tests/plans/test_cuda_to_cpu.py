"""CUDA → CPU on the suite: the translation runs on the spec's cases and matches the numpy reference."""

from __future__ import annotations

import glob
import tempfile
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import _launch_params_used, spec_with_launch_args, translate_to_cpu
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"
ALL_SPECS = sorted(glob.glob(str(ROOT / "*" / "*" / "spec.toml")))
# one per style: guard + launch bounds, warp shuffles + early exit, host entry + atomics, wmma, divergent
# barrier loop, launch shape not derivable from parameters
SUBSET = ["activation/relu", "normalization/softmax", "reduction/sum", "matrix/gemm_wmma", "llm/gqa_decode",
          "normalization/layernorm", "reduction/l2norm"]


def check(spec_path: str) -> None:
    spec = load_spec(spec_path)
    candidate, records, _ctx = translate_to_cpu(spec.source.read_text(), str(spec.source), spec)
    assert candidate is not None, [r["refused"] for r in records]
    launch = _launch_params_used(records)
    with tempfile.TemporaryDirectory() as tmp:
        test_spec = spec_with_launch_args(spec, launch, Path(tmp)) if launch else spec
        report = run_spec(test_spec, candidate_text=candidate, candidate_dialect=Dialect.C,
                          candidate_entry=spec.entry, candidate_kind="host")
    assert report.passed, report.summary()


@pytest.mark.parametrize("name", SUBSET)
def test_cuda_to_cpu_subset(name: str) -> None:
    check(str(ROOT / name / "spec.toml"))


@pytest.mark.slow
@pytest.mark.parametrize("spec_path", ALL_SPECS, ids=lambda p: Path(p).parent.name)
def test_cuda_to_cpu_whole_suite(spec_path: str) -> None:
    check(spec_path)


def test_recovery_refuses_unsupported_cooperative_groups_call() -> None:
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.passes import get_pass

    text = ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
            "__global__ void __launch_bounds__(64) k(float* y, int n) {\n"
            "  cg::thread_block b = cg::this_thread_block();\n"
            "  int i = blockIdx.x * 64 + threadIdx.x;\n  b.barrier_arrive();\n  if (i < n) y[i] = 1.0f;\n}\n")
    mod = get_pass("loop_recovery")
    with pytest.raises(PassRefused, match="barrier_arrive"):  # CUDA 12's split block barrier: not lowered
        mod.apply(lower_text(text, "k.cu"), mod.INFO.defaults(), PassContext(Dialect.CUDA, Dialect.C))


def test_recovery_says_when_grid_cannot_be_inferred() -> None:
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.passes import get_pass

    text = "__global__ void k(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }"
    mod = get_pass("loop_recovery")
    with pytest.raises(PassRefused, match="block size|grid"):  # BANG binds the wrapper: it must have one
        mod.apply(lower_text(text, "k.cu"), mod.INFO.defaults(), PassContext(Dialect.CUDA, Dialect.BANG))
    ctx = PassContext(Dialect.CUDA, Dialect.C)  # for C the caller launches it, as in CUDA
    mod.apply(lower_text(text, "k.cu"), mod.INFO.defaults(), ctx)
    assert any("exported as NAME(dim3 grid" in note for note in ctx.notes), ctx.notes


def test_translate_dispatches_to_the_cpu_plan_and_verifies() -> None:
    from xpiler_core.pipeline import TranslateOptions, translate

    spec_dir = ROOT / "normalization" / "layernorm"
    source = spec_dir / "layernorm.cu"
    result = translate(source.read_text(), str(source),
                       TranslateOptions(target=Dialect.C, spec_path=str(spec_dir / "spec.toml")))
    assert result.status == "verified", result.summary
    assert result.compile is not None and result.compile.ok
    assert "xp_grid_x" in result.summary  # the launch shape it could not derive is said, not guessed
    bare = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.C))
    assert bare.status == "compiled-not-executed" and "launch configuration" in bare.summary, bare.summary


KERNELS_ONLY = """
__global__ void saxpy_gs(int n, float a, const float* __restrict__ x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
__global__ void scale(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
__global__ void first_of_block(const float* x, float* out, int n) {
  if (threadIdx.x == 0) out[blockIdx.x] = x[blockIdx.x * blockDim.x];
}
"""


def test_kernels_without_host_code_get_wrappers_where_the_block_size_does_not_matter(cbuild) -> None:  # noqa: ANN001
    """No launch site: a kernel whose result is independent of the block size gets an ``extern "C"`` wrapper with
    its own parameters; one whose result depends on the block (``out[blockIdx.x]``) is exported with explicit
    launch arguments, never given a guessed block size. The wrappers compute what numpy does."""
    import ctypes

    import numpy as np

    from xpiler_core.pipeline import TranslateOptions, translate

    result = translate(KERNELS_ONLY, "kernels.cu", TranslateOptions(target=Dialect.C))
    assert result.compile is not None and result.compile.ok, result.summary
    assert "first_of_block" in " ".join(result.manifest["notes"])
    lib = cbuild(result.output_text)
    f32p = ctypes.POINTER(ctypes.c_float)
    rng = np.random.default_rng(3)
    for n in (1, 255, 257, 5000):
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        want = np.float32(1.5) * x + y
        lib.saxpy_gs(ctypes.c_int(n), ctypes.c_float(1.5), x.ctypes.data_as(f32p), y.ctypes.data_as(f32p))
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)  # FMA contraction may round once
        out = np.zeros(n, np.float32)
        lib.scale(x.ctypes.data_as(f32p), out.ctypes.data_as(f32p), ctypes.c_float(-2.0), ctypes.c_int(n))
        np.testing.assert_allclose(out, -2.0 * x, rtol=1e-6)
    assert not hasattr(lib, "first_of_block_blocks")


def test_block_size_dependent_kernel_alone_is_not_given_a_guessed_block(tmp_path: Path) -> None:
    """No launch and a result that depends on the block: exported with the launch as leading arguments (never
    a guessed block); called like a launch it computes what numpy says."""
    import ctypes
    import subprocess

    import numpy as np

    from xpiler_core.pipeline import TranslateOptions, translate

    text = ("__global__ void firsts(const float* x, float* out, int n) {\n"
            "  if (threadIdx.x == 0 && blockIdx.x < n) out[blockIdx.x] = x[blockIdx.x * blockDim.x];\n}\n")
    result = translate(text, "k.cu", TranslateOptions(target=Dialect.C))
    # the automatic tests exercise it through a wrapper at their own launch; the output has no guessed block
    assert result.status == "verified" and "through a wrapper" in result.summary, result.summary
    assert 'extern "C" void firsts' not in result.output_text and "256" not in result.output_text.split("firsts")[-1]
    from tests.conftest import build_shared

    lib_path = build_shared(result.output_text, tmp_path)
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib_path)], capture_output=True, text=True).stdout
    [mangled] = [line.split()[-1] for line in symbols.splitlines() if "firsts" in line]

    class Dim3(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

    fn = getattr(ctypes.CDLL(str(lib_path)), mangled)
    fn.argtypes = [Dim3, Dim3, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    x = np.arange(64 * 10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    fn(Dim3(10, 1, 1), Dim3(64, 1, 1), 0, x.ctypes.data, out.ctypes.data, 10)
    np.testing.assert_array_equal(out, x[::64])


def test_host_entry_with_a_scalar_result_verifies_without_a_spec() -> None:
    """The suite's sum has a host entry that copies back one float: tests are built from the entry itself
    (the retry after a failing candidate reuses the same built spec)."""
    from xpiler_core.pipeline import TranslateOptions, translate

    source = ROOT / "reduction" / "sum" / "sum.cu"
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.C))
    assert result.status == "verified", result.summary
    assert result.tests is not None and len(result.tests.cases) >= 3


STRUCT_PARAMS = """
struct Params { int n; float scale; };
__constant__ float c_bias[4];
__device__ __forceinline__ float act(float x) { return x > 0.f ? x : 0.01f * x; }
__global__ void leaky(Params p, const float4* in, float4* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  float4 v = in[i];
  v.x = act(v.x * p.scale + c_bias[0]); v.y = act(v.y * p.scale + c_bias[1]);
  v.z = act(v.z * p.scale + c_bias[2]); v.w = act(v.w * p.scale + c_bias[3]);
  out[i] = v;
}
"""


def test_struct_parameter_early_exit_and_device_function_without_a_launch(cbuild) -> None:  # noqa: ANN001
    """The guard is a struct member behind an early return and the work goes through a device function: the
    block size still does not matter, so the kernel gets a wrapper; it matches numpy, constant memory included."""
    import ctypes

    import numpy as np

    from xpiler_core.pipeline import TranslateOptions, translate

    result = translate(STRUCT_PARAMS, "leaky.cu", TranslateOptions(target=Dialect.C))
    assert result.compile is not None and result.compile.ok, result.summary
    lib = cbuild(result.output_text)

    class Params(ctypes.Structure):
        _fields_ = [("n", ctypes.c_int), ("scale", ctypes.c_float)]

    bias = np.array([0.5, -1.0, 0.0, 2.0], np.float32)
    ctypes.memmove(ctypes.addressof((ctypes.c_float * 4).in_dll(lib, "c_bias")), bias.ctypes.data, 16)
    rng = np.random.default_rng(5)
    for n in (1, 300, 1025):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        out = np.full((n, 4), 7.0, np.float32)
        lib.leaky(Params(n, 1.5), x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p))
        pre = x * np.float32(1.5) + bias
        np.testing.assert_allclose(out, np.where(pre > 0, pre, np.float32(0.01) * pre), rtol=1e-5, atol=1e-6)


def test_a_plain_cpp_host_function_is_the_launch_site(cbuild) -> None:  # noqa: ANN001
    """A (non-extern "C") host function that launches a template kernel fixes the launch: no wrapper, no guess."""
    import ctypes

    import numpy as np

    from xpiler_core.pipeline import TranslateOptions, translate

    text = """
template <typename T, int BLOCK>
__global__ void axpby(const T* __restrict__ a, const T* __restrict__ b, T* c, T alpha, T beta, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) c[i] = alpha * a[i] + beta * b[i];
}
void run(const float* a, const float* b, float* c, int n) {
  float *da, *db, *dc;
  cudaMalloc(&da, n * sizeof(float)); cudaMalloc(&db, n * sizeof(float)); cudaMalloc(&dc, n * sizeof(float));
  cudaMemcpy(da, a, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, n * sizeof(float), cudaMemcpyHostToDevice);
  axpby<float, 128><<<(n + 127) / 128, 128>>>(da, db, dc, 2.0f, 3.0f, n);
  cudaMemcpy(c, dc, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(da); cudaFree(db); cudaFree(dc);
}
"""
    result = translate(text, "axpby.cu", TranslateOptions(target=Dialect.C))
    assert result.compile is not None and result.compile.ok, result.summary
    lib = cbuild(result.output_text, cplusplus=True)
    run = lib._Z3runPKfS0_Pfi  # the C++ name of run(const float*, const float*, float*, int)
    rng = np.random.default_rng(1)
    for n in (5, 129, 1000):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        c = np.zeros(n, np.float32)
        run(a.ctypes.data_as(ctypes.c_void_p), b.ctypes.data_as(ctypes.c_void_p), c.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(n))
        np.testing.assert_allclose(c, 2 * a + 3 * b, rtol=1e-5, atol=1e-6)


def test_a_whole_program_with_main_translates_verifies_and_passes_its_own_check(tmp_path: Path) -> None:
    """A CUDA-samples style program: the kernel is tested through a wrapper with the automatic tests' launch
    (against the source on the runtime), and the translated program, built with g++ -fopenmp, runs its own
    host-side check."""
    import subprocess

    from xpiler_core.pipeline import TranslateOptions, translate

    source = Path(__file__).resolve().parents[2] / "examples" / "vector_add_program.cu"
    result = translate(source.read_text(), str(source), TranslateOptions(target=Dialect.C))
    assert result.status == "verified", result.summary
    assert "int main" in result.output_text and 'extern "C" void vecAdd' not in result.output_text
    (tmp_path / "prog.cpp").write_text(result.output_text)
    built = subprocess.run(["g++", "-O1", "-fopenmp", str(tmp_path / "prog.cpp"), "-o", str(tmp_path / "prog")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "Test PASSED" in ran.stdout, ran.stderr


HIP_WAVE_PARTIALS = """#include <hip/hip_runtime.h>
__global__ void wave_partials(const float* x, float* partial, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int off = warpSize / 2; off > 0; off /= 2) v += __shfl_down(v, off);
  int waves_per_block = blockDim.x / warpSize;
  if ((threadIdx.x % warpSize) == 0) partial[blockIdx.x * waves_per_block + threadIdx.x / warpSize] = v;
}
extern "C" void wave_partials_host(const float* x, float* partial, int n) {
  float *dx, *dp;
  int blocks = (n + 255) / 256;
  hipMalloc(&dx, n * sizeof(float)); hipMalloc(&dp, blocks * 4 * sizeof(float));
  hipMemcpy(dx, x, n * sizeof(float), hipMemcpyHostToDevice);
  hipLaunchKernelGGL(wave_partials, dim3(blocks), dim3(256), 0, 0, dx, dp, n);
  hipMemcpy(partial, dp, blocks * 4 * sizeof(float), hipMemcpyDeviceToHost);
  hipFree(dx); hipFree(dp);
}
"""


def test_hip_to_cpu_keeps_64_lane_wavefront_semantics(cbuild) -> None:  # noqa: ANN001
    """HIP code written for 64-lane wavefronts (per-wave partial sums, 4 waves per 256-thread block) keeps
    its meaning on the CPU: the output holds 64-element partial sums, as numpy computes them."""
    import ctypes

    import numpy as np

    from xpiler_core.pipeline import TranslateOptions, translate

    result = translate(HIP_WAVE_PARTIALS, "wave.hip", TranslateOptions(target=Dialect.C))
    assert result.status == "verified" and result.source_dialect is Dialect.HIP, result.summary
    lib = cbuild(result.output_text)
    for n in (256, 1000, 4099):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        blocks = (n + 255) // 256
        partial = np.zeros(blocks * 4, np.float32)
        lib.wave_partials_host(x.ctypes.data_as(ctypes.c_void_p), partial.ctypes.data_as(ctypes.c_void_p),
                               ctypes.c_int(n))
        padded = np.zeros(blocks * 256, np.float64)
        padded[:n] = x
        np.testing.assert_allclose(partial, padded.reshape(-1, 64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_a_2d_kernel_without_a_launch_gets_a_2d_wrapper_that_matches_numpy(cbuild) -> None:  # noqa: ANN001
    import ctypes

    import numpy as np

    from xpiler_core.pipeline import TranslateOptions, translate

    text = """
__global__ void gemm(const double *A, const double *B, double *C, size_t M, size_t K, size_t N) {
    size_t row = blockIdx.y * blockDim.y + threadIdx.y;
    size_t col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        double sum = 0;
        for (size_t k = 0; k < K; k++) sum += A[row * K + k] * B[k * N + col];
        C[row * N + col] = sum;
    }
}
"""
    result = translate(text, "gemm.cu", TranslateOptions(target=Dialect.C))
    assert result.status == "verified", result.summary
    lib = cbuild(result.output_text)
    rng = np.random.default_rng(11)
    for m, k, n in ((1, 1, 1), (17, 5, 33), (40, 64, 23)):
        a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        c = np.full((m, n), np.nan)
        lib.gemm(a.ctypes.data_as(ctypes.c_void_p), b.ctypes.data_as(ctypes.c_void_p),
                 c.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(m), ctypes.c_size_t(k), ctypes.c_size_t(n))
        np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


def test_each_exported_kernel_of_a_kernels_only_file_is_tested_through_a_forwarder(tmp_path: Path) -> None:
    """A CPU output exports each kernel of a file of kernels only with its launch as leading arguments; the tests
    call each through a forwarder with its own launch, and a wrong constant in one kernel fails that kernel's."""
    from xpiler_core.frontend.unit import ParsedUnit
    from xpiler_core.plans.cuda_to_cpu import _through_exports
    from xpiler_core.translation import TranslateOptions, build_test_set
    from xpiler_core.verify.targets import CpuRunner

    source = (
        'extern "C" __global__ void __launch_bounds__(128) scale_fused(float* __restrict__ out, float* __restrict__ x) {\n'
        "  out[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = x[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] * 3.0f;\n"
        "}\n"
        'extern "C" __global__ void __launch_bounds__(128) shift_fused(float* __restrict__ out) {\n'
        "  out[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = out[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] - 7.0f;\n"
        "}\n")
    unit = ParsedUnit(source, "stages.cu", Dialect.CUDA)
    candidate, _, _ = translate_to_cpu(source, "stages.cu")
    assert candidate is not None and "xp_grid" in candidate
    tests = build_test_set(source, "stages.cu", Dialect.CUDA, TranslateOptions(target=Dialect.C), tmp_path)
    forwarded = _through_exports(candidate, tests, unit)
    # no guard fixes the grid (it is guessed): each kernel is exported with its launch as leading arguments
    assert [s.entry for s in forwarded.specs] == ["xp_test_scale_fused", "xp_test_shift_fused"]
    runner = CpuRunner(warp_size=32)
    assert all(runner.run(s, candidate, 0, None).passed for s in forwarded.specs)
    assert "7.0f" in candidate
    wrong = candidate.replace("7.0f", "6.0f")
    assert [runner.run(s, wrong, 0, None).passed for s in forwarded.specs] == [True, False]
