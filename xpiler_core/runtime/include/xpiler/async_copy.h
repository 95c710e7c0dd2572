// libcu++'s block-scope barrier (cuda::barrier), its asynchronous copies (cuda::memcpy_async) and the
// pipeline primitives (__pipeline_memcpy_async) on the CPU.
//
// A copy is done when it is issued: CUDA lets an asynchronous copy complete at any point before the wait that
// covers it, so finishing at once is one of the behaviours a GPU may show; a kernel that reads the destination
// before that wait races on a GPU. A barrier's phase is the lanes' arrival count: wait() sleeps (the block's
// other threads run) until the phase it was given has completed.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include "simt.h"

namespace xpiler {
// A group's share of a copy: each of the group's `n` threads copies its slice by rank, so the whole range is
// written once every thread of the group has called it.
inline void copy_share(std::size_t rank, std::size_t n, void* dst, const void* src, std::size_t bytes) {
  const std::size_t share = (bytes + n - 1) / n;
  const std::size_t begin = rank * share < bytes ? rank * share : bytes;
  const std::size_t end = begin + share < bytes ? begin + share : bytes;
  if (end > begin) std::memmove(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
}
}  // namespace xpiler

namespace cuda {

#ifndef XPILER_CUDA_THREAD_SCOPE
#define XPILER_CUDA_THREAD_SCOPE
enum thread_scope { thread_scope_system = 0, thread_scope_device = 1, thread_scope_block = 2, thread_scope_thread = 3 };
#endif

template <std::size_t Alignment>
struct aligned_size_t {
  static constexpr std::size_t align = Alignment;
  std::size_t value;
  explicit constexpr aligned_size_t(std::size_t v) : value(v) {}
  constexpr operator std::size_t() const { return value; }
};

enum class async_contract_fulfillment { none, async };

struct xpiler_no_completion {
  void operator()() const noexcept {}
};

template <thread_scope Scope, class CompletionF = xpiler_no_completion>
class barrier {
  // Threads of one block run on one OS thread here: only a block-scope barrier can be waited on.
  static_assert(Scope == thread_scope_block || Scope == thread_scope_thread,
                "xpiler runtime: cuda::barrier is modelled at thread_scope_block only");

 public:
  using arrival_token = unsigned long long;

  barrier() = default;  // trivial, as `__shared__` storage needs: init() sets it up
  barrier(const barrier&) = delete;
  barrier& operator=(const barrier&) = delete;
  explicit barrier(std::ptrdiff_t expected, CompletionF completion = CompletionF())
      : expected_(expected), pending_(expected), phase_(0), completion_(completion) {}

  [[nodiscard]] arrival_token arrive(std::ptrdiff_t update = 1, int site = __builtin_LINE()) {
    if (update <= 0 || update > pending_)
      ::xpiler::die(::xpiler::kExitFault, "xpiler: cuda::barrier::arrive with an update the current phase does "
                    "not expect (more arrivals than init() gave)\n");
    (void)site;
    const arrival_token token = phase_;
    pending_ -= update;
    if (pending_ == 0) {
      completion_();
      pending_ = expected_;
      ++phase_;
    }
    return token;
  }
  void wait(arrival_token&& token, int site = __builtin_LINE()) const {
    ::xpiler::wait_object(site, &passed, this, token);
  }
  void arrive_and_wait(int site = __builtin_LINE()) { wait(arrive(1, site), site); }
  void arrive_and_drop(int site = __builtin_LINE()) {
    --expected_;
    (void)arrive(1, site);
  }
  static constexpr std::ptrdiff_t max() noexcept { return (std::ptrdiff_t(1) << 30) - 1; }

  friend void init(barrier* bar, std::ptrdiff_t expected, CompletionF completion = CompletionF()) {
    bar->expected_ = expected;
    bar->pending_ = expected;
    bar->phase_ = 0;
    bar->completion_ = completion;
  }

