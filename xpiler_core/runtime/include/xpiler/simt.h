// The SIMT programming model on the CPU: builtins, barriers, warp collectives, launches.
#pragma once
#include "engine.h"
#include "device_heap.h"
#include "copyback.h"
#include "graph.h"

namespace xpiler {

// ---- builtins ---------------------------------------------------------------------------------------------
inline const uint3& thread_idx() { return tls_worker->cur->idx; }
inline const uint3& block_idx() { return tls_worker->block_idx; }
inline const dim3& block_dim() { return tls_worker->block_dim; }
inline const dim3& grid_dim() { return tls_worker->grid_dim; }
inline unsigned linear_tid() { return tls_worker->cur->linear; }
inline int lane_id() { return static_cast<int>(tls_worker->cur->linear % kWarpSize); }
// The launch's dynamic shared buffer, filled (see shared_fill_byte) the first time a block asks for it.
inline void* dynamic_shared_memory() {
  Worker* w = tls_worker;
  if (w->dyn_smem_stamp != w->block_serial) {
    w->dyn_smem_stamp = w->block_serial;
    memset(w->dyn_smem, shared_fill_byte(), w->dyn_smem_store.size() * sizeof(max_align_t));
  }
  return w->dyn_smem;
}

// ---- block barrier ----------------------------------------------------------------------------------------
// The running lane, about to sleep in `state` at `site` (the block becomes fibers first); it sleeps when it
// yields to the scheduler.
inline Lane* begin_wait(LaneState state, int site) {
  Worker* w = tls_worker;
  ensure_fiber_mode(w);
  Lane* me = w->cur;
  me->state = state;
  me->site = site;
  return me;
}

inline int block_barrier(int site, int pred) {
  begin_wait(kAtBarrier, site)->pred = pred;
  yield_to_scheduler(tls_worker);
  return tls_worker->bar_count;
}

// ---- waiting on a block-scope object (cuda::barrier) ---------------------------------------------------------
// The lane sleeps until `ready(object, token)`; other lanes of the block run meanwhile (the scheduler checks it
// after each lane it runs).
inline void wait_object(int site, ObjectReady ready, const void* object, unsigned long long token) {
  if (ready(object, token)) return;
  Lane* me = begin_wait(kAtObject, site);
  me->ready = ready;
  me->object = object;
  me->token = token;
  yield_to_scheduler(tls_worker);
}

// ---- warp collectives -------------------------------------------------------------------------------------
struct Arrival {
  const WarpRound* round;
  int lane;
  int site;
  // lanes that took part in this collective at the same call site
  lanemask_t peers() const {
    lanemask_t m = 0;
    for (int l = 0; l < kWarpSize; ++l)
      if ((round->arrived >> l & 1) && round->site[l] == site) m |= 1ull << l;
    return m;
  }
};

inline Arrival warp_arrive(lanemask_t mask, uint64_t value, int site, uint8_t op) {
  Worker* w = tls_worker;
  ensure_fiber_mode(w);
  Lane* me = w->cur;
  WarpState& ws = w->warps[me->linear / kWarpSize];
  const int lane = static_cast<int>(me->linear % kWarpSize);
  WarpRound& r = ws.buf[ws.round & 1];
  r.value[lane] = value;
  r.mask[lane] = mask;
  r.site[lane] = site;
  r.op[lane] = op;
  r.arrived |= 1ull << lane;
  me->round = ws.round;
  me->state = kAtWarp;
  yield_to_scheduler(w);
  // The scheduler may have carried this lane into a later round: read the buffer it was released from.
  // Its site is read back too: lanes of one collective called from several sites share the lead's site.
  Lane* again = tls_worker->cur;
  const WarpRound* released = &tls_worker->warps[again->linear / kWarpSize].buf[again->round & 1];
  return Arrival{released, lane, released->site[lane]};
}

enum ShuffleKind { kShflIdx = kOpShflIdx, kShflUp = kOpShflUp, kShflDown = kOpShflDown, kShflXor = kOpShflXor };

// The op a collective records; `implicit_mask` marks the legacy forms that take no mask.
inline uint8_t op_code(CollectiveOp op, bool implicit_mask) {
  return static_cast<uint8_t>(op | (implicit_mask ? kImplicitMask : 0));
}

template <class T>
inline T shuffle(lanemask_t mask, T var, ShuffleKind kind, int arg, int width, int site, bool implicit_mask = false) {
  if constexpr (sizeof(T) > 8) {
    // a cooperative-groups tile shuffles any trivially copyable value (a uint4, a struct): 64 bits at a time
    static_assert(std::is_trivially_copyable<T>::value, "a shuffled value must be trivially copyable");
    unsigned long long words[(sizeof(T) + 7) / 8] = {};
    std::memcpy(words, &var, sizeof(T));
    for (auto& word : words) word = shuffle(mask, word, kind, arg, width, site, implicit_mask);
    T out;
    std::memcpy(&out, words, sizeof(T));
    return out;
  } else {
    uint64_t bits = 0;
    std::memcpy(&bits, &var, sizeof(T));
    const Arrival a = warp_arrive(mask, bits, site, op_code(static_cast<CollectiveOp>(kind), implicit_mask));
    const int lane = a.lane;
    const int w = (width <= 0 || width > kWarpSize) ? kWarpSize : width;
    const int base = lane & ~(w - 1);
    int src = lane;
    switch (kind) {
      case kShflIdx: src = base + (arg & (w - 1)); break;
      case kShflUp: src = (lane - base) < arg ? lane : lane - arg; break;
      case kShflDown: src = (lane - base) + arg >= w ? lane : lane + arg; break;
      case kShflXor: src = lane ^ arg; if (src >= base + w) src = lane; break;
    }
    if (src < 0 || src >= kWarpSize) src = lane;
    T out = var;
    // A lane past the block's last thread (a partial warp) does not exist: it reads as zero. NVIDIA's reduction
    // sample finishes a one-thread block with tile32.shfl_down over such lanes and passes on GPUs; returning the
    // caller's own value instead doubled its sum at each step.
    const unsigned first = tls_worker->cur->linear / kWarpSize * kWarpSize;
    if (first + static_cast<unsigned>(src) >= tls_worker->nthreads) {
      std::memset(&out, 0, sizeof(T));
    } else if ((a.round->arrived >> src & 1) && a.round->site[src] == a.site) {
      uint64_t v = a.round->value[src];
      std::memcpy(&out, &v, sizeof(T));
    }
    return out;
  }
}

inline lanemask_t ballot(lanemask_t mask, int pred, int site, bool implicit_mask = false) {
  const Arrival a = warp_arrive(mask, pred != 0, site, op_code(kOpBallot, implicit_mask));
  lanemask_t m = 0;
  const lanemask_t peers = a.peers();
  for (int l = 0; l < kWarpSize; ++l)
    if ((peers >> l & 1) && a.round->value[l]) m |= 1ull << l;
  return m & mask;
}

inline lanemask_t peers_in(lanemask_t mask, const Arrival& a) { return (a.peers() & mask) | (1ull << a.lane); }

inline int vote_any(lanemask_t mask, int pred, int site, bool implicit_mask = false) {
  const Arrival a = warp_arrive(mask, pred != 0, site, op_code(kOpAny, implicit_mask));
  const lanemask_t p = peers_in(mask, a);
  for (int l = 0; l < kWarpSize; ++l)
    if ((p >> l & 1) && a.round->value[l]) return 1;
  return 0;
}

inline int vote_all(lanemask_t mask, int pred, int site, bool implicit_mask = false) {
  const Arrival a = warp_arrive(mask, pred != 0, site, op_code(kOpAll, implicit_mask));
  const lanemask_t p = peers_in(mask, a);
  for (int l = 0; l < kWarpSize; ++l)
    if ((p >> l & 1) && !a.round->value[l]) return 0;
  return 1;
}

// Not a synchronisation: the mask names only the caller, so converged lanes at this site answer together.
inline lanemask_t active_mask(int site) {
  return warp_arrive(1ull << lane_id(), 0, site, kOpActiveMask).peers();
}
inline void sync_warp(lanemask_t mask, int site) { (void)warp_arrive(mask, 0, site, kOpSyncWarp); }
// After a device-code statement that reads or writes through a volatile pointer (runtime/rewrite.py adds the
// call): the lanes of the warp that run this code together meet here, as the legacy warp-synchronous idiom
// (`volatile float* v = s; v[tid] += v[tid + 16]; v[tid] += v[tid + 8]; ...` with no __syncwarp) relies on a
// warp executing each statement in step; lanes elsewhere, blocked or exited are not waited for.
inline void lockstep(int site) {
  if (!tls_worker || !tls_worker->cur) return;  // a __host__ __device__ function called from host code
  (void)warp_arrive(1ull << lane_id(), 0, site, kOpLockstep);
}

template <class T>
inline lanemask_t match_any(lanemask_t mask, T value, int site) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  const Arrival a = warp_arrive(mask, bits, site, kOpMatchAny);
  const lanemask_t p = peers_in(mask, a);
  lanemask_t m = 0;
  for (int l = 0; l < kWarpSize; ++l)
    if ((p >> l & 1) && a.round->value[l] == bits) m |= 1ull << l;
  return m;
}

