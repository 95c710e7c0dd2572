"""Uninitialised shared memory holds garbage on a GPU; the runtime fills it with 0xFF bytes at every block
start so a kernel that reads slots nobody wrote computes wrong answers here too (checked against numpy).
XPILER_SHARED_FILL=zero shows what the zero-filled runtime let through."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.runtime.call import run_kernel

SOURCE = r"""
// Tree reduction sized for 64 threads, launched with 48: the first step reads s[48..63], never written.
__global__ void sum_reads_unwritten(const float* x, float* out) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int stride = 32; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
// The fixed kernel: pads the tree with zeros.
__global__ void sum_padded(const float* x, float* out) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  if (t + blockDim.x < 64) s[t + blockDim.x] = 0.0f;
  __syncthreads();
  for (int stride = 32; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
// The same bug through dynamic shared memory.
__global__ void dyn_sum_reads_unwritten(const float* x, float* out) {
  extern __shared__ float d[];
  int t = threadIdx.x;
  d[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int stride = 32; stride > 0; stride /= 2) {
    if (t < stride) d[t] += d[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = d[0];
}
// A shared histogram whose bins are never cleared.
__global__ void histogram_uncleared(const int* x, int* bins, int n) {
  __shared__ int local[16];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&local[x[i] & 15], 1);
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}
__global__ void histogram_cleared(const int* x, int* bins, int n) {
  __shared__ int local[16];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x < 16) local[threadIdx.x] = 0;
  __syncthreads();
  if (i < n) atomicAdd(&local[x[i] & 15], 1);
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}
// Only block 0 stages its input; the others read what a previous block left (or garbage).
__global__ void stage_in_block0_only(const float* x, float* y) {
  __shared__ float s[32];
  if (blockIdx.x == 0) s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[blockIdx.x * 32 + threadIdx.x] = s[31 - threadIdx.x];
}
// A file-scope shared array, written before it is read: correct, must still pass.
__shared__ float tile[32];
__global__ void reverse_file_scope(const float* x, float* y) {
  int i = blockIdx.x * 32 + threadIdx.x;
  tile[threadIdx.x] = x[i];
  __syncthreads();
  y[i] = tile[31 - threadIdx.x];
}
// The same file-scope array, half written.
__global__ void reverse_half_written(const float* x, float* y) {
  int i = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.x < 16) tile[threadIdx.x] = x[i];
  __syncthreads();
  y[i] = tile[31 - threadIdx.x];
}
"""

BLOCKS = 5


def _sums(kernel: str, x: np.ndarray, *, shared_bytes: int = 0, fill: str | None = None) -> np.ndarray:
    env = {"XPILER_SHARED_FILL": fill} if fill else None
    run = run_kernel(
        SOURCE,
        kernel,
        grid=BLOCKS,
        block=48,
        shared_bytes=shared_bytes,
        args=[x, np.zeros(BLOCKS, np.float32)],
        threads=1,
        env=env,
    )
    assert run.ok, run.error
    assert run.arrays[1] is not None
    return run.arrays[1]


@pytest.fixture(scope="module")
def block_input() -> np.ndarray:
    return np.random.default_rng(3).uniform(-1, 1, BLOCKS * 48).astype(np.float32)


def test_reading_unwritten_static_shared_gives_wrong_sums(block_input: np.ndarray) -> None:
    expected = block_input.reshape(BLOCKS, 48).sum(axis=1)
    got = _sums("sum_reads_unwritten", block_input)
    assert not np.allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert np.isnan(got).all()  # 0xFFFFFFFF is a NaN
    # What the zero-filled runtime reported: a pass a GPU would not give.
    zero = _sums("sum_reads_unwritten", block_input, fill="zero")
    np.testing.assert_allclose(zero, expected, rtol=1e-4, atol=1e-5)


def test_reading_unwritten_dynamic_shared_gives_wrong_sums(block_input: np.ndarray) -> None:
    expected = block_input.reshape(BLOCKS, 48).sum(axis=1)
    got = _sums("dyn_sum_reads_unwritten", block_input, shared_bytes=64 * 4)
    assert np.isnan(got).all()
    zero = _sums("dyn_sum_reads_unwritten", block_input, shared_bytes=64 * 4, fill="zero")
    np.testing.assert_allclose(zero, expected, rtol=1e-4, atol=1e-5)


def test_kernel_that_writes_before_reading_still_passes(block_input: np.ndarray) -> None:
    expected = block_input.reshape(BLOCKS, 48).sum(axis=1)
    np.testing.assert_allclose(_sums("sum_padded", block_input), expected, rtol=1e-4, atol=1e-5)


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 700), seed=st.integers(0, 2**16))
def test_uncleared_histogram_is_wrong_cleared_one_is_right(n: int, seed: int) -> None:
    x = np.random.default_rng(seed).integers(0, 1000, n).astype(np.int32)
    expected = np.bincount(x & 15, minlength=16).astype(np.int32)
    blocks = (n + 127) // 128
    runs = {}
    for kernel in ("histogram_uncleared", "histogram_cleared"):
        run = run_kernel(
            SOURCE, kernel, grid=blocks, block=128, args=[x, np.zeros(16, np.int32), np.int32(n)]
        )
        assert run.ok, run.error
        runs[kernel] = run.arrays[1]
    np.testing.assert_array_equal(runs["histogram_cleared"], expected)
    # Every block adds its 16 uncleared bins, each starting at -1.
    np.testing.assert_array_equal(runs["histogram_uncleared"], expected - blocks)


def test_every_block_starts_poisoned_not_with_the_previous_blocks_data() -> None:
    x = np.arange(4 * 32, dtype=np.float32)
    # One OS thread: all blocks share one copy of the static array, as the zero-filled runtime showed.
    run = run_kernel(SOURCE, "stage_in_block0_only", grid=4, block=32, args=[x, np.zeros_like(x)], threads=1)
    assert run.ok, run.error
    y = run.arrays[1]
    assert y is not None
    np.testing.assert_array_equal(y[:32], x[:32][::-1])
    assert np.isnan(y[32:]).all()


def test_file_scope_shared_array_is_poisoned_per_block() -> None:
    x = np.random.default_rng(5).standard_normal(3 * 32).astype(np.float32)
    good = run_kernel(SOURCE, "reverse_file_scope", grid=3, block=32, args=[x, np.zeros_like(x)], threads=1)
    assert good.ok, good.error
    np.testing.assert_array_equal(good.arrays[1], x.reshape(3, 32)[:, ::-1].reshape(-1))
    half = run_kernel(SOURCE, "reverse_half_written", grid=3, block=32, args=[x, np.zeros_like(x)], threads=1)
    assert half.ok, half.error
    y = half.arrays[1]
    assert y is not None
    y = y.reshape(3, 32)
    np.testing.assert_array_equal(y[:, 16:], x.reshape(3, 32)[:, 15::-1])
    assert np.isnan(y[:, :16]).all()


def test_an_unknown_fill_setting_is_refused() -> None:
    x = np.zeros(48, np.float32)
    run = run_kernel(
        SOURCE,
        "sum_padded",
        grid=1,
        block=48,
        args=[x, np.zeros(1, np.float32)],
        env={"XPILER_SHARED_FILL": "random"},
    )
    assert not run.ok
    assert run.error is not None and "XPILER_SHARED_FILL" in run.error
