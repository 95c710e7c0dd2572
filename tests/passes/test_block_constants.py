"""The block-constants pass: a kernel with a known block shape runs a copy of its body with the extents as constants.

Checked against numpy: TVM's warp-shuffle sum (``__launch_bounds__(32)``, its partials in a per-thread array
that becomes a fixed-size one), and a block-strided kernel launched at the bounded width and at another width
(the original body runs there); a kernel with no known block shape is left alone.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.conftest import loop_recovered
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

TVM_SUM = r"""
extern "C" __global__ void __launch_bounds__(32) default_function_kernel(float* __restrict__ data,
                                                                        float* __restrict__ data_red) {
  float normal_reduce_temp0[1];
  float red_buf0[1];
  normal_reduce_temp0[0] = 0.000000e+00f;
  for (int k_outer = 0; k_outer < 100; ++k_outer) {
    if (((k_outer * 16) + (((int)threadIdx.x) >> 1)) < 1590) {
      normal_reduce_temp0[0] = (normal_reduce_temp0[0] + data[((k_outer * 32) + ((int)threadIdx.x))]);
    }
  }
  uint mask[1];
  float t0[1];
  red_buf0[0] = normal_reduce_temp0[0];
  mask[0] = __activemask();
  t0[0] = __shfl_down_sync(mask[0], red_buf0[0], 16, 32);
  red_buf0[0] = (red_buf0[0] + t0[0]);
  t0[0] = __shfl_down_sync(mask[0], red_buf0[0], 8, 32);
  red_buf0[0] = (red_buf0[0] + t0[0]);
  t0[0] = __shfl_down_sync(mask[0], red_buf0[0], 4, 32);
  red_buf0[0] = (red_buf0[0] + t0[0]);
  t0[0] = __shfl_down_sync(mask[0], red_buf0[0], 2, 32);
  red_buf0[0] = (red_buf0[0] + t0[0]);
  t0[0] = __shfl_down_sync(mask[0], red_buf0[0], 1, 32);
  red_buf0[0] = (red_buf0[0] + t0[0]);
  red_buf0[0] = __shfl_sync(mask[0], red_buf0[0], 0, 32);
  if (((int)threadIdx.x) == 0) {
    data_red[0] = red_buf0[0];
  }
}
"""

STRIDED = r"""
__global__ void __launch_bounds__(64) scale_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    y[blockIdx.x * cols + c] = 2.0f * x[blockIdx.x * cols + c] + (float)threadIdx.x;
  }
}
"""


def test_warp_sum_runs_with_constant_extents_and_matches_numpy(cbuild) -> None:  # noqa: ANN001 - fixture
    text, records, _ctx = translate_to_cpu(TVM_SUM, "s.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "block_constants")
    assert record["changed"], record
    assert "xp_bdx == 32 && xp_bdy == 1 && xp_bdz == 1" in text
    lib = cbuild(text + """
extern "C" void run(float* data, float* out) { default_function_kernel(dim3(1), dim3(32), 0, data, out); }
""")
    data = np.random.default_rng(0).standard_normal(3200).astype(np.float32)
    out = np.zeros(1, dtype=np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.run(data.ctypes.data_as(ptr), out.ctypes.data_as(ptr))
    np.testing.assert_allclose(out[0], data[:3180].astype(np.float64).sum(), rtol=1e-4, atol=1e-3)


def test_other_block_widths_run_the_original_body(cbuild) -> None:  # noqa: ANN001 - fixture
    text, records, _ctx = translate_to_cpu(STRIDED, "r.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "block_constants")["changed"]
    assert "xp_bdx == 64" in text
    lib = cbuild(text + """
extern "C" void run(const float* x, float* y, int rows, int cols, int threads) {
  scale_rows(dim3(rows), dim3(threads), 0, x, y, cols);
}
""")
    rows, cols = 5, 150
    x = np.random.default_rng(1).standard_normal(rows * cols).astype(np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    for threads in (64, 32, 7):
        y = np.zeros_like(x)
        lib.run(x.ctypes.data_as(ptr), y.ctypes.data_as(ptr), rows, cols, threads)
        lane = (np.arange(rows * cols) % cols) % threads
        np.testing.assert_array_equal(y, 2.0 * x + lane.astype(np.float32))


def test_unknown_block_shape_is_left_alone() -> None:
    module, ctx = loop_recovered(STRIDED.replace("__launch_bounds__(64) ", ""))
    with pytest.raises(PassRefused, match="block shape not known"):
        get_pass("block_constants").apply(module, {}, ctx)