template <class T, class Op>
inline T warp_reduce_values(lanemask_t mask, T value, Op op, int site) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  const Arrival a = warp_arrive(mask, bits, site, kOpReduce);
  const lanemask_t p = peers_in(mask, a);
  bool first = true;
  T acc = value;
  for (int l = 0; l < kWarpSize; ++l) {
    if (!(p >> l & 1)) continue;
    T v;
    uint64_t b = a.round->value[l];
    std::memcpy(&v, &b, sizeof(T));
    acc = first ? v : op(acc, v);
    first = false;
  }
  return acc;
}

// ---- launches ---------------------------------------------------------------------------------------------
inline int g_last_error = 0;  // 0 = success, 9 = invalid configuration (CUDA numbering)
inline char g_next_name[256] = {0};

inline void set_next_kernel_name(const char* name) {
  strncpy(g_next_name, name, sizeof g_next_name - 1);
}

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void kernel_name_of(const void* fn, char* out, size_t cap) {
  if (g_next_name[0]) {
    strncpy(out, g_next_name, cap - 1);
    out[cap - 1] = 0;
    g_next_name[0] = 0;
    return;
  }
  Dl_info info;
  if (dladdr(fn, &info) && info.dli_sname) {
    int status = 0;
    char* dem = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    const char* s = (status == 0 && dem) ? dem : info.dli_sname;
    // "void ns::k<float>(float*)" -> "ns::k<float>": cut at the argument list, drop the return type.
    size_t n = strlen(s), end = n, start = 0;
    int depth = 0;
    for (size_t i = 0; i < n; ++i) {
      char c = s[i];
      if (c == '<') ++depth;
      else if (c == '>') --depth;
      else if (c == '(' && depth == 0) { end = i; break; }
      else if (c == ' ' && depth == 0) start = i + 1;
    }
    size_t len = end > start ? end - start : 0;
    if (len >= cap) len = cap - 1;
    memcpy(out, s + start, len);
    out[len] = 0;
    free(dem);
    return;
  }
  snprintf(out, cap, "kernel@%p", fn);
}
#else
XPILER_ENGINE_FN void kernel_name_of(const void* fn, char* out, size_t cap);
#endif

