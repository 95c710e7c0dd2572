"""bang_pipeline: double-buffered tile loops on the MLU model, and the model catching a missing __sync_io."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_bang import translate_to_bang
from xpiler_core.printer import print_module
from xpiler_core.runtime.bang.call import run_bang_kernel
from xpiler_core.verify.spec import load_spec

SCALE_SHIFT = """
__global__ void k(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 3.0f + y[i];
}
"""


def _translate(src: str, tmp: Path, max_tile: int = 64) -> str:
    (tmp / "k.cu").write_text(src)
    (tmp / "ref.py").write_text("def ref(**kw):\n    raise NotImplementedError\n")
    (tmp / "spec.toml").write_text(textwrap.dedent("""
        name = "k"
        source = "k.cu"
        entry = "k"
        kind = "kernel"
        grid = ["ceil_div(n, 128)"]
        block = [128]
        reference = "ref.py:ref"
        [[args]]
        name = "x"
        dtype = "float32"
        shape = ["n"]
        role = "in"
        [[args]]
        name = "y"
        dtype = "float32"
        shape = ["n"]
        role = "inout"
        [[args]]
        name = "n"
        dtype = "int32"
        role = "scalar"
        value = "n"
        [[cases]]
        n = 1000
    """))
    spec = load_spec(str(tmp / "spec.toml"))
    candidate, records, ctx = translate_to_bang(src, "k.cu", spec, {"bang_tensorize": {"max_tile": max_tile}})
    assert candidate is not None, ctx.unresolved
    assert next(r for r in records if r["name"] == "bang_pipeline")["changed"]
    return candidate


def _run(candidate: str, n: int, tasks: int = 4) -> tuple[np.ndarray, np.ndarray, object]:
    rng = np.random.default_rng(n)
    x = rng.normal(size=n).astype(np.float32)
    y = rng.normal(size=n).astype(np.float32)
    run = run_bang_kernel(candidate, "k", [x, y.copy(), np.int32(n)], dim=(tasks, 1, 1), task_type="union1")
    return x, y, run


def test_double_buffered_tiles_match_numpy_with_an_in_place_operand(tmp_path: Path) -> None:
    # y is loaded, updated and stored by the same loop: its next tile is prefetched while this one is stored
    candidate = _translate(SCALE_SHIFT, tmp_path)
    assert "__memcpy_async" in candidate and "__sync_io()" in candidate
    assert "xp_tile_x_buf[128]" in candidate and "xp_tile_y_buf[128]" in candidate  # 64-element tiles, doubled
    for n in (1000, 63, 1):  # many tiles with a ragged last one; tasks with a single partial tile; idle tasks
        x, y, run = _run(candidate, n)
        assert run.ok, run.error  # type: ignore[attr-defined]
        np.testing.assert_allclose(run.arrays[1], x * np.float32(3) + y, rtol=1e-6)  # type: ignore[attr-defined]


def test_the_model_catches_a_missing_sync(tmp_path: Path) -> None:
    candidate = _translate(SCALE_SHIFT, tmp_path)
    assert candidate.count("__sync_io();") == 1
    racy = candidate.replace("__sync_io();", "")
    _, _, run = _run(racy, 1000)
    assert not run.ok  # type: ignore[attr-defined]
    assert "__memcpy_async" in (run.error or "")  # type: ignore[attr-defined]


HAND_WRITTEN = """
__mlu_global__ void k(float* x, int n, int len) {
  __nram__ float t[64];
  for (int o = 0; o < n; o += 64) {
    __memcpy(t, x + o, len * 4, GDRAM2NRAM);
    __bang_mul_scalar(t, t, 2.0f, 64);
    __memcpy(x + o, t, len * 4, NRAM2GDRAM);
  }
}
"""


def _apply(src: str) -> str:
    module = lower_text(src, "k.mlu", Dialect.BANG)
    ctx = PassContext(source_dialect=Dialect.BANG, target=Dialect.BANG)
    return print_module(get_pass("bang_pipeline").apply(module, {}, ctx), Dialect.BANG)


def test_prefetching_an_array_the_loop_overwrites_without_a_bound_is_refused() -> None:
    # len is not bounded by the step: the next tile's prefetch could overlap this iteration's store
    with pytest.raises(PassRefused, match="also prefetches"):
        _apply(HAND_WRITTEN)


def test_a_loop_that_computes_before_loading_is_refused() -> None:
    src = HAND_WRITTEN.replace("    __memcpy(t, x + o, len * 4, GDRAM2NRAM);\n", "").replace(
        "__bang_mul_scalar(t, t, 2.0f, 64);", "__bang_mul_scalar(t, t, 2.0f, 64);\n    __memcpy(t, x + o, 256, GDRAM2NRAM);")
    with pytest.raises(PassRefused, match="computes before loading"):
        _apply(src)


def test_a_read_only_source_is_pipelined_whatever_its_length() -> None:
    src = HAND_WRITTEN.replace("float* x, int n", "float* y, const float* x, int n").replace(
        "__memcpy(x + o, t", "__memcpy(y + o, t")
    out = _apply(src)
    assert "__nram__ float t[128];" in out
    assert "__memcpy_async(t + (1 - xp_pslot) * 64, x + (o + 64), len * 4, GDRAM2NRAM);" in out


def test_grid_stride_accumulation_loops_are_double_buffered_too() -> None:
    # bang_reduce's NRAM loop steps by the whole grid (a loop-invariant, not a constant)
    from xpiler_core.plans.cuda_to_bang import verify_bang

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "reduction" / "sum"
    spec = load_spec(str(root / "spec.toml"))
    candidate, records, _ = translate_to_bang(spec.source_text(), str(root / spec.source), spec)
    assert candidate is not None and "__memcpy_async" in candidate and "__bang_add" in candidate
    report, _ = verify_bang(candidate, spec, records)
    assert report.passed, report.summary()


def test_a_typed_view_of_a_raw_nram_array_doubles_the_raw_array() -> None:
    src = textwrap.dedent("""
        __mlu_global__ void k(float* y, const half* x, int n) {
          __nram__ char raw[256];
          half *t = (half *)raw;
          __nram__ float f[128];
          for (int o = 0; o < n; o += 128) {
            const int m = n - o < 128 ? n - o : 128;
            __memcpy(t, x + o, m * 2, GDRAM2NRAM);
            __bang_half2float(f, t, 128);
            __memcpy(y + o, f, m * 4, NRAM2GDRAM);
          }
        }
    """)
    out = _apply(src)
    assert "__nram__ char raw[512];" in out and "__nram__ float f[128];" in out
    assert "__memcpy_async(t + (1 - xp_pslot) * 128, x + (o + 128)" in out
