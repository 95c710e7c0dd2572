"""Tests built from the code: what is derived, and an honest refusal when it cannot be."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.verify.autospec import CASE_SIZES, build_spec
from xpiler_core.verify.expr import evaluate_int
from xpiler_core.verify.spec import load_spec

REPO = Path(__file__).resolve().parents[2]


def test_host_entry_buffer_lengths_come_from_memcpy_byte_counts(tmp_path: Path) -> None:
    text = (REPO / "examples" / "vector_add.cu").read_text()
    built = build_spec(text, "vector_add.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.kind == "host" and spec.entry == "vector_add_host"
    roles = {a.name: a.role for a in spec.args}
    assert roles == {"a": "in", "b": "in", "c": "out", "n": "scalar"}
    assert [c["n"] for c in spec.cases] == list(CASE_SIZES)
    assert any(n % 256 for n in CASE_SIZES)  # sizes that are not multiples of the block


def test_one_size_kernel_gets_a_1d_launch_from_launch_bounds(tmp_path: Path, suite: Path) -> None:
    text = (suite / "activation" / "relu" / "relu.cu").read_text()
    built = build_spec(text, "relu.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.block == [1024] and spec.kind == "kernel"
    assert {a.name: a.role for a in spec.args} == {"compute": "inout", "data": "in", "n": "scalar"}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("__global__ void k(float* a, int m, int n) { a[threadIdx.x] = m + n; }", "integer parameters (m, n)"),
        ("__global__ void k(float* a, int n) { extern __shared__ float s[]; a[threadIdx.x] = s[0]; }", "dynamic shared"),
        ("template <int B> __global__ void k(float* a, int n) { a[threadIdx.x] = B; }", "no extern"),
    ],
)
def test_refuses_with_a_reason(tmp_path: Path, source: str, reason: str) -> None:
    built = build_spec(source, "k.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is None and reason in built.reason


@pytest.mark.slow
def test_auto_tests_catch_a_wrong_translation(suite: Path) -> None:
    """Differential tests built from the code fail when the translation drops the warp_size pass."""
    source = suite / "warp64" / "ballot_count" / "ballot_count.cu"
    text = source.read_text()
    wrong = translate(text, str(source), TranslateOptions(Dialect.HIP, passes=["api_map"]))
    assert wrong.status == "unresolved" and wrong.tests is not None and not wrong.tests.passed
    right = translate(text, str(source), TranslateOptions(Dialect.HIP))
    assert right.status == "verified", right.summary
    assert right.manifest["spec"]["auto"] is True


CPP_HOST = """
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
}
"""


def test_a_cpp_host_function_is_tested_through_an_extern_c_forwarder(tmp_path: Path) -> None:
    """No extern "C" entry, a template kernel: the host function with C++ linkage is the test entry, reached
    through a generated forwarder; the tests pass on the source and catch a wrong candidate."""
    from xpiler_core.verify.harness import run_spec

    (tmp_path / "no").mkdir()
    assert build_spec(CPP_HOST, "axpby.cu", Dialect.CUDA, tmp_path / "no").spec_path is None  # opt-in only
    built = build_spec(CPP_HOST, "axpby.cu", Dialect.CUDA, tmp_path, allow_shim=True)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.entry == "xp_entry_run" and spec.entry_shim and "run(a, b, c, n)" in spec.entry_shim
    assert {a.name: a.role for a in spec.args} == {"a": "in", "b": "in", "c": "out", "n": "scalar"}
    assert run_spec(spec, candidate_text=CPP_HOST, candidate_dialect=Dialect.CUDA).passed
    wrong = CPP_HOST.replace("alpha * a[i] + beta * b[i]", "alpha * a[i] - beta * b[i]")
    assert not run_spec(spec, candidate_text=wrong, candidate_dialect=Dialect.CUDA).passed


@pytest.mark.parametrize("target", [Dialect.HIP, Dialect.C])
def test_cpp_host_function_files_verify_on_hip_and_cpu(target: Dialect) -> None:
    result = translate(CPP_HOST, "axpby.cu", TranslateOptions(target=target))
    assert result.status == "verified", result.summary
    assert result.tests is not None and len(result.tests.cases) == len(CASE_SIZES)


GEMM_2D = """
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


