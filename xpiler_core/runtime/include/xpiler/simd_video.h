// CUDA's lane-wise SIMD intrinsics on the bytes (…4) or halfwords (…2) of a 32-bit word (__vmaxs4, __vadd2,
// …) as loops over the lanes. Shared by the SIMT runtime, the CPU translation's prelude and the HIP
// translation's helpers: XPILER_SIMD_QUALIFIER (e.g. __device__) and XPILER_SIMD_NAME (the spelling) set by
// the includer.
#ifndef XPILER_SIMD_QUALIFIER
#define XPILER_SIMD_QUALIFIER
#endif
#ifndef XPILER_SIMD_NAME
#define XPILER_SIMD_NAME(n) __##n
#endif
#define XPILER_SIMD(n, lanes, T, expr)                                                                      \
  XPILER_SIMD_QUALIFIER inline unsigned int XPILER_SIMD_NAME(n)(unsigned int a, unsigned int b) {           \
    unsigned int r = 0; const int bits = 32 / lanes; const unsigned int m = (1u << bits) - 1u;               \
    for (int k = 0; k < lanes; ++k) {                                                                         \
      T x = (T)((a >> (bits * k)) & m), y = (T)((b >> (bits * k)) & m); T z = (T)(expr);                     \
      r |= ((unsigned int)z & m) << (bits * k);                                                               \
    }                                                                                                         \
    return r;                                                                                                 \
  }
XPILER_SIMD(vmaxs4, 4, signed char, x > y ? x : y) XPILER_SIMD(vmins4, 4, signed char, x < y ? x : y)
XPILER_SIMD(vmaxu4, 4, unsigned char, x > y ? x : y) XPILER_SIMD(vminu4, 4, unsigned char, x < y ? x : y)
XPILER_SIMD(vadd4, 4, unsigned char, x + y) XPILER_SIMD(vsub4, 4, unsigned char, x - y)
XPILER_SIMD(vabsdiffu4, 4, unsigned char, x > y ? x - y : y - x)
XPILER_SIMD(vavgu4, 4, unsigned char, (x + y + 1) >> 1)
XPILER_SIMD(vmaxs2, 2, short, x > y ? x : y) XPILER_SIMD(vmins2, 2, short, x < y ? x : y)
XPILER_SIMD(vmaxu2, 2, unsigned short, x > y ? x : y) XPILER_SIMD(vminu2, 2, unsigned short, x < y ? x : y)
XPILER_SIMD(vadd2, 2, unsigned short, x + y) XPILER_SIMD(vsub2, 2, unsigned short, x - y)
XPILER_SIMD(vabsdiffu2, 2, unsigned short, x > y ? x - y : y - x)
#undef XPILER_SIMD
