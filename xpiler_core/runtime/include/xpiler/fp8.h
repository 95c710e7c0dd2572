// FP8 (cuda_fp8.h) on the CPU. e4m3: bias 7, 3 mantissa bits, no infinity, NaN = S.1111.111, largest 448;
// e5m2: bias 15, 2 mantissa bits, IEEE-like infinities and NaNs, largest 57344. A value is rounded to the
// nearest representable one, ties to even (computed exactly in double: every step scales by powers of two);
// what rounds past the largest finite value is that value under __NV_SATFINITE, NaN (e4m3) or infinity (e5m2)
// under __NV_NOSAT. The classes convert as CUDA's do: from float/double/half/bfloat16 with saturation, to them
// exactly (through half for float, as CUDA does; every fp8 value is a half).
#pragma once
#include <cmath>
#include <cstdint>
#include "half.h"
#include "types.h"

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short int __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;
#ifndef XPILER_HALF2_RAW
#define XPILER_HALF2_RAW
struct __half2_raw { unsigned short x, y; };
#endif

namespace xpiler {
namespace fp8 {
inline __nv_fp8_storage_t encode(double x, __nv_saturation_t saturate, __nv_fp8_interpretation_t kind) {
  const bool e5m2 = kind == __NV_E5M2;
  const int mantissa_bits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const double largest = e5m2 ? 57344.0 : 448.0;
  const unsigned char largest_code = e5m2 ? 0x7B : 0x7E;
  const unsigned char sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return 0x7F;
  const double a = std::fabs(x);
  const auto overflow = [&]() -> __nv_fp8_storage_t {
    if (saturate == __NV_SATFINITE) return sign | largest_code;
    return static_cast<__nv_fp8_storage_t>(sign | (e5m2 ? 0x7C : 0x7F));  // infinity / NaN, signed
  };
  if (std::isinf(a)) return overflow();
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int exponent = e - 1, smallest_exponent = 1 - bias;
  const double quantum = std::ldexp(1.0, (exponent < smallest_exponent ? smallest_exponent : exponent) - mantissa_bits);
  const double rounded = std::nearbyint(a / quantum) * quantum;  // the default rounding mode: ties to even
  if (rounded > largest) return overflow();
  if (rounded < std::ldexp(1.0, smallest_exponent))  // subnormal (or zero)
    return sign | static_cast<unsigned char>(rounded / std::ldexp(1.0, smallest_exponent - mantissa_bits));
  std::frexp(rounded, &e);
  const int field = e - 1 + bias;
  const int mantissa = static_cast<int>(rounded / std::ldexp(1.0, e - 1 - mantissa_bits)) - (1 << mantissa_bits);
  return static_cast<__nv_fp8_storage_t>(sign | field << mantissa_bits | mantissa);
}
inline float decode(__nv_fp8_storage_t v, __nv_fp8_interpretation_t kind) {
  const bool e5m2 = kind == __NV_E5M2;
  const int mantissa_bits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, top = e5m2 ? 31 : 15;
  const int field = (v & 0x7F) >> mantissa_bits, mantissa = v & ((1 << mantissa_bits) - 1);
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  if (!e5m2 && (v & 0x7F) == 0x7F) return NAN;
  if (e5m2 && field == top) return mantissa ? NAN : sign * INFINITY;
  if (field == 0) return sign * std::ldexp(static_cast<float>(mantissa), 1 - bias - mantissa_bits);
  return sign * std::ldexp(static_cast<float>(mantissa + (1 << mantissa_bits)), field - bias - mantissa_bits);
}
}  // namespace fp8
}  // namespace xpiler

inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
  if (std::isnan(x))  // NVIDIA's double path keeps the sign of a NaN and gives e5m2 the pattern .11111.10
    return static_cast<__nv_fp8_storage_t>((std::signbit(x) ? 0x80 : 0) | (k == __NV_E5M2 ? 0x7E : 0x7F));
  return ::xpiler::fp8::encode(x, s, k);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
  return ::xpiler::fp8::encode(x, s, k);
}
inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
  return static_cast<__nv_fp8x2_storage_t>(__nv_cvt_float_to_fp8(x.x, s, k) | __nv_cvt_float_to_fp8(x.y, s, k) << 8);
}
inline __nv_fp8x2_storage_t __nv_cvt_double2_to_fp8x2(double2 x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
  return static_cast<__nv_fp8x2_storage_t>(__nv_cvt_double_to_fp8(x.x, s, k) | __nv_cvt_double_to_fp8(x.y, s, k) << 8);
}
inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half_raw x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
  return ::xpiler::fp8::encode(::xpiler::half_bits_to_float(x.x), s, k);
}
inline __nv_fp8x2_storage_t __nv_cvt_halfraw2_to_fp8x2(__half2_raw x, __nv_saturation_t s,
                                                       __nv_fp8_interpretation_t k) {
  return static_cast<__nv_fp8x2_storage_t>(__nv_cvt_halfraw_to_fp8(__half_raw{x.x}, s, k) |
                                           __nv_cvt_halfraw_to_fp8(__half_raw{x.y}, s, k) << 8);
}
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x, __nv_fp8_interpretation_t k) {
  const float f = ::xpiler::fp8::decode(x, k);
  return __half_raw{std::isnan(f) ? static_cast<unsigned short>(0x7FFF) : ::xpiler::float_to_half_bits(f)};  // CUDA's NaN
}
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x, __nv_fp8_interpretation_t k) {
  return __half2_raw{__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(x & 0xFF), k).x,
                     __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(x >> 8), k).x};
}

