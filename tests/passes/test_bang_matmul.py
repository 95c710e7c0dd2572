"""CUDA → BANG C matrix products: recognized from the thread's dataflow, run as __bang_matmul on the MLU model."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.plans.bang_to_cuda import translate_bang_to_cuda
from xpiler_core.plans.cuda_to_bang import intrinsics_used, translate_to_bang, verify_bang
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import KernelSpec, load_spec
from xpiler_core.verify.toolchains import compile_check

# ragged sizes (not multiples of the 64-column / 16-deep tiles), a K of 0, and a single row
CASES = [(37, 70, 45), (64, 128, 16), (1, 5, 0), (100, 3, 130)]

REFERENCES = {
    "nn": "def ref(A, B, M, N, K):\n    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)\n",
    "nt": "def ref(A, B, M, N, K):\n    return (A.astype(np.float64) @ B.astype(np.float64).T).astype(np.float32)\n",
}


def _spec(tmp: Path, src: str, layout: str = "nn", cases: list[tuple[int, int, int]] | None = None) -> KernelSpec:
    (tmp / "k.cu").write_text(src)
    (tmp / "ref.py").write_text("import numpy as np\n" + REFERENCES[layout])
    b_shape = '["K", "N"]' if layout == "nn" else '["N", "K"]'
    rows = "\n".join(f"[[cases]]\nM = {m}\nN = {n}\nK = {k}\n" for m, n, k in (cases or CASES))
    (tmp / "spec.toml").write_text(textwrap.dedent(f"""
        name = "mm"
        source = "k.cu"
        entry = "mm"
        kind = "kernel"
        grid = ["ceil_div(N, 16)", "ceil_div(M, 8)"]
        block = [16, 8]
        reference = "ref.py:ref"
        tolerance = {{ atol = 1e-4, rtol = 1e-4 }}
        [[args]]
        name = "A"
        dtype = "float32"
        shape = ["M", "K"]
        role = "in"
        [[args]]
        name = "B"
        dtype = "float32"
        shape = {b_shape}
        role = "in"
        [[args]]
        name = "C"
        dtype = "float32"
        shape = ["M", "N"]
        role = "out"
        [[args]]
        name = "M"
        dtype = "int32"
        role = "scalar"
        value = "M"
        [[args]]
        name = "N"
        dtype = "int32"
        role = "scalar"
        value = "N"
        [[args]]
        name = "K"
        dtype = "int32"
        role = "scalar"
        value = "K"
    """) + rows)
    return load_spec(str(tmp / "spec.toml"))


NAIVE = """
__global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
"""

# another spelling of the same dataflow: early exit, pointer offsets, a helper, a constant block size
HELPER_STYLE = """
__device__ float dot(const float* a, const float* b, int n, int stride) {
  float s = 0;
  for (int i = 0; i < n; i++) s = s + a[i] * b[(size_t)i * stride];
  return s;
}
__global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
  const int c = threadIdx.x + 16 * blockIdx.x;
  const int r = threadIdx.y + blockIdx.y * 8;
  if (c >= N || r >= M) return;
  const float* arow = A + (size_t)r * K;
  C[(size_t)r * N + c] = dot(arow, B + c, K, N);
}
"""

# B stored transposed (N x K): already the WRAM filter layout, no __bang_transpose needed
NT_LAYOUT = """
__global__ void mm(const float* A, const float* Bt, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += Bt[col * K + k] * A[row * K + k];
    C[row * N + col] = acc;
  }
}
"""


def _translate(spec: KernelSpec, src: str) -> tuple[str, list[dict[str, object]]]:
    candidate, records, ctx = translate_to_bang(src, "k.cu", spec)
    assert candidate is not None, ctx.unresolved
    return candidate, records


def _check_on_model(spec: KernelSpec, src: str) -> tuple[str, list[dict[str, object]]]:
    candidate, records = _translate(spec, src)
    assert {"__bang_matmul", "__bang_transpose"} <= set(intrinsics_used(candidate))
    assert "__wram__ float" in candidate and "NRAM2WRAM" in candidate
    report, _ = verify_bang(candidate, spec, records)
    assert report.build_error is None, report.build_error
    assert report.capacity_violations == []
    assert report.passed, report.summary()
    return candidate, records


def test_matrix_product_runs_on_bang_matmul_and_matches_numpy(tmp_path: Path) -> None:
    _check_on_model(_spec(tmp_path, NAIVE), NAIVE)


@pytest.mark.slow
def test_another_spelling_is_recognized_and_its_tiled_path_is_the_one_that_runs(tmp_path: Path) -> None:
    spec = _spec(tmp_path, HELPER_STYLE)
    candidate, records = _check_on_model(spec, HELPER_STYLE)
    # dropping the accumulation of K chunks breaks every case with K > 0: the tiled path is what ran
    broken = candidate.replace("__bang_add(xp_mm_acc0, xp_mm_acc0, xp_mm_out", "__bang_sub(xp_mm_acc0, xp_mm_acc0, xp_mm_out")
    bad, _ = verify_bang(broken, spec, records)
    assert not bad.passed


def test_transposed_right_operand_is_staged_without_a_transpose(tmp_path: Path) -> None:
    spec = _spec(tmp_path, NT_LAYOUT, "nt", cases=[(37, 70, 45), (3, 130, 17)])
    candidate, records = _translate(spec, NT_LAYOUT)
    used = set(intrinsics_used(candidate))
    assert "__bang_matmul" in used and "__bang_transpose" not in used
    report, _ = verify_bang(candidate, spec, records)
    assert report.passed, report.summary()


LOOP = "acc += A[row * K + k] * B[k * N + col];"
STORE = "C[row * N + col] = acc;"


@pytest.mark.parametrize("old, new, reason", [
    # column-major A: the left tile would need a gather
    (LOOP, "acc += A[k * M + row] * B[k * N + col];", "left operand"),
    # an extra term per step is not a matrix product
    (LOOP, "acc += A[row * K + k] * B[k * N + col] + 1.0f;", "not a sum of products"),
    # a second store in the same thread
    (STORE, "C[row * N + col] = acc; C[row * N + col] = acc;", "stores 2"),
    # an epilogue that reads the element it stores (C += A.B): the CPU takes it, the MLU staging does not yet
    (STORE, "C[row * N + col] = C[row * N + col] + acc;", "reads the element it stores"),
    # one that reads another thread's element is no element-wise epilogue at all
    (STORE, "C[row * N + col] = C[row * N + col + 1] + acc;", "reads memory"),
])
def test_other_dataflow_is_refused_and_keeps_the_scalar_form(tmp_path: Path, old: str, new: str, reason: str) -> None:
    src = NAIVE.replace(old, new)
    spec = _spec(tmp_path, src)
    candidate, records = _translate(spec, src)
    record = next(r for r in records if r["name"] == "bang_matmul")
    assert record["refused"] and reason in str(record["refused"]), record["refused"]
    assert "__bang_matmul" not in candidate


def test_shared_memory_tiled_gemm_is_forwarded_and_verified() -> None:
    # the suite's 16 x 16 shared-memory tiled GEMM (zero padded at the edges): the staged tiles are forwarded
    # to the sum, so the product is found from the dataflow and runs on __bang_matmul
    root = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "matrix" / "gemm"
    spec = load_spec(str(root / "spec.toml"))
    candidate, records, _ = translate_to_bang(spec.source_text(), str(root / spec.source), spec)
    assert candidate is not None and "__bang_matmul" in candidate
    report, _ = verify_bang(candidate, spec, records)
    assert report.passed, report.summary()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_matmul_translation_round_trips_to_cuda(tmp_path: Path) -> None:
    spec = _spec(tmp_path, NAIVE, cases=[(37, 70, 45)])
    candidate, _ = _translate(spec, NAIVE)
    cuda, reason = translate_bang_to_cuda(candidate, "mm.mlu")
    assert cuda is not None, reason
    assert "__bang_" not in cuda and "__wram__" not in cuda
    verdict = compile_check(cuda, Dialect.CUDA)
    assert verdict.ok, verdict.stderr[-2000:]
    report = run_spec(spec, candidate_text=cuda, candidate_dialect=Dialect.CUDA, warp_size=32)
    assert report.passed, report.summary()


def test_an_early_return_inside_a_helper_is_not_taken_for_a_bound(tmp_path: Path) -> None:
    # the helper returns 0 for columns past N instead of leaving the thread: C[.., col >= N] must be written
    src = HELPER_STYLE.replace("  float s = 0;", "  if (stride < 0) return 0.0f;\n  float s = 0;")
    spec = _spec(tmp_path, src, cases=[(5, 7, 3)])
    _, records = _translate(spec, src)
    record = next(r for r in records if r["name"] == "bang_matmul")
    assert "returns early" in str(record["refused"]) or "early exit" in str(record["refused"])


def test_an_exit_under_another_condition_is_refused(tmp_path: Path) -> None:
    src = NAIVE.replace("  if (row < M && col < N) {", "  if (row < M) { if (col >= N) return; }\n  if (row < M && col < N) {")
    spec = _spec(tmp_path, src, cases=[(5, 7, 3)])
    _, records = _translate(spec, src)
    record = next(r for r in records if r["name"] == "bang_matmul")
    assert record["refused"]


# two products of the same left operand and an element-wise epilogue (a gated linear unit)
GATED = """
__device__ float squash(float v) { return v / (1.0f + expf(-v)); }
__global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float g = 0.0f, u = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float a = A[row * K + k];
    g += a * B[k * N + col];
    u += a * B[(K + k) * N + col];
  }
  C[row * N + col] = squash(g) * u + 0.5f;
}
"""


def test_products_sharing_a_left_operand_with_an_epilogue_match_numpy(tmp_path: Path) -> None:
    (tmp_path / "gref.py").write_text(
        "import numpy as np\n"
        "def ref(A, B, M, N, K):\n"
        "    a = A.astype(np.float64); b = B.astype(np.float64).reshape(2, K, N)\n"
        "    g, u = a @ b[0], a @ b[1]\n"
        "    return (g / (1 + np.exp(-g)) * u + 0.5).astype(np.float32)\n")
    spec = _spec(tmp_path, GATED, cases=[(37, 70, 45), (3, 130, 0)])
    text = (tmp_path / "spec.toml").read_text().replace('"ref.py:ref"', '"gref.py:ref"').replace(
        'shape = ["K", "N"]', 'shape = ["2 * K", "N"]')
    (tmp_path / "spec.toml").write_text(text)
    spec = load_spec(str(tmp_path / "spec.toml"))
    candidate, records = _translate(spec, GATED)
    assert candidate.count("__bang_matmul(") == 2
    assert "squash(xp_mm_acc0[xp_e]) * xp_mm_acc1[xp_e] + 0.5f" in candidate
    report, _ = verify_bang(candidate, spec, records)
    assert report.passed, report.summary()


@pytest.mark.parametrize("old, new, reason", [
    ("squash(g) * u + 0.5f", "g * u + A[0]", "reads memory"),
    ("squash(g) * u + 0.5f", "g * u + (float)row", "reads row"),
    ("u += a * B[(K + k) * N + col];", "u += B[k * N + col] * B[(K + k) * N + col];", "left operand"),
])
def test_epilogues_that_are_not_element_wise_are_refused(tmp_path: Path, old: str, new: str, reason: str) -> None:
    src = GATED.replace(old, new)
    assert src != GATED
    spec = _spec(tmp_path, src, cases=[(5, 7, 3)])
    candidate, records = _translate(spec, src)
    record = next(r for r in records if r["name"] == "bang_matmul")
    assert reason in str(record["refused"]), record["refused"]
    assert "__bang_matmul" not in candidate