#define XPILER_STR2(x) #x
#define XPILER_STR(x) XPILER_STR2(x)

#ifndef XPILER_ENGINE_EXTERN
[[noreturn]] XPILER_ENGINE_FN void report_fault(int sig, siginfo_t* si) {
  const char* what = sig == SIGSEGV ? "segmentation fault" : sig == SIGBUS ? "bus error"
                   : sig == SIGFPE ? "arithmetic exception" : sig == SIGILL ? "illegal instruction" : "abort";
  char msg[768];
  Worker* w = tls_worker;
  if (w && sig == SIGSEGV && si) {
    const char* addr = static_cast<const char*>(si->si_addr);
    for (char* base : w->stacks)
      if (addr >= base && addr < base + 4096) what = "stack overflow (more than " XPILER_STR(XPILER_STACK_BYTES) " bytes of locals per thread)";
  }
  if (sig == SIGSEGV && si && si->si_code == SI_KERNEL)  // no faulting address: x86 reports a protection fault
    what = "general-protection fault (a misaligned vector access or a non-canonical pointer)";
  DeviceBlock near{};
  const bool past_end = sig == SIGSEGV && si && device_block_near(si->si_addr, &near);
  if (past_end) {
    const size_t offset = static_cast<size_t>(static_cast<const char*>(si->si_addr) - near.user);
    char where[320];
    if (w && w->cur && g_launch.name[0]) {
      const uint3 b = w->block_idx, t = w->cur->idx;
      snprintf(where, sizeof where, "kernel %s (block (%u,%u,%u), thread (%u,%u,%u))", g_launch.name, b.x, b.y, b.z,
               t.x, t.y, t.z);
    } else {
      snprintf(where, sizeof where, "host code");
    }
    snprintf(msg, sizeof msg, "xpiler: out-of-bounds access in %s: byte %zu of a buffer of %zu bytes (allocated at "
             "%s:%d), past its end\n", where, offset, near.size, near.file ? near.file : "?", near.line);
  } else if (w && w->cur && g_launch.name[0]) {
    const uint3 b = w->block_idx, t = w->cur->idx;
    snprintf(msg, sizeof msg, "xpiler: %s in kernel %s (block (%u,%u,%u), thread (%u,%u,%u), address %p)\n", what,
             g_launch.name, b.x, b.y, b.z, t.x, t.y, t.z, si ? si->si_addr : nullptr);
  } else {
    snprintf(msg, sizeof msg, "xpiler: %s in host code (address %p)\n", what, si ? si->si_addr : nullptr);
  }
  die(kExitFault, msg);
}
#else
[[noreturn]] XPILER_ENGINE_FN void report_fault(int sig, siginfo_t* si);
#endif

