"""Boundary split (``cpu/boundary_split``): element loops whose bounds checks hold except near their ends run as
head, check-free interior and tail. Checked against numpy on every kind of check the pass proves — ``continue``
inside a template device function's filter loop (coefficients 1, 2, -1 and -2 on the element index), an inline
zero-padding ternary over a constant-range tap loop, a depthwise 3×3 convolution as the suite writes it — with
hypothesis choosing sizes and offsets so the interior is empty, partial or the whole loop, and against checks
the pass must leave alone (an index the loop rewrites, an unsigned comparison)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import build_shared, loop_recovered
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

COEFFICIENTS = {"a1": (1, 3), "a2": (2, 5), "am1": (-1, 4), "am2": (-2, 3)}

STENCILS = r"""
// taps outside [lo, hi) are skipped; sample j = A*i + k + off
template <int A, int TAPS>
__device__ __forceinline__ float taps(const float* x, const float* w, int i, int lo, int hi, int off) {
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < TAPS; ++k) {
    const int j = A * i + k + off;
    if (j < lo || j >= hi) continue;
    acc += x[j - lo] * w[k];
  }
  return acc;
}
""" + "".join(f"""
__global__ void stencil_{name}(const float* x, const float* w, float* y, int n, int lo, int hi, int off) {{
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = taps<{a}, {t}>(x, w, i, lo, hi, off);
}}
extern "C" void run_{name}(const float* x, const float* w, float* y, int n, int lo, int hi, int off) {{
  stencil_{name}<<<(n + 255) / 256 < 8 ? (n + 255) / 256 : 8, 256>>>(x, w, y, n, lo, hi, off);
}}
""" for name, (a, t) in COEFFICIENTS.items()) + r"""
// zero padding written inline, as generated code does
__global__ void pad_inline(const float* x, const float* w, float* y, int n, int m, int off) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float acc = 0.0f;
    for (int k = 0; k < 5; ++k)
      acc += ((i + k + off >= 0) && (i + k + off < m)) ? x[i + k + off] * w[k] : 0.0f;
    y[i] = acc;
  }
}
extern "C" void run_pad_inline(const float* x, const float* w, float* y, int n, int m, int off) {
  pad_inline<<<(n + 63) / 64, 64>>>(x, w, y, n, m, off);
}

