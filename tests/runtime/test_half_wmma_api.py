"""__half/__nv_bfloat16 (+ HIP names), wmma and rocwmma fragments, and the host runtime API."""

from __future__ import annotations

import numpy as np

from xpiler_core.dialect import Dialect
from xpiler_core.verify.inputs import bf16_bits_to_float, float_to_bf16_bits

CUDA_SOURCE = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

__global__ void halves(const __half* a, const __half* b, __half* sum, float* f, __half2* pairs,
                       const __nv_bfloat16* c, __nv_bfloat16* cout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  sum[i] = __hadd(a[i], __hmul(b[i], __float2half(2.0f)));
  f[i] = __half2float(a[i]) * 0.5f;
  __half2 p = __halves2half2(a[i], b[i]);
  pairs[i] = __hmul2(p, __float2half2_rn(3.0f));
  cout[i] = __float2bfloat16(__bfloat162float(c[i]) * 2.0f + 1.0f);
}
// Lane-wise half2 comparisons (1.0/0.0 per lane) and the both-lanes __hb* forms; ordered unless *u.
__global__ void half2_compare(const __half2* a, const __half2* b, __half2* gt, __half2* ne, __half2* neu,
                              int* both_le, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  gt[i] = __hgt2(a[i], b[i]);
  ne[i] = __hne2(a[i], b[i]);
  neu[i] = __hneu2(a[i], b[i]);
  both_le[i] = __hble2(a[i], b[i]);
}
extern "C" void t_half2_compare(const __half* a, const __half* b, __half* gt, __half* ne, __half* neu,
                                int* both_le, int n) {
  half2_compare<<<(n + 63) / 64, 64>>>((const __half2*)a, (const __half2*)b, (__half2*)gt, (__half2*)ne,
                                       (__half2*)neu, both_le, n);
}
extern "C" void t_halves(const __half* a, const __half* b, __half* s, float* f, __half* pairs,
                         const __nv_bfloat16* c, __nv_bfloat16* co, int n) {
  halves<<<(n + 127) / 128, 128>>>(a, b, s, f, (__half2*)pairs, c, co, n);
}

// One warp per 16x16 output tile; A row-major or column-major.
template <typename LayoutA>
__global__ void wmma_gemm(const __half* A, const __half* B, float* C, int M, int N, int K) {
  int tile_m = blockIdx.y, tile_n = blockIdx.x;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, LayoutA> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  const bool col = std::is_same<LayoutA, wmma::col_major>::value;
  for (int k = 0; k < K; k += 16) {
    const __half* pa = col ? A + k * M + tile_m * 16 : A + tile_m * 16 * K + k;
    wmma::load_matrix_sync(a, pa, col ? M : K);
    wmma::load_matrix_sync(b, B + k * N + tile_n * 16, N);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + tile_m * 16 * N + tile_n * 16, c, N, wmma::mem_row_major);
}
extern "C" void t_wmma(const __half* A, const __half* B, float* C, int M, int N, int K, int col) {
  dim3 grid(N / 16, M / 16);
  if (col) wmma_gemm<wmma::col_major><<<grid, 32>>>(A, B, C, M, N, K);
  else wmma_gemm<wmma::row_major><<<grid, 32>>>(A, B, C, M, N, K);
}

__constant__ int c_table[8];
__global__ void use_table(int* out) { out[threadIdx.x] = c_table[threadIdx.x] * 2; }