inline void fault_handler(int sig, siginfo_t* si, void*) { report_fault(sig, si); }

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void install_altstack(Worker* w) {
  const size_t size = 64 * 1024;
  w->altstack = static_cast<char*>(malloc(size));
  stack_t ss{};
  ss.ss_sp = w->altstack;
  ss.ss_size = size;
  sigaltstack(&ss, nullptr);
}
#else
XPILER_ENGINE_FN void install_altstack(Worker* w);
#endif

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void install_fault_handlers() {
  static bool done = false;
  if (done) return;
  done = true;
  struct sigaction sa{};
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}
#else
XPILER_ENGINE_FN void install_fault_handlers();
#endif

inline unsigned os_threads() {
  static const unsigned n = [] {
    const char* e = getenv("XPILER_THREADS");
    int v = e ? atoi(e) : 0;
    if (v <= 0) v = static_cast<int>(std::thread::hardware_concurrency());
    return static_cast<unsigned>(v > 0 ? v : 1);
  }();
  return n;
}

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void write_status(const char* name) {
  if (g_status_fd == -2) {
    const char* p = getenv("XPILER_STATUS_FILE");
    g_status_fd = p ? open(p, O_WRONLY | O_CREAT, 0600) : -1;
  }
  if (g_status_fd >= 0) {
    char line[300];
    int n = snprintf(line, sizeof line, "%s\n", name);
    (void)!ftruncate(g_status_fd, 0);
    (void)!pwrite(g_status_fd, line, static_cast<size_t>(n), 0);
  }
}
#else
XPILER_ENGINE_FN void write_status(const char* name);
#endif

