// Tensor-core fragments on the CPU. Every thread of the warp holds the whole tile (num_elements = rows *
// cols), so loads, stores, fills, element-wise loops and mma give every lane the same, exact result.
#pragma once
#include <cstddef>

#include "half.h"

namespace xpiler {
namespace tc {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K> struct shape_of;
template <int M, int N, int K> struct shape_of<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct shape_of<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct shape_of<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  using element_type = T;
  static constexpr int rows = shape_of<Use, M, N, K>::rows;
  static constexpr int cols = shape_of<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols;
  T x[num_elements];  // logical row-major tile
  T& operator[](int i) { return x[i]; }
  const T& operator[](int i) const { return x[i]; }
};

template <class Layout> constexpr bool is_col_major() { return std::is_same<Layout, col_major>::value; }

// An element moved between memory and a fragment: through float when the types differ, copied when they
// are the same (half's conversions are software: a copy costs none).
template <class T, class P> struct element_conversion { static T of(const P& v) { return T(float(v)); } };
template <class T> struct element_conversion<T, T> { static T of(const T& v) { return v; } };
template <class T, class P> inline T element_as(const P& v) { return element_conversion<T, P>::of(v); }

template <class Use, int M, int N, int K, class T, class L, class P>
inline void load(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm, bool col) {
  using F = fragment<Use, M, N, K, T, L>;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      f.x[r * F::cols + c] = element_as<T>(col ? p[static_cast<size_t>(c) * ldm + r] : p[static_cast<size_t>(r) * ldm + c]);
}

template <class Use, int M, int N, int K, class T, class L, class P>
inline void store(P* p, const fragment<Use, M, N, K, T, L>& f, unsigned ldm, bool col) {
  using F = fragment<Use, M, N, K, T, L>;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      (col ? p[static_cast<size_t>(c) * ldm + r] : p[static_cast<size_t>(r) * ldm + c]) = element_as<P>(f.x[r * F::cols + c]);
}

template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC, class TD>
inline void mma(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  // each operand converted to float once (not once per product), then every (i, j) summed over k in
  // ascending order as before; the j loop innermost so it vectorizes. Every lane of the warp runs this.
  float fa[M * K], fb[K * N], acc[M * N];
  for (int i = 0; i < M * K; ++i) fa[i] = float(a.x[i]);
  for (int i = 0; i < K * N; ++i) fb[i] = float(b.x[i]);
  for (int i = 0; i < M * N; ++i) acc[i] = float(c.x[i]);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) {
      const float aik = fa[i * K + k];
      for (int j = 0; j < N; ++j) acc[i * N + j] += aik * fb[k * N + j];
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = TD(acc[i]);
}
}  // namespace tc
}  // namespace xpiler
