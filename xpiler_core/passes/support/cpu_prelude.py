"""The support text every CUDA → CPU translation starts with (C++ compiled by g++ -O2 -fopenmp).

Loop recovery turns kernels into loops; what remains of CUDA in the translated file is spelled with these
definitions: half/vector types and their intrinsics, sequential warp-shuffle reads over per-thread arrays,
OpenMP atomics, a host memory API that maps device allocations onto the heap, and ``dim3``.
Kept as one string (not a header on disk) so a translated file is self-contained.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

PRELUDE_MARK = "/* xpiler CPU prelude */"
# the packed GEMM micro-kernel cpu_gemm adds; the C → CUDA plan drops it with the fast paths that call it
GEMM_MARK = "/* xpiler cpu_gemm micro-kernel */"
GEMM_ENTRY = "xp_sgemm"


def _runtime_header(name: str) -> str:
    """One of the SIMT runtime's shared definition headers without its comment and pragma lines."""
    from importlib import resources

    text = resources.files("xpiler_core.runtime").joinpath(f"include/xpiler/{name}").read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith(("//", "#pragma")))


def _simd_video() -> str:
    """CUDA's lane-wise SIMD intrinsics and funnel shifts, from the SIMT runtime's own definitions."""
    return _runtime_header("simd_video.h") + "\n" + _runtime_header("funnel_shift.h")


def _runtime_enums() -> str:
    """The runtime's error codes, device attributes and compute modes as unnamed enums (the host API takes
    and returns plain ints), and the driver API's error type ``CUresult`` (programs name its codes in their
    error helpers), from the X-macro lists the SIMT runtime's headers use too."""
    return (_runtime_header("cuda_enums.h") + "\n#define XP_ENUMERATOR(prefix, name, value) prefix##name = value,\n"
            "#define XP_ERROR(name, value) XP_ENUMERATOR(cuda, name, value)\n"
            "#define XP_ATTR(name, value) XP_ENUMERATOR(cudaDevAttr, name, value)\n"
            "#define XP_MODE(name, value) XP_ENUMERATOR(cudaComputeMode, name, value)\n"
            "enum { XPILER_CUDA_ERRORS(XP_ERROR) };\nenum { XPILER_CUDA_DEVICE_ATTRS(XP_ATTR) };\n"
            "enum { XPILER_CUDA_COMPUTE_MODES(XP_MODE) };\n"
            "#define XP_DRIVER_ERROR(name, value) CUDA_##name = value,\n"
            "typedef enum cudaError_enum { XPILER_CUDA_DRIVER_ERRORS(XP_DRIVER_ERROR) } CUresult;\n"
            "#undef XP_ERROR\n#undef XP_ATTR\n#undef XP_MODE\n#undef XP_DRIVER_ERROR\n#undef XP_ENUMERATOR")