def test_a_2d_kernel_gets_its_grid_from_guards_and_buffer_lengths_from_indices(tmp_path: Path) -> None:
    from xpiler_core.verify.expr import evaluate

    built = build_spec(GEMM_2D, "gemm.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.kind == "kernel" and spec.block == [16, 16]
    for case in spec.cases:
        m, k, n = case["M"], case["K"], case["N"]
        assert [evaluate(str(g), case) for g in spec.grid] == [-(-n // 16), -(-m // 16)]
        shapes = {a.name: evaluate(str(a.shape[0]), case) for a in spec.args if a.role != "scalar"}
        assert shapes == {"A": m * k, "B": k * n, "C": m * n}
    tiled = GEMM_2D.replace("double sum = 0;", "__shared__ double t[16]; double sum = t[0];")
    assert build_spec(tiled, "t.cu", Dialect.CUDA, tmp_path / "t").spec_path is None  # block-dependent


def test_a_2d_kernel_without_host_code_verifies_to_cpu_and_hip() -> None:
    for target in (Dialect.C, Dialect.HIP):
        result = translate(GEMM_2D, "gemm.cu", TranslateOptions(target=target))
        assert result.status == "verified", result.summary


CONSTANT_WEIGHTS = r"""
#include <cuda_runtime.h>
#define KW 7
__constant__ float d_w[KW];
__global__ void conv1d(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.f;
  for (int k = 0; k < KW; ++k) {
    int j = i + k - KW / 2;
    if (j >= 0 && j < n) s += d_w[k] * in[j];
  }
  out[i] = s;
}
extern "C" void conv1d_host(const float* x, const float* w, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float)); cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpyToSymbol(d_w, w, KW * sizeof(float));
  conv1d<<<(n + 255) / 256, 256>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""


def test_a_copy_into_a_constant_symbol_makes_its_source_an_input_sized_by_a_file_constant(tmp_path: Path) -> None:
    built = build_spec(CONSTANT_WEIGHTS, "conv1d.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.kind == "host" and spec.entry == "conv1d_host"
    args = {a.name: a for a in spec.args}
    assert args["w"].role == "in" and [evaluate_int(str(d), {}) for d in args["w"].shape] == [7]
    assert args["x"].role == "in" and args["y"].role == "out"


def test_the_host_tests_exercise_the_constant_weights() -> None:
    """A translation that ignores the weights copied into the symbol fails the derived tests."""
    wrong_hip = ("#include <hip/hip_runtime.h>\n" + CONSTANT_WEIGHTS.replace("s += d_w[k] * in[j]", "s += in[j]")
                 .replace("cudaMemcpyToSymbol(d_w,", "hipMemcpyToSymbol(HIP_SYMBOL(d_w),")
                 .replace("cudaMalloc", "hipMalloc").replace("cudaMemcpyHostToDevice", "hipMemcpyHostToDevice")
                 .replace("cudaMemcpyDeviceToHost", "hipMemcpyDeviceToHost").replace("cudaMemcpy", "hipMemcpy")
                 .replace("cudaFree", "hipFree").replace("#include <cuda_runtime.h>\n", ""))
    right = translate(CONSTANT_WEIGHTS, "conv1d.cu", TranslateOptions(Dialect.HIP))
    assert right.status == "verified", right.summary
    assert right.manifest["spec"]["auto"] is True and "host entry conv1d_host" in right.manifest["spec"]["reason"]
    from xpiler_core.verify.harness import run_spec

    with __import__("tempfile").TemporaryDirectory() as tmp:
        built = build_spec(CONSTANT_WEIGHTS, "conv1d.cu", Dialect.CUDA, Path(tmp))
        assert built.spec_path is not None
        report = run_spec(load_spec(str(built.spec_path)), candidate_text=wrong_hip, candidate_dialect=Dialect.HIP)
    assert not report.passed


# generated code (TVM style): the kernel hard-codes its extent and guards its threads with it; the host entry's
# size is right only at that extent (any other size makes the source itself write past its buffers)
FIXED_EXTENT_HIP = """#include <hip/hip_runtime.h>
__global__ void __launch_bounds__(256) add(float *__restrict__ A, float *__restrict__ B, float *__restrict__ T) {
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < 1300) {
    T[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] = A[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))]
        + B[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))];
  }
}
extern "C" void add_kernel(float *A, float *B, float *C, int size) {
  float *d_A, *d_B, *d_C;
  hipMalloc(&d_A, size * sizeof(float));
  hipMalloc(&d_B, size * sizeof(float));
  hipMalloc(&d_C, size * sizeof(float));
  hipMemcpy(d_A, A, size * sizeof(float), hipMemcpyHostToDevice);
  hipMemcpy(d_B, B, size * sizeof(float), hipMemcpyHostToDevice);
  dim3 blockSize(256);
  dim3 numBlocks((size + 255) / 256);
  add<<<numBlocks, blockSize>>>(d_A, d_B, d_C);
  hipMemcpy(C, d_C, size * sizeof(float), hipMemcpyDeviceToHost);
  hipFree(d_A);
  hipFree(d_B);
  hipFree(d_C);
}
"""


def test_a_kernel_with_its_extent_built_in_is_tested_at_that_extent(tmp_path: Path) -> None:
    built = build_spec(FIXED_EXTENT_HIP, "add.hip", Dialect.HIP, tmp_path)
    assert built.spec_path is not None, built.reason
    assert [c["size"] for c in load_spec(str(built.spec_path)).cases] == [1300]


def test_a_fixed_extent_source_verifies_rather_than_blaming_itself(tmp_path: Path) -> None:
    result = translate(FIXED_EXTENT_HIP, str(tmp_path / "add.hip"), TranslateOptions(Dialect.CUDA))
    assert result.status == "verified", result.summary


FIXED_SHAPE_C = """
extern "C" void colmax(float *input, float *output) {
  int rows = 12;
  int cols = 40;
  for (int j = 0; j < cols; j++) {
    output[j] = -1e30f;
  }
  for (int j = 0; j < cols; j++) {
    for (int i = 0; i < rows; i++) {
      int at = i * cols + j;
      if (input[at] > output[j]) {
        output[j] = input[at];
      }
    }
  }
}
"""


def test_c_buffer_extents_follow_constant_locals_and_index_locals(tmp_path: Path) -> None:
    built = build_spec(FIXED_SHAPE_C, "colmax.c", Dialect.C, tmp_path, entry="colmax")
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    shapes = {a.name: evaluate_int(str(a.shape[0]), {}) for a in spec.args}
    assert shapes == {"input": 12 * 40, "output": 40}


def test_a_reassigned_local_is_followed_in_order_not_taken_at_its_first_value(tmp_path: Path) -> None:
    """``cols = cols * 2`` after ``int cols = 40``: the loops run to 80, so the buffers are 12 x 80 and 80 long
    (taking the declared 40 would test half of them)."""
    text = FIXED_SHAPE_C.replace("int cols = 40;", "int cols = 40;\n  cols = cols * 2;")
    built = build_spec(text, "colmax.c", Dialect.C, tmp_path, entry="colmax")
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert {a.name: evaluate_int(str(a.shape[0]), {}) for a in spec.args} == {"input": 12 * 80, "output": 80}


def test_the_extent_is_read_through_an_index_local(tmp_path: Path) -> None:
    text = FIXED_EXTENT_HIP.replace(
        "  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < 1300) {",
        "  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n  if (idx < 1300) {")
    assert "idx < 1300" in text
    built = build_spec(text, "add.hip", Dialect.HIP, tmp_path)
    assert built.spec_path is not None and not built.sizes_guessed, built.reason
    assert [c["size"] for c in load_spec(str(built.spec_path)).cases] == [1300]


# fixed-shape kernels (no size parameter, no guard) behind an entry with two sizes, with a row stride the size
# solve does not follow (computed in steps): any size tried is a guess
UNGUARDED_2D = """#include <hip/hip_runtime.h>
__global__ void scale2d(const float *__restrict__ A, float *__restrict__ B) {
  int stride = 64;
  stride = stride * 64;
  int at = (blockIdx.x * 64 + threadIdx.x) * stride / 4096;
  B[at] = 2.0f * A[at];
}
extern "C" void scale2d_kernel(float *A, float *B, int rows, int cols) {
  float *d_A, *d_B;
  hipMalloc(&d_A, rows * cols * sizeof(float));
  hipMalloc(&d_B, rows * cols * sizeof(float));
  hipMemcpy(d_A, A, rows * cols * sizeof(float), hipMemcpyHostToDevice);
  scale2d<<<rows, 64>>>(d_A, d_B);
  hipMemcpy(B, d_B, rows * cols * sizeof(float), hipMemcpyDeviceToHost);
  hipFree(d_A);
  hipFree(d_B);
}
"""


def test_guessed_sizes_that_overrun_are_not_blamed_on_the_source(tmp_path: Path) -> None:
    built = build_spec(UNGUARDED_2D, "scale2d.hip", Dialect.HIP, tmp_path / "spec")
    assert built.spec_path is not None and built.sizes_guessed
    result = translate(UNGUARDED_2D, str(tmp_path / "scale2d.hip"), TranslateOptions(Dialect.CUDA))
    assert result.status == "compiled-not-executed", result.summary
    assert "no test at sizes the source supports" in result.reason and "source itself is defective" not in result.reason


POOL_C = """
extern "C" void pool(float *x, float *out) {
  int H = 11;
  int k = 3;
  int s = 2;
  int oh = (H - k) / s + 1;
  for (int h = 0; h < oh; h++) {
    for (int w = 0; w < oh; w++) {
      int index = h * oh + w;
      float best = x[h * s * H + w * s];
      for (int kh = 0; kh < k; kh++) {
        int index2 = (h * s + kh) * H + w * s;
        for (int kw = 0; kw < k; kw++) {
          if (x[index2 + kw] > best) best = x[index2 + kw];
        }
      }
      out[index] = best;
    }
  }
  for (int h = 0; h < oh; h++) {
    int index = h;
    out[index] = out[index] * 1.0f;
  }
}
"""


def test_c_extents_fold_derived_constants_and_scope_redeclared_index_locals(tmp_path: Path) -> None:
    built = build_spec(POOL_C, "pool.c", Dialect.C, tmp_path, entry="pool")
    assert built.spec_path is not None, built.reason
    shapes = {a.name: evaluate_int(str(a.shape[0]), {}) for a in load_spec(str(built.spec_path)).args}
    h, k, s = 11, 3, 2
    oh = (h - k) // s + 1
    last_read = ((oh - 1) * s + (k - 1)) * h + (oh - 1) * s + (k - 1)
    assert shapes == {"x": last_read + 1, "out": oh * oh}


CONV1D = """
__global__ void conv1d(const float *in, const float *w, float *out, int n_out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n_out) {
    float s = 0.0f;
    for (int j = 0; j < 3; j++) s += in[i + j] * w[j];
    out[i] = s;
  }
}
extern "C" void conv1d_host(float *input, float *kernel, float *output, int input_size, int output_size) {
  float *d_in, *d_w, *d_out;
  int kernel_size = input_size - output_size + 1;
  cudaMalloc(&d_in, input_size * sizeof(float));
  cudaMalloc(&d_w, kernel_size * sizeof(float));
  cudaMalloc(&d_out, output_size * sizeof(float));
  cudaMemcpy(d_in, input, input_size * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_w, kernel, kernel_size * sizeof(float), cudaMemcpyHostToDevice);
  conv1d<<<(output_size + 127) / 128, 128>>>(d_in, d_w, d_out, output_size);
  cudaMemcpy(output, d_out, output_size * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d_in); cudaFree(d_w); cudaFree(d_out);
}
"""


def test_sizes_are_ordered_so_that_every_buffer_has_a_length(tmp_path: Path) -> None:
    built = build_spec(CONV1D, "conv1d.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    cases = load_spec(str(built.spec_path)).cases
    assert cases and all(c["input_size"] - c["output_size"] + 1 >= 1 for c in cases), cases


def test_copy_sizes_through_constexpr_expressions_of_constants(tmp_path: Path) -> None:
    text = """
