// CUDA/HIP device-side vocabulary on the CPU: qualifiers, builtins, barriers, warp intrinsics, bit tricks.
#pragma once
#include <cassert>
#include <climits>
#include <cmath>
#include <math.h>
#include <cstdio>
#include <ctime>
#include <chrono>

#include "simt.h"

// Qualifiers: code runs on the host, so most vanish. `__shared__` storage is per OS thread, and all threads
// of a block run on one OS thread, one block at a time: thread_local is exactly "one per running block".
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
// 16-byte aligned like a GPU's shared arrays in practice: code reads float4 from `float s[...]` tiles
#define __shared__ static thread_local __attribute__((aligned(16)))
#define __forceinline__ inline
// Empty, not __attribute__((noinline)): libstdc++ writes __attribute__((__noinline__)) (shared_ptr), which a
// macro with parentheses would break; the hint does not change what code computes.
#define __noinline__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __cluster_dims__(...)
#define __builtin_assume_aligned_(p, n) (p)

// threadIdx, blockIdx, blockDim, gridDim: thread-local variables the engine keeps current (engine.h).
constexpr int warpSize = XPILER_WARP_SIZE;

// ---- barriers ---------------------------------------------------------------------------------------------
inline void __syncthreads(int site = __builtin_LINE()) { ::xpiler::block_barrier(site, 1); }
inline int __syncthreads_count(int pred, int site = __builtin_LINE()) {
  return ::xpiler::block_barrier(site, pred);
}
inline int __syncthreads_and(int pred, int site = __builtin_LINE()) {
  ::xpiler::block_barrier(site, pred);
  return ::xpiler::tls_worker->bar_and;
}
inline int __syncthreads_or(int pred, int site = __builtin_LINE()) {
  ::xpiler::block_barrier(site, pred);
  return ::xpiler::tls_worker->bar_or;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) {}
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline long long wall_clock64() { return clock64(); }
[[noreturn]] inline void __trap() { abort(); }
inline void __brkpt() {}

// ---- warp intrinsics (mask type is 64-bit inside; CUDA callers pass 32-bit masks) ---------------------------
#ifdef XPILER_DIALECT_HIP
using xpiler_ballot_t = unsigned long long;
#else
using xpiler_ballot_t = unsigned int;
#endif