PRELUDE = PRELUDE_MARK + r"""
/* Build: g++ -O2 -fopenmp -fno-strict-aliasing FILE.cpp (the GPU code may type-pun through pointer casts). */
#include <math.h>
#include <stdio.h>
#include <limits.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <time.h>
#include <cmath>
#include <algorithm>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__F16C__) || defined(XPILER_F16C) || defined(__AVX512F__) || defined(XPILER_AVX512F)
#include <immintrin.h>
#endif
/* glibc's vector math library (libmvec, within 4 ulp) declared as SIMD functions, so loops under
   `omp simd` that call expf/tanhf/... vectorize; glibc itself declares them only under -ffast-math. */
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(__FAST_MATH__) && !defined(XPILER_NO_MVEC)
#define XP_MVEC(ret, name, ...) extern "C" ret name(__VA_ARGS__) __THROW __attribute__((__simd__("notinbranch")));
#if __GLIBC_PREREQ(2, 22)
XP_MVEC(float, expf, float) XP_MVEC(float, logf, float) XP_MVEC(float, sinf, float) XP_MVEC(float, cosf, float)
XP_MVEC(float, powf, float, float) XP_MVEC(double, exp, double) XP_MVEC(double, log, double)
XP_MVEC(double, sin, double) XP_MVEC(double, cos, double) XP_MVEC(double, pow, double, double)
#endif
#if __GLIBC_PREREQ(2, 35)
XP_MVEC(float, tanhf, float) XP_MVEC(float, exp2f, float) XP_MVEC(float, log2f, float)
XP_MVEC(float, log10f, float) XP_MVEC(float, expm1f, float) XP_MVEC(float, log1pf, float)
XP_MVEC(float, atanf, float) XP_MVEC(float, erff, float) XP_MVEC(double, tanh, double)
XP_MVEC(double, expm1, double) XP_MVEC(double, log1p, double) XP_MVEC(double, erf, double)
#endif
#undef XP_MVEC
#endif
namespace xpiler_cpu {
#if defined(__F16C__) || defined(XPILER_F16C)
/* hardware conversions (round to nearest even, like the portable versions below) */
static inline float h2f(unsigned short h) { return _cvtsh_ss(h); }
static inline unsigned short f2h(float f) { return (unsigned short)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
#else
static inline float h2f(unsigned short h) {
  unsigned int sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) { bits = sign; }
    else { exp = 127 - 15 + 1; while (!(man & 0x400u)) { man <<= 1; --exp; } man &= 0x3ffu; bits = sign | (exp << 23) | (man << 13); }
  } else if (exp == 31) { bits = sign | 0x7f800000u | (man << 13); }
  else { bits = sign | ((exp + 127 - 15) << 23) | (man << 13); }
  float f; memcpy(&f, &bits, 4); return f;
}
static inline unsigned short f2h(float f) {  /* round to nearest even */
  unsigned int x; memcpy(&x, &f, 4);
  unsigned int sign = (x >> 16) & 0x8000u; int exp = (int)((x >> 23) & 0xff) - 127 + 15; unsigned int man = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return (unsigned short)(sign | 0x7c00u | (man ? 0x200u : 0));
  if (exp >= 31) return (unsigned short)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (unsigned short)sign;
    man |= 0x800000u; unsigned int shift = (unsigned int)(14 - exp); unsigned int half_bits = man >> shift;
    unsigned int rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_bits & 1u))) ++half_bits;
    return (unsigned short)(sign | half_bits);
  }
  unsigned int out = sign | ((unsigned int)exp << 10) | (man >> 13); unsigned int rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) ++out;
  return (unsigned short)out;
}
#endif
}  // namespace xpiler_cpu
struct __half {
  unsigned short x;
  __half() = default;
  __half(float f) : x(xpiler_cpu::f2h(f)) {}
  __half(double f) : x(xpiler_cpu::f2h((float)f)) {}
  __half(int v) : x(xpiler_cpu::f2h((float)v)) {}
  operator float() const { return xpiler_cpu::h2f(x); }
  /* CUDA's compound assignments: the operation in float, rounded once to half (acc += a * b) */
  __half& operator+=(float v) { x = xpiler_cpu::f2h(xpiler_cpu::h2f(x) + v); return *this; }
  __half& operator-=(float v) { x = xpiler_cpu::f2h(xpiler_cpu::h2f(x) - v); return *this; }
  __half& operator*=(float v) { x = xpiler_cpu::f2h(xpiler_cpu::h2f(x) * v); return *this; }
  __half& operator/=(float v) { x = xpiler_cpu::f2h(xpiler_cpu::h2f(x) / v); return *this; }
};
typedef __half half;
/* Tiles of half values converted to and from float in bulk, with the vector conversion instructions where the
   ISA has them (g++ cannot vectorize the scalar ones): loops over half arrays stage through float tiles. */
static inline void xp_h2f_n(float* dst, const __half* src, int n) {
  int k = 0;
#if defined(__AVX512F__) || defined(XPILER_AVX512F)
  for (; k + 16 <= n; k += 16)
    _mm512_storeu_ps(dst + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(src + k))));
#endif
#if defined(__F16C__) || defined(XPILER_F16C)
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(src + k))));
#endif
  for (; k < n; ++k) dst[k] = (float)src[k];
}
static inline void xp_f2h_n(__half* dst, const float* src, int n) {
  int k = 0;
#if defined(__AVX512F__) || defined(XPILER_AVX512F)
  for (; k + 16 <= n; k += 16)
    _mm256_storeu_si256((__m256i*)(dst + k), _mm512_cvtps_ph(_mm512_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT));
#endif
#if defined(__F16C__) || defined(XPILER_F16C)
  for (; k + 8 <= n; k += 8)
    _mm_storeu_si128((__m128i*)(dst + k), _mm256_cvtps_ph(_mm256_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; k < n; ++k) dst[k] = __half(src[k]);
}
struct __half2 { __half x, y; };
typedef __half2 half2;
/* CUDA's vector types, with CUDA's sizes and alignments (host code copies n * sizeof(float4) bytes). */
#define XP_VEC(T, B, A2, A4) \
  struct T##1 { B x; }; struct alignas(A2) T##2 { B x, y; }; struct T##3 { B x, y, z; }; \
  struct alignas(A4) T##4 { B x, y, z, w; }; \
  static inline T##1 make_##T##1(B x) { T##1 r = {x}; return r; } \
  static inline T##2 make_##T##2(B x, B y) { T##2 r = {x, y}; return r; } \
  static inline T##3 make_##T##3(B x, B y, B z) { T##3 r = {x, y, z}; return r; } \
  static inline T##4 make_##T##4(B x, B y, B z, B w) { T##4 r = {x, y, z, w}; return r; }
XP_VEC(char, signed char, 2, 4) XP_VEC(uchar, unsigned char, 2, 4) XP_VEC(short, short, 4, 8)
XP_VEC(ushort, unsigned short, 4, 8) XP_VEC(int, int, 8, 16) XP_VEC(uint, unsigned int, 8, 16)
XP_VEC(long, long, 16, 16) XP_VEC(ulong, unsigned long, 16, 16) XP_VEC(longlong, long long, 16, 32)
XP_VEC(ulonglong, unsigned long long, 16, 32) XP_VEC(float, float, 8, 16) XP_VEC(double, double, 16, 32)
#undef XP_VEC
static inline float __half2float(__half h) { return (float)h; }
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
/* directed roundings: the nearest value moved back one step of its magnitude where it went past f */
static inline __half xpiler_cpu_float2half_directed(float f, int dir) {
  __half h(f);
  const float back = (float)h;
  if (f != f || back == f) return h;
  const bool neg = (h.x & 0x8000) != 0;
  const bool past = dir == 0 ? fabsf(back) > fabsf(f) : dir < 0 ? back > f : back < f;
  if (!past) return h;
  h.x = (unsigned short)((dir == 0 || (dir < 0) != neg) ? h.x - 1 : h.x + 1);
  return h;
}
static inline __half __float2half_rz(float f) { return xpiler_cpu_float2half_directed(f, 0); }
static inline __half __float2half_rd(float f) { return xpiler_cpu_float2half_directed(f, -1); }
static inline __half __float2half_ru(float f) { return xpiler_cpu_float2half_directed(f, 1); }
static inline __half __hadd(__half a, __half b) { return __half((float)a + (float)b); }
static inline __half __hsub(__half a, __half b) { return __half((float)a - (float)b); }
static inline __half __hmul(__half a, __half b) { return __half((float)a * (float)b); }
static inline __half __hdiv(__half a, __half b) { return __half((float)a / (float)b); }
static inline __half __hneg(__half a) { return __half(-(float)a); }
static inline __half __hfma(__half a, __half b, __half c) { return __half(fmaf((float)a, (float)b, (float)c)); }
static inline __half2 __floats2half2_rn(float a, float b) { __half2 r; r.x = __half(a); r.y = __half(b); return r; }
static inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
static inline __half2 __float2half2_rn(float f) { return __floats2half2_rn(f, f); }
static inline __half2 __halves2half2(__half a, __half b) { __half2 r; r.x = a; r.y = b; return r; }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static inline float __low2float(__half2 h) { return (float)h.x; }
static inline float __high2float(__half2 h) { return (float)h.y; }
static inline __half2 __hadd2(__half2 a, __half2 b) { return __floats2half2_rn((float)a.x + (float)b.x, (float)a.y + (float)b.y); }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __floats2half2_rn((float)a.x * (float)b.x, (float)a.y * (float)b.y); }
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanhf(x) tanhf(x)
#define __powf(x, y) powf(x, y)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __exp10f(x) exp10f(x)
#define __tanf(x) tanf(x)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
static inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
static inline float __uint_as_float(unsigned int v) { float f; memcpy(&f, &v, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int v; memcpy(&v, &f, 4); return v; }
static inline double __longlong_as_double(long long v) { double f; memcpy(&f, &v, 8); return f; }
static inline long long __double_as_longlong(double f) { long long v; memcpy(&v, &f, 8); return v; }
static inline int __float2int_rn(float f) { return (int)nearbyintf(f); }
static inline int __float2int_rz(float f) { return (int)f; }
static inline int __float2int_rd(float f) { return (int)floorf(f); }
static inline int __float2int_ru(float f) { return (int)ceilf(f); }
static inline float __int2float_rn(int v) { return (float)v; }
static inline unsigned int __brev(unsigned int x) { unsigned int r = 0; for (int k = 0; k < 32; ++k) { r = (r << 1) | (x & 1u); x >>= 1; } return r; }
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __mul24(int a, int b) { return a * b; }
static inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += (int)(signed char)(a >> (8 * k)) * (int)(signed char)(b >> (8 * k));
  return c;
}
static inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  for (int k = 0; k < 4; ++k) c += ((a >> (8 * k)) & 0xffu) * ((b >> (8 * k)) & 0xffu);
  return c;
}
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline T __ldcv(const T* p) { return *p; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stwb(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }
/* CUDA's pipeline primitives: a thread's asynchronous copy done when issued (CUDA lets it complete at any point
   before the wait that covers it; the thread loops keep every thread's own order) */
static inline void __pipeline_memcpy_async(void* dst, const void* src, size_t size_and_align, size_t zfill = 0) {
  memcpy(dst, src, size_and_align - zfill);
  memset((char*)dst + (size_and_align - zfill), 0, zfill);
}
static inline void __pipeline_commit() {}
static inline void __pipeline_wait_prior(size_t) {}
@SIMD_VIDEO@
template <class T> static inline T xp_min(T a, T b) { return a < b ? a : b; }
/* CUDA's min/max: by value (std::max returns a reference, which keeps loops from vectorizing); the float
   versions return the non-NaN operand like fminf/fmaxf, written as selects so they vectorize. */
static inline float max(float a, float b) { return (b != b || a > b) ? a : b; }
static inline float min(float a, float b) { return (b != b || a < b) ? a : b; }
static inline double max(double a, double b) { return (b != b || a > b) ? a : b; }
static inline double min(double a, double b) { return (b != b || a < b) ? a : b; }
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) { return a > b ? a : b; }
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
/* Warp collectives read a per-thread array filled before the (split) barrier; t is the thread's linear
   index, n the block's thread count, w the warp size, width the shuffle segment. Out-of-range lanes get
   their own value, as CUDA specifies. */
template <class T> static inline T xp_shfl_idx(const T* a, int t, int n, int w, int src, int width) {
  int lane = t % w, base = t - lane + (lane / width) * width, s = base + (src % width + width) % width;
  return s < n ? a[s] : a[t];
}
template <class T> static inline T xp_shfl_down(const T* a, int t, int n, int w, unsigned d, int width) {
  int lane = t % w, pos = lane % width, s = t + (int)d;
  return (pos + (int)d < width && s < n) ? a[s] : a[t];
}
template <class T> static inline T xp_shfl_up(const T* a, int t, int n, int w, unsigned d, int width) {
  int lane = t % w, pos = lane % width;
  return (pos - (int)d >= 0) ? a[t - (int)d] : a[t];
}
template <class T> static inline T xp_shfl_xor(const T* a, int t, int n, int w, int m, int width) {
  int lane = t % w, base = t - lane, s_lane = lane ^ m;
  if ((s_lane / width) != (lane / width) && width < w) return a[t];
  int s = base + s_lane;
  return s < n && s_lane < w ? a[s] : a[t];
}
static inline unsigned int xp_ballot(const int* a, int t, int n, int w) {
  int base = t - t % w; unsigned int r = 0;
  for (int j = 0; j < w && j < 32 && base + j < n; ++j) if (a[base + j]) r |= 1u << j;
  return r;
}
static inline int xp_any(const int* a, int t, int n, int w) { return xp_ballot(a, t, n, w) != 0u; }
static inline int xp_all(const int* a, int t, int n, int w) {
  int base = t - t % w;
  for (int j = 0; j < w && base + j < n; ++j) if (!a[base + j]) return 0;
  return 1;
}
/* Atomics: OpenMP atomic captures (blocks run on OpenMP threads). */
template <class T, class V> static inline T atomicAdd(T* p, V v) { T old; _Pragma("omp atomic capture") { old = *p; *p += (T)v; } return old; }
template <class T, class V> static inline T atomicSub(T* p, V v) { T old; _Pragma("omp atomic capture") { old = *p; *p -= (T)v; } return old; }
template <class T, class V> static inline T atomicAnd(T* p, V v) { T old; _Pragma("omp atomic capture") { old = *p; *p &= (T)v; } return old; }
template <class T, class V> static inline T atomicOr(T* p, V v) { T old; _Pragma("omp atomic capture") { old = *p; *p |= (T)v; } return old; }
template <class T, class V> static inline T atomicXor(T* p, V v) { T old; _Pragma("omp atomic capture") { old = *p; *p ^= (T)v; } return old; }
template <class T, class V> static inline T atomicInc(T* p, V lim_) { T lim = (T)lim_; T old = __atomic_load_n(p, __ATOMIC_SEQ_CST); while (!__atomic_compare_exchange_n(p, &old, old >= lim ? 0 : old + 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return old; }
template <class T, class V> static inline T atomicDec(T* p, V lim_) { T lim = (T)lim_; T old = __atomic_load_n(p, __ATOMIC_SEQ_CST); while (!__atomic_compare_exchange_n(p, &old, (old == 0 || old > lim) ? lim : old - 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return old; }
template <class T, class V> static inline T atomicExch(T* p, V v) { T old; _Pragma("omp atomic capture") { old = *p; *p = (T)v; } return old; }
template <class T, class C, class V> static inline T atomicCAS(T* p, C cmp, V v) { T c = (T)cmp; __atomic_compare_exchange_n(p, &c, (T)v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
/* Max/min by compare-and-swap on the bytes (the generic builtins take float and double too). Templates, so a
   program's own non-template atomicMax(float*, float) (CUDA has none) is the better match and no clash. */
template <class T, class V> static inline T atomicMax(T* p, V v) {
  T old, nv = (T)v; __atomic_load(p, &old, __ATOMIC_SEQ_CST);
  while (nv > old && !__atomic_compare_exchange(p, &old, &nv, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
template <class T, class V> static inline T atomicMin(T* p, V v) {
  T old, nv = (T)v; __atomic_load(p, &old, __ATOMIC_SEQ_CST);
  while (nv < old && !__atomic_compare_exchange(p, &old, &nv, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
/* Host API: device memory is host memory. Headers that test for the CUDA runtime's own include guards
   (helper libraries) see it, since this prelude provides its vocabulary. */
#ifndef __CUDA_RUNTIME_H__
#define __CUDA_RUNTIME_H__
#define __CUDA_RUNTIME_H_
#define __DRIVER_TYPES_H__
#endif
/* Execution-space qualifiers left in project headers the translation includes as they are (classes with
   __host__ __device__ members): every function is a host function here. */
#ifndef __host__
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#endif
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif
struct dim3 {
  unsigned int x, y, z;
  dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef int cudaError_t;
typedef int cudaError;
typedef void* cudaStream_t;
typedef int cudaMemcpyKind;
enum { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
       cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
@RUNTIME_ENUMS@
enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1, cudaEventDefault = 0, cudaEventBlockingSync = 1,
       cudaEventDisableTiming = 2, cudaHostAllocDefault = 0, cudaHostAllocPortable = 1, cudaHostAllocMapped = 2,
       cudaMemAttachGlobal = 1, cudaFuncCachePreferNone = 0, cudaFuncCachePreferShared = 1,
       cudaFuncCachePreferL1 = 2, cudaSharedMemBankSizeDefault = 0, cudaLimitStackSize = 0,
       cudaLimitMallocHeapSize = 2, cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
/* The device is this CPU: one device, properties of a large GPU block so that programs size their launches
   as usual (a translated launch runs the same blocks and threads, as loops). */
struct cudaDeviceProp {
  char name[256]; size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerMultiprocessor, sharedMemPerBlockOptin;
  size_t totalConstMem, memPitch, textureAlignment; int regsPerBlock, warpSize, maxThreadsPerBlock;
  int maxThreadsDim[3], maxGridSize[3], clockRate, major, minor, multiProcessorCount, l2CacheSize;
  int maxThreadsPerMultiProcessor, memoryClockRate, memoryBusWidth, concurrentKernels, computeMode, integrated;
  int canMapHostMemory, unifiedAddressing, managedMemory, asyncEngineCount, deviceOverlap, pciBusID, pciDeviceID;
  int pciDomainID, ECCEnabled, cooperativeLaunch, kernelExecTimeoutEnabled, regsPerMultiprocessor;
  int maxBlocksPerMultiProcessor, persistingL2CacheMaxSize, pageableMemoryAccess, concurrentManagedAccess;
};
static inline int cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  memset(p, 0, sizeof *p); strcpy(p->name, "xpiler CPU"); p->totalGlobalMem = (size_t)8 << 30;
  p->sharedMemPerBlock = 48 << 10; p->sharedMemPerMultiprocessor = p->sharedMemPerBlockOptin = 164 << 10;
  p->totalConstMem = 64 << 10; p->regsPerBlock = p->regsPerMultiprocessor = 65536; p->warpSize = 32;
  p->maxThreadsPerBlock = 1024; p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = p->maxGridSize[2] = 65535; p->clockRate = 1000000;
  p->major = 8; p->minor = 0; p->l2CacheSize = 1 << 20;
#ifdef _OPENMP
  p->multiProcessorCount = omp_get_num_procs();
#else
  p->multiProcessorCount = 1;
#endif
  p->maxThreadsPerMultiProcessor = 2048; p->memoryClockRate = 1000000; p->memoryBusWidth = 64;
  p->concurrentKernels = p->canMapHostMemory = p->unifiedAddressing = p->managedMemory = 1;
  p->cooperativeLaunch = 1; p->maxBlocksPerMultiProcessor = 32; p->pageableMemoryAccess = 1;
  p->concurrentManagedAccess = 1; return 0;
}
static inline int cudaDeviceGetAttribute(int* v, int attr, int) {
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  switch (attr) { case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *v = p.warpSize; break; case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; break; case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break; default: *v = 0; }
  return 0;
}
static inline int cudaGetDeviceCount(int* n) { *n = 1; return 0; }
static inline int cudaGetDevice(int* d) { *d = 0; return 0; }
static inline int cudaSetDevice(int) { return 0; }
static inline int cudaDeviceReset(void) { return 0; }
static inline int cudaDeviceSetCacheConfig(int) { return 0; }
static inline int cudaDeviceSetSharedMemConfig(int) { return 0; }
typedef int cudaSharedMemConfig;
typedef int cudaFuncCache;
enum { cudaSharedMemBankSizeFourByte = 1, cudaSharedMemBankSizeEightByte = 2, cudaFuncCachePreferEqual = 3 };
static inline int cudaDeviceGetSharedMemConfig(cudaSharedMemConfig* c) { *c = cudaSharedMemBankSizeFourByte; return 0; }
static inline int cudaDeviceGetCacheConfig(cudaFuncCache* c) { *c = cudaFuncCachePreferNone; return 0; }
static inline int cudaDeviceSetLimit(int, size_t) { return 0; }
template <class F> static inline int cudaFuncSetCacheConfig(F, int) { return 0; }
template <class F> static inline int cudaFuncSetAttribute(F, int, int) { return 0; }
static inline int cudaMemGetInfo(size_t* free_, size_t* total) { *free_ = *total = (size_t)8 << 30; return 0; }
static inline int cudaProfilerStart(void) { return 0; }
static inline int cudaProfilerStop(void) { return 0; }
/* XP_ALLOCATED, XP_HOST_WROTE, XP_FREED: hooks the verifier's build defines to read the device buffers as they
   are when freed (nothing otherwise: verify/program.py, runtime/include/xpiler/copyback.h) */
#ifndef XP_FREED
#define XP_ALLOCATED(p, n, type) ((void)0)
#define XP_HOST_WROTE(d, n) ((void)0)
#define XP_FREED(p, type) ((void)0)
#endif
template <class T> static inline int cudaMalloc(T** p, size_t n) { *p = (T*)malloc(n ? n : 1); if (*p) XP_ALLOCATED((void*)*p, n, T); return *p ? 0 : 2; }
template <class T> static inline int cudaMallocHost(T** p, size_t n) { return cudaMalloc(p, n); }
template <class T> static inline int cudaMallocAsync(T** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
template <class T> static inline int cudaHostAlloc(T** p, size_t n, unsigned int) { return cudaMalloc(p, n); }
template <class T> static inline int cudaMallocManaged(T** p, size_t n, unsigned int = 1) { return cudaMalloc(p, n); }
static inline int cudaFree(void* p) { XP_FREED(p, void); free(p); return 0; }
template <class T> static inline int cudaFree(T* p) { XP_FREED(p, T); free((void*)p); return 0; }
static inline int cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
static inline int cudaFreeHost(void* p) { return cudaFree(p); }
static inline int cudaHostRegister(void*, size_t, unsigned int) { return 0; }
static inline int cudaHostUnregister(void*) { return 0; }
template <class T> static inline int cudaHostGetDevicePointer(T** d, void* h, unsigned int) { *d = (T*)h; return 0; }
static inline int cudaMemPrefetchAsync(const void*, size_t, int, cudaStream_t = 0) { return 0; }
/* streams: distinct handles (a graph capture follows the streams it was started on or joined) */
static inline cudaStream_t xp_host_new_stream(void) { static long n = 16; return (cudaStream_t)++n; }
static inline int cudaStreamCreate(cudaStream_t* s) { *s = xp_host_new_stream(); return 0; }
static inline int cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) { *s = xp_host_new_stream(); return 0; }
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
static inline int cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int, int) { *s = xp_host_new_stream(); return 0; }
static inline int cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0; if (greatest) *greatest = -5; return 0; }
enum { cudaDeviceScheduleAuto = 0, cudaDeviceScheduleSpin = 1, cudaDeviceScheduleYield = 2,
       cudaDeviceScheduleBlockingSync = 4, cudaDeviceMapHost = 8, cudaDeviceLmemResizeToMax = 16 };
static inline int cudaSetDeviceFlags(unsigned int) { return 0; }
static inline int cudaGetDeviceFlags(unsigned int* f) { *f = cudaDeviceMapHost; return 0; }
static inline int cudaStreamDestroy(cudaStream_t) { return 0; }
static inline int cudaStreamQuery(cudaStream_t) { return 0; }
/* Events hold a time stamp; the stream work before them is done when they are recorded (synchronous). */
struct xp_event { double t; int captured; };
typedef xp_event* cudaEvent_t;
static inline double xp_now_ms(void) {
  struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6; }
/* a device cycle counter read on the CPU: nanoseconds of the monotonic clock (differences are what code uses) */
static inline long long clock64(void) {
  struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec; }
static inline int cudaEventCreate(cudaEvent_t* e) {
  *e = (cudaEvent_t)malloc(sizeof(xp_event)); (*e)->t = 0; (*e)->captured = 0; return 0; }
static inline int cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { return cudaEventCreate(e); }
/* Graphs by stream capture: work issued on a capturing stream (launches, async copies and sets, host functions)
   is recorded in order, as closures over its arguments' values, and a launch of the instantiated graph runs it
   again; an event recorded while capturing lets a stream that waits on it join the capture. */
struct xp_dep { const struct xp_work* on; xp_dep* next; };  /* a node this one runs after */
struct xp_work { xp_work* next; size_t at; const xp_work* origin; xp_dep* after;
                 xp_work() : next(0), at(0), origin(0), after(0) {}
                 virtual ~xp_work() { for (xp_dep* d = after; d;) { xp_dep* n = d->next; delete d; d = n; } }
                 virtual void run() = 0; virtual xp_work* clone() const = 0;
                 void runs_after(const xp_work* w) { after = new xp_dep{w, after}; } };
template <class F> struct xp_work_of : xp_work {
  F f; explicit xp_work_of(const F& g) : f(g) {} void run() { f(); } xp_work* clone() const { return new xp_work_of(f); } };
struct xp_graph { xp_work* head; xp_work* tail; size_t n; xp_graph() : head(0), tail(0), n(0) {} };
typedef xp_graph* cudaGraph_t;
typedef xp_graph* cudaGraphExec_t;
typedef void* cudaGraphNode_t;
typedef int cudaStreamCaptureMode;
typedef int cudaStreamCaptureStatus;
enum { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2,
       cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1, cudaStreamCaptureStatusInvalidated = 2,
       cudaGraphInstantiateFlagAutoFreeOnLaunch = 1 };
static xp_graph* xp_capture_graph = 0;
static cudaStream_t xp_capture_streams[64];
static int xp_capture_count = 0;
static inline bool xp_host_capturing(cudaStream_t s) {
  for (int i = 0; xp_capture_graph && i < xp_capture_count; ++i) if (xp_capture_streams[i] == s) return true;
  return false; }
static inline void xp_host_graph_append(xp_graph* g, xp_work* w) {
  if (g->tail) g->tail->next = w; else g->head = w;
  w->at = g->n; g->tail = w; ++g->n; }
template <class F> static inline void xp_host_record(const F& f) { xp_host_graph_append(xp_capture_graph, new xp_work_of<F>(f)); }
/* stream work: recorded while its stream is captured, done at once otherwise */
#define XP_ON_STREAM(s, ...) do { if (xp_host_capturing((cudaStream_t)(s))) xp_host_record([=]() { __VA_ARGS__; }); \
                                  else { __VA_ARGS__; } } while (0)
static inline int cudaStreamBeginCapture(cudaStream_t s, int = 0) {
  if (xp_capture_graph) return 1;
  xp_capture_graph = new xp_graph(); xp_capture_streams[0] = s; xp_capture_count = 1; return 0; }
static inline int cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  *g = xp_capture_graph; xp_capture_graph = 0; xp_capture_count = 0; return *g ? 0 : 1; }
static inline int cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  *status = xp_host_capturing(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone; return 0; }
static inline int cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode*) { return 0; }
static inline int cudaGraphCreate(cudaGraph_t* g, unsigned int) { *g = new xp_graph(); return 0; }
static inline void xp_host_graph_free(xp_graph* g) {
  for (xp_work* w = g->head; w;) { xp_work* next = w->next; delete w; w = next; }
  delete g; }
/* a graph's nodes in an order their dependencies allow (the first ready node in the order they were added: one
   of the schedules a GPU may run); each copy remembers its node. Not 0 where the dependencies form a cycle. */
static inline int xp_host_graph_copy(xp_graph* to, const xp_graph* g) {
  const size_t n = g->n;
  const xp_work** nodes = new const xp_work*[n + 1];
  xp_work** copies = new xp_work*[n + 1];
  char* taken = new char[n + 1]();
  size_t k = 0;
  for (const xp_work* w = g->head; w; w = w->next) nodes[k++] = w;
  int status = 0;
  for (size_t count = 0; count < n && status == 0; ++count) {
    size_t i = 0;
    for (; i < n; ++i) {
      bool ready = !taken[i];
      for (const xp_dep* d = nodes[i]->after; ready && d; d = d->next) ready = taken[d->on->at] != 0;
      if (ready) break; }
    if (i == n) { status = 1; break; }
    taken[i] = 1;
    xp_work* c = nodes[i]->clone(); c->origin = nodes[i]->origin ? nodes[i]->origin : nodes[i];
    xp_host_graph_append(to, c); copies[i] = c; }
  for (size_t i = 0; status == 0 && i < n; ++i)  /* the copies depend on the copies of their dependencies */
    for (const xp_dep* d = nodes[i]->after; d; d = d->next) copies[i]->runs_after(copies[d->on->at]);
  delete[] nodes; delete[] copies; delete[] taken;
  return status; }
static inline int cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long = 0) {
  *e = new xp_graph(); return xp_host_graph_copy(*e, g); }
static inline int cudaGraphClone(cudaGraph_t* c, cudaGraph_t g) { *c = new xp_graph(); return xp_host_graph_copy(*c, g); }
static inline int cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, cudaGraphNode_t*, char*, size_t) {
  return cudaGraphInstantiate(e, g); }
static inline int cudaGraphInstantiateWithFlags(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long = 0) {
  return cudaGraphInstantiate(e, g); }
static inline void xp_host_graph_run(xp_graph* g) { for (xp_work* w = g->head; w; w = w->next) w->run(); }
static inline int cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) { XP_ON_STREAM(s, xp_host_graph_run(e)); return 0; }
static inline int cudaGraphUpload(cudaGraphExec_t, cudaStream_t) { return 0; }
static inline int cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* n) {
  size_t i = 0;
  for (xp_work* w = g->head; w && nodes && i < *n; w = w->next) nodes[i++] = (cudaGraphNode_t)w;
  *n = nodes ? i : g->n; return 0; }
static inline int cudaGraphDestroy(cudaGraph_t g) { xp_host_graph_free(g); return 0; }
static inline int cudaGraphExecDestroy(cudaGraphExec_t e) { xp_host_graph_free(e); return 0; }
static inline int cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
  e->t = xp_now_ms(); e->captured = xp_host_capturing(s); return 0; }
static inline int cudaEventSynchronize(cudaEvent_t) { return 0; }
static inline int cudaEventQuery(cudaEvent_t) { return 0; }
static inline int cudaEventDestroy(cudaEvent_t e) { free(e); return 0; }
static inline int cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { *ms = (float)(b->t - a->t); return 0; }
static inline int cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int = 0) {
  if (e->captured && xp_capture_graph && !xp_host_capturing(s) && xp_capture_count < 64)
    xp_capture_streams[xp_capture_count++] = s;  /* the stream joins the capture */
  return 0; }
/* stream work is done when it is enqueued: a stream callback or host function runs at once */
#ifndef CUDART_CB
#define CUDART_CB
#endif
typedef void (*cudaStreamCallback_t)(cudaStream_t, cudaError_t, void*);
typedef void (*cudaHostFn_t)(void*);
static inline int cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t f, void* data, unsigned int) { f(s, 0, data); return 0; }
static inline int cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t f, void* data) { XP_ON_STREAM(s, f(data)); return 0; }
static inline int cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t s = 0) {
  XP_ON_STREAM(s, memset(d, v, n); XP_HOST_WROTE(d, n)); return 0; }
/* XP_COPY_BACK: a hook the verifier's build defines to read what the program copies back (nothing otherwise:
   verify/program.py, runtime/include/xpiler/copyback.h) */
#ifndef XP_COPY_BACK
#define XP_COPY_BACK(d, n, kind, type) ((void)0)
#endif
static inline int cudaMemcpy(void* d, const void* s, size_t n, int kind) { memmove(d, s, n); XP_HOST_WROTE(d, n); XP_COPY_BACK(d, n, kind, void); return 0; }
template <class T> static inline int cudaMemcpy(T* d, const void* s, size_t n, int kind) { memmove((void*)d, s, n); XP_HOST_WROTE((const void*)d, n); XP_COPY_BACK(d, n, kind, T); return 0; }
template <class D> static inline int cudaMemcpyAsync(D* d, const void* s, size_t n, int kind, cudaStream_t st = 0) {
  XP_ON_STREAM(st, cudaMemcpy(d, s, n, kind)); return 0; }
static inline int cudaMemset(void* d, int v, size_t n) { memset(d, v, n); XP_HOST_WROTE(d, n); return 0; }
/* pitched 2-D and 3-D memory: rows padded to 256 bytes, as the runtime (and GPUs) pad them */
template <class T> static inline int cudaMallocPitch(T** p, size_t* pitch, size_t w, size_t h) {
  *pitch = (w + 255) / 256 * 256; return cudaMalloc(p, *pitch * h); }
static inline int cudaMemcpy2D(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, int = cudaMemcpyDefault) {
  for (size_t r = 0; r < h; ++r) memmove((char*)d + r * dp, (const char*)s + r * sp, w);
  XP_HOST_WROTE(d, dp * h); return 0; }
static inline int cudaMemcpy2DAsync(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, int k = cudaMemcpyDefault,
                                    cudaStream_t = 0) { return cudaMemcpy2D(d, dp, s, sp, w, h, k); }
static inline int cudaMemset2D(void* d, size_t pitch, int v, size_t w, size_t h) {
  for (size_t r = 0; r < h; ++r) memset((char*)d + r * pitch, v, w);
  XP_HOST_WROTE(d, pitch * h); return 0; }
struct cudaExtent { size_t width, height, depth; };
struct cudaPitchedPtr { void* ptr; size_t pitch, xsize, ysize; };
struct cudaPos { size_t x, y, z; };
struct cudaMemcpy3DParms { void* srcArray; cudaPos srcPos; cudaPitchedPtr srcPtr; void* dstArray; cudaPos dstPos;
                           cudaPitchedPtr dstPtr; cudaExtent extent; int kind; };
static inline cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) { return cudaExtent{w, h, d}; }
static inline cudaPitchedPtr make_cudaPitchedPtr(void* p, size_t pitch, size_t xsize, size_t ysize) {
  return cudaPitchedPtr{p, pitch, xsize, ysize}; }
static inline cudaPos make_cudaPos(size_t x, size_t y, size_t z) { return cudaPos{x, y, z}; }
static inline int cudaMalloc3D(cudaPitchedPtr* p, cudaExtent e) {
  size_t pitch = (e.width + 255) / 256 * 256; void* block = 0;
  int err = cudaMalloc(&block, pitch * e.height * e.depth);
  *p = cudaPitchedPtr{block, pitch, e.width, e.height}; return err; }
static inline int cudaMemcpy3D(const cudaMemcpy3DParms* m) {
  if (!m || m->srcArray || m->dstArray) return 1;
  for (size_t z = 0; z < m->extent.depth; ++z)
    cudaMemcpy2D((char*)m->dstPtr.ptr + ((m->dstPos.z + z) * m->dstPtr.ysize + m->dstPos.y) * m->dstPtr.pitch + m->dstPos.x,
                 m->dstPtr.pitch,
                 (const char*)m->srcPtr.ptr + ((m->srcPos.z + z) * m->srcPtr.ysize + m->srcPos.y) * m->srcPtr.pitch
                     + m->srcPos.x, m->srcPtr.pitch, m->extent.width, m->extent.height, m->kind);
  return 0; }
static inline int cudaMemcpy3DAsync(const cudaMemcpy3DParms* m, cudaStream_t = 0) { return cudaMemcpy3D(m); }
static inline int cudaMemset3D(cudaPitchedPtr p, int v, cudaExtent e) {
  for (size_t z = 0; z < e.depth; ++z) cudaMemset2D((char*)p.ptr + z * p.ysize * p.pitch, p.pitch, v, e.width, e.height);
  return 0; }
template <class T> static inline int cudaMemcpyToSymbol(T& sym, const void* s, size_t n, size_t off = 0, int = 1) { memcpy((char*)&sym + off, s, n); return 0; }
template <class T> static inline int cudaMemcpyFromSymbol(void* d, const T& sym, size_t n, size_t off = 0, int = 2) { memcpy(d, (const char*)&sym + off, n); XP_COPY_BACK(d, n, 2, T); return 0; }
static inline int cudaDeviceSynchronize(void) { return 0; }
static inline int cudaThreadSynchronize(void) { return 0; }
static inline int cudaStreamSynchronize(cudaStream_t) { return 0; }
static inline int cudaGetLastError(void) { return 0; }
static inline int cudaPeekAtLastError(void) { return 0; }
static inline const char* cudaGetErrorString(int e) { return e == 0 ? "no error" : e == 2 ? "out of memory" : "error"; }
static inline const char* cudaGetErrorName(int e) { return e == 0 ? "cudaSuccess" : "cudaError"; }
""".replace("@RUNTIME_ENUMS@", _runtime_enums()).replace("@SIMD_VIDEO@", _simd_video())


