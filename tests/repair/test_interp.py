"""The repair interpreter runs suite kernels like the hardware would: its outputs match the numpy references
(written independently from the math), and its C integer semantics match C's truncating division."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.frontend.lower import lower_text
from xpiler_core.repair import examples as EX
from xpiler_core.repair.interp import LaunchShape, Program, Unsupported, run_kernel
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"
OPS = [
    "elementwise/add", "activation/relu", "elementwise/sign", "activation/gelu", "pooling/avgpool2d",
    "pooling/maxpool2d", "normalization/batchnorm", "matrix/gemm", "layout/transpose", "layout/gather",
    "layout/scatter_add", "llm/rotary_embedding", "convolution/conv2d_nhwc",
]


@pytest.mark.parametrize("op", OPS)
def test_interpreter_matches_numpy_reference_on_small_cases(op: str) -> None:
    spec = load_spec(SUITE / op / "spec.toml")
    prog = Program.of(lower_text(spec.source_text(), str(spec.source)))
    cases = EX.tiny_cases(spec, 1024)
    assert cases, "the spec yields small cases"
    for i, case in enumerate(cases[:1]):
        ex = EX.make_example(spec, case, i, seed=3)
        buffers = run_kernel(prog, spec.entry, EX.stored_args(spec, ex.inputs), ex.shape, spec.kind)
        for name, expected in ex.expected.items():
            got = np.array([float(v) for v in buffers[name].data])
            atol, rtol = EX.tolerance(spec, name)
            np.testing.assert_allclose(got, np.asarray(expected, dtype=np.float64).reshape(-1), atol=atol + 1e-6, rtol=rtol + 1e-6)


def _run_scalar_kernel(body: str, a: int, b: int) -> list[int]:
    src = f"__global__ void k(int* out, int a, int b) {{ {body} }}"
    prog = Program.of(lower_text(src, "k.cu"))
    bufs = run_kernel(prog, "k", {"out": np.zeros(4, dtype=np.int32), "a": a, "b": b}, LaunchShape((1, 1, 1), (1, 1, 1)))
    return [int(v) for v in bufs["out"].data]


@settings(max_examples=60, deadline=None)
@given(st.integers(-10_000, 10_000), st.integers(-50, 50).filter(lambda b: b != 0))
def test_integer_division_and_remainder_truncate_like_c(a: int, b: int) -> None:
    q, r, s, m = _run_scalar_kernel("out[0] = a / b; out[1] = a % b; out[2] = a >> 2; out[3] = a & 7;", a, b)
    expected_q = math.trunc(Fraction(a, b))
    assert q == expected_q and r == a - b * expected_q
    assert s == a // 4 and m == a % 8  # arithmetic shift floors; & 7 is the two's-complement low bits


def test_unmodeled_constructs_are_refused_not_guessed() -> None:
    # a warp vote in a loop condition: its operands cannot be exchanged before the condition is evaluated
    src = """__global__ void k(float* out) {
      int n = 0;
      for (int i = threadIdx.x; __any_sync(0xffffffff, i < 40); i += 32) n++;
      out[threadIdx.x] = n;
    }"""
    prog = Program.of(lower_text(src, "k.cu"))
    with pytest.raises(Unsupported):
        run_kernel(prog, "k", {"out": np.zeros(32, dtype=np.float32)}, LaunchShape((1, 1, 1), (32, 1, 1)))


WARP_KERNEL = """
__global__ void k(float* out, int* votes, int m) {
  const int t = threadIdx.x;
  if (t >= 60) return;  // the last four lanes of the second warp leave first
  const float v = (float)t;
  out[t] = __shfl_down_sync(0xffffffffu, v, 3, 16);
  out[64 + t] = __shfl_xor_sync(0xffffffffu, v, m, 8);
  out[128 + t] = __shfl_sync(0xffffffffu, v, 5, 16);
  out[192 + t] = __shfl_up_sync(0xffffffffu, v, 2);
  votes[t] = __ballot_sync(0xffffffffu, t % 3 == 0);
  votes[64 + t] = __any_sync(0xffffffffu, t == 7) + 2 * __all_sync(0xffffffffu, t < 50);
  votes[128 + t] = __activemask();
}
"""


@pytest.mark.parametrize("m", [1, 3, 6])
def test_warp_operations_follow_the_cuda_rules(m: int) -> None:
    prog = Program.of(lower_text(WARP_KERNEL, "k.cu"))
    out, votes = np.zeros(256, np.float32), np.zeros(192, np.int32)
    bufs = run_kernel(prog, "k", {"out": out, "votes": votes, "m": m}, LaunchShape((1, 1, 1), (64, 1, 1)))
    got = np.array([float(v) for v in bufs["out"].data])
    got_votes = [int(v) for v in bufs["votes"].data]
    live = range(60)
    # CUDA programming guide: a source lane outside the caller's width-segment returns the caller's value;
    # here the lanes that left have no value to give (undefined in CUDA), so only live sources are checked
    for t in live:
        lane, warp = t % 32, t - t % 32
        seg = lane - lane % 16
        down = lane + 3 if lane + 3 < seg + 16 else lane
        if warp + down < 60:
            assert got[t] == warp + down
        seg8 = lane - lane % 8
        xor = lane ^ m if seg8 <= (lane ^ m) < seg8 + 8 else lane
        if warp + xor < 60:
            assert got[64 + t] == warp + xor
        assert got[128 + t] == warp + seg + 5
        up = lane - 2 if lane >= 2 else lane
        assert got[192 + t] == warp + up
        members = [u for u in range(warp, warp + 32) if u < 60]
        ballot = sum(1 << (u - warp) for u in members if u % 3 == 0)
        assert got_votes[t] & 0xFFFFFFFF == ballot & 0xFFFFFFFF
        any7 = any(u == 7 for u in members)
        all50 = all(u < 50 for u in members)
        assert got_votes[64 + t] == int(any7) + 2 * int(all50)
        assert got_votes[128 + t] & 0xFFFFFFFF == sum(1 << (u - warp) for u in members) & 0xFFFFFFFF


HOST_ENTRY = """
#include <cuda_runtime.h>
#define SHIFT 1.5f
static constexpr int kThreads = 64;
__constant__ float c_scale[2];
static const float kScale[2] = {2.0f, -3.0f};

