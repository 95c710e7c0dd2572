// cooperative_groups::memcpy_async, wait and wait_prior on the CPU. Each thread of the group writes its share of
// the copy when it calls memcpy_async (see xpiler::copy_share); wait is a sync of the group, after which every
// share is written, as a GPU guarantees once wait returns.
#pragma once
#include "../xpiler/coop.h"
#include "../xpiler/async_copy.h"

namespace cooperative_groups {

template <class Group, class T, class Shape>
inline void memcpy_async(const Group& group, T* dst, const T* src, const Shape& bytes) {
  ::xpiler::copy_share(group.thread_rank(), group.size(), dst, src, static_cast<std::size_t>(bytes));
}
// The layout form: min(dst_count, src_count) elements.
template <class Group, class T, class DstLayout, class SrcLayout>
inline void memcpy_async(const Group& group, T* dst, const DstLayout& dst_count, const T* src,
                         const SrcLayout& src_count) {
  const std::size_t d = static_cast<std::size_t>(dst_count), s = static_cast<std::size_t>(src_count);
  ::xpiler::copy_share(group.thread_rank(), group.size(), dst, src, (d < s ? d : s) * sizeof(T));
}
template <class Group>
inline void wait(const Group& group, int site = __builtin_LINE()) { group.sync(site); }
template <unsigned Prior, class Group>
inline void wait_prior(const Group& group, int site = __builtin_LINE()) { group.sync(site); }

}  // namespace cooperative_groups
