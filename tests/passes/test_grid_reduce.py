"""The grid-reduce pass: per-thread fold + block combine + one atomic → one OpenMP reduction loop.

Semantics are checked against numpy on hand-written kernels the suite does not have (a shared-memory tree
with a grid-stride fold through a device helper, an int max with one element per thread and a butterfly),
built with gcc. Kernels whose combine is not a fold of the partials (scaled partials, nonzero starts,
mismatched atomics, global reads or per-block outputs) must be refused.
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
__device__ float sq(float v) { return v * v; }

__global__ void sumsq_kernel(const float* x, float* out, int n) {
  __shared__ float part[128];
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += sq(x[i]);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = part[threadIdx.x] + part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

__global__ void imax_kernel(const int* x, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = (i < n) ? x[i] : INT_MIN;
  for (int m = 16; m > 0; m >>= 1) {
    int o = __shfl_xor_sync(0xffffffff, v, m);
    v = v > o ? v : o;
  }
  if ((threadIdx.x & 31) == 0) atomicMax(out, v);
}

extern "C" void run(const float* x, const int* xi, float* sum, int* mx, int n) {
  int grid = (n + 127) / 128;
  sumsq_kernel<<<grid > 8 ? 8 : grid, 128>>>(x, sum, n);
  imax_kernel<<<(n + 255) / 256, 256>>>(xi, mx, n);
}
"""


def test_reductions_match_numpy(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_reduce")["changed"]
    assert "reduction(+:" in text and "reduction(max:" in text
    lib = cbuild(text, True)
    rng = np.random.default_rng(7)
    for n in (1, 100, 5000, 70001):
        x = rng.uniform(-1, 1, n).astype(np.float32)
        xi = rng.integers(-10**6, 10**6, n).astype(np.int32)
        total = np.array([0.25], np.float32)
        mx = np.array([-(2**31)], np.int32)
        lib.run(*(ctypes.c_void_p(a.ctypes.data) for a in (x, xi, total, mx)), ctypes.c_int(n))
        np.testing.assert_allclose(total[0], 0.25 + np.sum(x.astype(np.float64) ** 2), rtol=1e-4)
        assert mx[0] == xi.max()


FOLD = "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];"


@pytest.mark.parametrize("kernel", [
    # the block's partials are scaled before the atomic
    f"float v = 0.0f; {FOLD} v = 2.0f * v; if (threadIdx.x == 0) atomicAdd(out, v);",
    # every thread starts from 1: the grid adds 1 per thread
    f"float v = 1.0f; {FOLD} atomicAdd(out, v);",
    # a max atomic on a sum fold
    f"float v = 0.0f; {FOLD} atomicMax(out, v);",
    # the combine reads global memory
    f"float v = 0.0f; {FOLD} v += x[threadIdx.x]; atomicAdd(out, v);",
    # per-block results, not one scalar
    f"float v = 0.0f; {FOLD} out[blockIdx.x] = v;",
    # the atomic's address depends on the thread
    f"float v = 0.0f; {FOLD} atomicAdd(out + threadIdx.x, v);",
    # the partial steers control flow
    f"float v = 0.0f; {FOLD} if (v > 0.0f) atomicAdd(out, v);",
    # a fold that is not associative with the atomic (product)
    "float v = 0.0f; for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) "
    "v = v * x[i]; atomicAdd(out, v);",
])
def test_non_folds_are_refused(kernel: str) -> None:
    _assert_refused(kernel)


# the tutorials' spelling: the partial kept in the thread's own slot of the shared array, a while loop over the
# grid (cf. the OLCF training series' reduce_a)
SLOT_WHILE = r"""
__global__ void slot_while(const float* x, float* out, size_t n) {
  __shared__ float s[256];
  int tid = threadIdx.x;
  s[tid] = 0.0f;
  size_t i = threadIdx.x + blockDim.x * blockIdx.x;
  while (i < n) {
    s[tid] += x[i];
    i += gridDim.x * blockDim.x;
  }
  for (unsigned int h = blockDim.x / 2; h > 0; h >>= 1) {
    __syncthreads();
    if (tid < h) s[tid] += s[tid + h];
  }
  if (tid == 0) atomicAdd(out, s[0]);
}

extern "C" void run_slot_while(const float* x, float* out, size_t n, int blocks) {
  slot_while<<<blocks, 256>>>(x, out, n);
}
"""


def test_own_slot_partial_over_a_while_loop(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(SLOT_WHILE, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_reduce")["changed"]
    lib = cbuild(text, True)
    rng = np.random.default_rng(3)
    for n, blocks in ((1, 1), (300, 2), (100_003, 7), (1 << 20, 640)):
        x = rng.uniform(0, 1, n).astype(np.float32)
        total = np.array([0.5], np.float32)
        lib.run_slot_while(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(total.ctypes.data), ctypes.c_size_t(n),
                           ctypes.c_int(blocks))
        np.testing.assert_allclose(total[0], 0.5 + np.sum(x.astype(np.float64)), rtol=1e-4)


@pytest.mark.parametrize("kernel", [
    # the slot is read by another thread before the fold ends (no barrier, but a read of the array)
    "__shared__ float s[128]; int t = threadIdx.x; s[t] = 0.0f; float peek = s[0]; "
    "for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) s[t] += x[i]; "
    "if (t == 0) atomicAdd(out, s[0] + peek);",
    # the slot's index changes
    "__shared__ float s[128]; int t = threadIdx.x; s[t] = 0.0f; t = t ^ 1; "
    "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s[t] += x[i]; "
    "if (threadIdx.x == 0) atomicAdd(out, s[0]);",
    # the while loop's index is read after it
    "float v = 0.0f; int i = blockIdx.x * blockDim.x + threadIdx.x; while (i < n) { v += x[i]; "
    "i += gridDim.x * blockDim.x; } atomicAdd(out, v + (float)i);",
])
def test_slot_and_while_spellings_that_are_not_folds_are_refused(kernel: str) -> None:
    _assert_refused(kernel)


def _assert_refused(kernel: str) -> None:
    text = f"__global__ void k(const float* x, float* out, int n) {{ {kernel} }}"
    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    reduce = get_pass("grid_reduce")
    with pytest.raises(PassRefused):
        reduce.apply(module, reduce.INFO.defaults(), ctx)
