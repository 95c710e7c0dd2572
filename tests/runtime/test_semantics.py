"""CUDA semantics on the CPU runtime, each checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

SOURCE = r"""
#include <cuda_runtime.h>
#include <cstdio>

__constant__ float c_coeffs[4];

template <int SCALE, typename T>
__device__ __forceinline__ T scaled(T v) { return v * SCALE; }

__global__ void __launch_bounds__(128) builtins3d(int* out) {
  int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
  int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
  int bdx = blockDim.x, bdy = blockDim.y, bdz = blockDim.z;
  int gx = gridDim.x, gy = gridDim.y;
  int block = bx + gx * (by + gy * bz);
  int local = tx + bdx * (ty + bdy * tz);
  int g = block * (bdx * bdy * bdz) + local;
  out[4 * g + 1] = bx + 10 * by + 100 * bz;
  out[4 * g + 2] = bdx + 10 * bdy + 100 * bdz;
  __syncthreads();  // after a barrier (the block runs as fibers) each thread still reads its own index
  out[4 * g + 0] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
  out[4 * g + 3] = gx + 10 * gy + 100 * gridDim.z;
  (void)tx; (void)ty; (void)tz;
}
// Host code may name its own launch shapes gridDim and blockDim, as CUDA allows.
extern "C" void t_builtins(int* out) {
  dim3 gridDim(2, 3, 2), blockDim(4, 2, 3);
  builtins3d<<<gridDim, blockDim>>>(out);
}

template <typename T, int SCALE>
__global__ void templated(const T* __restrict__ x, T* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = scaled<SCALE>(__ldg(x + i)) + c_coeffs[i % 4];
}
extern "C" void t_templates(const float* x, float* y, const float* coeffs, int n) {
  cudaMemcpyToSymbol(c_coeffs, coeffs, 4 * sizeof(float));
  templated<float, 3><<<(n + 63) / 64, 64>>>(x, y, n);
}

// Reverse within a block through shared memory: needs the barrier and per-block shared storage.
__global__ void reverse_static(const float* x, float* y) {
  __shared__ float tile[128];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  tile[t] = x[base + t];
  __syncthreads();
  y[base + t] = tile[blockDim.x - 1 - t];
}
extern "C" void t_reverse_static(const float* x, float* y, int blocks) { reverse_static<<<blocks, 128>>>(x, y); }

