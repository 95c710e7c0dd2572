"""Uninitialised shared memory holds garbage on a GPU; the runtime fills it with 0xFF bytes at every block
start so a kernel that reads slots nobody wrote computes wrong answers here too (checked against numpy).
XPILER_SHARED_FILL=zero shows what the zero-filled runtime let through."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
#define SUM_ENTRY(k, smem) \
  extern "C" void t_##k(const float* x, float* out, int blocks) { k<<<blocks, 48, smem>>>(x, out); }
SUM_ENTRY(sum_reads_unwritten, 0)
SUM_ENTRY(sum_padded, 0)
SUM_ENTRY(dyn_sum_reads_unwritten, 64 * sizeof(float))
#define HIST_ENTRY(k) \
  extern "C" void t_##k(const int* x, int* bins, int n) { k<<<(n + 127) / 128, 128>>>(x, bins, n); }
HIST_ENTRY(histogram_uncleared)
HIST_ENTRY(histogram_cleared)
#define COPY_ENTRY(k) \
  extern "C" void t_##k(const float* x, float* y, int blocks) { k<<<blocks, 32>>>(x, y); }
COPY_ENTRY(stage_in_block0_only)
COPY_ENTRY(reverse_file_scope)
COPY_ENTRY(reverse_half_written)
"""

BLOCKS = 5


@pytest.fixture(scope="module")
def lib(built_factory):  # type: ignore[no-untyped-def]
    return built_factory(SOURCE)


def _run(lib, entry: str, args: list[object], fill: str | None = None) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    """Call ``t_<entry>`` on one OS thread (every block reuses one copy of each static array)."""
    res = lib.call(f"t_{entry}", args, threads=1, env={"XPILER_SHARED_FILL": fill} if fill else None)
    assert res.ok, res.error
    return [res.outputs[f"a{i}"] for i, a in enumerate(args) if isinstance(a, np.ndarray)]


def _sums(lib, kernel: str, x: np.ndarray, fill: str | None = None) -> np.ndarray:  # type: ignore[no-untyped-def]
    return _run(lib, kernel, [x, np.zeros(BLOCKS, np.float32), np.int32(BLOCKS)], fill)[1]


@pytest.fixture(scope="module")
def block_input() -> np.ndarray:
    return np.random.default_rng(3).uniform(-1, 1, BLOCKS * 48).astype(np.float32)


@pytest.mark.parametrize("kernel", ["sum_reads_unwritten", "dyn_sum_reads_unwritten"])
def test_reading_unwritten_shared_gives_wrong_sums(lib, kernel: str, block_input: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    expected = block_input.reshape(BLOCKS, 48).sum(axis=1)
    got = _sums(lib, kernel, block_input)
    assert not np.allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert np.isnan(got).all()  # 0xFFFFFFFF is a NaN
    # What the zero-filled runtime reported: a pass a GPU would not give.
    zero = _sums(lib, kernel, block_input, fill="zero")
    np.testing.assert_allclose(zero, expected, rtol=1e-4, atol=1e-5)


def test_kernel_that_writes_before_reading_still_passes(lib, block_input: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    expected = block_input.reshape(BLOCKS, 48).sum(axis=1)
    np.testing.assert_allclose(_sums(lib, "sum_padded", block_input), expected, rtol=1e-4, atol=1e-5)


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 700), seed=st.integers(0, 2**16))
def test_uncleared_histogram_is_wrong_cleared_one_is_right(built_factory, n: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(SOURCE)
    x = np.random.default_rng(seed).integers(0, 1000, n).astype(np.int32)
    expected = np.bincount(x & 15, minlength=16).astype(np.int32)
    blocks = (n + 127) // 128
    cleared = _run(lib, "histogram_cleared", [x, np.zeros(16, np.int32), np.int32(n)])[1]
    uncleared = _run(lib, "histogram_uncleared", [x, np.zeros(16, np.int32), np.int32(n)])[1]
    np.testing.assert_array_equal(cleared, expected)
    # Every block adds its 16 uncleared bins, each starting at -1.
    np.testing.assert_array_equal(uncleared, expected - blocks)


def test_every_block_starts_poisoned_not_with_the_previous_blocks_data(lib) -> None:  # type: ignore[no-untyped-def]
    x = np.arange(4 * 32, dtype=np.float32)
    y = _run(lib, "stage_in_block0_only", [x, np.zeros_like(x), np.int32(4)])[1]
    np.testing.assert_array_equal(y[:32], x[:32][::-1])
    assert np.isnan(y[32:]).all()


def test_file_scope_shared_array_is_poisoned_per_block(lib) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(5).standard_normal(3 * 32).astype(np.float32)
    good = _run(lib, "reverse_file_scope", [x, np.zeros_like(x), np.int32(3)])[1]
    np.testing.assert_array_equal(good, x.reshape(3, 32)[:, ::-1].reshape(-1))
    y = _run(lib, "reverse_half_written", [x, np.zeros_like(x), np.int32(3)])[1].reshape(3, 32)
    np.testing.assert_array_equal(y[:, 16:], x.reshape(3, 32)[:, 15::-1])
    assert np.isnan(y[:, :16]).all()


def test_an_unknown_fill_setting_is_refused(lib) -> None:  # type: ignore[no-untyped-def]
    x = np.zeros(48, np.float32)
    res = lib.call(
        "t_sum_padded", [x, np.zeros(1, np.float32), np.int32(1)], env={"XPILER_SHARED_FILL": "random"}
    )
    assert not res.ok
    assert res.error is not None and "XPILER_SHARED_FILL" in res.error
