"""Implicit GEMM on the CPU (``cpu_gemm`` with ``support/implicit_gemm``): threads indexed through a split
global index (``idx % K``, ``idx / K % W``, ...) whose value is a nested sum of products — convolutions in NHWC
and NCHW (zero padding, a one-element local accumulator, TVM's spelling), a matrix product over a flat index —
are gathered into matrices and multiplied by the packed micro-kernel.

Each kernel is translated by the CPU plan, built with g++ and run on ragged shapes (no size a multiple of a
register tile or cache block, strides 1 and 2) against numpy in float64; a counter in the micro-kernel proves
the tensorized path ran. Kernels that are not one product of two gathered operands (a depthwise convolution,
where both operands follow the channel; an output index that moves with the summation) are refused and still
computed right by the scalar plan.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.conftest import build_shared, loop_recovered
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNELS = r"""
// NHWC input, [KH][KW][C][K] weights, no padding, stride s; the channel of the output is the fastest index
__global__ void conv_nhwc(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                          int N, int H, int W, int C, int K, int KH, int KW, int s, int OH, int OW) {
  long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long total = (long)N * OH * OW * K;
  if (idx >= total) return;
  int k = idx % K;
  int ow = (idx / K) % OW;
  int oh = (idx / ((long)K * OW)) % OH;
  int n = idx / ((long)K * OW * OH);
  float acc = 0.0f;
  for (int r = 0; r < KH; ++r)
    for (int q = 0; q < KW; ++q) {
      const float* px = x + (((long)n * H + oh * s + r) * W + ow * s + q) * C;
      const float* pw = w + ((long)r * KW + q) * C * K + k;
      for (int c = 0; c < C; ++c) acc += __ldg(px + c) * pw[(long)c * K];
    }
  y[idx] = acc;
}

// NCHW, KCRS weights, 3x3 with zero padding 1, a one-element local accumulator (TVM's spelling)
__global__ void __launch_bounds__(128) conv_nchw(float* __restrict__ out, const float* __restrict__ data,
                                                 const float* __restrict__ kern, int n, int c, int h, int w, int k) {
  float local[1];
  if (((int)blockIdx.x) * 128 + ((int)threadIdx.x) < ((n * k) * h) * w) {
    int ow = (((int)blockIdx.x) * 128 + ((int)threadIdx.x)) % w;
    int oh = ((((int)blockIdx.x) * 128 + ((int)threadIdx.x)) / w) % h;
    int ok = ((((int)blockIdx.x) * 128 + ((int)threadIdx.x)) / (w * h)) % k;
    int on = (((int)blockIdx.x) * 128 + ((int)threadIdx.x)) / ((w * h) * k);
    local[0] = 0.000000e+00f;
    for (int rc = 0; rc < c; ++rc)
      for (int ry = 0; ry < 3; ++ry)
        for (int rx = 0; rx < 3; ++rx)
          local[0] = (local[0] + ((((1 <= (oh + ry)) && ((oh + ry) < (h + 1))) && (1 <= (ow + rx)) &&
                                   ((ow + rx) < (w + 1))) ? data[((((on * c + rc) * h) + (oh + ry - 1)) * w) +
                                                                 (ow + rx - 1)] : 0.000000e+00f) *
                                 kern[(((ok * c + rc) * 3 + ry) * 3) + rx]);
    out[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = local[0];
  }
}

// NCHW, 5x5 taps, stride 2 and padding 2 on the rows, columns read mirrored: the zero-padding guards have
// coefficients 2 and -2 in the output column (the gather copies the interval where they hold)
__global__ void conv_s2_mirror(float* out, const float* data, const float* kern, int n, int c, int h, int w, int k,
                               int oh_n, int ow_n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n * k * oh_n * ow_n) {
    int ow = t % ow_n, oh = t / ow_n % oh_n, ok = t / (ow_n * oh_n) % k, on = t / (ow_n * oh_n * k);
    float acc = 0.0f;
    for (int rc = 0; rc < c; ++rc)
      for (int ry = 0; ry < 5; ++ry)
        for (int rx = 0; rx < 5; ++rx) {
          int ih = oh * 2 + ry - 2, iw = w + 1 - ow * 2 - rx;
          acc += (ih >= 0 && ih < h && iw >= 0 && iw < w)
                     ? data[((on * c + rc) * h + ih) * w + iw] * kern[((ok * c + rc) * 5 + ry) * 5 + rx] : 0.0f;
        }
    out[t] = acc;
  }
}