 private:
  static bool passed(const void* object, unsigned long long token) {
    return static_cast<const barrier*>(object)->phase_ != token;
  }
  std::ptrdiff_t expected_;
  std::ptrdiff_t pending_;
  unsigned long long phase_;
  CompletionF completion_;
};

// One thread's copy, complete when issued (see above).
template <class Size, thread_scope Scope, class CompletionF>
inline async_contract_fulfillment memcpy_async(void* dst, const void* src, Size size, barrier<Scope, CompletionF>&) {
  std::memmove(dst, src, static_cast<std::size_t>(size));
  return async_contract_fulfillment::none;
}
template <class T, class Size, thread_scope Scope, class CompletionF,
          class = std::enable_if_t<!std::is_void_v<T>>>
inline async_contract_fulfillment memcpy_async(T* dst, const T* src, Size size, barrier<Scope, CompletionF>& bar) {
  return memcpy_async(static_cast<void*>(dst), static_cast<const void*>(src), size, bar);
}

// A group's copy: every thread of the group calls it with the same arguments (see copy_share); the last one
// arrives on the barrier after its share is written, so no wait returns before the whole range is.
template <class Group, class Size, thread_scope Scope, class CompletionF>
inline auto memcpy_async(const Group& group, void* dst, const void* src, Size size, barrier<Scope, CompletionF>&)
    -> decltype(group.thread_rank(), group.size(), async_contract_fulfillment()) {
  ::xpiler::copy_share(group.thread_rank(), group.size(), dst, src, static_cast<std::size_t>(size));
  return async_contract_fulfillment::none;
}
template <class Group, class T, class Size, thread_scope Scope, class CompletionF,
          class = std::enable_if_t<!std::is_void_v<T>>>
inline auto memcpy_async(const Group& group, T* dst, const T* src, Size size, barrier<Scope, CompletionF>& bar)
    -> decltype(group.thread_rank(), async_contract_fulfillment()) {
  return memcpy_async(group, static_cast<void*>(dst), static_cast<const void*>(src), size, bar);
}

// ---- cuda::pipeline -----------------------------------------------------------------------------------------
// A thread-scope pipeline (make_pipeline()) holds one thread's copies, each done when issued: every step is
// immediate. A block-scope pipeline follows the protocol between the group's threads: a stage in slot s of the
// shared state is full when every producer has committed it, and free again when every consumer has released it;
// consumer_wait sleeps until its stage is full, producer_acquire until its slot is free.
enum class pipeline_role { producer, consumer };

template <thread_scope Scope, std::uint8_t StagesCount>
struct pipeline_shared_state {
  static_assert(StagesCount >= 1, "a pipeline has at least one stage");
  unsigned producers, consumers;
  unsigned committed[StagesCount];
  unsigned released[StagesCount];
  unsigned long long generation[StagesCount];
};

template <thread_scope Scope>
class pipeline {
 public:
  pipeline(const pipeline&) = delete;
  pipeline(pipeline&&) = default;
  pipeline& operator=(const pipeline&) = delete;

  void producer_acquire(int site = __builtin_LINE()) {
    if (stages_ != 0) wait_slot(produced_, &slot_free, site);
  }
  void producer_commit() {
    if (stages_ != 0) ++committed_[produced_ % stages_];
    ++produced_;
  }
  void consumer_wait(int site = __builtin_LINE()) {
    if (stages_ != 0) wait_slot(consumed_, &stage_full, site);
  }
  template <class Rep, class Period>
  bool consumer_wait_for(const Rep&, int site = __builtin_LINE()) { consumer_wait(site); return true; }
  void consumer_release() {
    if (stages_ != 0) {
      const unsigned s = static_cast<unsigned>(consumed_ % stages_);
      if (++released_[s] == *consumers_) {  // the stage is free for its next generation
        committed_[s] = 0;
        released_[s] = 0;
        ++generation_[s];
      }
    }
    ++consumed_;
  }
  bool quit() { return true; }

  // (make_pipeline's) a thread-scope pipeline, and one over a block's shared state
  pipeline() = default;
  template <std::uint8_t Stages>
  explicit pipeline(pipeline_shared_state<Scope, Stages>* state)
      : stages_(Stages), producers_(&state->producers), consumers_(&state->consumers),
        committed_(state->committed), released_(state->released), generation_(state->generation) {}

