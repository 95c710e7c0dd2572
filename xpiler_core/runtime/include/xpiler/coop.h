// cooperative_groups basics on the CPU: thread_block, tiled_partition<N> (a warp or less; wider tiles sync and
// reduce, as CUDA 11+ allows), coalesced, labeled and binary partitions, tile shuffles and votes, sync, reduce.
#pragma once
#include "device.h"

namespace cooperative_groups {

class thread_block {
 public:
  void sync(int site = __builtin_LINE()) const { ::xpiler::block_barrier(site, 1); }
  unsigned thread_rank() const { return ::xpiler::linear_tid(); }
  unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return dim3(blockIdx); }
  dim3 thread_index() const { return dim3(threadIdx); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};
inline thread_block this_thread_block() { return thread_block(); }
inline void sync(const thread_block& b) { b.sync(); }
// Scratch for tiles wider than a warp (CUDA 11+): this runtime's tiles need none, it is accepted and unused.
template <unsigned TileCommunicationSize = 8, unsigned MaxBlockSize = 1024> struct block_tile_memory { char unused; };
template <unsigned A, unsigned B> inline thread_block this_thread_block(block_tile_memory<A, B>&) { return thread_block(); }

// Grid-wide groups: ranks work; grid.sync() needs every block resident at once, which a cooperative launch gives
// (cudaLaunchCooperativeKernel: a block per OS thread); elsewhere (a <<<>>> launch, where CUDA leaves it undefined)
// it stops the run with a message.
class grid_group {
 public:
  unsigned long long thread_rank() const {
    return static_cast<unsigned long long>(block_rank()) * (blockDim.x * blockDim.y * blockDim.z) + ::xpiler::linear_tid();
  }
  unsigned long long size() const { return num_blocks() * (blockDim.x * blockDim.y * blockDim.z); }
  unsigned long long num_threads() const { return size(); }
  unsigned long long block_rank() const {
    return blockIdx.x + static_cast<unsigned long long>(gridDim.x) * (blockIdx.y + static_cast<unsigned long long>(gridDim.y) * blockIdx.z);
  }
  unsigned long long num_blocks() const { return static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z; }
  bool is_valid() const { return ::xpiler::g_cooperative; }
  void sync(int site = __builtin_LINE()) const {
    if (!::xpiler::g_cooperative)
      ::xpiler::die(::xpiler::kExitLaunch, "xpiler: grid-wide sync (this_grid().sync()) in a kernel not launched "
                    "with cudaLaunchCooperativeKernel: every block must be resident, which only that launch gives\n");
    ::xpiler::block_barrier(site, 1);
    if (::xpiler::linear_tid() == 0) ::xpiler::grid_barrier_wait();
    ::xpiler::block_barrier(site, 1);
  }
};
inline grid_group this_grid() { return grid_group(); }
inline void sync(const grid_group& g, int site = __builtin_LINE()) { g.sync(site); }

}  // namespace cooperative_groups

namespace xpiler {
// Tiles wider than a warp (CUDA 11+: thread_block_tile<64>, <128>, ...): their sync is a barrier of the tile's own
// threads (a block-scope object each lane sleeps on, see wait_object), and cg::reduce goes through one slot per
// thread. The state is the running block's: fresh for every block on this OS thread.
struct MultiWarpTiles {
  struct Barrier { unsigned expected, pending; unsigned long long phase; };
  unsigned long long stamp = 0;
  std::vector<Barrier> barriers;
  std::vector<unsigned char> slots;
};
inline MultiWarpTiles& multi_warp_tiles(unsigned size) {
  static thread_local MultiWarpTiles state;
  Worker* w = tls_worker;
  const unsigned threads = w->nthreads, count = (threads + size - 1) / size;
  if (state.stamp != w->block_serial || state.barriers.size() != count) {
    state.stamp = w->block_serial;
    state.barriers.assign(count, MultiWarpTiles::Barrier{0, 0, 0});
    for (unsigned t = 0; t < count; ++t) {
      const unsigned members = threads - t * size < size ? threads - t * size : size;
      state.barriers[t] = MultiWarpTiles::Barrier{members, members, 0};
    }
  }
  return state;
}
inline bool multi_warp_phase_moved(const void* barrier, unsigned long long token) {
  return static_cast<const MultiWarpTiles::Barrier*>(barrier)->phase != token;
}
inline void multi_warp_sync(unsigned size, int site) {
  MultiWarpTiles::Barrier& b = multi_warp_tiles(size).barriers[linear_tid() / size];
  const unsigned long long token = b.phase;
  if (--b.pending == 0) {
    b.pending = b.expected;
    ++b.phase;
  }
  wait_object(site, &multi_warp_phase_moved, &b, token);
}
}  // namespace xpiler

namespace cooperative_groups {

template <unsigned N>
class thread_block_tile {
  static_assert(N >= 1 && (N & (N - 1)) == 0, "tile size must be a power of 2");
  static_assert(N <= XPILER_WARP_SIZE || N <= 1024, "a tile is at most a block (1024 threads)");
  static constexpr bool kMultiWarp = N > XPILER_WARP_SIZE;