extern "C" void run_s2_mirror(const float* x, const float* wt, float* y, int n, int c, int h, int w, int k, int oh_n,
                              int ow_n) {
  conv_s2_mirror<<<(n * k * oh_n * ow_n + 63) / 64, 64>>>(y, x, wt, n, c, h, w, k, oh_n, ow_n);
}

// a matrix product over a flat thread index, with a ReLU epilogue
__global__ void flat_gemm_relu(const float* A, const float* B, float* C, int M, int N, int K) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < M * N) {
    int i = t / N, j = t % N;
    float s = 0.0f;
    for (int p = 0; p < K; ++p) s += A[i * K + p] * B[p * N + j];
    C[t] = fmaxf(s, 0.0f);
  }
}

// blockIdx and threadIdx read on their own: output pixel per block, output channel per thread (NHWC, OHWI)
__global__ void conv_blocks(const float* in, const float* w, float* out, int H, int W, int C, int K, int OH, int OW) {
  int n = blockIdx.z, oh = blockIdx.y, ow = blockIdx.x, oc = threadIdx.x;
  if (oc < K && oh < OH && ow < OW) {
    float sum = 0.0f;
    for (int kh = 0; kh < 3; kh++)
      for (int kw = 0; kw < 3; kw++)
        for (int ic = 0; ic < C; ic++)
          sum += in[((n * H + oh * 2 + kh) * W + ow * 2 + kw) * C + ic] * w[((oc * 3 + kh) * 3 + kw) * C + ic];
    out[((n * OH + oh) * OW + ow) * K + oc] = sum;
  }
}

extern "C" void run_blocks(const float* x, const float* w, float* y, int N, int H, int W, int C, int K) {
  int OH = (H - 3) / 2 + 1, OW = (W - 3) / 2 + 1;
  conv_blocks<<<dim3(OW, OH, N), (K + 31) / 32 * 32>>>(x, w, y, H, W, C, K, OH, OW);
}

extern "C" void run_nhwc(const float* x, const float* w, float* y, int N, int H, int W, int C, int K, int KH,
                         int KW, int s) {
  int OH = (H - KH) / s + 1, OW = (W - KW) / s + 1;
  long total = (long)N * OH * OW * K;
  conv_nhwc<<<(total + 255) / 256, 256>>>(x, w, y, N, H, W, C, K, KH, KW, s, OH, OW);
}

extern "C" void run_nchw(const float* x, const float* w, float* y, int n, int c, int h, int wd, int k) {
  conv_nchw<<<(n * k * h * wd + 127) / 128, 128>>>(y, x, w, n, c, h, wd, k);
}

