"""Grid reductions published through a hand-written ``atomicCAS`` retry loop (float max/min/add helpers).

The recognizer (``passes/support/cas_atomic.py``) must prove the helper is an atomic add/max/min from its structure,
whatever its name; grid_reduce then takes the OpenMP reduction path. Each style is checked against numpy
(built with gcc); helpers that store something else, have other effects or exit the loop on a float
compare must be refused, never miscompiled.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.passes.support.cas_atomic import cas_atomic
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

# four helper styles, deliberately named so that nothing can be guessed from the names
HELPERS = r"""
__device__ float upd_a(float* address, float value) {           // while-loop max (absmax style)
  int* address_as_int = reinterpret_cast<int*>(address);
  int old = *address_as_int;
  while (__int_as_float(old) < value) {
    const int assumed = old;
    old = atomicCAS(address_as_int, assumed, __float_as_int(value));
    if (old == assumed) break;
  }
  return __int_as_float(old);
}

__device__ float upd_b(float* addr, float val) {                // do-while max through fmaxf
  int* address_as_i = (int*)addr;
  int old = *address_as_i, assumed;
  do {
    assumed = old;
    old = ::atomicCAS(address_as_i, assumed, __float_as_int(fmaxf(val, __int_as_float(assumed))));
  } while (assumed != old);
  return __int_as_float(old);
}

__device__ void upd_c(float* address, float val) {              // CAS float add on unsigned bits
  unsigned int* p = (unsigned int*)address;
  unsigned int old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, __float_as_uint(val + __uint_as_float(assumed)));
  } while (assumed != old);
}

__device__ float upd_d(float* address, float value) {           // do-while min with an early exit
  int old = __float_as_int(*address);
  int assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) <= value) break;
    old = atomicCAS((int*)address, assumed, __float_as_int(value));
  } while (assumed != old);
  return __int_as_float(old);
}

__device__ double upd_e(double* address, double val) {          // pre-sm60 double atomicAdd
  unsigned long long int* address_as_ull = (unsigned long long int*)address;
  unsigned long long int old = *address_as_ull, assumed;
  do {
    assumed = old;
    old = atomicCAS(address_as_ull, assumed, __double_as_longlong(val + __longlong_as_double(assumed)));
  } while (assumed != old);
  return __longlong_as_double(old);
}

__device__ int upd_f(int* address, int val) {                   // int max on the values themselves
  int old = *address, assumed;
  do {
    assumed = old;
    old = atomicCAS(address, assumed, assumed > val ? assumed : val);
  } while (assumed != old);
  return old;
}

__device__ void upd_g(float v, float* a) {                      // while-loop min, value first
  unsigned int* bits = reinterpret_cast<unsigned int*>(a);
  unsigned int old = bits[0];
  while (v < __uint_as_float(old)) {
    unsigned int assumed = old;
    old = atomicCAS(bits, assumed, __float_as_uint(v));
    if (assumed == old) break;
  }
}
"""

KERNELS = HELPERS + r"""
__global__ void absmax_k(const float* x, float* out, int n) {
  __shared__ float part[128];
  float m = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) m = fmaxf(m, fabsf(x[i]));
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) upd_a(out, part[0]);
}

__global__ void max_k(const float* x, float* out, int n) {
  float m = -INFINITY;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) m = fmaxf(m, x[i]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  if ((threadIdx.x & 31) == 0) upd_b(out, m);
}

__global__ void sum_k(const float* x, float* out, int n) {
  float s = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
  if ((threadIdx.x & 31) == 0) upd_c(out, s);
}

__global__ void min_k(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float m = (i < n) ? x[i] : INFINITY;
  for (int o = 16; o > 0; o >>= 1) m = fminf(m, __shfl_xor_sync(0xffffffff, m, o));
  if ((threadIdx.x & 31) == 0) upd_d(out, m);
}

__global__ void dsum_k(const double* x, double* out, int n) {
  double s = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i] * x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  if ((threadIdx.x & 31) == 0) upd_e(out, s);
}

__global__ void imax_k(const int* x, int* out, int n) {
  int m = INT_MIN;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) m = max(m, x[i]);
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffff, m, o));
  if ((threadIdx.x & 31) == 0) upd_f(out, m);
}

__global__ void min2_k(const float* x, float* out, int n) {
  __shared__ float part[128];
  float m = INFINITY;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) m = fminf(m, x[i] * 2.0f);
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = fminf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) upd_g(part[0], out);
}