constexpr int C = 8;
constexpr int HW = 49;
constexpr int TOTAL =
    C * HW;
__global__ void twice(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < TOTAL) y[i] = 2.0f * x[i];
}
extern "C" void twice_host(const float *h_x, float *h_y) {
  size_t bytes = TOTAL * sizeof(float);
  float *d_x, *d_y;
  cudaMalloc(&d_x, bytes);
  cudaMalloc(&d_y, bytes);
  cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice);
  twice<<<(TOTAL + 127) / 128, 128>>>(d_x, d_y);
  cudaMemcpy(h_y, d_y, bytes, cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_y);
}
"""
    built = build_spec(text, "twice.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert {a.name: evaluate_int(str(a.shape[0]), {}) for a in spec.args} == {"h_x": 8 * 49, "h_y": 8 * 49}


def test_a_guard_does_not_make_several_guessed_sizes_right(tmp_path: Path) -> None:
    # the kernel guards with its built-in extent, but the entry takes three sizes: any three tried are a guess
    text = FIXED_EXTENT_HIP.replace("int size) {", "int rows, int cols, int size) {")
    built = build_spec(text, "add.hip", Dialect.HIP, tmp_path)
    assert built.spec_path is not None and built.sizes_guessed, built.reason


def test_a_size_multiplying_built_in_constants_is_scaled_to_a_test_size(tmp_path: Path) -> None:
    text = CONV1D.replace("int kernel_size = input_size - output_size + 1;", "int kernel_size = 3;").replace(
        "cudaMalloc(&d_in, input_size * sizeof(float));", "cudaMalloc(&d_in, 4096 * 512 * input_size * sizeof(float));"
    ).replace("cudaMemcpy(d_in, input, input_size * sizeof(float)", "cudaMemcpy(d_in, input, 4096 * 512 * input_size * sizeof(float)")
    built = build_spec(text, "conv1d.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    cases = load_spec(str(built.spec_path)).cases
    assert cases and all(4096 * 512 * c["input_size"] * 4 <= (1 << 20) * 8 or c["input_size"] <= 3 for c in cases)


# An entry that copies its buffers to the device and then launches the kernel on the caller's host pointers: on
# a GPU the kernel faults (or reads garbage); on the runtime, one address space, it would seem to run.
HOST_POINTERS_LAUNCHED = """#include <cuda_runtime.h>
__global__ void twice(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
extern "C" void twice_kernel(float *in, float *out, int n) {
  float *d_in, *d_out;
  cudaMalloc(&d_in, n * sizeof(float));
  cudaMalloc(&d_out, n * sizeof(float));
  cudaMemcpy(d_in, in, n * sizeof(float), cudaMemcpyHostToDevice);
  twice<<<(n + 63) / 64, 64>>>(in, out, n);
  cudaMemcpy(out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d_in); cudaFree(d_out);
}
"""


def test_host_memory_passed_to_a_kernel_is_the_source_s_defect(tmp_path: Path) -> None:
    built = build_spec(HOST_POINTERS_LAUNCHED, "twice.cu", Dialect.CUDA, tmp_path / "bad")
    assert built.spec_path is None
    assert "source itself is defective" in built.reason and "'in'" in built.reason, built.reason
    # the same entry launching its device copies is tested as usual
    fixed = HOST_POINTERS_LAUNCHED.replace("(in, out, n);", "(d_in, d_out, n);")
    assert build_spec(fixed, "twice.cu", Dialect.CUDA, tmp_path / "good").spec_path is not None


def test_an_entry_taking_device_pointers_is_not_flagged(tmp_path: Path) -> None:
    text = """#include <cuda_runtime.h>
__global__ void twice(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
extern "C" void twice_launch(const float *d_in, float *d_out, int n) {
  twice<<<(n + 63) / 64, 64>>>(d_in, d_out, n);
}
"""
    built = build_spec(text, "twice.cu", Dialect.CUDA, tmp_path)
    assert "defective" not in built.reason, built.reason


# a C function of built-in shape whose inner reduction loop reuses the outer loop's name
SHADOWED_C = """
extern "C" void rowsum4(const float *A, float *out) {
  float part[4];
  for (int i = 0; i < 3; i++) {
    for (int k = 0; k < 2; k++) {
      for (int i = 0; i < 4; ++i) part[i] = A[k * 4 + i];
    }
    float s = 0.0f;
    for (int j = 0; j < 5; j++) s += A[i * 5 + j];
    for (int i = 0; i < 4; ++i) s += part[i];
    out[i] = s;
  }
}
"""


def test_c_extents_see_through_an_inner_loop_that_reuses_the_outer_name(tmp_path: Path) -> None:
    built = build_spec(SHADOWED_C, "rowsum4.cpp", Dialect.C, tmp_path, entry="rowsum4")
    assert built.spec_path is not None, built.reason
    shapes = {a.name: evaluate_int(str(a.shape[0]), {}) for a in load_spec(str(built.spec_path)).args}
    assert shapes == {"A": 3 * 5, "out": 3}  # the last row read is A[2*5 + 4]; the inner i's reach A[7]


def test_a_shadowing_c_function_verifies_to_cuda() -> None:
    result = translate(SHADOWED_C, "rowsum4.cpp", TranslateOptions(target=Dialect.CUDA))
    assert result.status == "verified", result.summary


# Generated-code style (TVM): the shape is built in, no size parameter. out (23 x 60) = in (60 x 23) transposed;
# 345 * 4 = 1380 = 23 * 60 elements, so the guard stops the grid at ceil(345 / 64) = 6 blocks of 256.
FIXED_TRANSPOSE = """
extern "C" __global__ void __launch_bounds__(256) transpose_fused(float* __restrict__ out, float* __restrict__ in) {
  if (((((int)blockIdx.x) * 64) + (((int)threadIdx.x) >> 2)) < 345) {
    out[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] = in[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % 60) * 23) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / 60))];
  }
}
"""


def test_a_kernel_with_its_shape_built_in_is_tested_at_the_grid_its_guard_stops_at(tmp_path: Path) -> None:
    from xpiler_core.verify.harness import run_spec

    built = build_spec(FIXED_TRANSPOSE, "transpose.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    assert built.sizes_origin == "code"
    spec = load_spec(str(built.spec_path))
    assert spec.kind == "kernel" and spec.block == [256] and spec.grid == [6]
    lengths = {a.name: evaluate_int(str(a.shape[0]), {}) for a in spec.args}
    # every element the launch touches is inside its buffer: 1380 written, 1380 read
    assert lengths["out"] >= 1380 and lengths["in"] >= 1380
    # no input is left zero: TVM marks none `const`, and a zero input would test nothing
    assert all(a.init != "zeros" for a in spec.args)
    assert run_spec(spec, candidate_text=FIXED_TRANSPOSE, candidate_dialect=Dialect.CUDA).passed
    wrong = FIXED_TRANSPOSE.replace("% 60) * 23)", "% 60) * 22)")
    assert not run_spec(spec, candidate_text=wrong, candidate_dialect=Dialect.CUDA).passed


def test_a_built_in_shape_kernel_without_a_guard_runs_a_few_blocks(tmp_path: Path) -> None:
    text = ('extern "C" __global__ void __launch_bounds__(60) pool(float* __restrict__ out, float* __restrict__ data) {\n'
            "  out[blockIdx.x * 60 + threadIdx.x] = -3.4e38f;\n"
            "  for (int r = 0; r < 2; ++r)\n"
            "    out[blockIdx.x * 60 + threadIdx.x] = max(out[blockIdx.x * 60 + threadIdx.x],"
            " data[(blockIdx.x * 60 + threadIdx.x) * 2 + r]);\n}\n")
    built = build_spec(text, "pool.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    assert built.sizes_origin == "guessed" and "no guard fixes the grid" in built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.grid == [3] and spec.block == [60]
    lengths = {a.name: evaluate_int(str(a.shape[0]), {}) for a in spec.args}
    assert lengths == {"out": 180, "data": 360}


def test_a_built_in_shape_kernel_with_an_indirect_index_is_refused_by_name(tmp_path: Path) -> None:
    text = ('extern "C" __global__ void __launch_bounds__(64) gather(float* out, float* data, int* idx) {\n'
            "  out[threadIdx.x] = data[idx[threadIdx.x]];\n}\n")
    built = build_spec(text, "gather.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is None and "'data'" in built.reason and "give --spec" in built.reason


@pytest.mark.parametrize("target", [Dialect.HIP, Dialect.C])
def test_a_built_in_shape_kernel_file_verifies_without_a_spec(target: Dialect) -> None:
    result = translate(FIXED_TRANSPOSE, "transpose.cu", TranslateOptions(target=target))
    assert result.status == "verified", result.summary
    assert result.manifest["spec"]["auto"] is True


C_CHECKED_GATHER = """
extern "C" void pick_rows(const float *table, const int *rows, float *out) {
  const int ROWS = 30, WIDTH = 48, PICKS = 5;
  for (int i = 0; i < PICKS; ++i) {
    int r = rows[i];
    if (r < 0 || r >= ROWS) {
      for (int j = 0; j < WIDTH; ++j) out[i * WIDTH + j] = 0.0f;
    } else {
      for (int j = 0; j < WIDTH; ++j) out[i * WIDTH + j] = table[r * WIDTH + j];
    }
  }
}
"""


def test_a_c_function_indexing_through_checked_data_gets_the_length_its_check_allows(tmp_path: Path) -> None:
    """No loop bounds ``table`` (its row comes from data), but the check ``r < 0 || r >= ROWS`` does: 30 rows of
    48; the C -> CUDA translation is tested and verified."""
    built = build_spec(C_CHECKED_GATHER, "pick.cpp", Dialect.C, tmp_path, entry="pick_rows")
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    lengths = {a.name: evaluate_int(str(a.shape[0]), {}) for a in spec.args}
    assert lengths == {"table": 30 * 48, "rows": 5, "out": 5 * 48}
    result = translate(C_CHECKED_GATHER, "pick.cpp", TranslateOptions(target=Dialect.CUDA))
    assert result.status == "verified", result.summary


def test_a_built_in_shape_kernel_with_shared_arrays_and_no_block_size_is_not_guessed(tmp_path: Path) -> None:
    text = ("__global__ void rev(float* out, float* in) {\n  __shared__ float s[128];\n"
            "  s[threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x];\n  __syncthreads();\n"
            "  out[blockIdx.x * 128 + threadIdx.x] = s[127 - threadIdx.x];\n}\n")
    built = build_spec(text, "rev.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is None and "block size" in built.reason
    built = build_spec(text.replace("__global__ void", "__global__ void __launch_bounds__(128)"), "rev.cu",
                       Dialect.CUDA, tmp_path / "given")
    assert built.spec_path is not None, built.reason
    assert load_spec(str(built.spec_path)).block == [128]


# TVM's output for a fused graph: one kernel per stage and no host code. The first transposes (as above), the
# second clamps in place; each is tested on its own.
TWO_STAGES = FIXED_TRANSPOSE + """
extern "C" __global__ void __launch_bounds__(256) clamp_fused(float* __restrict__ out) {
  if (((((int)blockIdx.x) * 64) + (((int)threadIdx.x) >> 2)) < 345) {
    out[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] = min(0.5f, out[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))]);
  }
}
"""


def test_a_file_of_kernels_only_gets_one_test_set_per_kernel_and_each_catches_its_own_kernel(tmp_path: Path) -> None:
    from xpiler_core.translation import build_test_set
    from xpiler_core.verify.harness import run_spec

    tests = build_test_set(TWO_STAGES, "graph.cu", Dialect.CUDA, TranslateOptions(target=Dialect.C), tmp_path)
    assert [s.entry for s in tests.specs] == ["transpose_fused", "clamp_fused"], tests.reason
    assert not tests.untested
    wrong_clamp = TWO_STAGES.replace("min(0.5f,", "min(0.25f,")
    verdicts = [run_spec(s, candidate_text=wrong_clamp, candidate_dialect=Dialect.CUDA).passed for s in tests.specs]
    assert verdicts == [True, False]  # the clamp's own tests catch it; the transpose's do not run it
    assert all(run_spec(s, candidate_text=TWO_STAGES, candidate_dialect=Dialect.CUDA).passed for s in tests.specs)


@pytest.mark.parametrize("target", [Dialect.HIP, Dialect.C])
def test_a_file_of_kernels_only_verifies_kernel_by_kernel(target: Dialect) -> None:
    result = translate(TWO_STAGES, "graph.cu", TranslateOptions(target=target))
    assert result.status == "verified", result.summary
    assert "2/2 test sets passed" in result.summary


def test_a_kernel_of_the_file_no_test_reaches_is_named_and_nothing_is_verified() -> None:
    gather = ('\nextern "C" __global__ void __launch_bounds__(64) gather(float* out, float* data, int* idx) {\n'
              "  out[threadIdx.x] = data[idx[threadIdx.x]];\n}\n")
    result = translate(TWO_STAGES + gather, "graph.cu", TranslateOptions(target=Dialect.HIP))
    assert result.status != "verified"
    assert "kernel gather" in result.summary and "'data'" in result.summary


ROW_SUMS = """
__global__ void row_sums(float* out, const float* m, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += m[r * cols + c];
    out[r] = s;
  }
}
"""


def test_a_1d_kernel_with_several_sizes_gets_buffers_as_long_as_its_indices_reach(tmp_path: Path) -> None:
    from xpiler_core.verify.harness import run_spec

    built = build_spec(ROW_SUMS, "rows.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.block == [256]
    for case in spec.cases:
        lengths = {a.name: evaluate_int(str(a.shape[0]), case) for a in spec.args if a.role != "scalar"}
        assert lengths == {"out": case["rows"], "m": case["rows"] * case["cols"]}
    assert run_spec(spec, candidate_text=ROW_SUMS, candidate_dialect=Dialect.CUDA).passed
    skips_last_column = ROW_SUMS.replace("c < cols", "c < cols - 1")
    assert not run_spec(spec, candidate_text=skips_last_column, candidate_dialect=Dialect.CUDA).passed


def test_a_1d_kernel_with_several_sizes_and_a_descending_index_is_refused(tmp_path: Path) -> None:
    text = ("__global__ void flip(float* out, const float* x, int n, int k) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = x[n - 1 - i] * k;\n}\n")
    built = build_spec(text, "flip.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is None and "(n, k)" in built.reason and "give --spec" in built.reason