template <class T>
inline T __shfl_sync(unsigned long long mask, T var, int src, int width = warpSize, int site = __builtin_LINE()) {
  return ::xpiler::shuffle(mask, var, ::xpiler::kShflIdx, src, width, site);
}
template <class T>
inline T __shfl_up_sync(unsigned long long mask, T var, unsigned delta, int width = warpSize,
                        int site = __builtin_LINE()) {
  return ::xpiler::shuffle(mask, var, ::xpiler::kShflUp, static_cast<int>(delta), width, site);
}
template <class T>
inline T __shfl_down_sync(unsigned long long mask, T var, unsigned delta, int width = warpSize,
                          int site = __builtin_LINE()) {
  return ::xpiler::shuffle(mask, var, ::xpiler::kShflDown, static_cast<int>(delta), width, site);
}
template <class T>
inline T __shfl_xor_sync(unsigned long long mask, T var, int lane_mask, int width = warpSize,
                         int site = __builtin_LINE()) {
  return ::xpiler::shuffle(mask, var, ::xpiler::kShflXor, lane_mask, width, site);
}
// Legacy (pre-CUDA 9) and HIP forms without a mask: every active lane takes part, nobody is waited for.
template <class T>
inline T __shfl(T var, int src, int width = warpSize, int site = __builtin_LINE()) {
  return ::xpiler::shuffle(::xpiler::kFullWarp, var, ::xpiler::kShflIdx, src, width, site, true);
}
template <class T>
inline T __shfl_up(T var, unsigned delta, int width = warpSize, int site = __builtin_LINE()) {
  return ::xpiler::shuffle(::xpiler::kFullWarp, var, ::xpiler::kShflUp, static_cast<int>(delta), width, site, true);
}
template <class T>
inline T __shfl_down(T var, unsigned delta, int width = warpSize, int site = __builtin_LINE()) {
  return ::xpiler::shuffle(::xpiler::kFullWarp, var, ::xpiler::kShflDown, static_cast<int>(delta), width, site, true);
}
template <class T>
inline T __shfl_xor(T var, int lane_mask, int width = warpSize, int site = __builtin_LINE()) {
  return ::xpiler::shuffle(::xpiler::kFullWarp, var, ::xpiler::kShflXor, lane_mask, width, site, true);
}
inline xpiler_ballot_t __ballot_sync(unsigned long long mask, int pred, int site = __builtin_LINE()) {
  return static_cast<xpiler_ballot_t>(::xpiler::ballot(mask, pred, site));
}
inline xpiler_ballot_t __ballot(int pred, int site = __builtin_LINE()) {
  return static_cast<xpiler_ballot_t>(::xpiler::ballot(::xpiler::kFullWarp, pred, site, true));
}
inline int __any_sync(unsigned long long mask, int pred, int site = __builtin_LINE()) {
  return ::xpiler::vote_any(mask, pred, site);
}
inline int __all_sync(unsigned long long mask, int pred, int site = __builtin_LINE()) {
  return ::xpiler::vote_all(mask, pred, site);
}
inline int __any(int pred, int site = __builtin_LINE()) { return ::xpiler::vote_any(::xpiler::kFullWarp, pred, site, true); }
inline int __all(int pred, int site = __builtin_LINE()) { return ::xpiler::vote_all(::xpiler::kFullWarp, pred, site, true); }
inline xpiler_ballot_t __activemask(int site = __builtin_LINE()) {
  return static_cast<xpiler_ballot_t>(::xpiler::active_mask(site));
}
inline void __syncwarp(unsigned long long mask = ::xpiler::kFullWarp, int site = __builtin_LINE()) {
  ::xpiler::sync_warp(mask, site);
}
template <class T>
inline xpiler_ballot_t __match_any_sync(unsigned long long mask, T value, int site = __builtin_LINE()) {
  return static_cast<xpiler_ballot_t>(::xpiler::match_any(mask, value, site));
}
inline unsigned __reduce_add_sync(unsigned long long mask, unsigned v, int site = __builtin_LINE()) {
  return ::xpiler::warp_reduce_values(mask, v, [](unsigned a, unsigned b) { return a + b; }, site);
}
inline int __reduce_add_sync(unsigned long long mask, int v, int site = __builtin_LINE()) {
  return ::xpiler::warp_reduce_values(mask, v, [](int a, int b) { return a + b; }, site);
}
inline unsigned __reduce_max_sync(unsigned long long mask, unsigned v, int site = __builtin_LINE()) {
  return ::xpiler::warp_reduce_values(mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; }, site);
}
inline int __reduce_max_sync(unsigned long long mask, int v, int site = __builtin_LINE()) {
  return ::xpiler::warp_reduce_values(mask, v, [](int a, int b) { return a > b ? a : b; }, site);
}
inline unsigned __reduce_min_sync(unsigned long long mask, unsigned v, int site = __builtin_LINE()) {
  return ::xpiler::warp_reduce_values(mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; }, site);
}
inline int __reduce_min_sync(unsigned long long mask, int v, int site = __builtin_LINE()) {
  return ::xpiler::warp_reduce_values(mask, v, [](int a, int b) { return a < b ? a : b; }, site);
}
inline unsigned __lane_id() { return static_cast<unsigned>(::xpiler::lane_id()); }
inline unsigned long long __lanemask_lt() { return (1ull << __lane_id()) - 1; }
inline unsigned long long __lanemask_le() { return ((1ull << __lane_id()) << 1) - 1; }
inline unsigned long long __lanemask_gt() { return ::xpiler::kFullWarp & ~__lanemask_le(); }
inline unsigned long long __lanemask_ge() { return ::xpiler::kFullWarp & ~__lanemask_lt(); }
inline unsigned __lanemask_eq() { return 1u << (__lane_id() & 31); }

