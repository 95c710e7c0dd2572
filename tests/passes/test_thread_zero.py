"""``thread_zero``: statements only thread 0 runs become one run per block instead of a loop over the threads.

Block reductions that end in ``if (threadIdx.x == 0)`` (a per-block partial, an ``atomicAdd`` of it, a row
written by the first thread of each block row) are translated by the CPU plan, built with g++ and run against
numpy, on one-dimensional blocks (the statement runs once) and on two-dimensional blocks where only
``threadIdx.x`` is tested (every row of threads runs it: the loops stay, checked at run time). The default
plan's output must build: ``boundary_split`` once split a block loop that an OpenMP ``collapse(3)`` joins to
the loops around it (the nest was no longer perfect, and g++ rejected it).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNELS = r"""
__global__ void block_sums(const float* x, float* partial, int n) {
  __shared__ float s[256];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

__global__ void total(const float* x, float* out, int n) {
  __shared__ float s[128];
  s[threadIdx.x] = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s[threadIdx.x] += x[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = 0.0f;
    for (int k = 0; k < blockDim.x; ++k) acc += s[k];
    atomicAdd(out, acc);
  }
}

// the first thread of each row of the block writes the row's maximum: with blockDim.y > 1 every row runs it
__global__ void row_max(const float* x, float* out, int cols) {
  __shared__ float s[8][32];
  int row = blockIdx.x * blockDim.y + threadIdx.y;
  s[threadIdx.y][threadIdx.x] = x[row * cols + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = s[threadIdx.y][0];
    for (int k = 1; k < blockDim.x; ++k) m = fmaxf(m, s[threadIdx.y][k]);
    out[row] = m;
  }
}

extern "C" void run_block_sums(const float* x, float* partial, int n) {
  block_sums<<<(n + 255) / 256, 256>>>(x, partial, n);
}

extern "C" void run_total(const float* x, float* out, int n, int blocks) { total<<<blocks, 128>>>(x, out, n); }

extern "C" void run_row_max(const float* x, float* out, int rows, int rows_per_block) {
  row_max<<<rows / rows_per_block, dim3(32, rows_per_block)>>>(x, out, 32);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, _ctx = translate_to_cpu(KERNELS, "zero.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "thread_zero")
    assert record["changed"], record
    assert "3 statement(s) of thread 0" in " ".join(record["notes"])  # all three kernels
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("zero"))))


def _ptr(x: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.ctypes.data)


@pytest.mark.parametrize("n", [1, 255, 256, 1000, 70001])
def test_block_partials_match_numpy(lib: ctypes.CDLL, n: int) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    blocks = (n + 255) // 256
    partial = np.full(blocks, np.nan, np.float32)
    lib.run_block_sums(_ptr(x), _ptr(partial), n)
    padded = np.zeros(blocks * 256, np.float64)
    padded[:n] = x
    np.testing.assert_allclose(partial, padded.reshape(blocks, 256).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("n", "blocks"), [(5, 1), (1000, 3), (50000, 17)])
def test_atomic_total_of_block_partials(lib: ctypes.CDLL, n: int, blocks: int) -> None:
    x = np.random.default_rng(n + blocks).uniform(0.0, 1.0, n).astype(np.float32)
    out = np.zeros(1, np.float32)
    lib.run_total(_ptr(x), _ptr(out), n, blocks)
    assert out[0] == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-4)


@pytest.mark.parametrize("rows_per_block", [1, 4, 8])
def test_first_thread_of_each_row(lib: ctypes.CDLL, rows_per_block: int) -> None:
    rows = 16
    x = np.random.default_rng(rows_per_block).standard_normal((rows, 32)).astype(np.float32)
    out = np.full(rows, np.nan, np.float32)
    lib.run_row_max(_ptr(x), _ptr(out), rows, rows_per_block)
    np.testing.assert_array_equal(out, x.max(axis=1))
