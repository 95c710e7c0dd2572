"""Warp intrinsics at a configurable warp size (32 for CUDA, 64 for HIP/CDNA), checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from xpiler_core.dialect import Dialect

WARP_SOURCE = r"""
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void shuffles(const int* x, int* out, int width) {
  int t = threadIdx.x, v = x[t];
  unsigned long long full = ~0ull;
  out[6 * t + 0] = __shfl_sync(full, v, 3, width);
  out[6 * t + 1] = __shfl_up_sync(full, v, 2, width);
  out[6 * t + 2] = __shfl_down_sync(full, v, 5, width);
  out[6 * t + 3] = __shfl_xor_sync(full, v, 1, width);
  out[6 * t + 4] = __shfl_xor_sync(full, v, 8, width);
  out[6 * t + 5] = __shfl(v, t + 1);
}
extern "C" void t_shuffles(const int* x, int* out, int n, int width) { shuffles<<<1, n>>>(x, out, width); }

__global__ void votes(const int* p, unsigned long long* ballots, int* anys, int* alls, unsigned* masks, int* sizes) {
  int t = threadIdx.x, pred = p[t];
  ballots[t] = __ballot_sync(0xffffffffu, pred);
  anys[t] = __any_sync(0xffffffffu, pred);
  alls[t] = __all_sync(0xffffffffu, pred);
  masks[t] = (unsigned)__activemask();
  __syncwarp();
  sizes[t] = warpSize;
}
extern "C" void t_votes(const int* p, unsigned long long* b, int* a, int* l, unsigned* m, int* s, int n) {
  votes<<<1, n>>>(p, b, a, l, m, s);
}

// A warp-32 row normalisation: one 32-lane "warp" per row, sum by shfl_down, broadcast from lane 0.
__global__ void row_normalize32(const float* x, float* y) {
  int lane = threadIdx.x % 32;
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  float v = x[row * 32 + lane];
  float s = v;
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffff, s, offset);
  s = __shfl_sync(0xffffffff, s, 0);
  y[row * 32 + lane] = v / s;
}
extern "C" void t_row_normalize32(const float* x, float* y, int rows) { row_normalize32<<<rows / 8, 256>>>(x, y); }

__global__ void tiles(const float* x, float* sums, float* firsts, int* ranks) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  int t = block.thread_rank();
  float v = x[blockIdx.x * blockDim.x + t];
  float s = cg::reduce(tile, v, cg::plus<float>());
  block.sync();
  float first = tile.shfl(v, 0);
  tile.sync();
  int g = blockIdx.x * blockDim.x + t;
  sums[g] = s;
  firsts[g] = first;
  ranks[g] = tile.thread_rank() + 100 * tile.meta_group_rank();
}
__global__ void lanes_and_divergence(const int* key, unsigned long long* out) {
  int t = threadIdx.x;
  out[8 * t + 0] = __lanemask_lt();
  out[8 * t + 1] = __lanemask_le();
  out[8 * t + 2] = __lanemask_gt();
  out[8 * t + 3] = __lanemask_ge();
  out[8 * t + 4] = 0;
  if (t % 4 == 0) out[8 * t + 4] = __activemask();  // only every 4th lane is here
  __syncwarp();
  out[8 * t + 5] = __match_any_sync(0xffffffffu, key[t]);
  out[8 * t + 6] = __reduce_add_sync(0xffffffffu, (unsigned)key[t]);
  out[8 * t + 7] = __reduce_max_sync(0xffffffffu, key[t]);
}
extern "C" void t_lanes(const int* key, unsigned long long* out, int n) { lanes_and_divergence<<<1, n>>>(key, out); }