// ---- loads with cache hints ---------------------------------------------------------------------------------
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

#include "simd_video.h"

// ---- integer intrinsics -----------------------------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) | __brev(static_cast<unsigned>(x >> 32));
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
#include "funnel_shift.h"
inline int __mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffff) * (b & 0xffffff); }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32); }
inline long long __mul64hi(long long a, long long b) { return static_cast<long long>((static_cast<__int128>(a) * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline unsigned __sad(int a, int b, unsigned c) { return c + static_cast<unsigned>(a > b ? a - b : b - a); }
inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return c + (a > b ? a - b : b - a); }
inline int __rhadd(int a, int b) { return static_cast<int>((static_cast<long long>(a) + b + 1) >> 1); }
inline unsigned __urhadd(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<unsigned long long>(a) + b + 1) >> 1); }
inline unsigned __uhadd(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<unsigned long long>(a) + b) >> 1); }
inline int __dp4a(int a, int b, int c) {
  int r = c;
  for (int i = 0; i < 4; ++i) r += static_cast<signed char>(a >> (8 * i)) * static_cast<signed char>(b >> (8 * i));
  return r;
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  unsigned r = c;
  for (int i = 0; i < 4; ++i) r += ((a >> (8 * i)) & 0xff) * ((b >> (8 * i)) & 0xff);
  return r;
}
inline int __dp4a(char4 a, char4 b, int c) {
  return c + a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
inline int __dp2a_lo(int a, int b, int c) {
  return c + static_cast<short>(a) * static_cast<signed char>(b) + static_cast<short>(a >> 16) * static_cast<signed char>(b >> 8);
}
inline int __dp2a_hi(int a, int b, int c) {
  return c + static_cast<short>(a) * static_cast<signed char>(b >> 16) + static_cast<short>(a >> 16) * static_cast<signed char>(b >> 24);
}

#include "mathfn.h"
#include "atomics.h"
#include "half.h"

// ---- CDNA matrix cores: V_MFMA_F32_16X16X4F32 (one block, 64-lane wavefront) -------------------------------
// A is 16x4 (lane l holds A[l % 16][l / 16]), B is 4x16 (lane l holds B[l / 16][l % 16]), C/D are 16x16 with
// lane l holding rows 4*(l/16) .. 4*(l/16)+3 of column l % 16 in its four registers. Modelled with width-64
// shuffles, so every lane of the wavefront takes part (as on the hardware); cbsz/abid/blgp broadcasts are not.
#ifdef XPILER_DIALECT_HIP
namespace xpiler {
template <class V>
inline V mfma_f32_16x16x4f32(float a, float b, V c, int cbsz, int abid, int blgp) {
  if (cbsz != 0 || abid != 0 || blgp != 0) {
    std::fprintf(stderr, "xpiler runtime: __builtin_amdgcn_mfma_f32_16x16x4f32 with cbsz/abid/blgp broadcast "
                         "is not modelled\n");
    std::abort();
  }
  const int lane = static_cast<int>(::xpiler::lane_id()) % 64;
  V d = c;
  for (int r = 0; r < 4; ++r) {
    float sum = d[r];
    for (int k = 0; k < 4; ++k)
      sum += __shfl(a, 4 * (lane / 16) + r + 16 * k, 64) * __shfl(b, lane % 16 + 16 * k, 64);
    d[r] = sum;
  }
  return d;
}
}  // namespace xpiler
#define __builtin_amdgcn_mfma_f32_16x16x4f32(a, b, c, cbsz, abid, blgp) \
  ::xpiler::mfma_f32_16x16x4f32((a), (b), (c), (cbsz), (abid), (blgp))
#endif  // XPILER_DIALECT_HIP
