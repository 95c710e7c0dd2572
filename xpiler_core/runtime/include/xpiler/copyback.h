// What host code copies back from the device (XPILER_COPYBACK=FILE). A program that prints nothing to compare is
// judged by the data it copies back to the host (else by its device buffers when freed): each device-to-host
// copy appends "copyback N T\n" and its N bytes (past COPYBACK_LIMIT in all, "copyback N T -\n": its length
// alone), T the element type of the destination pointer as the host code declared it ('f' float, 'd' double,
// 'i' an integer, a vector type by its lanes, 'p' pointers: their count alone, 'b' anything else: as bytes); each free of a block
// cudaMalloc returned appends "freed N T\n" and the block (a block still live at exit, the same at exit). Standalone: the runtime's host API includes it, and
// the verifier's build of a CPU translation puts it in front of the translation (verify/program.py), whose
// prelude calls it through its XP_COPY_BACK, XP_ALLOCATED and XP_FREED hooks. An include guard, not #pragma once: the text may stand in a file and be included too.
#ifndef XPILER_COPYBACK_H
#define XPILER_COPYBACK_H
#ifndef XPILER_ENGINE_FN
#define XPILER_ENGINE_FN inline  // standalone (in front of a CPU translation): header-only
#endif
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

namespace xpiler {
constexpr size_t COPYBACK_LIMIT = size_t(256) << 20;
// a CUDA/HIP vector type (float4, int2, double3, ...) is compared as its lanes: those named x, y, ... of one type
template <class T, class = void> struct copy_lane { using type = T; };
template <class T> struct copy_lane<T, decltype(void(std::declval<T&>().x))> {
  using lane = typename std::remove_cv<decltype(std::declval<T&>().x)>::type;
  using type = typename std::conditional<(std::is_arithmetic<lane>::value && sizeof(T) % sizeof(lane) == 0),
                                         lane, T>::type;
};
template <class T> constexpr char copy_type() {
  using V = typename std::remove_cv<typename std::remove_all_extents<T>::type>::type;
  using U = typename copy_lane<V>::type;
  // pointers ('p': addresses differ between any two runs) are compared by their count alone
  return std::is_same<U, float>::value ? 'f' : std::is_same<U, double>::value ? 'd'
       : std::is_integral<U>::value ? 'i' : std::is_pointer<U>::value ? 'p' : 'b';
}
inline FILE* copyback_file() {
  static FILE* f = [] {
    const char* p = getenv("XPILER_COPYBACK");
    return p && *p ? fopen(p, "wb") : nullptr;
  }();
  return f;
}
inline std::mutex& copyback_mutex() { static std::mutex m; return m; }
// "KIND N T\n" and the N bytes (past COPYBACK_LIMIT in all, "KIND N T -\n": the length alone); flags (" u") before
// the newline
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void write_copy_record(const char* kind, const void* d, size_t n, char type, const char* flags = "") {
  static size_t written = 0;
  FILE* f = copyback_file();
  if (!f) return;
  std::lock_guard<std::mutex> hold(copyback_mutex());
  if (written + n > COPYBACK_LIMIT) {
    fprintf(f, "%s %zu %c -%s\n", kind, n, type, flags);
  } else {
    fprintf(f, "%s %zu %c%s\n", kind, n, type, flags);
    fwrite(d, 1, n, f);
    written += n;
  }
  fflush(f);
}
#else
XPILER_ENGINE_FN void write_copy_record(const char* kind, const void* d, size_t n, char type, const char* flags = "");
#endif
inline void record_copy_back(const void* d, size_t n, char type = 'b') { write_copy_record("copyback", d, n, type); }
// A program that copies nothing back is judged by its device buffers as they are when freed ("freed N T"): the
// blocks cudaMalloc returned, with their sizes; zero_fill: a CPU translation's blocks start zeroed, as the
// runtime's do, so bytes no kernel wrote compare equal. A block whose bytes are those the host last put there
// (zeros, a copy, a memset) is freed with the flag "u": its agreement says nothing of what the kernels computed.
struct CopybackBlock {
  size_t n;
  uint64_t host_hash;  // of the block's bytes after the host last wrote it
  char type;           // the element type it was allocated as ('b' when untyped)
  uint64_t order;      // allocations counted: blocks live at exit are recorded in the order they were allocated
};
inline std::map<const char*, CopybackBlock>& copyback_blocks() {
  static std::map<const char*, CopybackBlock> blocks;
  return blocks;
}
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN uint64_t copyback_hash(const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  uint64_t h = 1469598103934665603ull;
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    uint64_t w;
    memcpy(&w, b + k, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; k < n; ++k) h = (h ^ b[k]) * 1099511628211ull;
  return h;
}
#else
XPILER_ENGINE_FN uint64_t copyback_hash(const void* p, size_t n);
#endif
XPILER_ENGINE_FN void copyback_at_exit();
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void copyback_alloc(void* p, size_t n, bool zero_fill, char type = 'b') {
  if (!p || !copyback_file()) return;
  if (zero_fill) memset(p, 0, n);
  std::lock_guard<std::mutex> hold(copyback_mutex());
  auto& blocks = copyback_blocks();
  // registered after the block map and the mutex exist: it runs before they are destroyed
  static const bool registered = std::atexit(copyback_at_exit) == 0;
  (void)registered;
  static uint64_t allocated = 0;
  blocks[static_cast<const char*>(p)] = CopybackBlock{n, copyback_hash(p, n), type, allocated++};
}
#else
XPILER_ENGINE_FN void copyback_alloc(void* p, size_t n, bool zero_fill, char type = 'b');
#endif
// the host wrote n bytes at d (a copy, a memset): the block holding d now holds what the host put there
inline void copyback_host_write(const void* d, size_t n) {
  if (!d || !n || !copyback_file()) return;
  std::lock_guard<std::mutex> hold(copyback_mutex());
  auto& blocks = copyback_blocks();
  const char* at = static_cast<const char*>(d);
  auto it = blocks.upper_bound(at);
  if (it == blocks.begin()) return;
  --it;
  if (at >= it->first + it->second.n) return;
  it->second.host_hash = copyback_hash(it->first, it->second.n);
}
// the element type a typed allocation (cudaMalloc(float**, ...)) gave the block, for a block still live at exit
inline void copyback_type(const void* p, char type) {
  if (!p || !copyback_file()) return;
  std::lock_guard<std::mutex> hold(copyback_mutex());
  auto at = copyback_blocks().find(static_cast<const char*>(p));
  if (at != copyback_blocks().end()) at->second.type = type;
}
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void copyback_free(const void* p, char type) {
  if (!p || !copyback_file()) return;
  CopybackBlock block{};
  {
    std::lock_guard<std::mutex> hold(copyback_mutex());
    auto at = copyback_blocks().find(static_cast<const char*>(p));
    if (at == copyback_blocks().end()) return;
    block = at->second;
    copyback_blocks().erase(at);
  }
  const bool unchanged = copyback_hash(p, block.n) == block.host_hash;
  write_copy_record("freed", p, block.n, type, unchanged ? " u" : "");
}
#else
XPILER_ENGINE_FN void copyback_free(const void* p, char type);
#endif
// A program that never frees its blocks (managed memory read in place, a teaching program's last lines) leaves
// them live at exit: each is recorded as if freed there, typed as it was allocated.
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void copyback_at_exit() {
  std::map<const char*, CopybackBlock> live;
  {
    std::lock_guard<std::mutex> hold(copyback_mutex());
    live.swap(copyback_blocks());
  }
  // by allocation order, not address (two runs place blocks differently); C++11: the header goes before
  // translations built at any standard
  std::map<uint64_t, std::pair<const char*, CopybackBlock>> in_order;
  for (const auto& entry : live) in_order[entry.second.order] = entry;
  for (const auto& entry : in_order) {
    const char* p = entry.second.first;
    const CopybackBlock& block = entry.second.second;
    const bool unchanged = copyback_hash(p, block.n) == block.host_hash;
    write_copy_record("freed", p, block.n, block.type, unchanged ? " u" : "");
  }
}
#else
XPILER_ENGINE_FN void copyback_at_exit();
#endif
}  // namespace xpiler
#endif
