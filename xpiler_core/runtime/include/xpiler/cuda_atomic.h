// libcu++'s cuda::atomic, cuda::atomic_ref and cuda::std::atomic on the CPU. Blocks run on several OS threads, so
// every operation is a real atomic (GCC's __atomic builtins, sequentially consistent whatever order is asked: never
// weaker than the program's); the scope only matters on a GPU.
#pragma once
#include <atomic>
#include <cstring>
#include <type_traits>
#include "atomics.h"
#include "cuda_std.h"

namespace cuda {

#ifndef XPILER_CUDA_THREAD_SCOPE
#define XPILER_CUDA_THREAD_SCOPE
enum thread_scope { thread_scope_system = 0, thread_scope_device = 1, thread_scope_block = 2, thread_scope_thread = 3 };
#endif

namespace xpiler_detail {
// The operations on one object of T, whichever type holds or refers to it.
template <class T>
struct atomic_ops {
  static_assert(std::is_trivially_copyable<T>::value, "cuda::atomic needs a trivially copyable type");
  T* p;
  T load(std::memory_order = std::memory_order_seq_cst) const {
    T out;
    __atomic_load(p, &out, __ATOMIC_SEQ_CST);
    return out;
  }
  void store(T v, std::memory_order = std::memory_order_seq_cst) const { __atomic_store(p, &v, __ATOMIC_SEQ_CST); }
  T exchange(T v, std::memory_order = std::memory_order_seq_cst) const {
    T out;
    __atomic_exchange(p, &v, &out, __ATOMIC_SEQ_CST);
    return out;
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order = std::memory_order_seq_cst,
                               std::memory_order = std::memory_order_seq_cst) const {
    return __atomic_compare_exchange(p, &expected, &desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order o = std::memory_order_seq_cst,
                             std::memory_order f = std::memory_order_seq_cst) const {
    return compare_exchange_strong(expected, desired, o, f);
  }
  template <class F>
  T update(F f) const { return ::xpiler::atomic_update(p, f); }
  T fetch_add(T v, std::memory_order = std::memory_order_seq_cst) const {
    if constexpr (std::is_integral<T>::value) return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    else return update([v](T old) { return old + v; });
  }
  T fetch_sub(T v, std::memory_order = std::memory_order_seq_cst) const {
    if constexpr (std::is_integral<T>::value) return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST);
    else return update([v](T old) { return old - v; });
  }
  T fetch_and(T v, std::memory_order = std::memory_order_seq_cst) const { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
  T fetch_or(T v, std::memory_order = std::memory_order_seq_cst) const { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
  T fetch_xor(T v, std::memory_order = std::memory_order_seq_cst) const { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
  T fetch_min(T v, std::memory_order = std::memory_order_seq_cst) const {
    return update([v](T old) { return v < old ? v : old; });
  }
  T fetch_max(T v, std::memory_order = std::memory_order_seq_cst) const {
    return update([v](T old) { return old < v ? v : old; });
  }
};

// The operator forms, over whatever `ops()` gives.
template <class Self, class T>
struct atomic_operators {
  const Self& self() const { return static_cast<const Self&>(*this); }
  operator T() const { return self().ops().load(); }
  T operator=(T v) const { self().ops().store(v); return v; }
  T operator++() const { return self().ops().fetch_add(T(1)) + T(1); }
  T operator++(int) const { return self().ops().fetch_add(T(1)); }
  T operator--() const { return self().ops().fetch_sub(T(1)) - T(1); }
  T operator--(int) const { return self().ops().fetch_sub(T(1)); }
  T operator+=(T v) const { return self().ops().fetch_add(v) + v; }
  T operator-=(T v) const { return self().ops().fetch_sub(v) - v; }
  T operator&=(T v) const { return self().ops().fetch_and(v) & v; }
  T operator|=(T v) const { return self().ops().fetch_or(v) | v; }
  T operator^=(T v) const { return self().ops().fetch_xor(v) ^ v; }
#define XPILER_ATOMIC_FORWARD(name)                                                                     \
  template <class... A>                                                                                 \
  auto name(A... a) const { return self().ops().name(a...); }
  XPILER_ATOMIC_FORWARD(load) XPILER_ATOMIC_FORWARD(store) XPILER_ATOMIC_FORWARD(exchange)
  XPILER_ATOMIC_FORWARD(fetch_add) XPILER_ATOMIC_FORWARD(fetch_sub) XPILER_ATOMIC_FORWARD(fetch_and)
  XPILER_ATOMIC_FORWARD(fetch_or) XPILER_ATOMIC_FORWARD(fetch_xor) XPILER_ATOMIC_FORWARD(fetch_min)
  XPILER_ATOMIC_FORWARD(fetch_max)
#undef XPILER_ATOMIC_FORWARD
  template <class... A>
  bool compare_exchange_strong(T& expected, T desired, A... a) const {
    return self().ops().compare_exchange_strong(expected, desired, a...);
  }
  template <class... A>
  bool compare_exchange_weak(T& expected, T desired, A... a) const {
    return self().ops().compare_exchange_weak(expected, desired, a...);
  }
  static constexpr bool is_always_lock_free = sizeof(T) <= 8;
  bool is_lock_free() const { return sizeof(T) <= 8; }
};
}  // namespace xpiler_detail

template <class T, thread_scope Scope = thread_scope_system>
class atomic_ref : public xpiler_detail::atomic_operators<atomic_ref<T, Scope>, T> {
 public:
  explicit atomic_ref(T& object) : p_(&object) {}
  atomic_ref(const atomic_ref&) = default;
  using xpiler_detail::atomic_operators<atomic_ref<T, Scope>, T>::operator=;
  xpiler_detail::atomic_ops<T> ops() const { return {p_}; }

 private:
  T* p_;
};

// Storage of its own (trivially default-constructible, as `__shared__`/`__device__` objects need).
template <class T, thread_scope Scope = thread_scope_system>
class atomic : public xpiler_detail::atomic_operators<atomic<T, Scope>, T> {
 public:
  atomic() = default;
  constexpr atomic(T v) : value_(v) {}
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;
  T operator=(T v) { ops().store(v); return v; }
  xpiler_detail::atomic_ops<T> ops() const { return {const_cast<T*>(&value_)}; }

 private:
  T value_;
};

inline void atomic_thread_fence(std::memory_order, thread_scope = thread_scope_system) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

namespace std {
template <class T>
using atomic = ::cuda::atomic<T, ::cuda::thread_scope_system>;
template <class T>
using atomic_ref = ::cuda::atomic_ref<T, ::cuda::thread_scope_system>;
}  // namespace std

}  // namespace cuda