extern "C" void t_runtime_api(const int* table, int* result, int* status) {
  int* d = nullptr;
  status[0] = cudaMalloc(&d, 8 * sizeof(int));
  status[1] = cudaMemset(d, 0, 8 * sizeof(int));
  status[2] = cudaMemcpyToSymbol(c_table, table, 8 * sizeof(int));
  cudaStream_t s;
  cudaEvent_t e0, e1;
  cudaStreamCreate(&s);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, s);
  use_table<<<1, 8, 0, s>>>(d);
  cudaEventRecord(e1, s);
  cudaEventSynchronize(e1);
  float ms = -1.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  status[3] = ms >= 0.0f;
  status[4] = cudaGetLastError();
  use_table<<<1, 4096>>>(d);  // too many threads: a launch error, kernel not run
  status[5] = cudaGetLastError();
  status[6] = cudaGetLastError();  // reading clears it
  status[7] = strcmp(cudaGetErrorString(cudaErrorInvalidConfiguration), "invalid configuration argument") == 0;
  status[8] = cudaMemcpy(result, d, 8 * sizeof(int), cudaMemcpyDeviceToHost);
  status[9] = cudaDeviceSynchronize();
  cudaStreamDestroy(s);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  status[10] = cudaFree(d);
}

__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
extern "C" void t_launch_kernel_api(float* x, int n, int* status) {
  void* args[] = {&x, &n};
  status[0] = cudaLaunchKernel(add_one, dim3((n + 31) / 32), dim3(32), args, 0, nullptr);
  status[1] = cudaLaunchKernel(add_one, dim3(1), dim3(0), args);  // empty block: configuration error
}
"""

HIP_SOURCE = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>
#include <rocwmma/rocwmma.hpp>

__global__ void rocwmma_gemm(const rocwmma::float16_t* A, const rocwmma::float16_t* B, float* C, int N, int K) {
  rocwmma::fragment<rocwmma::matrix_a, 16, 16, 16, rocwmma::float16_t, rocwmma::row_major> a;
  rocwmma::fragment<rocwmma::matrix_b, 16, 16, 16, rocwmma::float16_t, rocwmma::col_major> b;
  rocwmma::fragment<rocwmma::accumulator, 16, 16, 16, float> c;
  rocwmma::fill_fragment(c, 0.0f);
  for (int k = 0; k < K; k += 16) {
    rocwmma::load_matrix_sync(a, A + blockIdx.y * 16 * K + k, K);
    rocwmma::load_matrix_sync(b, B + blockIdx.x * 16 * K + k, K);  // B stored column-major (N x K rows)
    rocwmma::mma_sync(c, a, b, c);
  }
  rocwmma::store_matrix_sync(C + blockIdx.y * 16 * N + blockIdx.x * 16, c, N, rocwmma::mem_row_major);
}
__global__ void hip_halves(const __half* a, __hip_bfloat16* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = __float2bfloat16(__half2float(a[i]) - 1.0f);
}
__constant__ float c_scale[2];
__global__ void scale_by_symbol(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * c_scale[0] + c_scale[1];
}
extern "C" void t_hip_api(float* x, int n, const float* scale, int* status) {
  status[0] = hipMemcpyToSymbol(HIP_SYMBOL(c_scale), scale, 2 * sizeof(float));
  void* args[] = {&x, &n};
  status[1] = hipLaunchKernel(scale_by_symbol, dim3((n + 63) / 64), dim3(64), args, 0, 0);
  hipDeviceProp_t prop;
  status[2] = hipGetDeviceProperties(&prop, 0);
  status[3] = prop.warpSize;
  int ws = 0;
  hipDeviceGetAttribute(&ws, hipDeviceAttributeWarpSize, 0);
  status[4] = ws;
  status[5] = strcmp(hipGetErrorString(hipErrorInvalidValue), "invalid argument") == 0;
  status[6] = hipMemset(nullptr, 0, 4);
}

extern "C" void t_hip(const __half* A, const __half* B, float* C, int M, int N, int K, __hip_bfloat16* out, int* status) {
  __half* dA;
  status[0] = hipMalloc(&dA, M * K * sizeof(__half));
  status[1] = hipMemcpy(dA, A, M * K * sizeof(__half), hipMemcpyHostToDevice);
  hipLaunchKernelGGL(rocwmma_gemm, dim3(N / 16, M / 16), dim3(64), 0, 0, dA, B, C, N, K);
  status[2] = hipGetLastError();
  hipLaunchKernelGGL(hip_halves, dim3(1), dim3(64), 0, 0, dA, out, M * K < 64 ? M * K : 64);
  status[3] = hipDeviceSynchronize();
  status[4] = hipFree(dA);
}
"""