extern "C" void run_flat(const float* A, const float* B, float* C, int M, int N, int K) {
  flat_gemm_relu<<<(M * N + 63) / 64, 64>>>(A, B, C, M, N, K);
}
"""


@pytest.fixture(scope="module")
def conv_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "cpu_gemm")
    assert record["changed"], record
    assert text.count("xp_sgemm(xp_gemm_m") == 5, ctx.notes
    marker = "  if (M <= 0 || N <= 0) return;"
    text = text.replace("static void xp_sgemm(", 'extern "C" { int xp_gemm_calls = 0; }\nstatic void xp_sgemm(', 1)
    text = text.replace(marker, "  ++xp_gemm_calls;\n" + marker, 1)
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("conv"))))


def _run(lib: ctypes.CDLL, entry: str, arrays: tuple[np.ndarray, ...], ints: tuple[int, ...]) -> int:
    calls = ctypes.c_int.in_dll(lib, "xp_gemm_calls")
    calls.value = 0
    getattr(lib, entry)(*(ctypes.c_void_p(a.ctypes.data) for a in arrays), *(ctypes.c_int(v) for v in ints))
    return calls.value


def _conv_nhwc(x: np.ndarray, w: np.ndarray, s: int) -> np.ndarray:
    n, h, wd, _c = x.shape
    kh, kw, _, k = w.shape
    oh, ow = (h - kh) // s + 1, (wd - kw) // s + 1
    y = np.zeros((n, oh, ow, k))
    for r in range(kh):
        for q in range(kw):
            patch = x[:, r:r + s * (oh - 1) + 1:s, q:q + s * (ow - 1) + 1:s, :].astype(np.float64)
            y += patch @ w[r, q].astype(np.float64)
    return y


@pytest.mark.parametrize(("N", "H", "W", "C", "K", "KH", "KW", "s"),
                         [(1, 3, 3, 1, 1, 3, 3, 1), (2, 11, 13, 5, 7, 3, 3, 1), (1, 17, 14, 19, 23, 3, 2, 2),
                          (3, 9, 10, 33, 17, 1, 1, 1)])
def test_nhwc_convolution_matches_numpy(conv_lib, N: int, H: int, W: int, C: int, K: int, KH: int, KW: int,  # noqa: ANN001
                                        s: int) -> None:
    rng = np.random.default_rng(N * H * W + C * K)
    x = rng.standard_normal((N, H, W, C)).astype(np.float32)
    w = rng.standard_normal((KH, KW, C, K)).astype(np.float32)
    ref = _conv_nhwc(x, w, s)
    y = np.full(ref.shape, np.nan, np.float32)
    assert _run(conv_lib, "run_nhwc", (x, w, y), (N, H, W, C, K, KH, KW, s)) == 1
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(C * KH * KW))


@pytest.mark.parametrize(("n", "c", "h", "w", "k"), [(1, 1, 1, 1, 1), (2, 3, 7, 5, 4), (1, 19, 13, 11, 9)])
def test_padded_nchw_convolution_matches_numpy(conv_lib, n: int, c: int, h: int, w: int, k: int) -> None:  # noqa: ANN001
    rng = np.random.default_rng(n + c + h + w + k)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((n, k, h, w))
    for ry in range(3):
        for rx in range(3):
            ref += np.einsum("nchw,kc->nkhw", padded[:, :, ry:ry + h, rx:rx + w], wt[:, :, ry, rx].astype(np.float64))
    y = np.full(ref.shape, np.nan, np.float32)
    assert _run(conv_lib, "run_nchw", (x, wt, y), (n, c, h, w, k)) == 1
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(c * 9))


@pytest.mark.parametrize(("n", "c", "h", "w", "k", "oh_n", "ow_n"),
                         [(1, 1, 1, 1, 1, 1, 1), (2, 3, 7, 5, 4, 4, 3), (1, 5, 13, 11, 9, 7, 9), (1, 2, 4, 3, 3, 6, 11)])
def test_strided_mirrored_padding_matches_numpy(conv_lib, n: int, c: int, h: int, w: int, k: int, oh_n: int,  # noqa: ANN001
                                                ow_n: int) -> None:
    """Guards with coefficients 2 and -2 in the column, rows wholly in the padding, columns running past both
    edges (the last case has more outputs than inputs): element by element as numpy reads the source."""
    rng = np.random.default_rng(n * c + h * w + k)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c, 5, 5)).astype(np.float32)
    ref = np.zeros((n, k, oh_n, ow_n))
    for oh in range(oh_n):
        for ow in range(ow_n):
            for ry in range(5):
                for rx in range(5):
                    ih, iw = oh * 2 + ry - 2, w + 1 - ow * 2 - rx
                    if 0 <= ih < h and 0 <= iw < w:
                        ref[:, :, oh, ow] += x[:, :, ih, iw].astype(np.float64) @ wt[:, :, ry, rx].T.astype(np.float64)
    y = np.full(ref.shape, np.nan, np.float32)
    assert _run(conv_lib, "run_s2_mirror", (x, wt, y), (n, c, h, w, k, oh_n, ow_n)) == 1
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(c * 25))


@pytest.mark.parametrize(("N", "H", "W", "C", "K"), [(1, 3, 3, 1, 1), (2, 9, 12, 5, 33), (3, 14, 11, 19, 7)])
def test_block_and_thread_coordinates_convolution(conv_lib, N: int, H: int, W: int, C: int, K: int) -> None:  # noqa: ANN001
    rng = np.random.default_rng(N + H + W + C + K)
    x = rng.standard_normal((N, H, W, C)).astype(np.float32)
    w = rng.standard_normal((K, 3, 3, C)).astype(np.float32)
    ref = _conv_nhwc(x, w.transpose(1, 2, 3, 0), 2)
    y = np.full(ref.shape, np.nan, np.float32)
    assert _run(conv_lib, "run_blocks", (x, w, y), (N, H, W, C, K)) == 1
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(C * 9))


@pytest.mark.parametrize(("M", "N", "K"), [(1, 1, 1), (7, 37, 5), (37, 19, 131), (5, 3, 0)])
def test_flat_index_product_with_epilogue(conv_lib, M: int, N: int, K: int) -> None:  # noqa: ANN001
    rng = np.random.default_rng(M * N + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    assert _run(conv_lib, "run_flat", (a, b, c), (M, N, K)) == 1
    np.testing.assert_allclose(c, np.maximum(a.astype(np.float64) @ b, 0.0), rtol=1e-4, atol=1e-4 * max(1, K))


REFUSED = {
    "depthwise: both operands follow the channel": r"""
