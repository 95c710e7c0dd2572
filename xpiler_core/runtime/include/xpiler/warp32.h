// The 32-lane warp helpers that the CUDA -> HIP warp_size pass writes into its output
// (xpiler_core/passes/gpu/warp_size.py), defined here for runs on this runtime. A vote takes the line of the
// code that calls the helper, not the helper's own line: lanes that call one helper from two places (inside a
// branch some lanes skip, and after it) are two collectives, as they are on a GPU; the helper's line would
// make them one. Same values as the pass's definitions (each 32-lane half of a wavefront is one CUDA warp).
#pragma once
#define XPILER_WARP32_HELPERS

__device__ inline unsigned xpiler_lane_in_wave() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % warpSize;
}

namespace xpiler {
inline unsigned wave_ballot32(int predicate, int site) {
  return static_cast<unsigned>(__ballot(predicate, site) >> (xpiler_lane_in_wave() & ~31u));
}
inline int wave_all32(int predicate, int site) { return wave_ballot32(predicate, site) == wave_ballot32(1, site); }
}  // namespace xpiler

#define xpiler_ballot32(predicate) ::xpiler::wave_ballot32((predicate), __LINE__)
#define xpiler_activemask32() ::xpiler::wave_ballot32(1, __LINE__)
#define xpiler_any32(predicate) (::xpiler::wave_ballot32((predicate), __LINE__) != 0u)
#define xpiler_all32(predicate) ::xpiler::wave_all32((predicate), __LINE__)

template <class T>
__device__ inline T xpiler_reduce_add32(T v, int site = __builtin_LINE()) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor(v, o, 32, site);
  return v;
}
template <class T>
__device__ inline T xpiler_reduce_min32(T v, int site = __builtin_LINE()) {
  for (int o = 16; o > 0; o >>= 1) {
    T w = __shfl_xor(v, o, 32, site);
    v = w < v ? w : v;
  }
  return v;
}
template <class T>
__device__ inline T xpiler_reduce_max32(T v, int site = __builtin_LINE()) {
  for (int o = 16; o > 0; o >>= 1) {
    T w = __shfl_xor(v, o, 32, site);
    v = w > v ? w : v;
  }
  return v;
}
