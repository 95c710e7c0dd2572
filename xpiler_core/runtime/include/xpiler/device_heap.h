// Device memory with bounds checking: every cudaMalloc/hipMalloc block ends at an inaccessible guard page,
// and the bytes between the requested size and the 256-byte granule it occupies hold a canary.
//
// A GPU hides small overruns in its allocation slack; a CPU translation does not (a store past malloc's end
// corrupts the heap). So the runtime, which judges translations by running the source, reports the source's
// own out-of-bounds accesses: a read or write into the guard page faults and the fault handler names the
// buffer (its size and the file:line of its allocation); a write into the slack is found when the launch
// ends (the canary changed). Freed blocks are unmapped, so a use after free faults too. When the kernel can
// no longer map memory (the process's mapping limit), blocks fall back to the C heap without a guard.
// Included by simt.h after engine.h (die, kExitFault).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include "linkage.h"

namespace xpiler {

constexpr size_t kGranule = 256;

// What fresh device memory holds. A GPU's cudaMalloc returns whatever the memory last held; here a block is
// zero-filled with canary slack (0xA7), unless XPILER_DEVICE_FILL=poison: then every byte of the block is
// 0xFF (NaN for floats, -1 for integers) and the slack's canary 0x5C. The harness runs a source a second
// time poisoned: outputs that change read memory nothing wrote (the source's defect, not the translation's).
inline bool device_poisoned() {
  static const bool v = [] {
    const char* e = getenv("XPILER_DEVICE_FILL");
    if (!e || !*e || strcmp(e, "zero") == 0) return false;
    if (strcmp(e, "poison") == 0) return true;
    die(kExitLaunch, "xpiler: XPILER_DEVICE_FILL must be 'zero' or 'poison'\n");
  }();
  return v;
}

inline unsigned char canary_byte() { return device_poisoned() ? 0x5C : 0xA7; }

struct DeviceBlock {
  char* user;       // what the program got
  size_t size;      // what it asked for
  size_t body;      // size rounded up to the granule (the slack after size holds the canary)
  char* map;        // the mapping (nullptr: a C heap block without guard)
  size_t mapped;
  const char* file;
  int line;
};

struct DeviceHeap {
  std::mutex mu;
  std::map<uintptr_t, DeviceBlock> blocks;  // by user address
};

// Never destroyed: the fault handler may look blocks up while the process exits.
inline DeviceHeap& device_heap() {
  static DeviceHeap* heap = new DeviceHeap;
  return *heap;
}

inline size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void* device_alloc(size_t n, const char* file, int line) {
  const size_t page = page_bytes();
  const size_t body = n ? (n + kGranule - 1) / kGranule * kGranule : kGranule;
  const size_t span = (body + page - 1) / page * page;
  DeviceBlock b{nullptr, n, body, nullptr, span + page, file, line};
  void* m = mmap(nullptr, b.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m != MAP_FAILED && mprotect(static_cast<char*>(m) + span, page, PROT_NONE) == 0) {
    b.map = static_cast<char*>(m);
    b.user = b.map + span - body;  // 256-aligned: the guard page is page-aligned and body a granule multiple
  } else {
    if (m != MAP_FAILED) munmap(m, b.mapped);
    b.map = nullptr;
    b.user = static_cast<char*>(aligned_alloc(kGranule, body + kGranule));
    if (!b.user) return nullptr;
  }
  if (device_poisoned()) memset(b.user, 0xFF, n);
  memset(b.user + n, canary_byte(), body - n);
  std::lock_guard<std::mutex> lock(device_heap().mu);
  device_heap().blocks[reinterpret_cast<uintptr_t>(b.user)] = b;
  return b.user;
}
#else
XPILER_ENGINE_FN void* device_alloc(size_t n, const char* file, int line);
#endif

// The block whose guard page (or slack) holds ``addr``; safe in a fault handler (never waits for the lock).
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN bool device_block_near(const void* addr, DeviceBlock* out) {
  DeviceHeap& heap = device_heap();
  if (!heap.mu.try_lock()) return false;
  bool found = false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  auto it = heap.blocks.upper_bound(a);
  if (it != heap.blocks.begin()) {
    --it;
    const DeviceBlock& b = it->second;
    const uintptr_t end = reinterpret_cast<uintptr_t>(b.user) + b.size;
    const uintptr_t limit = b.map ? reinterpret_cast<uintptr_t>(b.map) + b.mapped : end + kGranule;
    if (a >= end && a < limit) {
      *out = b;
      found = true;
    }
  }
  heap.mu.unlock();
  return found;
}
#else
XPILER_ENGINE_FN bool device_block_near(const void* addr, DeviceBlock* out);
#endif

inline void report_slack_write(const DeviceBlock& b, size_t offset, const char* who) {
  char msg[512];
  snprintf(msg, sizeof msg,
           "xpiler: out-of-bounds write in %s: byte %zu of a buffer of %zu bytes (allocated at %s:%d) was written "
           "(past its end)\n", who, offset, b.size, b.file ? b.file : "?", b.line);
  die(kExitFault, msg);
}

// After a launch (and at free): a changed canary is a write past the end of its buffer.
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void check_device_canaries(const char* who) {
  DeviceHeap& heap = device_heap();
  std::lock_guard<std::mutex> lock(heap.mu);
  for (const auto& [key, b] : heap.blocks) {
    for (size_t i = b.size; i < b.body; ++i) {
      if (static_cast<unsigned char>(b.user[i]) != canary_byte()) report_slack_write(b, i, who);
    }
  }
}
#else
XPILER_ENGINE_FN void check_device_canaries(const char* who);
#endif

// false: not a block of this heap (the caller answers "invalid value", as CUDA does)
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN bool device_free(void* p) {
  if (!p) return true;
  DeviceBlock b;
  {
    std::lock_guard<std::mutex> lock(device_heap().mu);
    auto it = device_heap().blocks.find(reinterpret_cast<uintptr_t>(p));
    if (it == device_heap().blocks.end()) return false;
    b = it->second;
    device_heap().blocks.erase(it);
  }
  for (size_t i = b.size; i < b.body; ++i) {
    if (static_cast<unsigned char>(b.user[i]) != canary_byte()) report_slack_write(b, i, "the program (found when it was freed)");
  }
  if (b.map) munmap(b.map, b.mapped);
  else free(b.user);
  return true;
}
#else
XPILER_ENGINE_FN bool device_free(void* p);
#endif

}  // namespace xpiler