// ---- the record of what host code does (XPILER_RECORD=FILE) --------------------------------------------------
// The test builder runs a host entry once on probe buffers and reads back which of them each copy touched and
// what it launched: host code runs for real instead of being read by pattern. XPILER_RECORD_ONLY=1 records
// launches without running them (the probe only needs the host code's copies and launch shapes).
inline FILE* record_file() {
  static FILE* f = [] {
    const char* p = getenv("XPILER_RECORD");
    return p && *p ? fopen(p, "w") : nullptr;
  }();
  return f;
}
inline bool record_only() {
  static const bool v = [] {
    const char* e = getenv("XPILER_RECORD_ONLY");
    return e != nullptr && e[0] == '1';
  }();
  return v;
}
// XPILER_RECORD_DATA=1: each copy's source bytes follow it ("data HEX"), so a replay can move data that came
// from memory the host code owns itself (a local table copied to a __constant__ array)
inline bool record_data() {
  static const bool v = [] {
    const char* e = getenv("XPILER_RECORD_DATA");
    return e != nullptr && e[0] == '1';
  }();
  return v;
}
inline void record_bytes(FILE* f, const void* s, size_t n) {
  if (!record_data()) return;
  static const char digits[] = "0123456789abcdef";
  fputs("data ", f);
  const unsigned char* b = static_cast<const unsigned char*>(s);
  for (size_t i = 0; i < n; ++i) {
    fputc(digits[b[i] >> 4], f);
    fputc(digits[b[i] & 15], f);
  }
  fputc('\n', f);
}
inline unsigned long long record_address(const void* p) {
  return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p));
}
// A copy of n bytes from s to d (the host's copies, whatever their kind).
inline void record_copy(const void* d, const void* s, size_t n) {
  if (FILE* f = record_file()) {
    fprintf(f, "copy %llu %llu %zu\n", record_address(d), record_address(s), n);
    record_bytes(f, s, n);
    fflush(f);
  }
}
inline void record_copy2d(const void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h) {
  if (FILE* f = record_file()) {
    fprintf(f, "copy2d %llu %zu %llu %zu %zu %zu\n", record_address(d), dp, record_address(s), sp, w, h);
    if (record_data()) {
      std::vector<unsigned char> rows(w * h);
      for (size_t r = 0; r < h; ++r) memcpy(rows.data() + r * w, static_cast<const char*>(s) + r * sp, w);
      record_bytes(f, rows.data(), rows.size());
    }
    fflush(f);
  }
}
// The symbol at address p (a __constant__/__device__ variable), by its name in the library.
inline const char* record_symbol_name(const void* p) {
  Dl_info info;
  return dladdr(p, &info) && info.dli_sname && info.dli_saddr == p ? info.dli_sname : "?";
}
// A copy into (to = true) or out of a symbol: the symbol's name and byte offset, the host address, the bytes.
inline void record_symbol_copy(bool to, const void* sym, size_t off, const void* host, size_t n) {
  if (FILE* f = record_file()) {
    fprintf(f, "%s %s %zu %llu %zu\n", to ? "tosymbol" : "fromsymbol", record_symbol_name(sym), off,
            record_address(host), n);
    if (to) record_bytes(f, host, n);
    fflush(f);
  }
}
inline void record_alloc(const void* p, size_t n) {
  if (FILE* f = record_file()) {
    fprintf(f, "alloc %llu %zu\n", record_address(p), n);
    fflush(f);
  }
}
inline void record_memset(const void* d, int v, size_t n) {
  if (FILE* f = record_file()) {
    fprintf(f, "memset %llu %d %zu\n", record_address(d), v, n);
    fflush(f);
  }
}
// One argument of the launch about to be recorded (the "launch" line that follows closes the list).
template <class T>
inline void record_arg(const T& v) {
  FILE* f = record_file();
  if (!f) return;
  using D = std::decay_t<T>;
  if constexpr (std::is_pointer_v<D>) {
    // a volatile pointer (a kernel's flags between blocks) is recorded by its address like any other
    fprintf(f, "arg ptr %llu\n", record_address(const_cast<const void*>(reinterpret_cast<const volatile void*>(v))));
  } else if constexpr (std::is_same_v<D, bool>) {
    fprintf(f, "arg int %d\n", v ? 1 : 0);
  } else if constexpr (std::is_integral_v<D> && std::is_signed_v<D>) {
    fprintf(f, "arg int %lld\n", static_cast<long long>(v));
  } else if constexpr (std::is_integral_v<D>) {
    fprintf(f, "arg int %llu\n", static_cast<unsigned long long>(v));
  } else if constexpr (std::is_enum_v<D>) {
    fprintf(f, "arg int %lld\n", static_cast<long long>(v));
  } else if constexpr (std::is_floating_point_v<D>) {
    fprintf(f, "arg float %.17g\n", static_cast<double>(v));
  } else {
    fprintf(f, "arg other %zu\n", sizeof(D));
  }
}
template <class Tuple, size_t... I>
inline void record_args(const Tuple& t, std::index_sequence<I...>) {
  (record_arg(std::get<I>(t)), ...);
}
inline void record_launch(const char* name, dim3 g, dim3 b, size_t smem) {
  if (FILE* f = record_file()) {
    fprintf(f, "launch %u %u %u %u %u %u %zu %s\n", g.x, g.y, g.z, b.x, b.y, b.z, smem, name);
    fflush(f);
  }
}