__global__ void affine(const float* __restrict__ x, float* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = x[i] * c_scale[i % 2] + SHIFT;
}

extern "C" void run(const float* x, float* y, int n) {
  float* d_x = nullptr;
  float* d_y = nullptr;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaMalloc(reinterpret_cast<void**>(&d_x), bytes);
  cudaMalloc((void**)&d_y, bytes);
  cudaMemset(d_y, 0, bytes);
  cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice);
  cudaMemcpyToSymbol(c_scale, kScale, sizeof(kScale));
  dim3 grid((n + kThreads - 1) / kThreads / 2 + 1);
  affine<<<grid, kThreads>>>(d_x, d_y, n);
  cudaDeviceSynchronize();
  cudaMemcpy(y, d_y, bytes, cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_y);
}
"""


@pytest.mark.parametrize("n", [1, 7, 200])
def test_host_entry_allocates_copies_and_launches(n: int) -> None:
    prog = Program.of(lower_text(HOST_ENTRY, "k.cu"))
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    # the spec may name the entry's arguments otherwise: they are matched in order
    bufs = run_kernel(prog, "run", {"src": x, "dst": np.zeros(n, np.float32), "count": n},
                      LaunchShape((1, 1, 1), (1, 1, 1)), "host")
    got = np.array([float(v) for v in bufs["dst"].data], np.float32)
    scale = np.where(np.arange(n) % 2 == 0, np.float32(2.0), np.float32(-3.0))
    np.testing.assert_array_equal(got, x * scale + np.float32(1.5))


BLOCK_SUM = """
__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? partial[lane] : 0.0f;
  if (warp == 0) v = warp_sum(v);
  return v;
}

__global__ void row_sums(const float* x, float* out, int cols) {
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];
  const float total = block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""


def test_warp_operations_inside_device_functions_step_with_the_block() -> None:
    prog = Program.of(lower_text(BLOCK_SUM, "k.cu"))
    rows, cols = 3, 300
    x = np.random.default_rng(4).standard_normal((rows, cols)).astype(np.float32)
    bufs = run_kernel(prog, "row_sums", {"x": x, "out": np.zeros(rows, np.float32), "cols": cols},
                      LaunchShape((rows, 1, 1), (128, 1, 1)))
    got = np.array([float(v) for v in bufs["out"].data])
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
