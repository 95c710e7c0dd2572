"""The device-mirrors pass: host entries read input buffers in place instead of through a device copy.

Checked against numpy with gcc: a mirror that kernels only read is read from the host buffer (which stays
unchanged), a mirror a kernel writes keeps its copy, and a mirror read after a copy back to the host (the
caller may have passed one buffer twice) is refused.
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


def _recovered(text: str) -> tuple[object, PassContext]:
    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    recovery = get_pass("loop_recovery")
    return recovery.apply(module, {**recovery.INFO.defaults(), "wrapper": False}, ctx), ctx


MIRRORS = r"""
__global__ void scale(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = 3.0f * a[i];
}
__global__ void bump(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1.0f;
}
extern "C" void run(const float* x, float* y, int n) {
  float *dx, *dy, *dz;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMalloc(&dz, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dz, x, n * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<(n + 63) / 64, 64>>>(dx, dy, n);
  bump<<<(n + 63) / 64, 64>>>(dz, n);      // writes its mirror: the copy must stay
  scale<<<(n + 63) / 64, 64>>>(dz, dy + 0, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy); cudaFree(dz);
}
"""


def test_input_mirrors_read_in_place_and_written_mirrors_stay(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(MIRRORS, "m.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "device_mirrors")["changed"]
    assert "dx = (float *)x" in text.replace("(float*)", "(float *)")
    assert "cudaMemcpy(dz, x" in text  # bump writes dz: x must not be touched
    lib = cbuild(text, True)
    x = np.arange(100, dtype=np.float32)
    keep = x.copy()
    y = np.zeros(100, np.float32)
    lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int(100))
    np.testing.assert_array_equal(x, keep)
    np.testing.assert_allclose(y, 3.0 * (keep + 1.0))


def test_mirror_read_after_a_copy_back_is_kept() -> None:
    text = r"""
__global__ void scale(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = 3.0f * a[i];
}
extern "C" void run(const float* x, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<(n + 63) / 64, 64>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);  // y may be x
  scale<<<(n + 63) / 64, 64>>>(dx, dy, n);
  cudaFree(dx); cudaFree(dy);
}
"""
    module, ctx = _recovered(text)
    mirrors = get_pass("device_mirrors")
    with pytest.raises(PassRefused):
        mirrors.apply(module, mirrors.INFO.defaults(), ctx)


INPLACE = r"""
__global__ void shift(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[n - 1 - i] + 1.0f;  // reversed: reading and writing one buffer in place would differ
}
extern "C" void run(const float* x, float* y, int n) {
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  shift<<<(n + 63) / 64, 64>>>(dx, dy, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""


def test_output_mirror_is_the_host_buffer_unless_it_overlaps_an_input(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(INPLACE, "s.cu")
    assert text is not None and "cudaMalloc" not in text.split("extern \"C\"")[-1]
    lib = cbuild(text, True)
    x = np.arange(50, dtype=np.float32)
    y = np.zeros(50, np.float32)
    lib.run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int(50))
    np.testing.assert_array_equal(y, x[::-1] + 1)
    same = np.arange(50, dtype=np.float32)  # the caller passes one buffer as input and output
    lib.run(ctypes.c_void_p(same.ctypes.data), ctypes.c_void_p(same.ctypes.data), ctypes.c_int(50))
    np.testing.assert_array_equal(same, np.arange(50, dtype=np.float32)[::-1] + 1)