__global__ void reverse_dynamic(const float* x, float* y) {
  extern __shared__ float tile[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  tile[t] = x[base + t];
  __syncthreads();
  y[base + t] = tile[blockDim.x - 1 - t];
}
extern "C" void t_reverse_dynamic(const float* x, float* y, int blocks, int threads) {
  reverse_dynamic<<<blocks, threads, threads * sizeof(float), 0>>>(x, y);
}
// the qualifier after the type, as some samples write it
__global__ void reverse_dynamic_late(const float* x, float* y) {
  extern float __shared__ tile[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  tile[t] = x[base + t];
  __syncthreads();
  y[base + t] = tile[blockDim.x - 1 - t];
}
extern "C" void t_reverse_dynamic_late(const float* x, float* y, int blocks, int threads) {
  reverse_dynamic_late<<<blocks, threads, threads * sizeof(float), 0>>>(x, y);
}

// Tree reduction in shared memory (log2(256) barriers).
__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * 256 + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" void t_block_sum(const float* x, float* out, int n) { block_sum<<<(n + 255) / 256, 256>>>(x, out, n); }

__global__ void sync_variants(const int* flags, int* out) {
  int f = flags[blockIdx.x * blockDim.x + threadIdx.x];
  int c = __syncthreads_count(f);
  int a = __syncthreads_and(f);
  int o = __syncthreads_or(f);
  if (threadIdx.x == 0) { out[3 * blockIdx.x] = c; out[3 * blockIdx.x + 1] = a; out[3 * blockIdx.x + 2] = o; }
}
extern "C" void t_sync_variants(const int* flags, int* out, int blocks) { sync_variants<<<blocks, 96>>>(flags, out); }

// Early return before a barrier (common in real code): exited threads do not block the others.
__global__ void early_exit(const float* x, float* y, int n) {
  __shared__ float s[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  if (i >= n) return;
  s[t] = x[i];
  __syncthreads();
  y[i] = s[t] * 2.0f;
}
extern "C" void t_early_exit(const float* x, float* y, int n) { early_exit<<<(n + 63) / 64, 64>>>(x, y, n); }

__global__ void histogram(const int* bins, int* hist, unsigned* uhist, float* fsum, double* dsum, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&hist[bins[i]], 1);
    atomicAdd(&uhist[bins[i]], 2u);
    atomicAdd(fsum, 0.5f);
    atomicAdd(dsum, 0.25);
  }
}
extern "C" void t_histogram(const int* bins, int* hist, unsigned* uhist, float* fsum, double* dsum, int n) {
  histogram<<<64, 128>>>(bins, hist, uhist, fsum, dsum, n);
}

// CUDA has no atomicMax/atomicMin/atomicSub on float or double: programs define them (a CAS loop), and the
// runtime must not define them a second time.
__device__ float atomicMax(float* a, float v) {
  int* bits = (int*)a; int old = *bits, assumed;
  do { assumed = old; old = atomicCAS(bits, assumed, __float_as_int(fmaxf(v, __int_as_float(assumed)))); }
  while (assumed != old);
  return __int_as_float(old);
}
__device__ float atomicMin(float* a, float v) {
  int* bits = (int*)a; int old = *bits, assumed;
  do { assumed = old; old = atomicCAS(bits, assumed, __float_as_int(fminf(v, __int_as_float(assumed)))); }
  while (assumed != old);
  return __int_as_float(old);
}
__device__ float atomicSub(float* a, float v) { return atomicAdd(a, -v); }
__device__ double atomicMax(double* a, double v) {
  unsigned long long* bits = (unsigned long long*)a; unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    old = atomicCAS(bits, assumed, __double_as_longlong(fmax(v, __longlong_as_double(assumed))));
  } while (assumed != old);
  return __longlong_as_double(old);
}

__global__ void atomic_zoo(const int* v, int* r, unsigned* u, float* f, double* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicMax(&r[0], v[i]);
  atomicMin(&r[1], v[i]);
  atomicSub(&r[2], v[i]);
  atomicAnd(&r[3], ~(1 << (i % 31)));
  atomicOr(&r[4], 1 << (i % 31));
  atomicXor(&r[5], v[i]);
  atomicInc(&u[0], 9u);
  atomicDec(&u[1], 9u);
  atomicMax(&f[0], (float)v[i]);
  atomicMin(&f[1], (float)v[i]);
  atomicSub(&f[2], 1.0f);
  atomicMax(&d[0], (double)v[i]);
  atomicAdd(&d[1], (double)v[i]);
  int old = atomicCAS(&r[6], 0, i + 1);  // exactly one thread wins
  if (old == 0) atomicAdd(&r[7], 1);
  atomicExch(&r[8], 5);
  atomicExch(&f[3], 2.5f);
}
extern "C" void t_atomic_zoo(const int* v, int* r, unsigned* u, float* f, double* d, int n) {
  atomic_zoo<<<(n + 127) / 128, 128>>>(v, r, u, f, d, n);
}

__global__ void vectors(const float4* x, float4* y, int2* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 a = x[i];
  float2 h = make_float2(a.x + a.y, a.z * a.w);
  y[i] = make_float4(h.x, h.y, a.x - a.w, sizeof(float4) + alignof(float4));
  z[i] = make_int2(i, -i);
}
extern "C" void t_vectors(const float* x, float* y, int* z, int n) {
  vectors<<<(n + 31) / 32, 32>>>((const float4*)x, (float4*)y, (int2*)z, n);
}

__global__ void math_fns(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  y[8 * i + 0] = __expf(v);
  y[8 * i + 1] = __fdividef(v, 3.0f);
  y[8 * i + 2] = rsqrtf(fabsf(v) + 1.0f);
  y[8 * i + 3] = __saturatef(v);
  y[8 * i + 4] = fmaf(v, 2.0f, 1.0f);
  y[8 * i + 5] = tanhf(v) + __sinf(v) * __cosf(v);
  y[8 * i + 6] = max(v, 0.0f) + min(v, 0.0f) * 0.5f;
  y[8 * i + 7] = __int_as_float(__float_as_int(v)) + (float)__float2int_rn(v);
}
extern "C" void t_math(const float* x, float* y, int n) { math_fns<<<(n + 63) / 64, 64>>>(x, y, n); }