 private:
  // object: this pipeline; token: the sequence number of the stage waited for
  static bool slot_free(const void* object, unsigned long long seq) {
    const pipeline* p = static_cast<const pipeline*>(object);
    return p->generation_[seq % p->stages_] == seq / p->stages_;
  }
  static bool stage_full(const void* object, unsigned long long seq) {
    const pipeline* p = static_cast<const pipeline*>(object);
    return slot_free(object, seq) && p->committed_[seq % p->stages_] == *p->producers_;
  }
  void wait_slot(unsigned long long seq, ::xpiler::ObjectReady ready, int site) {
    ::xpiler::wait_object(site, ready, this, seq);
  }
  unsigned stages_ = 0;
  unsigned long long produced_ = 0, consumed_ = 0;
  const unsigned* producers_ = nullptr;
  const unsigned* consumers_ = nullptr;
  unsigned* committed_ = nullptr;
  unsigned* released_ = nullptr;
  unsigned long long* generation_ = nullptr;
};

inline pipeline<thread_scope_thread> make_pipeline() { return pipeline<thread_scope_thread>(); }

// Collective over the group: the group's first thread resets the shared state; every thread then counts itself
// in its role (both roles without one).
template <class Group, thread_scope Scope, std::uint8_t Stages>
inline pipeline<Scope> xpiler_make_shared(const Group& group, pipeline_shared_state<Scope, Stages>* state, int roles,
                                          int site) {
  if (group.thread_rank() == 0) {
    state->producers = state->consumers = 0;
    for (unsigned s = 0; s < Stages; ++s) state->committed[s] = state->released[s] = 0, state->generation[s] = 0;
  }
  group.sync(site);
  if (roles & 1) ++state->producers;
  if (roles & 2) ++state->consumers;
  group.sync(site);
  return pipeline<Scope>(state);
}
template <class Group, thread_scope Scope, std::uint8_t Stages>
inline pipeline<Scope> make_pipeline(const Group& group, pipeline_shared_state<Scope, Stages>* state,
                                     int site = __builtin_LINE()) {
  return xpiler_make_shared(group, state, 3, site);
}
template <class Group, thread_scope Scope, std::uint8_t Stages>
inline pipeline<Scope> make_pipeline(const Group& group, pipeline_shared_state<Scope, Stages>* state,
                                     pipeline_role role, int site = __builtin_LINE()) {
  return xpiler_make_shared(group, state, role == pipeline_role::producer ? 1 : 2, site);
}

template <class Size, thread_scope Scope>
inline async_contract_fulfillment memcpy_async(void* dst, const void* src, Size size, pipeline<Scope>&) {
  std::memmove(dst, src, static_cast<std::size_t>(size));
  return async_contract_fulfillment::none;
}
template <class T, class Size, thread_scope Scope, class = std::enable_if_t<!std::is_void_v<T>>>
inline async_contract_fulfillment memcpy_async(T* dst, const T* src, Size size, pipeline<Scope>& pipe) {
  return memcpy_async(static_cast<void*>(dst), static_cast<const void*>(src), size, pipe);
}
template <class Group, class Size, thread_scope Scope>
inline auto memcpy_async(const Group& group, void* dst, const void* src, Size size, pipeline<Scope>&)
    -> decltype(group.thread_rank(), async_contract_fulfillment()) {
  ::xpiler::copy_share(group.thread_rank(), group.size(), dst, src, static_cast<std::size_t>(size));
  return async_contract_fulfillment::none;
}
template <class Group, class T, class Size, thread_scope Scope, class = std::enable_if_t<!std::is_void_v<T>>>
inline auto memcpy_async(const Group& group, T* dst, const T* src, Size size, pipeline<Scope>& pipe)
    -> decltype(group.thread_rank(), async_contract_fulfillment()) {
  return memcpy_async(group, static_cast<void*>(dst), static_cast<const void*>(src), size, pipe);
}

// All but the Prior most recent stages: here the oldest one the thread has not released (stronger, never weaker).
template <std::uint8_t Prior, thread_scope Scope>
inline void pipeline_consumer_wait_prior(pipeline<Scope>& pipe, int site = __builtin_LINE()) {
  pipe.consumer_wait(site);
}
template <thread_scope Scope>
inline void pipeline_producer_commit(pipeline<thread_scope_thread>& pipe, barrier<Scope>&) { pipe.producer_commit(); }

namespace std {
using ::cuda::barrier;
using namespace ::std;  // cuda::std is the standard library (xpiler/cuda_std.h)
}  // namespace std

}  // namespace cuda

// ---- the pipeline primitives (cuda_pipeline_primitives.h): per-thread copies of 4, 8 or 16 bytes ------------
inline void __pipeline_memcpy_async(void* dst, const void* src, std::size_t size_and_align, std::size_t zfill = 0) {
  if (size_and_align != 4 && size_and_align != 8 && size_and_align != 16)
    ::xpiler::die(::xpiler::kExitFault, "xpiler: __pipeline_memcpy_async copies 4, 8 or 16 bytes\n");
  if (zfill > size_and_align)
    ::xpiler::die(::xpiler::kExitFault, "xpiler: __pipeline_memcpy_async: zfill is larger than the copy\n");
  std::memcpy(dst, src, size_and_align - zfill);
  std::memset(static_cast<char*>(dst) + (size_and_align - zfill), 0, zfill);
}
inline void __pipeline_commit() {}
inline void __pipeline_wait_prior(std::size_t) {}