# cuBLAS on the CPU for host code that calls it (a benchmark's reference GEMM): device memory is host memory
# in the CPU output, so the GEMM family is computed here, column-major as cuBLAS defines it, accumulated in
# double like the runtime's own cuBLAS (runtime/include/xpiler/blas.h). Added by loop recovery when the
# program names cuBLAS; what is not here does not build, and says so.
GRAPH_NODES_MARK = "/* xpiler CPU graph nodes */"
# Added by loop recovery where the program builds graphs node by node or launches through an argument array
# (its includes cost every other program's compile ~0.15 s).
GRAPH_NODES = GRAPH_NODES_MARK + r"""
#include <tuple>
#include <utility>
/* Kernels named as values ((void*)k for cudaLaunchKernel or a graph's kernel node; loop recovery writes
   xp_host_kernel_value(k_blocks) there): one entry per block function, which binds an array of pointers to the
   arguments into a closure over their values (read then, as CUDA copies them). */
struct xp_kernel_fn { void* fn; xp_work* (*bind)(void*, dim3, dim3, size_t, void**); xp_kernel_fn* next; };
template <class... P, size_t... I>
static xp_work* xp_host_bind_at(void* fn, dim3 g, dim3 b, size_t smem, void** args, std::index_sequence<I...>) {
  typedef void (*block_fn)(dim3, dim3, size_t, P...);
  block_fn k = (block_fn)fn;
  std::tuple<typename std::decay<P>::type...> values(*(typename std::decay<P>::type*)args[I]...);
  auto call = [=]() { std::apply([&](const typename std::decay<P>::type&... v) { k(g, b, smem, v...); }, values); };
  return new xp_work_of<decltype(call)>(call); }
template <class... P> static xp_work* xp_host_bind(void* fn, dim3 g, dim3 b, size_t smem, void** args) {
  return xp_host_bind_at<P...>(fn, g, b, smem, args, std::index_sequence_for<P...>()); }
static xp_kernel_fn* xp_kernels_named = 0;
template <class... P> static inline void* xp_host_kernel_value(void (*k)(dim3, dim3, size_t, P...)) {
  for (xp_kernel_fn* f = xp_kernels_named; f; f = f->next) if (f->fn == (void*)k) return f;
  xp_kernel_fn* f = new xp_kernel_fn{(void*)k, &xp_host_bind<P...>, xp_kernels_named}; xp_kernels_named = f; return f; }
/* null for an address no kernel value gave (a launch through a pointer this file does not name as a kernel) */
static inline xp_work* xp_host_bind_kernel(const void* f, dim3 g, dim3 b, size_t smem, void** args) {
  for (const xp_kernel_fn* k = xp_kernels_named; k; k = k->next) if (k == f) return k->bind(k->fn, g, b, smem, args);
  return 0; }
static inline void xp_host_enqueue(xp_work* w, cudaStream_t s) {
  if (xp_host_capturing(s)) xp_host_graph_append(xp_capture_graph, w); else { w->run(); delete w; } }
static inline int cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t smem = 0, cudaStream_t s = 0) {
  xp_work* w = xp_host_bind_kernel(f, g, b, smem, args);
  if (!w) return 98;  /* cudaErrorInvalidDeviceFunction */
  xp_host_enqueue(w, s); return 0; }
static inline int cudaLaunchCooperativeKernel(const void* f, dim3 g, dim3 b, void** args, size_t smem = 0,
                                              cudaStream_t s = 0) { return cudaLaunchKernel(f, g, b, args, smem, s); }
/* graphs built node by node: each node runs after the nodes it depends on (the order they were added where
   that allows) */
struct cudaKernelNodeParams { void* func; dim3 gridDim; dim3 blockDim; unsigned int sharedMemBytes; void** kernelParams;
                              void** extra; };
struct cudaMemsetParams { void* dst; size_t pitch; unsigned int value; unsigned int elementSize; size_t width;
                          size_t height; };
struct cudaHostNodeParams { void (*fn)(void*); void* userData; };
static inline int xp_host_add_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                   xp_work* w) {
  for (size_t i = 0; deps && i < n; ++i) w->runs_after((const xp_work*)deps[i]);
  xp_host_graph_append(g, w); if (node) *node = (cudaGraphNode_t)w; return 0; }
template <class F> static inline int xp_host_add_node_of(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                         size_t n, const F& f) {
  return xp_host_add_node(node, g, deps, n, new xp_work_of<F>(f)); }
static inline int cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                         const cudaKernelNodeParams* p) {
  xp_work* w = xp_host_bind_kernel(p->func, p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams);
  return w ? xp_host_add_node(node, g, deps, n, w) : 98; }
static inline int cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                         const cudaMemsetParams* p) {
  cudaMemsetParams m = *p;
  if (m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) return 1;
  const size_t rows = m.height ? m.height : 1, pitch = m.pitch ? m.pitch : m.width * m.elementSize;
  return xp_host_add_node_of(node, g, deps, n, [=]() {
    for (size_t r = 0; r < rows; ++r)  /* little-endian: the value's low bytes */
      for (size_t i = 0; i < m.width; ++i) memcpy((char*)m.dst + r * pitch + i * m.elementSize, &m.value, m.elementSize);
    XP_HOST_WROTE(m.dst, rows * pitch); }); }
static inline int cudaGraphAddMemcpyNode(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                         const cudaMemcpy3DParms* p) {
  cudaMemcpy3DParms m = *p; return xp_host_add_node_of(node, g, deps, n, [=]() { cudaMemcpy3D(&m); }); }
static inline int cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                           void* dst, const void* src, size_t count, int kind) {
  return xp_host_add_node_of(node, g, deps, n, [=]() { cudaMemcpy(dst, src, count, kind); }); }
static inline int cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                       const cudaHostNodeParams* p) {
  cudaHostNodeParams h = *p; return xp_host_add_node_of(node, g, deps, n, [=]() { h.fn(h.userData); }); }
static inline int cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n) {
  return xp_host_add_node_of(node, g, deps, n, []() {}); }
static inline int cudaGraphAddChildGraphNode(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                             cudaGraph_t child) {
  xp_graph* copy = new xp_graph(); xp_host_graph_copy(copy, child);
  return xp_host_add_node_of(node, g, deps, n, [=]() { xp_host_graph_run(copy); }); }
static inline int cudaGraphAddDependencies(cudaGraph_t, const cudaGraphNode_t* from, const cudaGraphNode_t* to, size_t n) {
  for (size_t i = 0; i < n; ++i) ((xp_work*)to[i])->runs_after((const xp_work*)from[i]);
  return 0; }
/* CUDA 13's form, with edge data (the default edges: data dependencies) */
static inline int cudaGraphAddDependencies(cudaGraph_t g, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                           const void*, size_t n) { return cudaGraphAddDependencies(g, from, to, n); }
/* cudaGraphExecUpdate: the instantiation takes the graph's nodes (their new arguments) where the graph has as many
   nodes as it has; otherwise the topology changed and it stays as it was */
enum cudaGraphExecUpdateResult { cudaGraphExecUpdateSuccess = 0, cudaGraphExecUpdateError = 1,
  cudaGraphExecUpdateErrorTopologyChanged = 2, cudaGraphExecUpdateErrorNodeTypeChanged = 3,
  cudaGraphExecUpdateErrorFunctionChanged = 4, cudaGraphExecUpdateErrorParametersChanged = 5,
  cudaGraphExecUpdateErrorNotSupported = 6, cudaGraphExecUpdateErrorUnsupportedFunctionChange = 7,
  cudaGraphExecUpdateErrorAttributesChanged = 8 };
struct cudaGraphExecUpdateResultInfo { cudaGraphExecUpdateResult result; cudaGraphNode_t errorNode;
                                       cudaGraphNode_t errorFromNode; };
static inline int cudaGraphExecUpdate(cudaGraphExec_t e, cudaGraph_t g, cudaGraphNode_t* error_node,
                                      cudaGraphExecUpdateResult* result) {
  xp_graph fresh;
  const bool ok = g->n == e->n && xp_host_graph_copy(&fresh, g) == 0;
  if (ok) {
    for (xp_work* w = e->head; w;) { xp_work* next = w->next; delete w; w = next; }
    e->head = fresh.head; e->tail = fresh.tail; e->n = fresh.n; }
  else for (xp_work* w = fresh.head; w;) { xp_work* next = w->next; delete w; w = next; }
  if (error_node) *error_node = 0;
  if (result) *result = ok ? cudaGraphExecUpdateSuccess : cudaGraphExecUpdateErrorTopologyChanged;
  return ok ? 0 : 910; }
static inline int cudaGraphExecUpdate(cudaGraphExec_t e, cudaGraph_t g, cudaGraphExecUpdateResultInfo* info) {
  cudaGraphExecUpdateResult result; int status = cudaGraphExecUpdate(e, g, 0, &result);
  if (info) { info->result = result; info->errorNode = 0; info->errorFromNode = 0; }
  return status; }
/* new arguments for a kernel node of an instantiated graph: its copy there is bound again */
static inline int cudaGraphExecKernelNodeSetParams(cudaGraphExec_t e, cudaGraphNode_t node, const cudaKernelNodeParams* p) {
  for (xp_work** at = &e->head; *at; at = &(*at)->next)
    if ((*at)->origin == (const xp_work*)node) {
      xp_work* old = *at;
      xp_work* w = xp_host_bind_kernel(p->func, p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams);
      if (!w) return 98;
      w->next = old->next; w->at = old->at; w->origin = old->origin; w->after = old->after; old->after = 0;
      if (e->tail == old) e->tail = w;
      *at = w; delete old; return 0; }
  return 1; }
"""


