"""Loop recovery inlines a device template called with explicit type arguments (``scale<4, double>(…)``, as
the CUDA samples' ``matrixMul<16, size_t>``): the type parameters are written in, the value parameters bound
as before. It refused ("only value template parameters are supported") and the kernel fell to the portable
tier. A function-like macro naming an inlined local is expanded where it is used (the local is renamed).
The inlined parameter copies keep a pointer's pointee const (``const float* in``): the copy had dropped
it and g++ rejected the assignment from a ``const float*``. Reference: numpy."""

from __future__ import annotations

import ctypes

import numpy as np

from tests.conftest import build_shared
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

SOURCE = r"""
template <int SPAN, typename IndexT>
__device__ void scaled_copy(float* out, const float* in, IndexT width) {
  __shared__ float tile[64];
  IndexT i = (IndexT)blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < width ? in[i] * SPAN : 0.0f;
  __syncthreads();
  if (i < width) out[i] = tile[blockDim.x - 1 - threadIdx.x] + tile[threadIdx.x];
}

__global__ void entry(float* out, const float* in, size_t width) { scaled_copy<4, size_t>(out, in, width); }

extern "C" void run(float* out, const float* in, size_t width) { entry<<<(width + 63) / 64, 64>>>(out, in, width); }
"""


def test_explicit_type_arguments_are_inlined(tmp_path) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(SOURCE, "k.cu")
    assert text is not None
    recovery = next(r for r in records if r["name"] == "loop_recovery")
    assert recovery["changed"], recovery["refused"]
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    width = 64 * 3
    x = np.random.default_rng(0).standard_normal(width).astype(np.float32)
    y = np.full_like(x, np.nan)
    lib.run(ctypes.c_void_p(y.ctypes.data), ctypes.c_void_p(x.ctypes.data), ctypes.c_size_t(width))
    tiles = 4.0 * x.reshape(3, 64)
    np.testing.assert_allclose(y, (tiles[:, ::-1] + tiles).ravel(), rtol=1e-6)


# a function-like macro that names the inlined function's shared array (as the CUDA samples' AS(i, j)): the
# inliner renames the array, so the macro is expanded where the function uses it (it named a missing array)
MACRO_SOURCE = r"""
#define AT(i) tile[i]
__device__ void mirror(float* out, const float* in) {
  __shared__ float tile[32];
  int i = blockIdx.x * 32 + threadIdx.x;
  AT(threadIdx.x) = in[i];
  __syncthreads();
  out[i] = AT(31 - threadIdx.x);
}
__global__ void entry(float* out, const float* in) { mirror(out, in); }
extern "C" void run(float* out, const float* in, int blocks) { entry<<<blocks, 32>>>(out, in); }
"""


def test_macro_naming_an_inlined_local_is_expanded(tmp_path) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(MACRO_SOURCE, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "loop_recovery")["changed"]
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    x = np.random.default_rng(2).standard_normal(96).astype(np.float32)
    y = np.full_like(x, np.nan)
    lib.run(ctypes.c_void_p(y.ctypes.data), ctypes.c_void_p(x.ctypes.data), ctypes.c_int(3))
    np.testing.assert_array_equal(y, x.reshape(3, 32)[:, ::-1].ravel())


# a deduced template whose body calls another template with its type parameter written out (`load<T>(…)`, the
# CUDA Handbook's scans): the call is specialized with the deduced type (the specialization crashed on it)
DEDUCED_SOURCE = r"""
template <typename T> __device__ T twice(T v) { return v + v; }
template <typename T> __device__ void stage(T* out, const T* in) {
  __shared__ T tile[32];
  tile[threadIdx.x] = twice<T>(in[blockIdx.x * 32 + threadIdx.x]);
  __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = tile[31 - threadIdx.x];
}
__global__ void entry(float* out, const float* in) { stage(out, in); }
extern "C" void run(float* out, const float* in, int blocks) { entry<<<blocks, 32>>>(out, in); }
"""


def test_a_deduced_template_calling_a_template_with_its_type_is_inlined(tmp_path) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(DEDUCED_SOURCE, "k.cu")
    assert text is not None
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    y = np.full_like(x, np.nan)
    lib.run(ctypes.c_void_p(y.ctypes.data), ctypes.c_void_p(x.ctypes.data), ctypes.c_int(2))
    np.testing.assert_allclose(y, (2 * x.reshape(2, 32))[:, ::-1].ravel(), rtol=1e-6)
