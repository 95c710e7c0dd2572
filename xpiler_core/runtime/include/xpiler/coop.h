// cooperative_groups basics on the CPU: thread_block, tiled_partition<N> (N <= warp size), tile
// shuffles and votes, sync, reduce.
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

// Grid-wide groups: ranks work; grid.sync() needs every block resident at once, which this runtime (blocks
// run to completion one after another) cannot give, so it stops the run with a message.
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
  bool is_valid() const { return false; }
  void sync() const {
    ::xpiler::die(::xpiler::kExitLaunch, "xpiler: grid-wide sync (this_grid().sync()) is not supported by the CPU runtime\n");
  }
};
inline grid_group this_grid() { return grid_group(); }

template <unsigned N>
class thread_block_tile {
  static_assert(N >= 1 && N <= XPILER_WARP_SIZE && (N & (N - 1)) == 0, "tile size must be a power of 2 <= warp size");

 public:
  static constexpr unsigned num_threads() { return N; }
  static constexpr unsigned size() { return N; }
  unsigned thread_rank() const { return ::xpiler::linear_tid() % N; }
  unsigned meta_group_rank() const { return ::xpiler::linear_tid() / N; }
  unsigned meta_group_size() const { return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N; }
  unsigned long long tile_mask() const {
    unsigned long long m = N == 64 ? ~0ull : ((1ull << N) - 1);
    return m << (static_cast<unsigned>(::xpiler::lane_id()) / N * N);
  }
  void sync(int site = __builtin_LINE()) const { ::xpiler::sync_warp(tile_mask(), site); }
  template <class T> T shfl(T v, int src, int site = __builtin_LINE()) const {
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

template <class T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

// Butterfly reduction inside the tile: every lane gets the result, as cg::reduce promises.
template <unsigned N, class T, class Op>
inline T reduce(const thread_block_tile<N>& tile, T value, Op op) {
  for (unsigned offset = N / 2; offset > 0; offset /= 2) value = op(value, tile.shfl_xor(value, static_cast<int>(offset)));
  return value;
}

}  // namespace cooperative_groups