__global__ void depthwise(const float* x, const float* f, float* y, int C, int H, int W) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= C * H * W) return;
  int ow = i % W, oh = (i / W) % H, c = i / (W * H);
  float acc = 0.0f;
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 3; ++q)
      acc += ((oh + r < H && ow + q < W) ? x[(c * H + oh + r) * W + ow + q] : 0.0f) * f[c * 9 + r * 3 + q];
  y[i] = acc;
}""",
    "a split that does not match the earlier one": r"""
__global__ void mixed(const float* A, const float* B, float* C, int M, int N, int K) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int i = t / N, j = t % (N + 1);
  float s = 0.0f;
  for (int p = 0; p < K; ++p) s += A[i * K + p] * B[p * N + j];
  C[t] = s;
}""",
    "an output bound that is not a multiple of the split": r"""
__global__ void ragged(const float* A, const float* B, float* C, int M, int N, int K) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= M * N - 1) return;
  int i = t / N, j = t % N;
  float s = 0.0f;
  for (int p = 0; p < K; ++p) s += A[i * K + p] * B[p * N + j];
  C[t] = s;
}""",
    "a summation range that depends on the thread": r"""
__global__ void triangular(const float* A, const float* B, float* C, int N, int K) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N * N) return;
  int i = t / N, j = t % N;
  float s = 0.0f;
  for (int p = 0; p < i; ++p) s += A[i * K + p] * B[p * N + j];
  C[t] = s;
}""",
}




@pytest.mark.parametrize("name", sorted(REFUSED))
def test_not_one_gathered_product_is_refused(name: str) -> None:
    recovered, ctx = loop_recovered(REFUSED[name])
    gemm = get_pass("cpu_gemm")
    with pytest.raises(PassRefused):
        gemm.apply(recovered, gemm.INFO.defaults(), ctx)


def test_refused_depthwise_still_right(cbuild) -> None:  # noqa: ANN001
    text = REFUSED["depthwise: both operands follow the channel"] + r"""
extern "C" void run(const float* x, const float* f, float* y, int C, int H, int W) {
  depthwise<<<(C * H * W + 63) / 64, 64>>>(x, f, y, C, H, W);
}"""
    out, _records, _ctx = translate_to_cpu(text, "k.cu")
    assert out is not None and "xp_sgemm(xp_gemm_m" not in out
    lib = cbuild(out, True)
    rng = np.random.default_rng(1)
    C, H, W = 3, 6, 5
    x, f = rng.standard_normal((C, H, W)).astype(np.float32), rng.standard_normal((C, 3, 3)).astype(np.float32)
    y = np.full((C, H, W), np.nan, np.float32)
    lib.run(*(ctypes.c_void_p(a.ctypes.data) for a in (x, f, y)), *(ctypes.c_int(v) for v in (C, H, W)))
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 2), (0, 2)))
    ref = sum(padded[:, r:r + H, q:q + W] * f[:, r, q, None, None] for r in range(3) for q in range(3))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
