"""Loop recovery inlines a device template called with explicit type arguments (``scale<4, double>(…)``, as
the CUDA samples' ``matrixMul<16, size_t>``): the type parameters are written in, the value parameters bound
as before. It refused ("only value template parameters are supported") and the kernel fell to the portable
tier. A function-like macro naming an inlined local is expanded where it is used (the local is renamed).
The inlined parameter copies keep a pointer's pointee const (``const float* in``): the copy had dropped
it and g++ rejected the assignment from a ``const float*``. Reference: numpy."""

from __future__ import annotations

import ctypes
from pathlib import Path

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


def recovered_library(source: str, tmp_path: Path) -> ctypes.CDLL:
    """The CPU translation of ``source``, its loop recovery applied, built and loaded."""
    text, records, _ctx = translate_to_cpu(source, "k.cu")
    assert text is not None
    recovery = next(r for r in records if r["name"] == "loop_recovery")
    assert recovery["changed"], recovery["refused"]
    return ctypes.CDLL(str(build_shared(text, tmp_path)))


def test_explicit_type_arguments_are_inlined(tmp_path) -> None:  # noqa: ANN001
    lib = recovered_library(SOURCE, tmp_path)
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


# leimao's CUDA-GEMM-Optimization style: a template kernel instantiated for <float, 8> with a tile loader that is
# a template with a type parameter and default value parameters, a 2-D shared tile passed as an array parameter,
# brace-initialized locals live across a barrier, static_asserts on the template's values, and host code that
# also instantiates the kernel for __half (whose accumulation is `__half += float`).
LOADER_SOURCE = r"""
#include <cuda_fp16.h>
template <typename T, size_t TILE, size_t THREADS, size_t SKEW = 0U>
__device__ void load_tile(T const* in, T tile[TILE][TILE + SKEW], size_t row0, size_t n, size_t linear) {
  static_assert(TILE * TILE % THREADS == 0U);
  for (size_t load{0U}; load < TILE * TILE / THREADS; ++load) {
    size_t const r{(linear + load * THREADS) / TILE};
    size_t const c{(linear + load * THREADS) % TILE};
    T value{static_cast<T>(0)};
    if (row0 + r < n) value = in[(row0 + r) * TILE + c];
    tile[r][c] = value;
  }
}
template <typename T, size_t TILE>
__global__ void row_sums(T const* in, T* out, size_t n) {
  constexpr size_t THREADS{TILE};
  __shared__ T tile[TILE][TILE];
  size_t const linear{threadIdx.x};
  size_t const row0{blockIdx.x * TILE};
  load_tile<T, TILE, THREADS>(in, tile, row0, n, linear);
  __syncthreads();
  T sum{static_cast<T>(0)};
  for (size_t c{0U}; c < TILE; ++c) sum += static_cast<float>(tile[linear][c]);
  if (row0 + linear < n) out[row0 + linear] = sum;
}
template <typename T> void launch(T const* in, T* out, size_t n) { row_sums<T, 8><<<(n + 7) / 8, 8>>>(in, out, n); }
template void launch<float>(float const*, float*, size_t);
template void launch<__half>(__half const*, __half*, size_t);
"""


def test_a_template_instance_with_a_type_parameter_and_a_defaulted_loader(tmp_path) -> None:  # noqa: ANN001
    """The instance ``row_sums<float, 8>`` gets its own block function and an exported wrapper with ``float``
    parameters; the loader binds its defaulted ``SKEW``, indexes the caller's tile through the array parameter,
    the brace-initialized locals are per-thread copies across the barrier. Reference: numpy row sums."""
    text, records, _ctx = translate_to_cpu(LOADER_SOURCE, "k.cu", None, {"loop_recovery": {"entry": "row_sums<float, 8>", "block": "8", "grid": "(n + 7) / 8"}})
    assert text is not None
    recovery = next(r for r in records if r["name"] == "loop_recovery")
    assert recovery["changed"], recovery["refused"]
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    n = 8 * 5 - 3
    x = np.random.default_rng(1).standard_normal((n, 8)).astype(np.float32)
    x = np.vstack([x, np.full((3, 8), np.nan, dtype=np.float32)])  # past the rows: never read
    y = np.full(n + 3, -1.0, dtype=np.float32)
    lib.row_sums__float_8(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_size_t(n))
    np.testing.assert_allclose(y[:n], x[:n].sum(axis=1), rtol=1e-5, atol=1e-5)
    assert np.all(y[n:] == -1.0)


# Overloads of one kernel name: each keeps its own parameters and body (both had become the last overload's,
# and g++ rejected the redefinition, so the program fell to the portable tier)
OVERLOADS = r"""
__device__ int global_index() { return blockIdx.x * blockDim.x + threadIdx.x; }
__global__ void fill(float* a, int n) { int i = global_index(); if (i < n) a[i] = 0.5f * i; }
__global__ void fill(float* a, int n, int value) { int i = global_index(); if (i < n) a[i] = value; }
extern "C" void run(float* a, float* b, int n) {
  fill<<<(n + 31) / 32, 32>>>(a, n);
  fill<<<(n + 31) / 32, 32>>>(b, n, 7);
}
"""


def test_overloaded_kernels_keep_their_own_parameters(tmp_path) -> None:  # noqa: ANN001
    lib = recovered_library(OVERLOADS, tmp_path)
    n = 70
    a, b = np.full(n, -1, np.float32), np.full(n, -1, np.float32)
    lib.run(a.ctypes.data_as(ctypes.c_void_p), b.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(n))
    np.testing.assert_array_equal(a, 0.5 * np.arange(n, dtype=np.float32))
    np.testing.assert_array_equal(b, np.full(n, 7, np.float32))