inline void prepare_worker(Worker& w, dim3 grid, dim3 block, size_t smem) {
  w.grid_dim = grid;
  w.block_dim = block;
  w.nthreads = block.x * block.y * block.z;
  w.lanes.resize(w.nthreads);
  w.warps.resize((w.nthreads + kWarpSize - 1) / kWarpSize);
  w.dyn_smem_store.assign(smem / sizeof(max_align_t) + 1, max_align_t{});
  w.dyn_smem = reinterpret_cast<char*>(w.dyn_smem_store.data());
  install_altstack(&w);
}

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void run_kernel(const void* fn, const KernelCall& call, dim3 grid, dim3 block, size_t smem) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535) {
    g_last_error = 9;
    g_next_name[0] = 0;
    return;
  }
  install_fault_handlers();
  kernel_name_of(fn, g_launch.name, sizeof g_launch.name);
  g_launch.grid = grid;
  g_launch.block = block;
  g_launch.shared_bytes = smem;
  write_status(g_launch.name);
  record_launch(g_launch.name, grid, block, smem);
  if (record_only()) return;
  const unsigned long long nblocks = 1ull * grid.x * grid.y * grid.z;
  // XPILER_BLOCK_ORDER=reverse: a second schedule, to tell outputs that depend on which block wins a race
  // (an atomic counter's order) from outputs that differ because a translation is wrong
  static const bool reversed = [] {
    const char* e = getenv("XPILER_BLOCK_ORDER");
    return e != nullptr && strcmp(e, "reverse") == 0;
  }();
  std::atomic<unsigned long long> next{0};
  // a cooperative launch: one OS thread per block (all resident, as grid.sync() needs)
  const bool cooperative = g_next_cooperative;
  g_next_cooperative = false;
  if (cooperative && nblocks > kMaxCooperativeBlocks) {
    g_last_error = 720;  // cudaErrorCooperativeLaunchTooLarge
    return;
  }
  g_cooperative = cooperative;
  g_grid_barrier.expected = cooperative ? nblocks : 0;
  g_grid_barrier.arrived = 0;
  auto work = [&]() {
    Worker w;
    prepare_worker(w, grid, block, smem);
    Worker* saved = tls_worker;
    tls_worker = &w;
    for (;;) {
      unsigned long long b = next.fetch_add(1, std::memory_order_relaxed);
      if (b >= nblocks) break;
      if (reversed) b = nblocks - 1 - b;
      uint3 bidx{static_cast<unsigned>(b % grid.x), static_cast<unsigned>((b / grid.x) % grid.y),
                 static_cast<unsigned>(b / (1ull * grid.x * grid.y))};
      run_block(&w, &call, bidx);
      if (cooperative) grid_barrier_leave();
    }
    tls_worker = saved;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  };
  unsigned nt = static_cast<unsigned>(cooperative ? nblocks : std::min<unsigned long long>(os_threads(), nblocks));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < nt; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  g_cooperative = false;
  char who[300];
  snprintf(who, sizeof who, "kernel %s", g_launch.name);
  check_device_canaries(who);
}
#else
XPILER_ENGINE_FN void run_kernel(const void* fn, const KernelCall& call, dim3 grid, dim3 block, size_t smem);
#endif

template <class... P>
struct KernelArgs {
  void (*fn)(P...);
  std::tuple<P...> params;
};

template <class... P>
void invoke_kernel(const void* d) {
  const auto* a = static_cast<const KernelArgs<P...>*>(d);
  std::apply(a->fn, a->params);
}

// One launch argument as the kernel's parameter type. An integer given for a pointer parameter was a null pointer
// constant where the source wrote it (`k<<<g, b>>>(out, 0, in)`: nvcc converts it as in a call; any other
// integer does not compile there), but forwarded here it is a plain int, which static_cast cannot make a pointer.
template <class P, class A>
inline P launch_argument(A&& a) {
  if constexpr (std::is_pointer_v<P> && std::is_integral_v<std::decay_t<A>>) {
    return reinterpret_cast<P>(static_cast<std::uintptr_t>(a));
  } else {
    return static_cast<P>(std::forward<A>(a));
  }
}

