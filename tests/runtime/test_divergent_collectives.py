"""A warp collective whose mask names live lanes that never arrive is undefined on hardware (deadlock or
garbage): the runtime reports it like a barrier deadlock, with kernel name and line. Partial masks,
legacy mask-less forms and lanes that have exited stay legal and compute what numpy says."""

from __future__ import annotations

import numpy as np
import pytest

from xpiler_core.dialect import Dialect

SOURCE = r"""
#define FULL 0xffffffffu
// Half the warp shuffles with a full mask, the other half goes on to the block barrier.
__global__ void half_warp_shuffle_then_barrier(const float* x, float* y) {
  float v = x[threadIdx.x];
  if (threadIdx.x % 32 < 16) {
    v += __shfl_down_sync(FULL, v, 8);
  }
  __syncthreads();
  y[threadIdx.x] = v;
}
// The same with a ballot.
__global__ void ballot_in_branch(const float* x, float* y) {
  unsigned b = 0;
  if (x[threadIdx.x] > 0.0f) b = __ballot_sync(FULL, 1);
  __syncthreads();
  y[threadIdx.x] = (float)__popc(b);
}
// Two different collectives with the same full mask in the two arms of a branch.
__global__ void shuffle_vs_ballot(const float* x, float* y) {
  float v = x[threadIdx.x];
  if (threadIdx.x % 2) v = __shfl_xor_sync(FULL, v, 1);
  else v = (float)__ballot_sync(FULL, v > 0.0f);
  y[threadIdx.x] = v;
}
// Legal: the branch's own lanes named by __activemask().
__global__ void half_warp_activemask(const float* x, float* y) {
  float v = x[threadIdx.x];
  if (threadIdx.x % 32 < 16) {
    unsigned m = __activemask();
    v += __shfl_down_sync(m, v, 8, 16);
  }
  __syncthreads();
  y[threadIdx.x] = v;
}
// Legal: tail lanes exit before the full-mask reduction; every live lane takes part.
__global__ void guarded_warp_sum(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  unsigned live = __ballot_sync(__activemask(), 1);
  for (int o = 16; o > 0; o /= 2) {
    float other = __shfl_down_sync(live, v, o);
    if (threadIdx.x % 32 + o < 32 && (live >> (threadIdx.x % 32 + o) & 1)) v += other;
  }
  if (threadIdx.x % 32 == 0) atomicAdd(out, v);
}
// Legal since sm_70: the same intrinsic with the same mask in both arms meets as one collective.
__global__ void same_shuffle_both_arms(const float* x, float* y) {
  float v = x[threadIdx.x];
  if (threadIdx.x % 2) v = __shfl_xor_sync(FULL, v, 1);
  else v = __shfl_xor_sync(FULL, v, 1);
  y[threadIdx.x] = v;
}
#define ENTRY(k) extern "C" void t_##k(const float* x, float* y) { k<<<1, 128>>>(x, y); }
ENTRY(half_warp_shuffle_then_barrier)
ENTRY(ballot_in_branch)
ENTRY(shuffle_vs_ballot)
ENTRY(half_warp_activemask)
ENTRY(same_shuffle_both_arms)
extern "C" void t_guarded_warp_sum(const float* x, float* out, int n) {
  guarded_warp_sum<<<(n + 63) / 64, 64>>>(x, out, n);
}
"""

HIP_SOURCE = r"""
#include <hip/hip_runtime.h>
// HIP's mask-less shuffle in divergent code: the lanes present take part, nobody is waited for.
__global__ void legacy_shuffle_in_branch(const float* x, float* y) {
  float v = x[threadIdx.x];
  if (threadIdx.x < 32) v += __shfl_down(v, 16, 32);
  __syncthreads();
  y[threadIdx.x] = v;
}
extern "C" void t_legacy(const float* x, float* y) {
  hipLaunchKernelGGL(legacy_shuffle_in_branch, dim3(1), dim3(64), 0, 0, x, y);
}
"""


def _line_of(marker: str, after: int = 0) -> int:
    return next(i for i, line in enumerate(SOURCE.splitlines(), 1) if i > after and marker in line)


@pytest.fixture(scope="module")
def lib(built_factory):  # type: ignore[no-untyped-def]
    return built_factory(SOURCE)


def _x() -> np.ndarray:
    return np.random.default_rng(11).standard_normal(128).astype(np.float32)


@pytest.mark.parametrize(
    ("kernel", "line_marker", "intrinsic"),
    [
        ("half_warp_shuffle_then_barrier", "v += __shfl_down_sync(FULL, v, 8);", "__shfl_down_sync"),
        ("ballot_in_branch", "b = __ballot_sync(FULL, 1);", "__ballot_sync"),
    ],
)
def test_full_mask_collective_waiting_on_a_barrier_lane_is_a_deadlock(
    lib,
    kernel: str,
    line_marker: str,
    intrinsic: str,  # type: ignore[no-untyped-def]
) -> None:
    x = _x()
    res = lib.call(f"t_{kernel}", [x, np.zeros_like(x)])
    assert not res.ok
    assert res.error is not None and res.error.startswith(f"deadlock in kernel {kernel}")
    assert f"{intrinsic} at line {_line_of(line_marker)}" in res.error
    assert f"__syncthreads at line {_line_of('__syncthreads();', after=_line_of(line_marker))}" in res.error


def test_different_collectives_in_two_arms_are_a_deadlock(lib) -> None:  # type: ignore[no-untyped-def]
    x = _x()
    res = lib.call("t_shuffle_vs_ballot", [x, np.zeros_like(x)])
    assert not res.ok
    assert res.error is not None and res.error.startswith("deadlock in kernel shuffle_vs_ballot")
    assert "in divergent code" in res.error


def test_activemask_partial_shuffle_is_legal(lib) -> None:  # type: ignore[no-untyped-def]
    x = _x()
    (_, y) = lib.outputs("t_half_warp_activemask", [x, np.zeros_like(x)])
    lane = np.arange(128) % 32
    expected = x.copy()
    lo = lane < 8  # lanes 8..15 read past the 16-wide segment and keep their own value
    expected[lo] = x[lo] + x[np.arange(128)[lo] + 8]
    expected[(lane >= 8) & (lane < 16)] *= 2
    np.testing.assert_allclose(y, expected, rtol=1e-6)


@pytest.mark.parametrize("n", [1, 37, 100, 128])
def test_exited_tail_lanes_do_not_block_a_collective(lib, n: int) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    (_, out) = lib.outputs("t_guarded_warp_sum", [x, np.zeros(1, np.float32), np.int32(n)])
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-5)


def test_same_shuffle_in_both_arms_meets_as_one_collective(lib) -> None:  # type: ignore[no-untyped-def]
    x = _x()
    (_, y) = lib.outputs("t_same_shuffle_both_arms", [x, np.zeros_like(x)])
    np.testing.assert_array_equal(y, x[np.arange(128) ^ 1])


def test_legacy_hip_shuffle_in_divergent_code_is_legal(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(HIP_SOURCE, Dialect.HIP, 64)
    x = _x()[:64]
    (_, y) = lib.outputs("t_legacy", [x, np.zeros_like(x)])
    expected = x.copy()
    expected[:16] += x[16:32]
    expected[16:32] *= 2  # reads past the 32-wide segment: own value
    np.testing.assert_allclose(y, expected, rtol=1e-6)