// checks the pass must not specialize: the index is rewritten in the loop, the comparison is unsigned
__global__ void left_alone(const float* x, float* y, int n, int m) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < 3; ++k) {
      int j = i + k - 1;
      if (k == 2) j = j * 2;
      if (j < 0 || j >= m) continue;
      acc += x[j];
    }
    for (int k = 0; k < 3; ++k) {
      const int j = i + k - 1;
      if ((unsigned)j < (unsigned)m) acc += 10.0f * x[j];
    }
    y[i] = acc;
  }
}
extern "C" void run_left_alone(const float* x, float* y, int n, int m) { left_alone<<<4, 128>>>(x, y, n, m); }
"""


@pytest.fixture(scope="module")
def stencil_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, ctx = translate_to_cpu(STENCILS, "k.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "boundary_split")
    assert record["changed"], record
    def body(kernel: str) -> str:
        start = text.index(f"void {kernel}(")
        return text[start:text.index("\n}\n", start)]

    # every stencil went through the split (its interior copy runs); the unprovable checks did not
    assert all("boundary split" in body(k) for k in [*(f"stencil_{n}" for n in COEFFICIENTS), "pad_inline"])
    assert "boundary split" not in body("left_alone")
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("split"))))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _fenced(values: np.ndarray, fence: int = 64) -> np.ndarray:
    """``values`` inside a buffer of NaNs: a read past either end (a check wrongly dropped) poisons the result."""
    buffer = np.full(values.size + 2 * fence, np.nan, np.float32)
    buffer[fence:fence + values.size] = values
    return buffer[fence:fence + values.size]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(COEFFICIENTS)), n=st.integers(1, 700), lo=st.integers(-40, 40),
       width=st.integers(0, 900), off=st.integers(-60, 60))
def test_continue_in_device_function_matches_numpy(stencil_lib: ctypes.CDLL, name: str, n: int, lo: int, width: int,
                                                    off: int) -> None:
    a, t = COEFFICIENTS[name]
    hi = lo + width
    rng = np.random.default_rng(n + width)
    x = _fenced(rng.standard_normal(width).astype(np.float32))
    w = rng.standard_normal(t).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    getattr(stencil_lib, f"run_{name}")(_ptr(x), _ptr(w), _ptr(y), n, lo, hi, off)
    ref = np.zeros(n)
    for k in range(t):
        j = a * np.arange(n) + k + off
        ok = (j >= lo) & (j < hi)
        ref[ok] += x[j[ok] - lo].astype(np.float64) * w[k]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 400), m=st.integers(0, 450), off=st.integers(-8, 8))
def test_inline_zero_padding_matches_numpy(stencil_lib: ctypes.CDLL, n: int, m: int, off: int) -> None:
    rng = np.random.default_rng(n * 7 + m)
    x = _fenced(rng.standard_normal(m).astype(np.float32))
    w = rng.standard_normal(5).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    stencil_lib.run_pad_inline(_ptr(x), _ptr(w), _ptr(y), n, m, off)
    ref = np.zeros(n)
    for k in range(5):
        j = np.arange(n) + k + off
        ok = (j >= 0) & (j < m)
        ref[ok] += x[j[ok]].astype(np.float64) * w[k]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("n", "m"), [(1, 1), (5, 3), (300, 290), (64, 200)])
def test_checks_it_cannot_prove_keep_their_meaning(stencil_lib: ctypes.CDLL, n: int, m: int) -> None:
    x = _fenced(np.random.default_rng(m).standard_normal(m).astype(np.float32))
    y = np.full(n, np.nan, np.float32)
    stencil_lib.run_left_alone(_ptr(x), _ptr(y), n, m)
    ref = np.zeros(n)
    for i in range(n):
        for k in range(3):
            j = i + k - 1
            if k == 2:
                j *= 2
            if 0 <= j < m:
                ref[i] += x[j]
        for k in range(3):
            j = i + k - 1
            if 0 <= j < m:
                ref[i] += 10.0 * x[j]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("N", "C", "H", "W"), [(1, 1, 1, 1), (1, 2, 2, 2), (2, 3, 5, 17), (1, 4, 13, 9)])
def test_depthwise_convolution_matches_numpy(tmp_path: Path, N: int, C: int, H: int, W: int) -> None:
    source = (Path(__file__).parents[2] / "benchmarks/suite/convolution/depthwise_conv2d/depthwise_conv2d.cu").read_text()
    source += r"""
extern "C" void run(const float* x, const float* f, float* y, int N, int C, int H, int W) {
  depthwise_conv3x3_kernel<<<7, 64>>>(x, f, y, N, C, H, W);
}
"""
    text, _records, ctx = translate_to_cpu(source, "dw.cu")
    assert text is not None and any(note.startswith("boundary split") for note in ctx.notes), ctx.notes
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    rng = np.random.default_rng(N * C * H * W)
    x = _fenced(rng.standard_normal(N * C * H * W).astype(np.float32)).reshape(N, C, H, W)
    f = rng.standard_normal((C, 3, 3)).astype(np.float32)
    y = np.full(x.shape, np.nan, np.float32)
    lib.run(_ptr(x), _ptr(f), _ptr(y), N, C, H, W)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros(x.shape)
    for r in range(3):
        for s in range(3):
            ref += padded[:, :, r:r + H, s:s + W] * f[None, :, r, s, None, None]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_refuses_loops_without_provable_checks() -> None:
    recovered, ctx = loop_recovered(r"""
__global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
""")
    split = get_pass("boundary_split")
    with pytest.raises(PassRefused):
        split.apply(recovered, split.INFO.defaults(), ctx)
