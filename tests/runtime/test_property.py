"""Property test: a warp-size-generic block reduction (shuffles + shared memory + barriers) equals numpy
for any element count, block size and warp size."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect

SOURCE = r"""
__global__ void block_sums(const float* x, float* out, int n) {
  __shared__ float partial[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
  int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + warpSize - 1) / warpSize;
  if (warp == 0) {
    v = lane < warps ? partial[lane] : 0.0f;
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
    if (lane == 0) out[blockIdx.x] = v;
  }
}
extern "C" void t_block_sums(const float* x, float* out, int n, int block) {
  block_sums<<<(n + block - 1) / block, block>>>(x, out, n);
}
"""


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(1, 5000),
    warps_per_block=st.integers(1, 16),
    warp=st.sampled_from([32, 64]),
    seed=st.integers(0, 2**16),
)
def test_block_reduction_matches_numpy(
    built_factory, n: int, warps_per_block: int, warp: int, seed: int
) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(SOURCE, Dialect.CUDA, warp)
    block = warps_per_block * warp
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    blocks = (n + block - 1) // block
    _, out = lib.outputs("t_block_sums", [x, np.zeros(blocks, np.float32), np.int32(n), np.int32(block)])
    padded = np.zeros(blocks * block, np.float64)
    padded[:n] = x
    np.testing.assert_allclose(out, padded.reshape(blocks, block).sum(axis=1), rtol=1e-4, atol=1e-4)