extern "C" void run(const float* x, const double* xd, const int* xi, float* amax, float* mx, float* sum,
                    float* mn, double* dsum, int* imx, float* mn2, int n) {
  int grid = (n + 127) / 128;
  if (grid > 16) grid = 16;
  absmax_k<<<grid, 128>>>(x, amax, n);
  max_k<<<grid, 128>>>(x, mx, n);
  sum_k<<<grid, 128>>>(x, sum, n);
  min_k<<<(n + 255) / 256, 256>>>(x, mn, n);
  dsum_k<<<grid, 128>>>(xd, dsum, n);
  imax_k<<<grid, 128>>>(xi, imx, n);
  min2_k<<<grid, 128>>>(x, mn2, n);
}
"""


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def test_cas_helper_reductions_match_numpy(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_reduce")["changed"]
    for clause in ("reduction(max:", "reduction(min:", "reduction(+:"):
        assert clause in text
    assert text.count("omp parallel for simd reduction") >= 7  # every kernel took the reduction path
    lib = cbuild(text, True)
    rng = np.random.default_rng(11)
    for n in (1, 31, 1000, 5000, 70001):
        x = rng.normal(size=n).astype(np.float32)
        xd = rng.normal(size=n)
        xi = rng.integers(-10**6, 10**6, n).astype(np.int32)
        amax = np.zeros(1, np.float32)
        mx = np.array([-3.0], np.float32)
        total = np.array([0.5], np.float32)
        mn = np.array([np.inf], np.float32)
        dsum = np.array([1.0])
        imx = np.array([-(2**31)], np.int32)
        mn2 = np.array([0.0], np.float32)
        lib.run(*(_ptr(a) for a in (x, xd, xi, amax, mx, total, mn, dsum, imx, mn2)), ctypes.c_int(n))
        assert amax[0] == np.abs(x).max()
        assert mx[0] == max(-3.0, x.max())
        np.testing.assert_allclose(total[0], 0.5 + x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
        assert mn[0] == x.min()
        np.testing.assert_allclose(dsum[0], 1.0 + np.sum(xd * xd), rtol=1e-12)
        assert imx[0] == xi.max()
        assert mn2[0] == min(0.0, 2.0 * x.min())


@pytest.mark.parametrize(("name", "op"), [("upd_a", "max"), ("upd_b", "max"), ("upd_c", "+"), ("upd_d", "min"),
                                          ("upd_e", "+"), ("upd_f", "max"), ("upd_g", "min")])
def test_helper_styles_are_recognised(name: str, op: str) -> None:
    module = lower_text(HELPERS, "h.cu")
    fn = next(f for f in module.functions() if f.name == name)
    found = cas_atomic(fn)
    assert not isinstance(found, str), found
    assert (found.op, found.address, found.value) == ((op, 1, 0) if name == "upd_g" else (op, 0, 1))


def _helper(loop: str, pre: str = "int* p = (int*)address;\n  int old = *p;") -> str:
    return f"__device__ float h(float* address, float value) {{\n  {pre}\n  {loop}\n  return __int_as_float(old);\n}}"


WHILE_MAX = "while (__int_as_float(old) < value) { const int assumed = old; old = atomicCAS(p, assumed, {new}); " \
            "if (old == assumed) break; }"

REFUSED_HELPERS = {
    # the CAS stores something else than the value
    "scaled store": _helper(WHILE_MAX.replace("{new}", "__float_as_int(2.0f * value)")),
    "offset store": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value + 1.0f)")),
    # a product, not a fold the pass knows
    "product": _helper("int assumed; do { assumed = old; old = atomicCAS(p, assumed, "
                       "__float_as_int(value * __int_as_float(assumed))); } while (assumed != old);"),
    # an exchange: stores the value unconditionally
    "exchange": _helper("int assumed; do { assumed = old; old = atomicCAS(p, assumed, __float_as_int(value)); }"
                        " while (assumed != old);"),
    # a min guard around a max update
    "mixed guard": _helper(WHILE_MAX.replace("<", ">", 1).replace(
        "{new}", "__float_as_int(fmaxf(value, __int_as_float(assumed)))")),
    # other side effects: a second store, a counter, a print
    "extra store": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value)"),
                           "int* p = (int*)address;\n  int old = *p;\n  address[1] = value;"),
    "counter": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value)").replace(
        "if (old == assumed) break;", "if (old == assumed) break; atomicAdd(&p[1], 1);")),
    "print": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value)") + ' printf("done\\n");'),
    # the retry exit compares floats (-0.0 == +0.0 stops without writing)
    "float exit": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value)").replace(
        "if (old == assumed)", "if (__int_as_float(old) == __int_as_float(assumed))")),
    # no retry exit at all
    "no exit": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value)").replace(
        "if (old == assumed) break; ", "")),
    # CAS on another location
    "other address": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value)").replace(
        "atomicCAS(p,", "atomicCAS(p + 1,")),
    # CAS on a double's bits through a 4-byte view
    "width": _helper(WHILE_MAX.replace("{new}", "__float_as_int(value)"),
                     "long long* p = (long long*)address;\n  int old = *p;"),
}


@pytest.mark.parametrize("name", sorted(REFUSED_HELPERS))
def test_other_helpers_are_refused(name: str) -> None:
    helper = REFUSED_HELPERS[name]
    module = lower_text(helper, "h.cu")
    fn = next(f for f in module.functions() if f.name == "h")
    assert isinstance(cas_atomic(fn), str)
    kernel = helper + r"""
__global__ void k(const float* x, float* out, int n) {
  float m = -INFINITY;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) m = fmaxf(m, x[i]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  if ((threadIdx.x & 31) == 0) h(out, m);
}
"""
    _assert_grid_reduce_refuses(kernel, "not a CAS-loop atomic")


def test_min_helper_on_a_max_fold_is_refused() -> None:
    kernel = HELPERS + r"""
__global__ void k(const float* x, float* out, int n) {
  float m = -INFINITY;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) m = fmaxf(m, x[i]);
  if (threadIdx.x == 0) upd_d(out, m);
}
"""
    _assert_grid_reduce_refuses(kernel, "atomic min on a max fold")


def test_absmax_suite_kernel_takes_the_reduction_path() -> None:
    root = Path(__file__).resolve().parents[2]
    source = (root / "benchmarks/suite/reduction/absmax/absmax.cu").read_text()
    text, records, _ctx = translate_to_cpu(source, "absmax.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_reduce")["changed"]
    assert "reduction(max:" in text and "atomic_max_float(result, xp_acc)" in text


def _assert_grid_reduce_refuses(kernel: str, reason: str) -> None:
    module = lower_text(kernel, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    reduce = get_pass("grid_reduce")
    with pytest.raises(PassRefused, match=reason):
        reduce.apply(module, reduce.INFO.defaults(), ctx)
