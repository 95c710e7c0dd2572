"""The grid-flatten pass: per-thread grid-stride loops / guarded elements → one flat loop over the elements.

Semantics are checked against numpy on hand-written kernels (a grid-stride loop through a device function,
a template block size behind an early exit, a 2-D launch that must keep the recovered nest), built with gcc.
Kernels whose iterations are not independent (neighbour reads of a written buffer, atomics, per-thread
indices in the body, carried scalars) must be refused.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNELS = r"""
__device__ float cube_plus(float v, float a) { float t = v * v * v; return t + a * v; }

__global__ void stride_kernel(const float* x, float* y, float a, int n) {
  const int stride = gridDim.x * blockDim.x;
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += stride) y[i] = cube_plus(x[i], a) + expf(-x[i]);
}

template <int BLOCK>
__global__ void exit_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < 3; ++k) acc = acc * x[i] + (float)(k + 1);
  y[i] = acc;
}

__global__ void plain_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}

__global__ void spelled_kernel(const float* x, float* y, int n) {  // generated style: the index spelled out
  if ((int)blockIdx.x * 128 + (int)threadIdx.x < n) {
    y[(int)blockIdx.x * 128 + (int)threadIdx.x] = x[(int)blockIdx.x * 128 + (int)threadIdx.x] - 1.0f;
  }
}

extern "C" void run(const float* x, float* y1, float* y2, float* y3, float* y4, float a, int n) {
  int grid = (n + 127) / 128;
  if (grid > 4) grid = 4;
  stride_kernel<<<grid, 128>>>(x, y1, a, n);
  exit_kernel<64><<<(n + 63) / 64, 64>>>(x, y2, n);
  plain_kernel<<<(n + 31) / 32, dim3(32, 4)>>>(x, y3, n);  // 2-D block (rows repeat): keeps the recovered nest
  spelled_kernel<<<(n + 127) / 128, 128>>>(x, y4, n);
}
"""


def _recovered(text: str) -> tuple[object, PassContext]:
    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    recovery = get_pass("loop_recovery")
    return recovery.apply(module, {**recovery.INFO.defaults(), "wrapper": False}, ctx), ctx


def test_flattened_kernels_match_numpy(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_flatten")["changed"]
    assert text.count("xp_flat_n = ") == 4  # every kernel; the 2-D launch takes the nest at run time
    lib = cbuild(text, True)
    rng = np.random.default_rng(3)
    for n in (1, 127, 1000, 20000):
        x = rng.uniform(-2, 2, n).astype(np.float32)
        ys = [np.full(n, np.nan, np.float32) for _ in range(4)]
        ptr = [ctypes.c_void_p(a.ctypes.data) for a in (x, *ys)]
        lib.run(*ptr, ctypes.c_float(0.5), ctypes.c_int(n))
        xd = x.astype(np.float64)
        np.testing.assert_allclose(ys[0], xd**3 + 0.5 * xd + np.exp(-xd), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ys[1], (xd + 2) * xd + 3, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ys[2], 2 * xd, rtol=1e-6)
        np.testing.assert_allclose(ys[3], xd - 1, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("body", [
    "y[i] = x[i] + y[i + 1];",                       # neighbour read of a written buffer
    "atomicAdd(y, x[i]);",                           # an effect shared by all iterations
    "y[i] = x[i] + (float)threadIdx.x;",             # the thread index, not only through i
    "acc += x[i]; y[i] = acc;",                      # a scalar carried across iterations
    "y[i / 2] = x[i];",                              # two iterations write one element
    "float* p = y + i + 1; *p = x[i];",              # a local pointer into the next element
    "const float* q = y + 1; y[i] = q[i];",          # reading a written buffer through an alias
])
def test_dependent_iterations_are_refused(body: str) -> None:
    text = f"""
__global__ void k(const float* x, float* y, int n) {{
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {{ {body} }}
}}
"""
    module, ctx = _recovered(text)
    flatten = get_pass("grid_flatten")
    with pytest.raises(PassRefused):
        flatten.apply(module, flatten.INFO.defaults(), ctx)


def test_stride_other_than_the_grid_is_refused() -> None:
    text = """
__global__ void k(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x) y[i] = x[i];
}
"""
    module, ctx = _recovered(text)
    flatten = get_pass("grid_flatten")
    with pytest.raises(PassRefused, match="grid size"):
        flatten.apply(module, flatten.INFO.defaults(), ctx)