template <class... P>
void launch_held(void (*fn)(P...), const KernelArgs<P...>& args, dim3 grid, dim3 block, size_t smem) {
  if (record_file()) record_args(args.params, std::index_sequence_for<P...>{});
  KernelCall call{&invoke_kernel<P...>, &args};
  run_kernel(reinterpret_cast<const void*>(fn), call, grid, block, smem);
}

template <class... P>
void launch_copy(const void* held, const char*, dim3 grid, dim3 block, size_t smem) {
  const auto* args = static_cast<const KernelArgs<P...>*>(held);
  launch_held(args->fn, *args, grid, block, smem);
}

template <class... P>
struct Launcher {
  void (*fn)(P...);
  dim3 grid, block;
  size_t smem;
  StreamRecord* captured;  // a stream being captured: the launch becomes a node of its graph
  template <class... A>
  void operator()(A&&... a) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
    KernelArgs<P...> args{fn, std::tuple<P...>(launch_argument<P>(std::forward<A>(a))...)};
    if (captured) {
      capture_launch(captured, &launch_copy<P...>, new KernelArgs<P...>(std::move(args)),
                     &release_held<KernelArgs<P...>>, nullptr, grid, block, smem);
      return;
    }
    launch_held(fn, args, grid, block, smem);
  }
};

// `K<<<grid, block, smem, stream>>>(args)` is rewritten to `::xpiler::launch(K, grid, block, smem, stream)(args)`.
template <class... P, class S = int>
Launcher<P...> launch(void (*fn)(P...), dim3 grid, dim3 block, size_t smem = 0, S stream = S()) {
  return Launcher<P...>{fn, grid, block, smem, capturing_stream(stream)};
}

// A function template launched without template arguments (`k<<<g, b>>>(x)` with `template <class T>
// __global__ void k(T*)`): the rewrite wraps it in a generic lambda so the arguments deduce T, as nvcc does.
template <class F>
struct DeducedKernel {
  const char* name;
  F fn;
};
template <class F>
DeducedKernel<F> deduced_kernel(const char* name, F fn) { return DeducedKernel<F>{name, fn}; }

template <class F, class... A>
struct CallableArgs {
  F fn;
  std::tuple<A...> params;
};
template <class F, class... A>
void invoke_callable(const void* d) {
  const auto* a = static_cast<const CallableArgs<F, A...>*>(d);
  std::apply(a->fn, a->params);
}

template <class F, class... A>
void launch_held_callable(const char* name, const CallableArgs<F, A...>& args, dim3 grid, dim3 block, size_t smem) {
  if (record_file()) record_args(args.params, std::index_sequence_for<A...>{});
  KernelCall call{&invoke_callable<F, A...>, &args};
  set_next_kernel_name(name);
  run_kernel(nullptr, call, grid, block, smem);
}

template <class F, class... A>
void launch_copy_callable(const void* held, const char* name, dim3 grid, dim3 block, size_t smem) {
  launch_held_callable(name, *static_cast<const CallableArgs<F, A...>*>(held), grid, block, smem);
}

template <class F>
struct DeducedLauncher {
  DeducedKernel<F> kernel;
  dim3 grid, block;
  size_t smem;
  StreamRecord* captured;
  template <class... A>
  void operator()(A&&... a) const {
    CallableArgs<F, std::decay_t<A>...> args{kernel.fn, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
    if (captured) {
      using Held = CallableArgs<F, std::decay_t<A>...>;
      capture_launch(captured, &launch_copy_callable<F, std::decay_t<A>...>, new Held(std::move(args)),
                     &release_held<Held>, kernel.name, grid, block, smem);
      return;
    }
    launch_held_callable(kernel.name, args, grid, block, smem);
  }
};
template <class F, class S = int>
DeducedLauncher<F> launch(DeducedKernel<F> k, dim3 grid, dim3 block, size_t smem = 0, S stream = S()) {
  return DeducedLauncher<F>{k, grid, block, smem, capturing_stream(stream)};
}

// A pointer argument of any type: the generated entry wrapper passes buffers as these.
struct AnyPtr {
  void* p;
  template <class T>
  operator T*() const { return static_cast<T*>(p); }
};

}  // namespace xpiler