extern "C" void t_tiles(const float* x, float* s, float* f, int* r, int blocks) { tiles<<<blocks, 64>>>(x, s, f, r); }
"""


def ref_shuffle(x: np.ndarray, warp: int, width: int) -> np.ndarray:
    n = len(x)
    out = np.zeros((n, 6), np.int64)
    for t in range(n):
        lane = t % warp
        warp_base = t - lane
        base = lane - lane % width

        def get(src_lane: int, warp_base: int = warp_base, t: int = t) -> int:
            src = warp_base + src_lane
            return int(x[src]) if src < n else int(x[t])

        out[t, 0] = get(base + (3 % width))
        out[t, 1] = get(lane - 2) if lane - base >= 2 else x[t]
        out[t, 2] = get(lane + 5) if lane - base + 5 < width else x[t]
        out[t, 3] = get(lane ^ 1) if (lane ^ 1) < base + width else x[t]
        out[t, 4] = get(lane ^ 8) if (lane ^ 8) < base + width else x[t]
        out[t, 5] = get((lane + 1) % warp)
    return out


@pytest.mark.parametrize("warp", [32, 64])
@pytest.mark.parametrize("width", [32, 16, 8])
def test_shuffles_with_width(built_factory, warp: int, width: int) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(WARP_SOURCE, Dialect.CUDA, warp)
    n = 128
    x = np.random.default_rng(warp + width).integers(-1000, 1000, n).astype(np.int32)
    _, out = lib.outputs("t_shuffles", [x, np.zeros(6 * n, np.int32), np.int32(n), np.int32(width)])
    np.testing.assert_array_equal(out.reshape(n, 6), ref_shuffle(x, warp, width))


@pytest.mark.parametrize("warp", [32, 64])
def test_votes_and_warp_size(built_factory, warp: int) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(WARP_SOURCE, Dialect.CUDA, warp)
    n = 128
    p = (np.random.default_rng(9).random(n) < 0.3).astype(np.int32)
    p[64 : 64 + warp] = 1  # one warp where all lanes agree
    outs = lib.outputs(
        "t_votes",
        [
            p,
            np.zeros(n, np.uint64),
            np.zeros(n, np.int32),
            np.zeros(n, np.int32),
            np.zeros(n, np.uint32),
            np.zeros(n, np.int32),
            np.int32(n),
        ],
    )
    _, ballots, anys, alls, masks, sizes = outs
    for w in range(n // warp):
        seg = p[w * warp : (w + 1) * warp]
        bits = sum(1 << i for i in range(min(warp, 32)) if seg[i])  # CUDA's ballot is 32 bits wide
        assert all(int(b) == bits for b in ballots[w * warp : (w + 1) * warp])
        assert set(anys[w * warp : (w + 1) * warp]) == {int(seg.any())}
        assert set(alls[w * warp : (w + 1) * warp]) == {int(seg.all())}
    assert set(masks) == {0xFFFFFFFF}
    assert set(sizes) == {warp}


def test_warp32_reduction_right_at_32_wrong_at_64(built_factory) -> None:  # type: ignore[no-untyped-def]
    rows = 64
    x = np.random.default_rng(10).uniform(0.5, 1.5, (rows, 32)).astype(np.float32)
    expected = x / x.sum(axis=1, keepdims=True)
    lib32 = built_factory(WARP_SOURCE, Dialect.CUDA, 32)
    _, y32 = lib32.outputs("t_row_normalize32", [x.reshape(-1), np.zeros(x.size, np.float32), np.int32(rows)])
    np.testing.assert_allclose(y32.reshape(rows, 32), expected, rtol=1e-5)
    lib64 = built_factory(WARP_SOURCE, Dialect.CUDA, 64)
    _, y64 = lib64.outputs("t_row_normalize32", [x.reshape(-1), np.zeros(x.size, np.float32), np.int32(rows)])
    wrong = ~np.isclose(y64.reshape(rows, 32), expected, rtol=1e-5)
    # At warp 64 the odd rows (lanes 32..63) receive lane 0's sum, the even rows' sum: every odd row is wrong.
    assert wrong[1::2].all()
    assert not wrong[0::2].any()


@pytest.mark.parametrize("warp", [32, 64])
def test_cooperative_groups_tiles(built_factory, warp: int) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(WARP_SOURCE, Dialect.CUDA, warp)
    blocks = 3
    x = np.random.default_rng(11).standard_normal(blocks * 64).astype(np.float32)
    _, sums, firsts, ranks = lib.outputs(
        "t_tiles", [x, np.zeros_like(x), np.zeros_like(x), np.zeros(x.size, np.int32), np.int32(blocks)]
    )
    groups = x.reshape(-1, 16)
    np.testing.assert_allclose(
        sums.reshape(-1, 16), np.repeat(groups.sum(1, keepdims=True), 16, 1), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(firsts.reshape(-1, 16), np.repeat(groups[:, :1], 16, 1))
    t = np.arange(x.size) % 64
    np.testing.assert_array_equal(ranks, t % 16 + 100 * (t // 16))


HIP_SOURCE = r"""
#include <hip/hip_runtime.h>
__global__ void hip_ballot(const int* p, unsigned long long* out, int* lanes) {
  unsigned long long b = __ballot(p[threadIdx.x]);
  out[threadIdx.x] = b;
  lanes[threadIdx.x] = __lane_id() + 1000 * __popcll(b);
}
template <typename T>
__global__ void hip_scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
extern "C" void t_hip_ballot(const int* p, unsigned long long* out, int* lanes, int n) {
  hipLaunchKernelGGL(hip_ballot, dim3(1), dim3(n), 0, 0, p, out, lanes);
}
extern "C" void t_hip_template(float* x, int n) {
  hipLaunchKernelGGL(hip_scale, dim3((n + 63) / 64), dim3(64), 0, 0, x, 3.0f, n);           // T deduced
  hipLaunchKernelGGL((hip_scale<float>), dim3((n + 63) / 64), dim3(64), 0, 0, x, 0.5f, n);  // explicit
}
"""


def test_hip_ballot_is_64_bit_at_warp_64(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(HIP_SOURCE, Dialect.HIP, 64)
    n = 128
    p = (np.random.default_rng(12).random(n) < 0.5).astype(np.int32)
    _, out, lanes = lib.outputs(
        "t_hip_ballot", [p, np.zeros(n, np.uint64), np.zeros(n, np.int32), np.int32(n)]
    )
    for w in range(2):
        seg = p[w * 64 : (w + 1) * 64]
        bits = sum(1 << i for i in range(64) if seg[i])
        assert {int(v) for v in out[w * 64 : (w + 1) * 64]} == {bits}
        np.testing.assert_array_equal(lanes[w * 64 : (w + 1) * 64], np.arange(64) + 1000 * int(seg.sum()))


def test_lane_masks_divergent_activemask_match_and_reduce(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(WARP_SOURCE, Dialect.CUDA, 32)
    n = 64
    key = np.random.default_rng(16).integers(0, 4, n).astype(np.int32)
    _, out = lib.outputs("t_lanes", [key, np.zeros(8 * n, np.uint64), np.int32(n)])
    out = out.reshape(n, 8)
    full = (1 << 32) - 1
    for t in range(n):
        lane, w = t % 32, t // 32
        seg = key[w * 32:(w + 1) * 32]
        assert int(out[t, 0]) == (1 << lane) - 1
        assert int(out[t, 1]) == (1 << (lane + 1)) - 1
        assert int(out[t, 2]) == full & ~((1 << (lane + 1)) - 1)
        assert int(out[t, 3]) == full & ~((1 << lane) - 1)
        assert int(out[t, 4]) == (sum(1 << i for i in range(0, 32, 4)) if lane % 4 == 0 else 0)
        assert int(out[t, 5]) == sum(1 << i for i in range(32) if seg[i] == seg[lane])
        assert int(out[t, 6]) == int(seg.sum())
        assert int(out[t, 7]) == int(seg.max())


def test_hip_launch_kernel_ggl_with_templates(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(HIP_SOURCE, Dialect.HIP, 64)
    x = np.arange(100, dtype=np.float32)
    (out,) = lib.outputs("t_hip_template", [x, np.int32(100)])
    np.testing.assert_array_equal(out, x * 1.5)