#define XPILER_FP8_TYPE(NAME, KIND)                                                                       \
  struct NAME {                                                                                           \
    __nv_fp8_storage_t __x;                                                                               \
    NAME() = default;                                                                                     \
    explicit NAME(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, KIND)) {}                        \
    explicit NAME(double f) : __x(__nv_cvt_double_to_fp8(f, __NV_SATFINITE, KIND)) {}                      \
    explicit NAME(__half h) : __x(::xpiler::fp8::encode(float(h), __NV_SATFINITE, KIND)) {}                 \
    explicit NAME(__nv_bfloat16 b) : __x(::xpiler::fp8::encode(float(b), __NV_SATFINITE, KIND)) {}          \
    template <class I, class = std::enable_if_t<std::is_integral<I>::value>>                              \
    explicit NAME(I v) : NAME(static_cast<float>(v)) {}                                                   \
    explicit operator float() const { return ::xpiler::fp8::decode(__x, KIND); }                          \
    explicit operator double() const { return ::xpiler::fp8::decode(__x, KIND); }                         \
    explicit operator __half() const { return __half(::xpiler::fp8::decode(__x, KIND)); }                  \
    explicit operator __nv_bfloat16() const { return __nv_bfloat16(::xpiler::fp8::decode(__x, KIND)); }    \
    explicit operator bool() const { return (__x & 0x7F) != 0; }                                          \
    /* integers: toward zero, NaN as 0, clamped to the type (CUDA's __half2int_rz family) */              \
    template <class I, class = std::enable_if_t<std::is_integral<I>::value && !std::is_same<I, bool>::value>> \
    explicit operator I() const {                                                                          \
      const float f = std::trunc(::xpiler::fp8::decode(__x, KIND));                                        \
      if (std::isnan(f)) return I(0);                                                                     \
      if (f <= static_cast<float>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();   \
      if (f >= static_cast<float>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();   \
      return static_cast<I>(f);                                                                           \
    }                                                                                                     \
  };

XPILER_FP8_TYPE(__nv_fp8_e4m3, __NV_E4M3)
XPILER_FP8_TYPE(__nv_fp8_e5m2, __NV_E5M2)

#define XPILER_FP8_PAIR(NAME, KIND)                                                                       \
  struct NAME {                                                                                           \
    __nv_fp8x2_storage_t __x;                                                                             \
    NAME() = default;                                                                                     \
    explicit NAME(float2 f) : __x(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, KIND)) {}                    \
    explicit NAME(double2 f) : __x(__nv_cvt_double2_to_fp8x2(f, __NV_SATFINITE, KIND)) {}                  \
    explicit NAME(__half2 h) : NAME(make_float2(float(h.x), float(h.y))) {}                               \
    explicit operator float2() const {                                                                     \
      return make_float2(::xpiler::fp8::decode(__x & 0xFF, KIND), ::xpiler::fp8::decode(__x >> 8, KIND)); \
    }                                                                                                     \
    explicit operator __half2() const {                                                                    \
      return __half2(__half(::xpiler::fp8::decode(__x & 0xFF, KIND)), __half(::xpiler::fp8::decode(__x >> 8, KIND))); \
    }                                                                                                     \
  };
XPILER_FP8_PAIR(__nv_fp8x2_e4m3, __NV_E4M3)
XPILER_FP8_PAIR(__nv_fp8x2_e5m2, __NV_E5M2)

#define XPILER_FP8_QUAD(NAME, KIND)                                                                       \
  struct NAME {                                                                                           \
    __nv_fp8x4_storage_t __x;                                                                             \
    NAME() = default;                                                                                     \
    explicit NAME(float4 f)                                                                               \
        : __x(static_cast<__nv_fp8x4_storage_t>(__nv_cvt_float2_to_fp8x2(make_float2(f.x, f.y), __NV_SATFINITE, KIND)) | \
              static_cast<__nv_fp8x4_storage_t>(__nv_cvt_float2_to_fp8x2(make_float2(f.z, f.w), __NV_SATFINITE, KIND)) << 16) {} \
    explicit operator float4() const {                                                                     \
      return make_float4(::xpiler::fp8::decode(__x & 0xFF, KIND), ::xpiler::fp8::decode((__x >> 8) & 0xFF, KIND), \
                         ::xpiler::fp8::decode((__x >> 16) & 0xFF, KIND), ::xpiler::fp8::decode(__x >> 24, KIND)); \
    }                                                                                                     \
  };
XPILER_FP8_QUAD(__nv_fp8x4_e4m3, __NV_E4M3)
XPILER_FP8_QUAD(__nv_fp8x4_e5m2, __NV_E5M2)
