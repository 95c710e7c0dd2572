"""Shared-memory tree reductions become one vectorized sum per block (``tree_reduce``).

Three textbook spellings (interleaved rounds tested on the thread index, on the global index, sequential
halving rounds) translated by the CPU plan, built with g++ and run against numpy; a launch whose block is not a
power of two takes the rounds as written (checked against a numpy emulation of those rounds); a kernel that
reads the array past the rounds at another element is left alone and still computes what the source does;
an integer sum stays exact (the sum is taken in the array's own type: a float accumulator rounded block sums
past 2^24); partial sums a loop around the rounds reads when it comes round again keep the rounds; a staging
fused into the sum with its bounds check proven per block sums what numpy sums of each block's loads, wrapped
unsigned indices included."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import build_shared, loop_recovered
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNELS = r"""
__global__ void interleaved(const float* in, float* out, int n) {
  extern __shared__ float s[];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = 1; stride < blockDim.x; stride *= 2) {
    if (t % (2 * stride) == 0) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void interleaved_global(float* out, const float* in, unsigned int n) {
  unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
  extern __shared__ float s[];
  s[threadIdx.x] = (idx < n) ? in[idx] : 0.f;
  __syncthreads();
  for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
    if ((idx % (stride * 2)) == 0) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

#define BLOCK 128
__global__ void sequential(const float* in, float* out, int n) {
  __shared__ float s[BLOCK];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? 2.0f * in[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] = s[t] + s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" void run(const float* in, float* o1, float* o2, float* o3, int n, int block) {
  int blocks = (n + block - 1) / block;
  interleaved<<<blocks, block, block * sizeof(float)>>>(in, o1, n);
  interleaved_global<<<blocks, block, block * sizeof(float)>>>(o2, in, n);
  if (block <= BLOCK) sequential<<<blocks, block>>>(in, o3, n);
}
"""


def _sequential_rounds(values: np.ndarray) -> float:
    """What the sequential halving rounds leave in element 0 for any block size (the source's own semantics:
    with 96 threads the rounds 48, 24, 12, 6, 3, 1 drop some elements — not the block's sum)."""
    s = values.astype(np.float64).copy()
    stride = len(s) // 2
    while stride > 0:
        s[:stride] += s[stride:2 * stride]
        stride //= 2
    return float(s[0])


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, _ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "tree_reduce")
    assert record["changed"] and "3 shared-memory tree reduction(s)" in " ".join(record["notes"]), record
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("tree"))))