 public:
  static constexpr unsigned num_threads() { return N; }
  static constexpr unsigned size() { return N; }
  unsigned thread_rank() const { return ::xpiler::linear_tid() % N; }
  unsigned meta_group_rank() const { return ::xpiler::linear_tid() / N; }
  unsigned meta_group_size() const { return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N; }
  unsigned long long tile_mask() const {
    unsigned long long m = N >= 64 ? ~0ull : ((1ull << (N % 64)) - 1);
    return m << (static_cast<unsigned>(::xpiler::lane_id()) / N * N);
  }
  void sync(int site = __builtin_LINE()) const {
    if constexpr (kMultiWarp) ::xpiler::multi_warp_sync(N, site);
    else ::xpiler::sync_warp(tile_mask(), site);
  }
  template <class T> T shfl(T v, int src, int site = __builtin_LINE()) const {
    static_assert(!kMultiWarp, "CUDA shuffles within tiles of a warp or less");
    return ::xpiler::shuffle(tile_mask(), v, ::xpiler::kShflIdx, src, N, site);
  }
  template <class T> T shfl_down(T v, unsigned d, int site = __builtin_LINE()) const {
    return ::xpiler::shuffle(tile_mask(), v, ::xpiler::kShflDown, static_cast<int>(d), N, site);
  }
  template <class T> T shfl_up(T v, unsigned d, int site = __builtin_LINE()) const {
    return ::xpiler::shuffle(tile_mask(), v, ::xpiler::kShflUp, static_cast<int>(d), N, site);
  }
  template <class T> T shfl_xor(T v, int m, int site = __builtin_LINE()) const {
    return ::xpiler::shuffle(tile_mask(), v, ::xpiler::kShflXor, m, N, site);
  }
  int any(int p, int site = __builtin_LINE()) const { return ::xpiler::vote_any(tile_mask(), p, site); }
  int all(int p, int site = __builtin_LINE()) const { return ::xpiler::vote_all(tile_mask(), p, site); }
  unsigned ballot(int p, int site = __builtin_LINE()) const {
    unsigned long long m = ::xpiler::ballot(tile_mask(), p, site);
    return static_cast<unsigned>(m >> (static_cast<unsigned>(::xpiler::lane_id()) / N * N));
  }
};

template <unsigned N, class Parent>
inline thread_block_tile<N> tiled_partition(const Parent&) { return thread_block_tile<N>(); }

// The lanes of the warp active where the group is made (__activemask()): ranks, shuffles and votes among them.
class coalesced_group {
 public:
  explicit coalesced_group(unsigned long long mask) : mask_(mask) {}
  unsigned size() const { return static_cast<unsigned>(__builtin_popcountll(mask_)); }
  unsigned num_threads() const { return size(); }
  unsigned thread_rank() const {
    unsigned lane = static_cast<unsigned>(::xpiler::lane_id());
    return static_cast<unsigned>(__builtin_popcountll(mask_ & ((1ull << lane) - 1ull)));
  }
  unsigned meta_group_rank() const { return 0; }
  unsigned meta_group_size() const { return 1; }
  void sync(int site = __builtin_LINE()) const { ::xpiler::sync_warp(mask_, site); }
  int lane_of(int rank) const {  // the lane holding the rank-th active thread
    unsigned long long m = mask_;
    for (int r = 0; m; ++r, m &= m - 1) if (r == rank) return __builtin_ctzll(m);
    return 0;
  }
  template <class T> T shfl(T v, int src_rank, int site = __builtin_LINE()) const {
    return ::xpiler::shuffle(mask_, v, ::xpiler::kShflIdx, lane_of(src_rank), XPILER_WARP_SIZE, site);
  }
  int any(int p, int site = __builtin_LINE()) const { return ::xpiler::vote_any(mask_, p, site); }
  int all(int p, int site = __builtin_LINE()) const { return ::xpiler::vote_all(mask_, p, site); }
  unsigned long long ballot(int p, int site = __builtin_LINE()) const { return ::xpiler::ballot(mask_, p, site); }
  unsigned long long mask() const { return mask_; }

