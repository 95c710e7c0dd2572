"""CUDA → BANG C poolings: window reductions recognized from the thread's dataflow, run as __bang_*pool."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from xpiler_core.plans.cuda_to_bang import intrinsics_used, translate_to_bang, verify_bang
from xpiler_core.verify.spec import KernelSpec, load_spec

# (planes, H, W): more than one 16-plane group with a ragged last one, odd sizes, a single plane
CASES = [(19, 13, 37), (1, 6, 6), (33, 20, 9)]


def _spec(tmp: Path, src: str, k: int, s: int, reduce: str, cases: list[tuple[int, int, int]] | None = None) -> KernelSpec:
    (tmp / "k.cu").write_text(src)
    (tmp / "ref.py").write_text(textwrap.dedent(f"""
        import numpy as np
        def ref(x, H, W):
            OH, OW = (H - {k}) // {s} + 1, (W - {k}) // {s} + 1
            win = np.stack([x[:, i:i + {s} * (OH - 1) + 1:{s}, j:j + {s} * (OW - 1) + 1:{s}]
                            for i in range({k}) for j in range({k})]).astype(np.float64)
            return np.{reduce}(win, axis=0).astype(np.float32)
    """))
    rows = "\n".join(f"[[cases]]\nnc = {p}\nH = {h}\nW = {w}\n" for p, h, w in (cases or CASES))
    (tmp / "spec.toml").write_text(textwrap.dedent(f"""
        name = "pool"
        source = "k.cu"
        entry = "pool"
        kind = "kernel"
        grid = ["ceil_div((W - {k}) // {s} + 1, 16)", "ceil_div((H - {k}) // {s} + 1, 8)", "nc"]
        block = [16, 8]
        reference = "ref.py:ref"
        tolerance = {{ atol = 1e-5, rtol = 1e-5 }}
        [[args]]
        name = "x"
        dtype = "float32"
        shape = ["nc", "H", "W"]
        role = "in"
        [[args]]
        name = "y"
        dtype = "float32"
        shape = ["nc", "(H - {k}) // {s} + 1", "(W - {k}) // {s} + 1"]
        role = "out"
        [[args]]
        name = "H"
        dtype = "int32"
        role = "scalar"
        value = "H"
        [[args]]
        name = "W"
        dtype = "int32"
        role = "scalar"
        value = "W"
    """) + rows)
    return load_spec(str(tmp / "spec.toml"))


AVG_3x3_S2 = """
__global__ void pool(const float* x, float* y, int H, int W) {
  const int OH = (H - 3) / 2 + 1, OW = (W - 3) / 2 + 1;
  int ox = blockIdx.x * blockDim.x + threadIdx.x;
  int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox < OW && oy < OH) {
    const float* in = x + (size_t)blockIdx.z * H * W;
    float s = 0.0f;
    s += in[(2 * oy) * W + 2 * ox] + in[(2 * oy) * W + 2 * ox + 1] + in[(2 * oy) * W + 2 * ox + 2];
    s += in[(2 * oy + 1) * W + 2 * ox] + in[(2 * oy + 1) * W + 2 * ox + 1] + in[(2 * oy + 1) * W + 2 * ox + 2];
    s += in[(2 * oy + 2) * W + 2 * ox] + in[(2 * oy + 2) * W + 2 * ox + 1] + in[(2 * oy + 2) * W + 2 * ox + 2];
    y[((size_t)blockIdx.z * OH + oy) * OW + ox] = s / 9.0f;
  }
}
"""

MAX_2x2_S2 = """
__global__ void pool(const float* x, float* y, int H, int W) {
  const int oy = blockIdx.y * blockDim.y + threadIdx.y, ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int OH = H / 2, OW = W / 2;
  if (oy >= OH || ox >= OW) return;
  const float* p = x + (size_t)blockIdx.z * H * W + (2 * oy) * W + 2 * ox;
  y[(size_t)blockIdx.z * OH * OW + oy * OW + ox] = fmaxf(fmaxf(p[W + 1], p[0]), fmaxf(p[1], p[W]));
}
"""


@pytest.mark.parametrize("src, k, s, reduce, intrinsic", [
    (AVG_3x3_S2, 3, 2, "mean", "__bang_avgpool"),
    (MAX_2x2_S2, 2, 2, "max", "__bang_maxpool"),
], ids=["avg3x3s2", "max2x2s2"])
def test_window_reduction_runs_on_the_pooling_intrinsic_and_matches_numpy(
        tmp_path: Path, src: str, k: int, s: int, reduce: str, intrinsic: str) -> None:
    spec = _spec(tmp_path, src, k, s, reduce)
    candidate, records, ctx = translate_to_bang(src, "k.cu", spec)
    assert candidate is not None, ctx.unresolved
    assert intrinsic in intrinsics_used(candidate)
    report, _ = verify_bang(candidate, spec, records)
    assert report.build_error is None, report.build_error
    assert report.capacity_violations == []
    assert report.passed, report.summary()


@pytest.mark.parametrize("old, new, reason", [
    # a padded window (clamped reads) does not match the intrinsic's no-padding semantics
    ("fmaxf(p[1], p[W])", "fmaxf(p[1], ox + 1 < W / 2 ? p[W] : 0.0f)", "plain loads"),
    # three of four window elements: not a full window
    ("fmaxf(fmaxf(p[W + 1], p[0]), fmaxf(p[1], p[W]))", "fmaxf(fmaxf(p[W + 1], p[0]), p[1])", "full rectangular"),
    # a transposed output (column-major) is another layout
    ("oy * OW + ox] =", "ox * OH + oy] =", "row * ld + column"),
])
def test_other_windows_are_refused_and_keep_the_scalar_form(tmp_path: Path, old: str, new: str, reason: str) -> None:
    src = MAX_2x2_S2.replace(old, new)
    assert src != MAX_2x2_S2
    spec = _spec(tmp_path, src, 2, 2, "max", cases=[(3, 6, 6)])
    candidate, records, _ = translate_to_bang(src, "k.cu", spec)
    record = next(r for r in records if r["name"] == "bang_pool")
    assert record["refused"] and reason in str(record["refused"]), record["refused"]
    assert candidate is not None and "pool(" not in "".join(intrinsics_used(candidate))


def test_a_sum_scaled_by_the_wrong_factor_is_not_an_average(tmp_path: Path) -> None:
    src = AVG_3x3_S2.replace("s / 9.0f", "s / 8.0f")
    spec = _spec(tmp_path, src, 3, 2, "mean", cases=[(2, 7, 7)])
    _, records, _ = translate_to_bang(src, "k.cu", spec)
    record = next(r for r in records if r["name"] == "bang_pool")
    assert "not an average" in str(record["refused"])
