// Atomics: real hardware atomics (blocks run on several OS threads at once).
#pragma once
#include <cstring>
#include <type_traits>

namespace xpiler {
template <class T, class F>
inline T atomic_update(T* addr, F f) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 2, "unsupported atomic width");
  using Bits = std::conditional_t<sizeof(T) == 8, unsigned long long,
                                  std::conditional_t<sizeof(T) == 4, unsigned, unsigned short>>;
  Bits* p = reinterpret_cast<Bits*>(addr);
  Bits old_bits = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    T old_val;
    std::memcpy(&old_val, &old_bits, sizeof(T));
    T new_val = f(old_val);
    Bits new_bits;
    std::memcpy(&new_bits, &new_val, sizeof(T));
    if (__atomic_compare_exchange_n(p, &old_bits, new_bits, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return old_val;
  }
}
}  // namespace xpiler

#define XPILER_INT_ATOMICS(T)                                                                          \
  inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }                 \
  inline T atomicSub(T* a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }                 \
  inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }                 \
  inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }                   \
  inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }                 \
  inline T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }               \
  inline T atomicMax(T* a, T v) { return ::xpiler::atomic_update(a, [v](T o) { return o > v ? o : v; }); } \
  inline T atomicMin(T* a, T v) { return ::xpiler::atomic_update(a, [v](T o) { return o < v ? o : v; }); } \
  inline T atomicCAS(T* a, T cmp, T v) {                                                               \
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                \
    return cmp;                                                                                        \
  }

XPILER_INT_ATOMICS(int)
XPILER_INT_ATOMICS(unsigned int)
XPILER_INT_ATOMICS(long long)
XPILER_INT_ATOMICS(unsigned long long)
XPILER_INT_ATOMICS(unsigned long)
inline unsigned short atomicCAS(unsigned short* a, unsigned short cmp, unsigned short v) {
  __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}

// CUDA has atomicAdd on float and double and atomicExch on float only; HIP adds atomicSub, atomicMax and
// atomicMin on both and atomicExch on double (probed with nvcc 13 and hipcc). CUDA programs define those
// themselves (a CAS loop), so the runtime offers each only where the dialect does.
#define XPILER_FLOAT_ATOMIC_ADD(T) \
  inline T atomicAdd(T* a, T v) { return ::xpiler::atomic_update(a, [v](T o) { return o + v; }); }
#define XPILER_FLOAT_ATOMICS_HIP(T)                                                                    \
  inline T atomicSub(T* a, T v) { return ::xpiler::atomic_update(a, [v](T o) { return o - v; }); }     \
  inline T atomicMax(T* a, T v) { return ::xpiler::atomic_update(a, [v](T o) { return o > v ? o : v; }); } \
  inline T atomicMin(T* a, T v) { return ::xpiler::atomic_update(a, [v](T o) { return o < v ? o : v; }); }

XPILER_FLOAT_ATOMIC_ADD(float)
XPILER_FLOAT_ATOMIC_ADD(double)
inline float atomicExch(float* a, float v) { return ::xpiler::atomic_update(a, [v](float) { return v; }); }
#ifdef XPILER_DIALECT_HIP
XPILER_FLOAT_ATOMICS_HIP(float)
XPILER_FLOAT_ATOMICS_HIP(double)
inline double atomicExch(double* a, double v) { return ::xpiler::atomic_update(a, [v](double) { return v; }); }
#endif

inline unsigned atomicInc(unsigned* a, unsigned limit) {
  return ::xpiler::atomic_update(a, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* a, unsigned limit) {
  return ::xpiler::atomic_update(a, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; });
}

// Scoped and HIP spellings of the same operations.
#define XPILER_ATOMIC_ALIAS(name)                                                                      \
  template <class... A> inline auto name##_block(A... a) { return name(a...); }                       \
  template <class... A> inline auto name##_system(A... a) { return name(a...); }
XPILER_ATOMIC_ALIAS(atomicAdd)
XPILER_ATOMIC_ALIAS(atomicSub)
XPILER_ATOMIC_ALIAS(atomicMax)
XPILER_ATOMIC_ALIAS(atomicMin)
XPILER_ATOMIC_ALIAS(atomicExch)
XPILER_ATOMIC_ALIAS(atomicCAS)
XPILER_ATOMIC_ALIAS(atomicAnd)
XPILER_ATOMIC_ALIAS(atomicOr)
XPILER_ATOMIC_ALIAS(atomicXor)
template <class T> inline T unsafeAtomicAdd(T* a, T v) { return atomicAdd(a, v); }
template <class T> inline T safeAtomicAdd(T* a, T v) { return atomicAdd(a, v); }
template <class T> inline void atomicAddNoRet(T* a, T v) { (void)atomicAdd(a, v); }