@pytest.mark.parametrize(("n", "block"), [(1, 64), (1000, 64), (4099, 128), (70000, 128)])
def test_block_sums_match_numpy(lib: ctypes.CDLL, n: int, block: int) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    blocks = (n + block - 1) // block
    outs = [np.full(blocks, np.nan, np.float32) for _ in range(3)]
    lib.run(ctypes.c_void_p(x.ctypes.data), *(ctypes.c_void_p(o.ctypes.data) for o in outs), ctypes.c_int(n),
            ctypes.c_int(block))
    padded = np.zeros(blocks * block, np.float64)
    padded[:n] = x
    sums = padded.reshape(blocks, block).sum(axis=1)
    np.testing.assert_allclose(outs[0], sums, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(outs[1], sums, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(outs[2], 2.0 * sums, rtol=1e-5, atol=1e-4)


def test_block_not_a_power_of_two_runs_the_rounds(lib: ctypes.CDLL) -> None:
    # (the interleaved kernels read past their 96-float array at such a block: only the sequential one is checked)
    n, block = 500, 96
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    blocks = (n + block - 1) // block
    outs = [np.full(blocks, np.nan, np.float32) for _ in range(3)]
    lib.run(ctypes.c_void_p(x.ctypes.data), *(ctypes.c_void_p(o.ctypes.data) for o in outs), ctypes.c_int(n),
            ctypes.c_int(block))
    padded = np.zeros(blocks * block, np.float32)
    padded[:n] = 2.0 * x
    expected = [_sequential_rounds(padded[b * block:(b + 1) * block]) for b in range(blocks)]
    assert not np.allclose(expected, padded.reshape(blocks, block).sum(axis=1))  # the full sum would be wrong
    np.testing.assert_allclose(outs[2], expected, rtol=1e-5, atol=1e-4)


READS_PARTIAL = r"""
__global__ void two_halves(const float* in, float* out) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * 64 + t];
  __syncthreads();
  for (int stride = 1; stride < blockDim.x; stride *= 2) {
    if (t % (2 * stride) == 0) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0] - s[32];
}
"""


def test_array_read_elsewhere_after_the_rounds_is_refused() -> None:
    recovered, ctx = loop_recovered(READS_PARTIAL)
    tree = get_pass("tree_reduce")
    with pytest.raises(PassRefused):
        tree.apply(recovered, tree.INFO.defaults(), ctx)


INT_SUMS = r"""
__global__ void int_sums(const int* in, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" void run(const int* in, int* out, int blocks) { int_sums<<<blocks, 256>>>(in, out); }
"""


def test_integer_sums_stay_exact(tmp_path) -> None:  # noqa: ANN001
    # block sums near 2^30: a float accumulator would round them (24-bit mantissa)
    text, records, _ctx = translate_to_cpu(INT_SUMS, "k.cu")
    assert text is not None and next(r for r in records if r["name"] == "tree_reduce")["changed"]
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    x = np.random.default_rng(5).integers(1 << 21, 1 << 22, size=4 * 256, dtype=np.int32)
    out = np.zeros(4, np.int32)
    lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int(4))
    np.testing.assert_array_equal(out, x.reshape(4, 256).astype(np.int64).sum(axis=1))


LOOPED_PARTIALS = r"""
__global__ void carried(const float* in, float* out, int rows) {
  __shared__ float s[64];
  int t = threadIdx.x;
  float carry = 0.0f;
  for (int r = 0; r < rows; ++r) {
    carry += s[t] * (r > 0);  // reads the previous row's partial sums (other than s[0])
    __syncthreads();
    s[t] = in[r * 64 + t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
      if (t < stride) s[t] += s[t + stride];
      __syncthreads();
    }
    if (t == 0) out[r] = s[0];
  }
  out[rows + t] = carry;
}
"""


def test_partials_read_by_the_next_iteration_are_refused() -> None:
    recovered, ctx = loop_recovered(LOOPED_PARTIALS)
    tree = get_pass("tree_reduce")
    with pytest.raises(PassRefused):
        tree.apply(recovered, tree.INFO.defaults(), ctx)


SHIFTED_STAGING = r"""
__global__ void shifted_sums(const float* in, float* out, unsigned int n, int shift) {
  extern __shared__ float s[];
  unsigned int idx = blockIdx.x * blockDim.x + shift + threadIdx.x;  // wraps below zero for a negative shift
  s[threadIdx.x] = idx < n ? in[idx] : 0.0f;
  __syncthreads();
  for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
extern "C" void run(const float* in, float* out, unsigned int n, int shift, int blocks, int block) {
  shifted_sums<<<blocks, block, block * sizeof(float)>>>(in, out, n, shift);
}
"""


@pytest.fixture(scope="module")
def shifted_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, _ctx = translate_to_cpu(SHIFTED_STAGING, "k.cu")
    assert text is not None
    notes = " ".join(next(r for r in records if r["name"] == "tree_reduce")["notes"])
    assert "1 of them with their staging" in notes, notes
    assert "__int128" in text  # the staged bounds check is proven per block
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("shifted"))))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 3000), block=st.sampled_from([32, 64, 256]), shift=st.integers(-300, 300),
       blocks=st.integers(1, 14))
def test_staged_sums_with_their_bounds_check_match_numpy(shifted_lib: ctypes.CDLL, n: int, block: int, shift: int,
                                                         blocks: int) -> None:
    """Staging fused into the sum: blocks whose every index is in range sum unchecked, the others (past n, or
    below zero where the unsigned index wraps and fails the check) keep it — numpy sums what each block's
    threads load."""
    x = np.random.default_rng(n + 7 * block).standard_normal(max(n, 1)).astype(np.float32)
    out = np.full(blocks, np.nan, np.float32)
    shifted_lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_uint(n),
                    ctypes.c_int(shift), ctypes.c_int(blocks), ctypes.c_int(block))
    expected = []
    for b in range(blocks):
        idx = (b * block + shift + np.arange(block)) % (1 << 32)  # the unsigned index, wrapped
        keep = idx < n
        expected.append(x[idx[keep]].astype(np.float64).sum())
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
