// rocwmma on the CPU (see xpiler/wmma.h): same fragments, AMD spellings.
#pragma once
#include "../xpiler/wmma.h"

namespace rocwmma {
using ::xpiler::tc::accumulator;
using ::xpiler::tc::col_major;
using ::xpiler::tc::fragment;
using ::xpiler::tc::matrix_a;
using ::xpiler::tc::matrix_b;
using ::xpiler::tc::row_major;
using layout_t = ::xpiler::tc::layout_t;
constexpr layout_t mem_row_major = ::xpiler::tc::mem_row_major;
constexpr layout_t mem_col_major = ::xpiler::tc::mem_col_major;
using float16_t = __half;
using hfloat16_t = __half;
using bfloat16_t = __nv_bfloat16;
using float32_t = float;
using float64_t = double;
using int8_t = signed char;
using int32_t = int;

template <class Use, int M, int N, int K, class T, class L, class P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
  ::xpiler::tc::load(f, p, ldm, ::xpiler::tc::is_col_major<L>());
}
template <class Use, int M, int N, int K, class T, class L, class P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm, layout_t l) {
  ::xpiler::tc::load(f, p, ldm, l == mem_col_major);
}
template <class Use, int M, int N, int K, class T, class L, class P>
inline void store_matrix_sync(P* p, const fragment<Use, M, N, K, T, L>& f, unsigned ldm) {
  ::xpiler::tc::store(p, f, ldm, ::xpiler::tc::is_col_major<L>());
}
template <class Use, int M, int N, int K, class T, class L, class P>
inline void store_matrix_sync(P* p, const fragment<Use, M, N, K, T, L>& f, unsigned ldm, layout_t l) {
  ::xpiler::tc::store(p, f, ldm, l == mem_col_major);
}
template <class Use, int M, int N, int K, class T, class L, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& v) {
  for (auto& e : f.x) e = T(v);
}
template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC, class TD>
inline void mma_sync(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  ::xpiler::tc::mma(d, a, b, c);
}
inline void synchronize_workgroup() { __syncthreads(); }
}  // namespace rocwmma
