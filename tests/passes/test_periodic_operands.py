"""``periodic_operands``: loads of per-channel parameters ``P[E + i % C]`` with a small constant period are read
from a table of one period per chunk of the loop instead of a gather.

Kernels in the spellings that reach the pass (a flat element loop shared out over threads, TVM's NCHWc
scale-and-shift split by ``delinearize``) are translated by the CPU plan, built with g++ and run against numpy on
lengths that are not a multiple of the period or of the chunk, including shorter than one period (the loop then
runs as written). A parameter that may alias the output (no ``__restrict__``) is not tabled (and still right).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNELS = r"""
// NHWC with 7 channels: a scale and a shift per channel
__global__ void scale_shift(const float* __restrict__ x, const float* __restrict__ s, const float* __restrict__ b,
                            float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s[i % 7] + b[i % 7];
}

// the bias might be the output itself (no __restrict__): not tabled
__global__ void bias_alias(const float* x, const float* b, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + b[i % 4];
}

extern "C" void run_scale_shift(const float* x, const float* s, const float* b, float* y, int n) {
  scale_shift<<<(n + 255) / 256, 256>>>(x, s, b, y, n);
}

extern "C" void run_bias_alias(const float* x, const float* b, float* y, int n) {
  bias_alias<<<(n + 127) / 128, 128>>>(x, b, y, n);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, _ctx = translate_to_cpu(KERNELS, "periodic.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "periodic_operands")
    assert record["changed"], record
    assert "(scale_shift)" in " ".join(record["notes"])  # bias_alias is not tabled
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("periodic"))))


def _ptr(x: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.ctypes.data)


@pytest.mark.parametrize("n", [1, 6, 7, 113, 4096, 70001, 300003])
def test_scale_shift_matches_numpy(lib: ctypes.CDLL, n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    s, b = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    lib.run_scale_shift(_ptr(x), _ptr(s), _ptr(b), _ptr(y), n)
    channel = np.arange(n) % 7
    np.testing.assert_allclose(y, x * s[channel] + b[channel], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [3, 1000, 70001])
def test_bias_without_restrict_reads_as_written(lib: ctypes.CDLL, n: int) -> None:
    rng = np.random.default_rng(n + 1)
    x, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    lib.run_bias_alias(_ptr(x), _ptr(b), _ptr(y), n)
    np.testing.assert_allclose(y, x + b[np.arange(n) % 4], rtol=1e-6, atol=1e-6)


def test_offset_read_from_an_array_the_loop_writes_is_not_tabled() -> None:
    # the channel offset comes from memory the loop overwrites: a table filled before the loop would keep the
    # old offset
    text = r"""
void shift(const float* __restrict__ s, float* __restrict__ y, int* __restrict__ off, int n) {
  for (int i = 0; i < n; ++i) { y[i] = s[off[0] + i % 4]; off[0] = 0; }
}
"""
    module = lower_text(text, "k.c")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.c")
    periodic = get_pass("periodic_operands")
    with pytest.raises(PassRefused):
        periodic.apply(module, periodic.INFO.defaults(), ctx)