CUBLAS_MARK = "/* xpiler CPU cuBLAS */"


def _cublas_enums() -> str:
    """cuBLAS's status, operation, math and pointer-mode enumerations, as the runtime's header declares them."""
    header = (resources.files("xpiler_core.runtime") / "include" / "xpiler" / "blas.h").read_text(encoding="utf-8")
    wanted = ("cublasStatus_t", "cublasOperation_t", "cublasMath_t", "cublasPointerMode_t")
    found = {name: m.group(0) for m in re.finditer(r"typedef enum \{[^}]*\} (\w+);", header)
             for name in [m.group(1)] if name in wanted}
    assert set(found) == set(wanted), sorted(found)
    return "\n".join(found[name] for name in wanted)


@cache
def cublas_section() -> str:
    """The cuBLAS section (read once, when a translation first needs it)."""
    return CUBLAS_MARK + "\n" + _cublas_enums() + _CUBLAS_FUNCTIONS


_CUBLAS_FUNCTIONS = r"""
struct xp_cublas_context { int math; int pointer_mode; };
typedef xp_cublas_context* cublasHandle_t;
static inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  *h = (cublasHandle_t)calloc(1, sizeof(xp_cublas_context));
  return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t h) { free(h); return CUBLAS_STATUS_SUCCESS; }
template <class S> static inline cublasStatus_t cublasSetStream(cublasHandle_t h, S) {
  return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->math = m;
  return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetPointerMode(cublasHandle_t h, cublasPointerMode_t m) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->pointer_mode = m;  // both modes read the scalars from memory the host can read here
  return CUBLAS_STATUS_SUCCESS;
}
static inline const char* cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_ERROR";
}
template <class T>
static inline cublasStatus_t xp_cublas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                            int k, const T* alpha, const T* A, int lda, const T* B, int ldb,
                                            const T* beta, T* C, int ldc) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1)) return CUBLAS_STATUS_INVALID_VALUE;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0.0;
      for (int p = 0; p < k; ++p)
        s += (double)(ta == CUBLAS_OP_N ? A[i + (long)p * lda] : A[p + (long)i * lda]) *
             (double)(tb == CUBLAS_OP_N ? B[p + (long)j * ldb] : B[j + (long)p * ldb]);
      T* c = &C[i + (long)j * ldc];
      *c = (T)((double)*alpha * s + (*beta == (T)0 ? 0.0 : (double)*beta * (double)*c));  // beta 0: C not read
    }
  return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                         const float* beta, float* C, int ldc) {
  return xp_cublas_gemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
static inline cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double* alpha, const double* A, int lda, const double* B, int ldb,
                                         const double* beta, double* C, int ldc) {
  return xp_cublas_gemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
#define cublasCreate_v2 cublasCreate
#define cublasDestroy_v2 cublasDestroy
#define cublasSgemm_v2 cublasSgemm
#define cublasDgemm_v2 cublasDgemm
#define cublasSetStream_v2 cublasSetStream
"""