__global__ void bits(const unsigned* x, int* y, unsigned* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  y[5 * i + 0] = __popc(v);
  y[5 * i + 1] = __ffs((int)v);
  y[5 * i + 2] = __clz((int)v);
  y[5 * i + 3] = __popcll(((unsigned long long)v << 32) | v);
  y[5 * i + 4] = __dp4a((int)v, 0x01FF7F80, 7);
  z[i] = __brev(v);
}
extern "C" void t_bits(const unsigned* x, int* y, unsigned* z, int n) { bits<<<(n + 63) / 64, 64>>>(x, y, z, n); }

__global__ void say(int n) {
  if (threadIdx.x == 0) printf("hello from block %d of %d\n", blockIdx.x, n);
}
extern "C" void t_printf() { say<<<3, 32>>>(3); cudaDeviceSynchronize(); fflush(stdout); }

__global__ void grid_stride(float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] += 1.0f;
}
extern "C" void t_grid_stride(float* y, int n) { grid_stride<<<3, 32>>>(y, n); }

__host__ __device__ inline float square(float v) { return v * v; }
template <typename T>
__global__ void deduced(const T* x, T* y, T bias, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = static_cast<T>(square(static_cast<float>(x[i]))) + bias;
}
extern "C" void t_deduced(const float* x, float* y, const double* xd, double* yd, int n) {
  deduced<<<(n + 31) / 32, 32>>>(x, y, 1.0f, n);  // T deduced from the arguments, as nvcc does
  deduced<<<(n + 31) / 32, 32>>>(xd, yd, 2.0, n);
  y[0] += square(0.0f);                           // __host__ __device__ callable from host code too
}
"""


@pytest.fixture(scope="module")
def lib(built_factory):  # type: ignore[no-untyped-def]
    return built_factory(SOURCE)


def test_builtins_dim3_3d_launch(lib) -> None:  # type: ignore[no-untyped-def]
    out = np.zeros(4 * 2 * 3 * 2 * 4 * 2 * 3, np.int32)
    (res,) = lib.outputs("t_builtins", [out])
    grid, block = (2, 3, 2), (4, 2, 3)
    exp = []
    for bz in range(2):
        for by in range(3):
            for bx in range(2):
                for tz in range(3):
                    for ty in range(2):
                        for tx in range(4):
                            exp.append(
                                [
                                    tx + 10 * ty + 100 * tz,
                                    bx + 10 * by + 100 * bz,
                                    block[0] + 10 * block[1] + 100 * block[2],
                                    grid[0] + 10 * grid[1] + 100 * grid[2],
                                ]
                            )
    np.testing.assert_array_equal(res.reshape(-1, 4), np.array(exp))


def test_templates_constant_ldg_restrict(lib) -> None:  # type: ignore[no-untyped-def]
    n = 1000
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    coeffs = np.array([1, -2, 3, 0.5], np.float32)
    _, y, _ = lib.outputs("t_templates", [x, np.zeros(n, np.float32), coeffs, np.int32(n)])
    np.testing.assert_allclose(y, 3 * x + coeffs[np.arange(n) % 4], rtol=1e-6)


def test_static_shared_barrier_per_block_isolation(lib) -> None:  # type: ignore[no-untyped-def]
    blocks = 9
    x = np.arange(blocks * 128, dtype=np.float32)
    _, y = lib.outputs("t_reverse_static", [x, np.zeros_like(x), np.int32(blocks)])
    np.testing.assert_array_equal(y, x.reshape(blocks, 128)[:, ::-1].reshape(-1))


@pytest.mark.parametrize("entry", ["t_reverse_dynamic", "t_reverse_dynamic_late"])
def test_dynamic_shared_memory(lib, entry: str) -> None:  # type: ignore[no-untyped-def]
    blocks, threads = 5, 96
    x = np.random.default_rng(2).standard_normal(blocks * threads).astype(np.float32)
    _, y = lib.outputs(entry, [x, np.zeros_like(x), np.int32(blocks), np.int32(threads)])
    np.testing.assert_array_equal(y, x.reshape(blocks, threads)[:, ::-1].reshape(-1))


def test_shared_tree_reduction(lib) -> None:  # type: ignore[no-untyped-def]
    n = 1000
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    _, out = lib.outputs("t_block_sum", [x, np.zeros(4, np.float32), np.int32(n)])
    exp = np.array([x[i * 256 : (i + 1) * 256].sum() for i in range(4)])
    np.testing.assert_allclose(out, exp, rtol=1e-5, atol=1e-5)


def test_syncthreads_count_and_or(lib) -> None:  # type: ignore[no-untyped-def]
    flags = np.zeros((3, 96), np.int32)
    flags[0, ::3] = 1
    flags[1, :] = 1
    _, out = lib.outputs("t_sync_variants", [flags.reshape(-1), np.zeros(9, np.int32), np.int32(3)])
    exp = [[int(f.sum()), int(f.all()), int(f.any())] for f in flags]
    np.testing.assert_array_equal(out.reshape(3, 3), np.array(exp))


def test_early_return_before_barrier(lib) -> None:  # type: ignore[no-untyped-def]
    n = 100
    x = np.arange(n, dtype=np.float32)
    _, y = lib.outputs("t_early_exit", [x, np.zeros(n, np.float32), np.int32(n)])
    np.testing.assert_array_equal(y, 2 * x)


def test_atomic_add_is_atomic_across_os_threads(lib) -> None:  # type: ignore[no-untyped-def]
    n = 200_000
    bins = np.random.default_rng(4).integers(0, 16, n).astype(np.int32)
    outs = lib.outputs(
        "t_histogram",
        [
            bins,
            np.zeros(16, np.int32),
            np.zeros(16, np.uint32),
            np.zeros(1, np.float32),
            np.zeros(1, np.float64),
            np.int32(n),
        ],
    )
    _, hist, uhist, fsum, dsum = outs
    np.testing.assert_array_equal(hist, np.bincount(bins, minlength=16))
    np.testing.assert_array_equal(uhist, 2 * np.bincount(bins, minlength=16))
    assert dsum[0] == 0.25 * n
    assert fsum[0] == pytest.approx(0.5 * n, rel=1e-3)


def test_atomic_operations(lib) -> None:  # type: ignore[no-untyped-def]
    n = 1000
    v = np.random.default_rng(5).integers(-500, 500, n).astype(np.int32)
    r = np.array([-(10**9), 10**9, 0, -1, 0, 0, 0, 0, 0], np.int32)
    u = np.array([0, 0], np.uint32)
    f = np.array([-1e30, 1e30, 0, 0], np.float32)
    d = np.array([-1e300, 0], np.float64)
    _, r, u, f, d = lib.outputs("t_atomic_zoo", [v, r, u, f, d, np.int32(n)])
    xor = 0
    for val in v:
        xor ^= int(val)
    bits = 0
    for i in range(n):
        bits |= 1 << (i % 31)
    assert r[0] == v.max() and r[1] == v.min() and r[2] == -v.sum()
    assert r[3] == (-1 & ~bits) and r[4] == bits and r[5] == xor
    assert 1 <= r[6] <= n and r[7] == 1 and r[8] == 5
    # atomicInc wraps to 0 after reaching the limit: n increments modulo (limit + 1)
    assert u[0] == n % 10
    # atomicDec from 0 goes to the limit, then counts down: ((0 - n) mod 10)
    assert u[1] == (-n) % 10
    assert f[0] == v.max() and f[1] == v.min() and f[2] == -n and f[3] == 2.5
    assert d[0] == v.max() and d[1] == v.sum()


def test_vector_types_and_make(lib) -> None:  # type: ignore[no-untyped-def]
    n = 50
    x = np.random.default_rng(6).standard_normal(4 * n).astype(np.float32)
    _, y, z = lib.outputs(
        "t_vectors", [x, np.zeros(4 * n, np.float32), np.zeros(2 * n, np.int32), np.int32(n)]
    )
    a = x.reshape(n, 4)
    exp = np.stack([a[:, 0] + a[:, 1], a[:, 2] * a[:, 3], a[:, 0] - a[:, 3], np.full(n, 32.0)], axis=1)
    np.testing.assert_allclose(y.reshape(n, 4), exp, rtol=1e-6)
    np.testing.assert_array_equal(z.reshape(n, 2), np.stack([np.arange(n), -np.arange(n)], axis=1))


def test_math_and_fast_intrinsics(lib) -> None:  # type: ignore[no-untyped-def]
    n = 300
    x = np.random.default_rng(7).uniform(-3, 3, n).astype(np.float32)
    _, y = lib.outputs("t_math", [x, np.zeros(8 * n, np.float32), np.int32(n)])
    y = y.reshape(n, 8)
    exp = np.stack(
        [
            np.exp(x),
            x / 3,
            1 / np.sqrt(np.abs(x) + 1),
            np.clip(x, 0, 1),
            x * 2 + 1,
            np.tanh(x) + np.sin(x) * np.cos(x),
            np.maximum(x, 0) + np.minimum(x, 0) * 0.5,
            x + np.rint(x),
        ],
        axis=1,
    )
    np.testing.assert_allclose(y, exp, rtol=2e-5, atol=2e-6)


def test_bit_intrinsics_and_dp4a(lib) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(8)
    x = rng.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 1, 0x80000000]
    _, y, z = lib.outputs(
        "t_bits", [x, np.zeros(5 * len(x), np.int32), np.zeros(len(x), np.uint32), np.int32(len(x))]
    )
    y = y.reshape(-1, 5)
    for i, v in enumerate(int(t) for t in x):
        ffs = (v & -v).bit_length()
        clz = 32 - v.bit_length()
        a_bytes = [((v >> (8 * k)) & 0xFF) - (256 if (v >> (8 * k)) & 0x80 else 0) for k in range(4)]
        b_bytes = [-128, 127, -1, 1]  # 0x01FF7F80 little-endian bytes: 0x80, 0x7F, 0xFF, 0x01
        dp = 7 + sum(p * q for p, q in zip(a_bytes, b_bytes, strict=True))
        assert list(y[i]) == [bin(v).count("1"), ffs, clz, 2 * bin(v).count("1"), dp], i
        assert int(z[i]) == int(f"{v:032b}"[::-1], 2)


def test_printf_reaches_stdout(lib) -> None:  # type: ignore[no-untyped-def]
    res = lib.call("t_printf", [])
    assert res.ok, res.error
    lines = sorted(line for line in res.stdout.splitlines() if line.startswith("hello"))
    assert lines == [f"hello from block {b} of 3" for b in range(3)]


def test_grid_stride_loop_keeps_per_thread_params(lib) -> None:  # type: ignore[no-untyped-def]
    y = np.zeros(1000, np.float32)
    (out,) = lib.outputs("t_grid_stride", [y, np.int32(1000)])
    np.testing.assert_array_equal(out, np.ones(1000, np.float32))


def test_template_arguments_deduced_at_launch(lib) -> None:  # type: ignore[no-untyped-def]
    n = 77
    x = np.linspace(-2, 2, n).astype(np.float32)
    _, y, _, yd = lib.outputs(
        "t_deduced", [x, np.zeros(n, np.float32), x.astype(np.float64), np.zeros(n, np.float64), np.int32(n)]
    )
    np.testing.assert_allclose(y, x * x + 1, rtol=1e-6)
    np.testing.assert_allclose(yd, (x * x).astype(np.float64) + 2, rtol=1e-6)


def test_a_kernel_named_like_a_math_function(built_factory) -> None:  # type: ignore[no-untyped-def]
    # `sin` is then an overload set (<cmath>'s and the kernel); nvcc launches the kernel, so must the runtime
    lib = built_factory("#include <cmath>\n"
                        "__global__ void sin(const float* a, float* out, int n) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  if (i < n) out[i] = sinf(a[i]);\n}\n"
                        'extern "C" void t_sin(const float* a, float* out, int n) { sin<<<(n + 31) / 32, 32>>>(a, out, n); }\n')
    x = np.linspace(-3, 3, 77, dtype=np.float32)
    _, y = lib.outputs("t_sin", [x, np.zeros_like(x), np.int32(77)])
    np.testing.assert_allclose(y, np.sin(x), rtol=1e-6, atol=1e-6)


def test_a_kernel_launched_through_a_local_function_pointer(built_factory) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory("__global__ void twice(const float* a, float* out, int n) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = 2.0f * a[i];\n}\n"
                        "__global__ void thrice(const float* a, float* out, int n) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = 3.0f * a[i];\n}\n"
                        'extern "C" void t_pick(const float* a, float* out, int n, int which) {\n'
                        "  void (*kernel)(const float*, float*, int) = which ? &thrice : &twice;\n"
                        "  kernel<<<(n + 31) / 32, 32>>>(a, out, n);\n}\n")
    x = np.arange(50, dtype=np.float32)
    _, y = lib.outputs("t_pick", [x, np.zeros_like(x), np.int32(50), np.int32(1)])
    np.testing.assert_array_equal(y, 3.0 * x)


# float4 reads and writes of `float` shared tiles (the staging of vectorized GEMMs): a GPU's shared arrays are
# 16-byte aligned in practice, so such code runs there; a 4-byte aligned tile faulted (an aligned SSE move)
VECTOR_TILES = r"""
#define FLOAT4(x) (reinterpret_cast<float4 *>(&(x))[0])
__global__ void stage_as_float4(float* x, float* y) {
  __shared__ float odd[3];
  __shared__ float tile[4][8];
  __shared__ char flag[5];
  __shared__ float other[2][12];
  const int t = threadIdx.x;
  odd[t % 3] = 1.0f;
  flag[t % 5] = 1;
  FLOAT4(tile[t / 2][(t % 2) * 4]) = FLOAT4(x[t * 4]);
  FLOAT4(other[t / 4][(t % 4) * 4 % 12]) = FLOAT4(x[t * 4]);
  __syncthreads();
  FLOAT4(y[t * 4]) = FLOAT4(tile[t / 2][(t % 2) * 4]);
}
extern "C" void t_stage_as_float4(float* x, float* y) { stage_as_float4<<<1, 8>>>(x, y); }
"""


def test_float4_access_to_shared_float_tiles(built_factory) -> None:  # type: ignore[no-untyped-def]
    x = np.arange(32, dtype=np.float32)
    res = built_factory(VECTOR_TILES).call("t_stage_as_float4", [x, np.zeros(32, np.float32)], threads=1)
    assert res.ok, res.error
    np.testing.assert_array_equal(res.outputs["a1"], x)


# a kernel parameter passed by value whose destructor frees device memory (CUDA by Example's Lock): a GPU
# copies the parameter bit for bit and runs no destructor on the device; this engine's per-thread copies did,
# freeing the mutex while other threads still spun on it ("the source itself exits with status 87")
LOCK_BY_VALUE = r"""
struct Lock {
  int* mutex;
  Lock() { cudaMalloc(&mutex, sizeof(int)); cudaMemset(mutex, 0, sizeof(int)); }
  ~Lock() { cudaFree(mutex); }
  __device__ void lock() { while (atomicCAS(mutex, 0, 1) != 0) {} }
  __device__ void unlock() { atomicExch(mutex, 0); }
};
__global__ void count_under_lock(Lock lock, int* total) {
  if (threadIdx.x == 0) {
    lock.lock();
    *total += 1;
    lock.unlock();
  }
}
extern "C" void t_count_under_lock(int* total, int blocks) {
  Lock lock;
  count_under_lock<<<blocks, 64>>>(lock, total);
  cudaDeviceSynchronize();
}
"""


def test_a_parameter_destructor_does_not_run_per_thread(built_factory) -> None:  # type: ignore[no-untyped-def]
    res = built_factory(LOCK_BY_VALUE).call("t_count_under_lock", [np.zeros(1, np.int32), np.int32(6)])
    assert res.ok, res.error
    assert res.outputs["a0"][0] == 6
