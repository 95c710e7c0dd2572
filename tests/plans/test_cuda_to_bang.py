"""CUDA → BANG C: translations run on the MLU CPU model and are compared with numpy references."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.plans.cuda_to_bang import DEFAULT_PASSES, intrinsics_used, translate_to_bang, verify_bang
from xpiler_core.runtime.bang.call import run_bang_kernel
from xpiler_core.verify.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite"

# A representative subset of the suite: a tensorized activation (intrinsic), a grid-stride element-wise
# kernel (scalar tile loop), and a warp-shuffle row softmax (scalar path, per-thread arrays).
REPRESENTATIVE = ["activation/relu", "elementwise/sign", "normalization/softmax"]


@pytest.mark.parametrize("op", REPRESENTATIVE)
def test_suite_operator_translates_and_matches_numpy_on_the_model(op: str) -> None:
    spec = load_spec(str(SUITE / op / "spec.toml"))
    candidate, records, ctx = translate_to_bang(spec.source_text(), str(spec.path.parent / spec.source), spec)
    assert candidate is not None, ctx.unresolved
    assert "__mlu_global__" in candidate and "taskId" in candidate
    report, _ = verify_bang(candidate, spec, records)
    assert report.build_error is None, report.build_error
    assert report.capacity_violations == []
    assert report.passed, report.summary()


def test_relu_is_tiled_in_nram_with_the_relu_intrinsic_and_double_buffering() -> None:
    spec = load_spec(str(SUITE / "activation/relu/spec.toml"))
    candidate, _, _ = translate_to_bang(spec.source_text(), "relu.cu", spec)
    assert candidate is not None
    used = intrinsics_used(candidate)
    assert {"__bang_active_relu", "__memcpy", "__memcpy_async", "__sync_io"} <= set(used)
    assert "GDRAM2NRAM" in candidate and "NRAM2GDRAM" in candidate


def _elementwise_kernel(expr: str) -> str:
    return textwrap.dedent(f"""
        __global__ void k(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, int n) {{
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) {{
            float u = a[i];
            float v = b[i];
            y[i] = {expr};
          }}
        }}
    """)


def _run(src: str, n: int, task_dim: int = 8, **params: object) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    spec_text = textwrap.dedent(f"""
        name = "k"
        source = "k.cu"
        entry = "k"
        kind = "kernel"
        grid = ["ceil_div(n, 128)"]
        block = [128]
        reference = "ref.py:ref"
        [[args]]
        name = "a"
        dtype = "float32"
        shape = ["n"]
        role = "in"
        [[args]]
        name = "b"
        dtype = "float32"
        shape = ["n"]
        role = "in"
        [[args]]
        name = "y"
        dtype = "float32"
        shape = ["n"]
        role = "out"
        [[args]]
        name = "n"
        dtype = "int32"
        role = "scalar"
        value = "n"
        [[cases]]
        n = {n}
    """)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "k.cu").write_text(src)
        (Path(tmp) / "spec.toml").write_text(spec_text)
        (Path(tmp) / "ref.py").write_text("def ref(**kw):\n    raise NotImplementedError\n")
        spec = load_spec(str(Path(tmp) / "spec.toml"))
        pipeline = bool(params.pop("pipeline", True))
        passes = [p for p in DEFAULT_PASSES if pipeline or p != "bang_pipeline"]
        pass_params = {"bang_tensorize": dict(params)} if params else None
        candidate, _, ctx = translate_to_bang(src, "k.cu", spec, pass_params, passes)
    assert candidate is not None, ctx.unresolved
    if "GDRAM2NRAM" in candidate:  # a tiled kernel is double-buffered exactly when bang_pipeline runs
        assert ("__memcpy_async" in candidate) == pipeline
    rng = np.random.default_rng(n)
    a = rng.normal(size=n).astype(np.float32)
    b = rng.uniform(0.5, 2.0, size=n).astype(np.float32)
    y = np.zeros(n, np.float32)
    run = run_bang_kernel(candidate, "k", [a, b, y, np.int32(n)], dim=(task_dim, 1, 1), task_type="union1")
    assert run.ok, run.error
    out = run.arrays[2]
    assert out is not None
    return a, b, out, candidate


OPS = {
    "u + v": lambda u, v: u + v,
    "u * v - 1.5f": lambda u, v: u * v - np.float32(1.5),
    "max(u, 0.0f) * v": lambda u, v: np.maximum(u, 0) * v,
    "u / v + expf(u)": lambda u, v: u / v + np.exp(u),
    "tanhf(u) * 2.0f + v": lambda u, v: np.tanh(u) * np.float32(2) + v,
    "(u > v) ? u : -v": lambda u, v: np.where(u > v, u, -v),  # no intrinsic: scalar loop on the tile
}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=st.sampled_from(sorted(OPS)), n=st.integers(1, 5000), pipeline=st.booleans())
def test_elementwise_expressions_match_numpy_for_any_length(expr: str, n: int, pipeline: bool) -> None:
    a, b, y, _ = _run(_elementwise_kernel(expr), n, pipeline=pipeline)
    np.testing.assert_allclose(y, OPS[expr](a, b), rtol=2e-5, atol=1e-5)


def test_tiles_smaller_than_a_task_share_still_cover_every_element() -> None:
    # 64-element tiles force many tiles per task, with a ragged last tile and idle tasks
    a, b, y, candidate = _run(_elementwise_kernel("u - v"), 1000, task_dim=4, max_tile=64)
    assert "__bang_sub" in candidate
    np.testing.assert_allclose(y, a - b, rtol=1e-6)


def test_gather_is_not_tensorized_but_still_correct() -> None:
    src = textwrap.dedent("""
        __global__ void k(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = a[n - 1 - i] + b[i];
        }
    """)
    a, b, y, candidate = _run(src, 777)
    assert "__bang_" not in candidate  # a reversed read is not element-wise: no tiles
    np.testing.assert_allclose(y, a[::-1] + b, rtol=1e-6)


def test_the_element_index_used_as_a_value_stays_exact() -> None:
    src = _elementwise_kernel("u + (float)(i % 7)")
    a, _, y, _ = _run(src, 3001)
    np.testing.assert_allclose(y, a + (np.arange(3001) % 7).astype(np.float32), rtol=1e-6)


def test_server_offers_translate_to_bang_for_cuda() -> None:
    from xpiler_core import api as core_api

    assert Dialect.BANG in core_api.available_targets(Dialect.CUDA)
    assert Dialect.CUDA in core_api.available_targets(Dialect.BANG)


def test_cli_translates_to_bang_and_reports_verified(tmp_path: Path) -> None:
    import shutil

    from xpiler_core.cli import main

    for name in ("relu.cu", "spec.toml", "ref.py"):
        shutil.copy(SUITE / "activation/relu" / name, tmp_path / name)
    code = main(["translate", str(tmp_path / "relu.cu"), "--to", "bang", "--spec", str(tmp_path / "spec.toml")])
    assert code == 0
    out = (tmp_path / "relu.mlu").read_text()
    assert "__bang_active_relu" in out
    manifest = (tmp_path / ".xpiler" / "relu.mlu.json").read_text()
    assert '"status": "verified"' in manifest


def test_harness_runs_bang_candidates_and_rejects_a_wrong_one() -> None:
    from xpiler_core.verify.harness import run_spec

    spec = load_spec(str(SUITE / "activation/relu/spec.toml"))
    candidate, _, _ = translate_to_bang(spec.source_text(), "relu.cu", spec)
    assert candidate is not None
    good = run_spec(spec, candidate_text=candidate, candidate_dialect=Dialect.BANG, cases=[0])
    assert good.passed, good.summary()
    wrong = candidate.replace("__bang_active_relu", "__bang_active_abs")  # |x| instead of max(x, 0)
    bad = run_spec(spec, candidate_text=wrong, candidate_dialect=Dialect.BANG, cases=[0])
    assert not bad.passed and bad.cases[0].mismatches > 0


# TVM style: the shape is built in; 3 * 4 * 256 = 3072 outputs, the guard stops at ceil(768 / 64) = 12 blocks
GUARDED_FIXED = """
extern "C" __global__ void __launch_bounds__(256) twice(float* __restrict__ out, float* __restrict__ in) {
  if (((((int)blockIdx.x) * 64) + (((int)threadIdx.x) >> 2)) < 768) {
    out[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] = in[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] * 2.0f;
  }
}
"""


def test_a_built_in_shape_kernel_binds_the_grid_its_guard_fixes_and_never_a_guessed_one() -> None:
    """The BANG kernel binds its launch. Where the guard fixes the grid (12 blocks) the output computes every
    element the source does (checked against numpy on the model); where nothing fixes it, the tests' launch is
    not bound in: no verdict, rather than an output that computes only the blocks the tests ran."""
    from xpiler_core.pipeline import TranslateOptions, translate

    result = translate(GUARDED_FIXED, "twice.cu", TranslateOptions(target=Dialect.BANG))
    assert result.status == "verified", result.summary
    assert result.output_text
    x = np.random.default_rng(0).standard_normal(3072).astype(np.float32)
    run = run_bang_kernel(result.output_text, "twice", [np.zeros(3072, np.float32), x.copy()], dim=(16, 1, 1),
                          task_type="union1")
    assert run.ok, run.error
    np.testing.assert_array_equal(run.arrays[0], x * np.float32(2.0))
    unguarded = GUARDED_FIXED.replace("if (((((int)blockIdx.x) * 64) + (((int)threadIdx.x) >> 2)) < 768) ", "")
    result = translate(unguarded, "twice.cu", TranslateOptions(target=Dialect.BANG))
    assert result.status != "verified", result.summary
    assert "dim3(3)" not in result.output_text


UNWRITTEN_TAIL = """
__global__ void head(const float* in, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 48) return;
  out[i] = 2.0f * in[i];
}
extern "C" void head_host(const float* h_in, float* h_out) {
  const int n = 1152;
  float *d_in, *d_out;
  cudaMalloc(&d_in, n * sizeof(float));
  cudaMalloc(&d_out, n * sizeof(float));
  cudaMemcpy(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice);
  head<<<(n + 255) / 256, 256>>>(d_in, d_out);
  cudaMemcpy(h_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d_in);
  cudaFree(d_out);
}
"""


def test_a_source_that_copies_back_memory_it_never_wrote_is_its_defect_on_the_bang_target_too() -> None:
    """Only 48 of the 1152 outputs are written and all copied back: the source's defect (found by its poisoned run,
    as on the other targets), not "the translation computes different results" (the MLU model's fresh memory is
    not the runtime's zeros)."""
    from xpiler_core.pipeline import TranslateOptions, translate

    result = translate(UNWRITTEN_TAIL, "head.cu", TranslateOptions(target=Dialect.BANG))
    assert result.status == "compiled-not-executed", result.summary
    assert "reads memory it never wrote" in result.reason
