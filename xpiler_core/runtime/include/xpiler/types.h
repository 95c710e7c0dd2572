// Vector types, dim3 and make_* helpers with CUDA's sizes and alignments.
#pragma once
#include <cstddef>
#include <cstdint>

#define XPILER_VEC1(T, N, A) struct alignas(A) N##1 { T x; };
#define XPILER_VEC2(T, N, A) struct alignas(A) N##2 { T x, y; };
#define XPILER_VEC3(T, N) struct N##3 { T x, y, z; };
#define XPILER_VEC4(T, N, A) struct alignas(A) N##4 { T x, y, z, w; };
#define XPILER_MAKE(T, N)                                                                       \
  inline N##1 make_##N##1(T x) { return N##1{x}; }                                              \
  inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                                      \
  inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }                              \
  inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define XPILER_VECS(T, N, S)                                                                    \
  XPILER_VEC1(T, N, S) XPILER_VEC2(T, N, 2 * S) XPILER_VEC3(T, N) XPILER_VEC4(T, N, 4 * S)       \
  XPILER_MAKE(T, N)

XPILER_VECS(signed char, char, 1)
XPILER_VECS(unsigned char, uchar, 1)
XPILER_VECS(short, short, 2)
XPILER_VECS(unsigned short, ushort, 2)
XPILER_VECS(int, int, 4)
XPILER_VECS(unsigned int, uint, 4)
XPILER_VECS(float, float, 4)
// 64-bit element vectors: CUDA aligns the 4-vectors to 16 (not 32) bytes.
XPILER_VEC1(long long, longlong, 8) XPILER_VEC2(long long, longlong, 16) XPILER_VEC3(long long, longlong)
XPILER_VEC4(long long, longlong, 16) XPILER_MAKE(long long, longlong)
XPILER_VEC1(unsigned long long, ulonglong, 8) XPILER_VEC2(unsigned long long, ulonglong, 16)
XPILER_VEC3(unsigned long long, ulonglong) XPILER_VEC4(unsigned long long, ulonglong, 16)
XPILER_MAKE(unsigned long long, ulonglong)
XPILER_VEC1(double, double, 8) XPILER_VEC2(double, double, 16) XPILER_VEC3(double, double)
XPILER_VEC4(double, double, 16) XPILER_MAKE(double, double)
XPILER_VEC1(long, long, 8) XPILER_VEC2(long, long, 16) XPILER_VEC3(long, long) XPILER_VEC4(long, long, 16)
XPILER_MAKE(long, long)
XPILER_VEC1(unsigned long, ulong, 8) XPILER_VEC2(unsigned long, ulong, 16) XPILER_VEC3(unsigned long, ulong)
XPILER_VEC4(unsigned long, ulong, 16) XPILER_MAKE(unsigned long, ulong)

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
