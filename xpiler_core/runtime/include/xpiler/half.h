// __half / __half2 (IEEE binary16) and __nv_bfloat16 / __nv_bfloat162, with CUDA and HIP spellings.
// Storage is 16 bits, so numpy float16 buffers and uint16 bfloat16 buffers map onto them directly.
// Arithmetic rounds through float, as the hardware's float-accumulate paths do.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "atomics.h"
#include "types.h"

namespace xpiler {
inline uint16_t float_to_half_bits(float f) {
  _Float16 h = static_cast<_Float16>(f);  // round-to-nearest-even, IEEE
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
inline float half_bits_to_float(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace xpiler

#define XPILER_HALF_TYPE(H, TO, FROM)                                                               \
  struct H {                                                                                        \
    uint16_t __x;                                                                                   \
    H() = default;                                                                                  \
    H(float f) : __x(::xpiler::TO(f)) {}                                                            \
    H(double f) : __x(::xpiler::TO(static_cast<float>(f))) {}                                       \
    H(int v) : __x(::xpiler::TO(static_cast<float>(v))) {}                                          \
    H(unsigned v) : __x(::xpiler::TO(static_cast<float>(v))) {}                                     \
    H(long long v) : __x(::xpiler::TO(static_cast<float>(v))) {}                                    \
    H(unsigned long long v) : __x(::xpiler::TO(static_cast<float>(v))) {}                           \
    H(short v) : __x(::xpiler::TO(static_cast<float>(v))) {}                                        \
    operator float() const { return ::xpiler::FROM(__x); }                                          \
    H& operator+=(const H& o) { return *this = H(float(*this) + float(o)); }                        \
    H& operator-=(const H& o) { return *this = H(float(*this) - float(o)); }                        \
    H& operator*=(const H& o) { return *this = H(float(*this) * float(o)); }                        \
    H& operator/=(const H& o) { return *this = H(float(*this) / float(o)); }                        \
    H& operator++() { return *this += H(1.0f); }                                                    \
    H& operator--() { return *this -= H(1.0f); }                                                    \
  };                                                                                                \
  inline H operator+(const H& a, const H& b) { return H(float(a) + float(b)); }                     \
  inline H operator-(const H& a, const H& b) { return H(float(a) - float(b)); }                     \
  inline H operator*(const H& a, const H& b) { return H(float(a) * float(b)); }                     \
  inline H operator/(const H& a, const H& b) { return H(float(a) / float(b)); }                     \
  inline H operator-(const H& a) { H r = a; r.__x ^= 0x8000; return r; }                            \
  inline H operator+(const H& a) { return a; }                                                      \
  inline bool operator==(const H& a, const H& b) { return float(a) == float(b); }                   \
  inline bool operator!=(const H& a, const H& b) { return float(a) != float(b); }                   \
  inline bool operator<(const H& a, const H& b) { return float(a) < float(b); }                     \
  inline bool operator>(const H& a, const H& b) { return float(a) > float(b); }                     \
  inline bool operator<=(const H& a, const H& b) { return float(a) <= float(b); }                   \
  inline bool operator>=(const H& a, const H& b) { return float(a) >= float(b); }                   \
  struct alignas(4) H##2 {                                                                          \
    H x, y;                                                                                         \
    H##2() = default;                                                                               \
    H##2(H a, H b) : x(a), y(b) {}                                                                  \
  };                                                                                                \
  inline H##2 operator+(const H##2& a, const H##2& b) { return H##2(a.x + b.x, a.y + b.y); }        \
  inline H##2 operator-(const H##2& a, const H##2& b) { return H##2(a.x - b.x, a.y - b.y); }        \
  inline H##2 operator*(const H##2& a, const H##2& b) { return H##2(a.x * b.x, a.y * b.y); }        \
  inline H##2 operator/(const H##2& a, const H##2& b) { return H##2(a.x / b.x, a.y / b.y); }        \
  inline H##2& operator+=(H##2& a, const H##2& b) { return a = a + b; }                             \
  inline H##2& operator*=(H##2& a, const H##2& b) { return a = a * b; }                             \
  inline H atomicAdd(H* a, H v) { return ::xpiler::atomic_update(a, [v](H o) { return o + v; }); }  \
  inline H##2 atomicAdd(H##2* a, H##2 v) {                                                          \
    return ::xpiler::atomic_update(a, [v](H##2 o) { return o + v; });                               \
  }                                                                                                 \
  inline H __hadd(H a, H b) { return a + b; }                                                       \
  inline H __hsub(H a, H b) { return a - b; }                                                       \
  inline H __hmul(H a, H b) { return a * b; }                                                       \
  inline H __hdiv(H a, H b) { return a / b; }                                                       \
  inline H __hneg(H a) { return -a; }                                                               \
  inline H __habs(H a) { a.__x &= 0x7fff; return a; }                                               \
  inline H __hfma(H a, H b, H c) { return H(fmaf(float(a), float(b), float(c))); }                  \
  inline H __hmax(H a, H b) { return H(fmaxf(float(a), float(b))); }                                \
  inline H __hmin(H a, H b) { return H(fminf(float(a), float(b))); }                                \
  inline H __hadd_sat(H a, H b) { float r = float(a) + float(b); return H(r < 0 ? 0.f : r > 1 ? 1.f : r); } \
  inline bool __heq(H a, H b) { return a == b; }                                                    \
  inline bool __hne(H a, H b) { return a < b || a > b; } /* ordered: false when either is NaN */      \
  inline bool __hneu(H a, H b) { return !(a == b); }                                                \
  inline bool __hequ(H a, H b) { return !(a < b || a > b); }                                        \
  inline bool __hltu(H a, H b) { return !(a >= b); }                                                \
  inline bool __hleu(H a, H b) { return !(a > b); }                                                 \
  inline bool __hgtu(H a, H b) { return !(a <= b); }                                                \
  inline bool __hgeu(H a, H b) { return !(a < b); }                                                 \
  inline bool __hlt(H a, H b) { return a < b; }                                                     \
  inline bool __hle(H a, H b) { return a <= b; }                                                    \
  inline bool __hgt(H a, H b) { return a > b; }                                                     \
  inline bool __hge(H a, H b) { return a >= b; }                                                    \
  inline bool __hisnan(H a) { return std::isnan(float(a)); }                                        \
  inline bool __hisinf(H a) { return std::isinf(float(a)); }                                        \
  inline H hexp(H a) { return H(expf(float(a))); }                                                  \
  inline H hlog(H a) { return H(logf(float(a))); }                                                  \
  inline H hsqrt(H a) { return H(sqrtf(float(a))); }                                                \
  inline H hrsqrt(H a) { return H(1.0f / sqrtf(float(a))); }                                       \
  inline H hrcp(H a) { return H(1.0f / float(a)); }                                                 \
  inline H htanh(H a) { return H(tanhf(float(a))); }                                                \
  inline H hsin(H a) { return H(sinf(float(a))); }                                                  \
  inline H hcos(H a) { return H(cosf(float(a))); }                                                  \
  inline H hfloor(H a) { return H(floorf(float(a))); }                                              \
  inline H hceil(H a) { return H(ceilf(float(a))); }                                                \
  inline H htrunc(H a) { return H(truncf(float(a))); }                                              \
  inline H hrint(H a) { return H(rintf(float(a))); } /* to nearest, ties to even */                  \
  inline H hexp2(H a) { return H(exp2f(float(a))); }                                                \
  inline H hexp10(H a) { return H(powf(10.0f, float(a))); }                                         \
  inline H hlog2(H a) { return H(log2f(float(a))); }                                                \
  inline H hlog10(H a) { return H(log10f(float(a))); }                                              \
  inline H2_FN(H)

#define XPILER_H2_COMPARE(H, op)                                                                     \
  inline H##2 __h##op##2(H##2 a, H##2 b) {                                                          \
    return H##2(H(__h##op(a.x, b.x) ? 1.0f : 0.0f), H(__h##op(a.y, b.y) ? 1.0f : 0.0f));            \
  }                                                                                                 \
  inline bool __hb##op##2(H##2 a, H##2 b) { return __h##op(a.x, b.x) && __h##op(a.y, b.y); }

#define XPILER_H2_UNARY(H, name, scalar) \
  inline H##2 name(H##2 a) { return H##2(scalar(a.x), scalar(a.y)); }

// Packed-pair helpers, spelled per type below.
#define H2_FN(H)                                                                                     \
  H##2 __hadd2(H##2 a, H##2 b) { return a + b; }                                                    \
  inline H##2 __hsub2(H##2 a, H##2 b) { return a - b; }                                             \
  inline H##2 __hmul2(H##2 a, H##2 b) { return a * b; }                                             \
  inline H##2 __h2div(H##2 a, H##2 b) { return a / b; }                                             \
  inline H##2 __hfma2(H##2 a, H##2 b, H##2 c) { return H##2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  inline H##2 __hneg2(H##2 a) { return H##2(-a.x, -a.y); }                                          \
  inline H##2 __habs2(H##2 a) { return H##2(__habs(a.x), __habs(a.y)); }                            \
  inline H##2 __hmax2(H##2 a, H##2 b) { return H##2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }          \
  inline H##2 __hmin2(H##2 a, H##2 b) { return H##2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }          \
  inline H __low2half_(H##2 a) { return a.x; }                                                      \
  /* lane-wise comparisons: 1.0 where true, 0.0 where false; the __hb* forms: true when both lanes are */  \
  XPILER_H2_COMPARE(H, eq) XPILER_H2_COMPARE(H, ne) XPILER_H2_COMPARE(H, lt) XPILER_H2_COMPARE(H, le)   \
  XPILER_H2_COMPARE(H, gt) XPILER_H2_COMPARE(H, ge) XPILER_H2_COMPARE(H, equ) XPILER_H2_COMPARE(H, neu) \
  XPILER_H2_COMPARE(H, ltu) XPILER_H2_COMPARE(H, leu) XPILER_H2_COMPARE(H, gtu) XPILER_H2_COMPARE(H, geu) \
  inline H##2 h2exp(H##2 a) { return H##2(hexp(a.x), hexp(a.y)); }                                  \
  inline H##2 h2sqrt(H##2 a) { return H##2(hsqrt(a.x), hsqrt(a.y)); }                               \
  XPILER_H2_UNARY(H, h2exp2, hexp2) XPILER_H2_UNARY(H, h2exp10, hexp10) XPILER_H2_UNARY(H, h2log, hlog)   \
  XPILER_H2_UNARY(H, h2log2, hlog2) XPILER_H2_UNARY(H, h2log10, hlog10) XPILER_H2_UNARY(H, h2rcp, hrcp)   \
  XPILER_H2_UNARY(H, h2rsqrt, hrsqrt) XPILER_H2_UNARY(H, h2sin, hsin) XPILER_H2_UNARY(H, h2cos, hcos)     \
  XPILER_H2_UNARY(H, h2floor, hfloor) XPILER_H2_UNARY(H, h2ceil, hceil) XPILER_H2_UNARY(H, h2trunc, htrunc) \
  XPILER_H2_UNARY(H, h2rint, hrint)

XPILER_HALF_TYPE(__half, float_to_half_bits, half_bits_to_float)
XPILER_HALF_TYPE(__nv_bfloat16, float_to_bf16_bits, bf16_bits_to_float)

typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
typedef __nv_bfloat16 hip_bfloat16;
typedef uint16_t __half_raw_bits;
struct __half_raw { unsigned short x; };

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
// Directed roundings (dir: 0 toward zero, -1 down, +1 up): the nearest value, moved back one step of its
// magnitude where it went past f in the wrong direction (a finite f that rounds to infinity included).
inline __half xpiler_float2half_directed(float f, int dir) {
  __half h(f);
  const float back = float(h);
  if (f != f || back == f) return h;
  const bool neg = (h.__x & 0x8000) != 0;
  const bool past = dir == 0 ? fabsf(back) > fabsf(f) : dir < 0 ? back > f : back < f;
  if (!past) return h;
  const bool shrink = dir == 0 || (dir < 0) != neg;  // toward zero, or down from a positive value, or up from a negative one
  h.__x = static_cast<uint16_t>(shrink ? h.__x - 1 : h.__x + 1);
  return h;
}
inline __half __float2half_rz(float f) { return xpiler_float2half_directed(f, 0); }
inline __half __float2half_rd(float f) { return xpiler_float2half_directed(f, -1); }
inline __half __float2half_ru(float f) { return xpiler_float2half_directed(f, 1); }
inline __half __double2half(double f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half __int2half_rn(int v) { return __half(v); }
inline int __half2int_rn(__half h) { return static_cast<int>(nearbyintf(float(h))); }
inline int __half2int_rz(__half h) { return static_cast<int>(float(h)); }
inline __half __ushort_as_half(unsigned short b) { __half h; h.__x = b; return h; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __short_as_half(short b) { __half h; h.__x = static_cast<uint16_t>(b); return h; }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
inline __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __half2half2(__half a) { return __half2(a, a); }
inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
inline float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }
inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline float __low2float(__half2 h) { return float(h.x); }
inline float __high2float(__half2 h) { return float(h.y); }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { __nv_bfloat16 h; h.__x = b; return h; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b));
}
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(a)); }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{float(h.x), float(h.y)}; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
