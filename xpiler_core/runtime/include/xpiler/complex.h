// cuComplex.h / hip_complex.h on the CPU: complex numbers as float2 / double2, with the CUDA and HIP names.
// cuCabs scales like CUDA's (no overflow for large parts); cuCdiv divides by the larger part first.
#pragma once
#include <cmath>
#include <limits>
#include "types.h"

#define XPILER_COMPLEX(P, N, T, V, S)                                                                     \
  typedef V P##N##Complex;                                                                           \
  inline T P##Creal##S(P##N##Complex z) { return z.x; }                                               \
  inline T P##Cimag##S(P##N##Complex z) { return z.y; }                                               \
  inline P##N##Complex make_##P##N##Complex(T r, T i) { P##N##Complex z; z.x = r; z.y = i; return z; } \
  inline P##N##Complex P##Conj##S(P##N##Complex z) { return make_##P##N##Complex(z.x, -z.y); }         \
  inline P##N##Complex P##Cadd##S(P##N##Complex a, P##N##Complex b) {                                 \
    return make_##P##N##Complex(a.x + b.x, a.y + b.y);                                               \
  }                                                                                                  \
  inline P##N##Complex P##Csub##S(P##N##Complex a, P##N##Complex b) {                                 \
    return make_##P##N##Complex(a.x - b.x, a.y - b.y);                                               \
  }                                                                                                  \
  inline P##N##Complex P##Cmul##S(P##N##Complex a, P##N##Complex b) {                                 \
    return make_##P##N##Complex(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);                       \
  }                                                                                                  \
  inline P##N##Complex P##Cdiv##S(P##N##Complex a, P##N##Complex b) {                                 \
    T s = std::fabs(b.x) + std::fabs(b.y), inv = T(1) / s;                                           \
    T ar = a.x * inv, ai = a.y * inv, br = b.x * inv, bi = b.y * inv;                                 \
    T d = T(1) / (br * br + bi * bi);                                                                \
    return make_##P##N##Complex((ar * br + ai * bi) * d, (ai * br - ar * bi) * d);                   \
  }                                                                                                  \
  inline T P##Cabs##S(P##N##Complex z) {                                                              \
    T a = std::fabs(z.x), b = std::fabs(z.y), v = a > b ? a : b, w = a > b ? b : a;                   \
    if (v == T(0) || v > std::numeric_limits<T>::max() || w > std::numeric_limits<T>::max()) return v + w; \
    T q = w / v;                                                                                     \
    return v * std::sqrt(T(1) + q * q);                                                              \
  }                                                                                                  \
  inline P##N##Complex P##Cfma##S(P##N##Complex a, P##N##Complex b, P##N##Complex c) {                \
    return make_##P##N##Complex(a.x * b.x - a.y * b.y + c.x, a.x * b.y + a.y * b.x + c.y);           \
  }

XPILER_COMPLEX(cu, Float, float, float2, f)
XPILER_COMPLEX(cu, Double, double, double2, )
XPILER_COMPLEX(hip, Float, float, float2, f)
XPILER_COMPLEX(hip, Double, double, double2, )
typedef cuFloatComplex cuComplex;
typedef hipFloatComplex hipComplex;
inline cuComplex make_cuComplex(float r, float i) { return make_cuFloatComplex(r, i); }
inline hipComplex make_hipComplex(float r, float i) { return make_hipFloatComplex(r, i); }
inline cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex z) { return make_cuDoubleComplex(z.x, z.y); }
inline cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex z) {
  return make_cuFloatComplex(float(z.x), float(z.y));
}
inline hipDoubleComplex hipComplexFloatToDouble(hipFloatComplex z) { return make_hipDoubleComplex(z.x, z.y); }
inline hipFloatComplex hipComplexDoubleToFloat(hipDoubleComplex z) {
  return make_hipFloatComplex(float(z.x), float(z.y));
}