def test_half_and_bfloat16_arithmetic(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(CUDA_SOURCE)
    n = 300
    rng = np.random.default_rng(13)
    a = rng.standard_normal(n).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    c_bits = float_to_bf16_bits(rng.standard_normal(n).astype(np.float32))
    outs = lib.outputs(
        "t_halves",
        [
            a,
            b,
            np.zeros(n, np.float16),
            np.zeros(n, np.float32),
            np.zeros(2 * n, np.float16),
            c_bits,
            np.zeros(n, np.uint16),
            np.int32(n),
        ],
    )
    _, _, s, f, pairs, _, cout = outs
    prod = (b.astype(np.float32) * np.float32(2)).astype(np.float16)
    np.testing.assert_array_equal(s, (a.astype(np.float32) + prod.astype(np.float32)).astype(np.float16))
    np.testing.assert_array_equal(f, a.astype(np.float32) * 0.5)
    np.testing.assert_array_equal(pairs.reshape(n, 2)[:, 0], (a.astype(np.float32) * 3).astype(np.float16))
    np.testing.assert_array_equal(pairs.reshape(n, 2)[:, 1], (b.astype(np.float32) * 3).astype(np.float16))
    exp_bf = float_to_bf16_bits(bf16_bits_to_float(c_bits) * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(cout, exp_bf)


def test_half2_comparisons_match_numpy(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(CUDA_SOURCE)
    n = 200
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, 2 * n).astype(np.float16)
    b = rng.integers(-3, 4, 2 * n).astype(np.float16)
    a[::7] = np.nan  # ordered comparisons are false on NaN, unordered ones true
    zeros = [np.zeros(2 * n, np.float16) for _ in range(3)]
    _, _, gt, ne, neu, both_le = lib.outputs("t_half2_compare", [a, b, *zeros, np.zeros(n, np.int32), np.int32(n)])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(gt, np.greater(a, b).astype(np.float16))
        np.testing.assert_array_equal(ne, (np.less(a, b) | np.greater(a, b)).astype(np.float16))
        np.testing.assert_array_equal(neu, np.logical_not(np.equal(a, b)).astype(np.float16))
        np.testing.assert_array_equal(both_le, np.less_equal(a, b).reshape(n, 2).all(axis=1).astype(np.int32))


def test_wmma_row_and_col_major(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(CUDA_SOURCE)
    M, N, K = 32, 48, 64
    rng = np.random.default_rng(14)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    exp = A.astype(np.float64) @ B.astype(np.float64)
    for col in (0, 1):
        a_in = np.ascontiguousarray(A.T) if col else A
        _, _, C = lib.outputs(
            "t_wmma",
            [
                a_in.reshape(-1),
                B.reshape(-1),
                np.zeros(M * N, np.float32),
                np.int32(M),
                np.int32(N),
                np.int32(K),
                np.int32(col),
            ],
        )
        np.testing.assert_allclose(C.reshape(M, N), exp, rtol=1e-4, atol=1e-4)


def test_runtime_api_memory_symbols_events_errors(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(CUDA_SOURCE)
    table = np.arange(8, dtype=np.int32) * 3 - 5
    _, result, status = lib.outputs(
        "t_runtime_api", [table, np.zeros(8, np.int32), np.full(11, -1, np.int32)]
    )
    np.testing.assert_array_equal(result, table * 2)
    # cudaSuccess = 0 everywhere, except the bad launch: cudaErrorInvalidConfiguration = 9, read once.
    assert list(status) == [0, 0, 0, 1, 0, 9, 0, 1, 0, 0, 0]


def test_hip_twins_rocwmma_and_hip_bfloat16(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(HIP_SOURCE, Dialect.HIP, 64)
    M, N, K = 32, 32, 32
    rng = np.random.default_rng(15)
    A = rng.standard_normal((M, K)).astype(np.float16)
    Bt = rng.standard_normal((N, K)).astype(np.float16)  # column-major K x N
    outs = lib.outputs(
        "t_hip",
        [
            A.reshape(-1),
            Bt.reshape(-1),
            np.zeros(M * N, np.float32),
            np.int32(M),
            np.int32(N),
            np.int32(K),
            np.zeros(64, np.uint16),
            np.full(5, -1, np.int32),
        ],
    )
    _, _, C, bf, status = outs
    np.testing.assert_allclose(
        C.reshape(M, N), A.astype(np.float64) @ Bt.astype(np.float64).T, rtol=1e-4, atol=1e-4
    )
    np.testing.assert_array_equal(bf, float_to_bf16_bits(A.reshape(-1)[:64].astype(np.float32) - 1))
    assert list(status) == [0, 0, 0, 0, 0]


def test_cuda_launch_kernel_api(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(CUDA_SOURCE)
    x = np.arange(70, dtype=np.float32)
    out, status = lib.outputs("t_launch_kernel_api", [x, np.int32(70), np.full(2, -1, np.int32)])
    np.testing.assert_array_equal(out, x + 1)
    assert list(status) == [0, 9]


def test_hip_runtime_api_twins(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(HIP_SOURCE, Dialect.HIP, 64)
    x = np.linspace(-1, 1, 100).astype(np.float32)
    out, _, status = lib.outputs("t_hip_api", [x, np.int32(100), np.array([3, 0.5], np.float32), np.full(7, -1, np.int32)])
    np.testing.assert_allclose(out, x * 3 + 0.5, rtol=1e-6)
    assert list(status) == [0, 0, 0, 64, 64, 1, 1]


DIRECTED_SOURCE = r"""
#include <cuda_fp16.h>
__global__ void directed(const float* f, __half* rz, __half* rd, __half* ru, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  rz[i] = __float2half_rz(f[i]);
  rd[i] = __float2half_rd(f[i]);
  ru[i] = __float2half_ru(f[i]);
}
extern "C" void t_directed(const float* f, __half* rz, __half* rd, __half* ru, int n) {
  directed<<<(n + 127) / 128, 128>>>(f, rz, rd, ru, n);
}
"""


def directed_inputs(seed: int) -> np.ndarray:
    """Floats from subnormal to overflow, exact halves, zeros of both signs, infinities."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.standard_normal(400) * 10.0 ** rng.integers(-9, 6, 400),
                           rng.integers(-2048, 2048, 50).astype(np.float64),
                           [0.0, -0.0, 65504.0, 65520.0, 7e4, -7e4, np.inf, -np.inf, 1e-8, -1e-8]]).astype(np.float32)


def assert_directed_halves(f: np.ndarray, rz: np.ndarray, rd: np.ndarray, ru: np.ndarray) -> None:
    """__float2half_rd/ru/rz: the largest half not above the value, the smallest not below, and the one of the
    two nearer zero — found from numpy's nearest half and its float16 neighbours."""
    with np.errstate(over="ignore"):
        nearest = f.astype(np.float16)
        wide = nearest.astype(np.float32)
        below = np.where(wide <= f, nearest, np.nextafter(nearest, np.float16(-np.inf)))
        above = np.where(wide >= f, nearest, np.nextafter(nearest, np.float16(np.inf)))
    np.testing.assert_array_equal(rd, below)
    np.testing.assert_array_equal(ru, above)
    np.testing.assert_array_equal(rz, np.where(f >= 0, below, above))


def test_directed_half_roundings_are_the_neighbours_of_the_value(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(DIRECTED_SOURCE)
    f = directed_inputs(21)
    _, rz, rd, ru = lib.outputs("t_directed", [f, *(np.zeros(f.size, np.float16) for _ in range(3)), np.int32(f.size)])
    assert_directed_halves(f, rz, rd, ru)