 private:
  unsigned long long mask_;
};
inline coalesced_group coalesced_threads(int site = __builtin_LINE()) {
  return coalesced_group(static_cast<unsigned long long>(__activemask(site)));
}

// labeled_partition / binary_partition: collective over the parent group; the parent's lanes that give the same
// label (or predicate) form one coalesced group, ranked in lane order.
template <unsigned N>
inline coalesced_group labeled_partition(const thread_block_tile<N>& parent, int label, int site = __builtin_LINE()) {
  return coalesced_group(static_cast<unsigned long long>(::xpiler::match_any(parent.tile_mask(), label, site)));
}
inline coalesced_group labeled_partition(const coalesced_group& parent, int label, int site = __builtin_LINE()) {
  return coalesced_group(static_cast<unsigned long long>(::xpiler::match_any(parent.mask(), label, site)));
}
template <class Parent>
inline coalesced_group binary_partition(const Parent& parent, bool predicate, int site = __builtin_LINE()) {
  return labeled_partition(parent, predicate ? 1 : 0, site);
}

// A group whose kind is known at run time: a block, a tile, or coalesced lanes.
class thread_group {
 public:
  thread_group(const thread_block&) : kind_(0), size_(0), mask_(0) {}
  template <unsigned N> thread_group(const thread_block_tile<N>& t) : kind_(1), size_(N), mask_(t.tile_mask()) {}
  thread_group(const coalesced_group& c) : kind_(2), size_(c.size()), mask_(c.mask()) {}
  unsigned size() const { return kind_ == 0 ? blockDim.x * blockDim.y * blockDim.z : size_; }
  unsigned num_threads() const { return size(); }
  unsigned thread_rank() const {
    if (kind_ == 0) return ::xpiler::linear_tid();
    if (kind_ == 1) return ::xpiler::linear_tid() % size_;
    unsigned lane = static_cast<unsigned>(::xpiler::lane_id());
    return static_cast<unsigned>(__builtin_popcountll(mask_ & ((1ull << lane) - 1ull)));
  }
  void sync(int site = __builtin_LINE()) const {
    if (kind_ == 0) ::xpiler::block_barrier(site, 1);
    else ::xpiler::sync_warp(mask_, site);
  }

 private:
  int kind_;
  unsigned size_;
  unsigned long long mask_;
};
inline void sync(const thread_group& g) { g.sync(); }
// tiled_partition(parent, n) with the size known at run time (a power of two up to the warp size)
inline thread_group tiled_partition(const thread_block&, unsigned n) {
  switch (n) {
    case 1: return thread_block_tile<1>(); case 2: return thread_block_tile<2>(); case 4: return thread_block_tile<4>();
    case 8: return thread_block_tile<8>(); case 16: return thread_block_tile<16>();
    default: return thread_block_tile<32>();
  }
}

// ... of a group whose kind is known at run time (a block or a tile: tiles nest, so the sub-tiles of a tile are
// the block's tiles of that size; n at most the parent's size)
inline thread_group tiled_partition(const thread_group&, unsigned n) { return tiled_partition(thread_block(), n); }

template <class T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

// Butterfly reduction inside the tile: every lane gets the result, as cg::reduce promises.
template <unsigned N, class T, class Op>
inline T reduce(const thread_block_tile<N>& tile, T value, Op op, int site = __builtin_LINE()) {
  if constexpr (N > XPILER_WARP_SIZE) {
    // a tile wider than a warp: every thread's value in its slot, then each folds the tile's slots in rank order
    ::xpiler::MultiWarpTiles& state = ::xpiler::multi_warp_tiles(N);
    const unsigned first = ::xpiler::linear_tid() / N * N;
    const unsigned members = state.barriers[first / N].expected;
    if (state.slots.size() < sizeof(T) * state.barriers.size() * N) state.slots.resize(sizeof(T) * state.barriers.size() * N);
    std::memcpy(state.slots.data() + sizeof(T) * ::xpiler::linear_tid(), &value, sizeof(T));
    tile.sync(site);
    T result;
    std::memcpy(&result, state.slots.data() + sizeof(T) * first, sizeof(T));
    for (unsigned r = 1; r < members; ++r) {
      T next;
      std::memcpy(&next, state.slots.data() + sizeof(T) * (first + r), sizeof(T));
      result = op(result, next);
    }
    tile.sync(site);  // every thread has read the slots before any writes them again
    return result;
  } else {
    for (unsigned offset = N / 2; offset > 0; offset /= 2) value = op(value, tile.shfl_xor(value, static_cast<int>(offset)));
    return value;
  }
}

// ... and over coalesced lanes (a coalesced_threads() or partition group): the group's lanes in lane order.
template <class T, class Op>
inline T reduce(const coalesced_group& group, T value, Op op, int site = __builtin_LINE()) {
  return ::xpiler::warp_reduce_values(group.mask(), value, op, site);
}

// One thread of the group calls fn (rank 0: CUDA picks an arbitrary one); the group meets after the call, so every
// thread sees its effects. The broadcast form hands its result to every thread of a tile or coalesced group.
template <class Group, class Fn, class... Args>
inline void invoke_one(const Group& group, Fn&& fn, Args&&... args) {
  if (group.thread_rank() == 0) fn(static_cast<Args&&>(args)...);
  group.sync();
}
template <class Group, class Fn, class... Args>
inline auto invoke_one_broadcast(const Group& group, Fn&& fn, Args&&... args)
    -> decltype(fn(static_cast<Args&&>(args)...)) {
  using Result = decltype(fn(static_cast<Args&&>(args)...));
  Result value{};
  if (group.thread_rank() == 0) value = fn(static_cast<Args&&>(args)...);
  return group.shfl(value, 0);
}

}  // namespace cooperative_groups
