// SIMT-on-CPU execution engine: blocks over OS threads, threads of a block as fibers.
//
// Every block starts on the fast path: one "driver" fiber calls the kernel for each thread in turn, a plain
// loop. The first barrier or warp collective any thread reaches promotes the block: the driver fiber becomes
// that thread's fiber, the remaining threads get fibers of their own, and a round-robin scheduler runs them.
// Threads that finished before the promotion never reached a barrier, which is a legal interleaving.
// After each scheduler sweep every live thread is blocked; warp rounds complete first (each lane reads the
// values deposited by lanes at the same call site), then the block barrier releases when every live thread
// waits on it at the same site. Anything else is a deadlock, reported with the kernel name.
#pragma once
#include <sys/mman.h>
#include <signal.h>
#include <unistd.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <cxxabi.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef XPILER_UCONTEXT
#include <ucontext.h>
#else
#include <boost/context/detail/fcontext.hpp>
#endif

#include "types.h"
#include "linkage.h"

// The builtins are variables, not macros, so host code may name its own locals gridDim or blockDim as CUDA
// allows; the engine stores the running lane's and block's values into them before any of its code runs.
inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

#ifndef XPILER_WARP_SIZE
#define XPILER_WARP_SIZE 32
#endif
#ifndef XPILER_STACK_BYTES
#define XPILER_STACK_BYTES 131072
#endif

namespace xpiler {

constexpr int kWarpSize = XPILER_WARP_SIZE;
static_assert(kWarpSize == 32 || kWarpSize == 64, "warp size must be 32 or 64");
using lanemask_t = unsigned long long;
constexpr lanemask_t kFullWarp = kWarpSize == 64 ? ~0ull : 0xffffffffull;

constexpr int kExitDeadlock = 86;
constexpr int kExitFault = 87;
constexpr int kExitLaunch = 88;

// kAtObject: waiting on a block-scope object another lane completes (cuda::barrier's phase), see wait_object
enum LaneState : uint8_t { kNotStarted, kRunnable, kAtBarrier, kAtWarp, kAtObject, kDone };
using ObjectReady = bool (*)(const void* object, unsigned long long token);

struct Context {
#ifdef XPILER_UCONTEXT
  ucontext_t uc;
#else
  boost::context::detail::fcontext_t fc = nullptr;
#endif
};

struct Lane {
  uint3 idx;
  unsigned linear;
  uint8_t state;
  int site;
  int pred;
  unsigned round;
  int stack;
  Context ctx;
  ObjectReady ready;  // kAtObject: whether `object` has moved past `token`
  const void* object;
  unsigned long long token;
};

// Which warp collective a lane called: lanes at different call sites only meet in one collective when they
// call the same intrinsic with the same mask (PTX: "the same qualifiers and the same membermask").
enum CollectiveOp : uint8_t {
  kOpShflIdx, kOpShflUp, kOpShflDown, kOpShflXor, kOpBallot, kOpAny, kOpAll, kOpActiveMask, kOpSyncWarp,
  kOpMatchAny, kOpReduce, kOpLockstep,
};
// Legacy forms without a mask (`__shfl`, `__ballot`, `__any`, HIP's usual spelling): the lanes that are
// there take part, so such a collective never waits for anyone.
constexpr uint8_t kImplicitMask = 0x80;

struct WarpRound {
  lanemask_t arrived;
  uint64_t value[kWarpSize];
  lanemask_t mask[kWarpSize];
  int site[kWarpSize];
  uint8_t op[kWarpSize];
};

struct WarpState {
  unsigned round;
  WarpRound buf[2];
};

struct KernelCall {
  void (*invoke)(const void*);
  const void* data;
};

struct Worker;
// Not initial-exec: a library with any static-TLS access must fit all its TLS (the __shared__ arrays) there.
inline thread_local Worker* tls_worker = nullptr;

struct LaunchInfo {
  char name[256];
  dim3 grid, block;
  size_t shared_bytes;
};
inline LaunchInfo g_launch;  // the kernel running now (fault/deadlock reports)
// A cooperative launch (cudaLaunchCooperativeKernel): every block runs on its own OS thread, so all are resident
// at once and grid.sync() is a barrier over them; a block that has finished counts as arrived at every later one.
struct GridBarrier {
  std::mutex lock;
  std::condition_variable released;
  unsigned long long expected = 0, arrived = 0, generation = 0;
};
inline GridBarrier g_grid_barrier;
inline bool g_cooperative = false;       // the launch running now is cooperative
inline bool g_next_cooperative = false;  // set by the cooperative launch API for the launch it starts
constexpr unsigned long long kMaxCooperativeBlocks = 1024;  // OS threads one cooperative launch may take
// Counts the blocks this OS thread has started, across launches: a shared array whose stamp differs from
// the running block's serial has not been filled for this block yet.
inline thread_local unsigned long long tls_block_serial = 0;
inline int g_status_fd = -2;

[[noreturn]] inline void die(int code, const char* msg) {
  fflush(stdout);
  (void)!write(2, msg, strlen(msg));
  _exit(code);
}

struct Worker {
  Lane* cur = nullptr;
  uint3 block_idx{0, 0, 0};
  dim3 block_dim, grid_dim;
  unsigned nthreads = 0;
  std::vector<Lane> lanes;
  std::vector<WarpState> warps;
  std::vector<char*> stacks;     // all stacks this worker owns
  std::vector<int> free_stacks;  // indices into stacks
  char* dyn_smem = nullptr;
  std::vector<max_align_t> dyn_smem_store;
  unsigned long long block_serial = 0;  // this block's number on this OS thread (see tls_block_serial)
  unsigned long long dyn_smem_stamp = 0;
  bool fiber_mode = false;
  bool driver_done = false;
  int driver_stack = -1;
  Context sched;
  const KernelCall* call = nullptr;
  int bar_count = 0, bar_and = 0, bar_or = 0;
  char* altstack = nullptr;

  ~Worker() {
    for (char* s : stacks) munmap(s, XPILER_STACK_BYTES + 4096);
    free(altstack);
  }

  int take_stack() {
    if (free_stacks.empty()) {
      // One guard page below each stack turns an overflow into a reported fault.
      char* base = static_cast<char*>(
          mmap(nullptr, XPILER_STACK_BYTES + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      if (base == MAP_FAILED) die(kExitFault, "xpiler: out of memory for thread stacks\n");
      mprotect(base, 4096, PROT_NONE);
      stacks.push_back(base);
      return static_cast<int>(stacks.size() - 1);
    }
    int s = free_stacks.back();
    free_stacks.pop_back();
    return s;
  }
  void give_stack(int s) { free_stacks.push_back(s); }
  char* stack_top(int s) { return stacks[s] + 4096 + XPILER_STACK_BYTES; }
};

// ---- uninitialised shared memory -------------------------------------------------------------------
// On a GPU, shared memory nobody wrote in this block holds garbage. Zero-filled storage would let a kernel
// that reads such slots pass here and fail on hardware, so every block starts with its shared memory
// (static arrays and the dynamic buffer) filled with 0xFF bytes: NaN for float/half/double, -1 for ints.
// XPILER_SHARED_FILL=zero restores zero-filled storage; the fill happens lazily, the first time a thread
// of the block executes the array's declaration (file-scope arrays: at block start).
inline int shared_fill_byte() {
  static const int v = [] {
    const char* e = getenv("XPILER_SHARED_FILL");
    if (!e || !*e || strcmp(e, "poison") == 0) return 0xFF;
    if (strcmp(e, "zero") == 0) return 0;
    die(kExitLaunch, "xpiler: XPILER_SHARED_FILL must be 'poison' or 'zero'\n");
  }();
  return v;
}

template <class T>
inline void poison_shared(T& obj) {
  // A polymorphic object's vtable pointer is not data a kernel could read as garbage: leave such objects.
  if constexpr (!std::is_polymorphic_v<std::remove_all_extents_t<T>>)
    memset(const_cast<void*>(static_cast<const volatile void*>(&obj)), shared_fill_byte(), sizeof(T));
}

// Called right after a function-scope `__shared__` declaration (inserted by the rewrite): the first thread
// of each block to pass the declaration fills the arrays; no thread can name them before that point.
template <class... T>
inline void fresh_shared(unsigned long long& stamp, T&... objs) {
  Worker* w = tls_worker;
  if (w == nullptr || stamp == w->block_serial) return;
  stamp = w->block_serial;
  (poison_shared(objs), ...);
}

// File-scope `__shared__` arrays have no declaration a thread executes: the rewrite registers a filler
// for each, and every block runs them all before its first thread starts.
using SharedFiller = void (*)();
inline std::vector<SharedFiller>& file_scope_shared() {
  static std::vector<SharedFiller> fillers;
  return fillers;
}
inline bool register_shared(SharedFiller f) {
  file_scope_shared().push_back(f);
  return true;
}

// ---- context switching -------------------------------------------------------------------------------
#ifdef XPILER_UCONTEXT
inline void make_context(Context& c, Worker* w, int stack, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = w->stacks[stack] + 4096;
  c.uc.uc_stack.ss_size = XPILER_STACK_BYTES;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
inline void resume(Worker* w, Context& c) { swapcontext(&w->sched.uc, &c.uc); }
inline void yield_to_scheduler(Worker* w) { swapcontext(&w->cur->ctx.uc, &w->sched.uc); }
[[noreturn]] inline void leave_forever(Worker* w) {
  setcontext(&w->sched.uc);
  __builtin_unreachable();
}
#define XPILER_ENTRY(name) void name()
#define XPILER_ENTRY_PROLOGUE(w) (void)0
#else
namespace bctx = boost::context::detail;
inline void make_context(Context& c, Worker* w, int stack, void (*entry)(bctx::transfer_t)) {
  c.fc = bctx::make_fcontext(w->stack_top(stack), XPILER_STACK_BYTES, entry);
}
inline void resume(Worker* w, Context& c) {
  bctx::transfer_t t = bctx::jump_fcontext(c.fc, nullptr);
  // Whoever jumped back is the lane that was running (after a promotion: the driver, now that lane).
  w->cur->ctx.fc = t.fctx;
}
inline void yield_to_scheduler(Worker* w) {
  bctx::transfer_t t = bctx::jump_fcontext(w->sched.fc, nullptr);
  w->sched.fc = t.fctx;
}
[[noreturn]] inline void leave_forever(Worker* w) {
  bctx::jump_fcontext(w->sched.fc, nullptr);
  __builtin_unreachable();
}
#define XPILER_ENTRY(name) void name(::xpiler::bctx::transfer_t xpiler_t)
#define XPILER_ENTRY_PROLOGUE(w) ((w)->sched.fc = xpiler_t.fctx)
#endif

// ---- fiber entries ------------------------------------------------------------------------------------
// Every switch to a lane goes through here: the lane and its threadIdx become current together.
inline void enter_lane(Worker* w, Lane* lane) {
  w->cur = lane;
  ::threadIdx = lane->idx;
}

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN XPILER_ENTRY(lane_entry) {
  Worker* w = tls_worker;
  XPILER_ENTRY_PROLOGUE(w);
  w->call->invoke(w->call->data);
  w = tls_worker;
  w->cur->state = kDone;
  w->give_stack(w->cur->stack);
  leave_forever(w);
}
#else
XPILER_ENGINE_FN XPILER_ENTRY(lane_entry);
#endif

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN XPILER_ENTRY(driver_entry) {
  Worker* w = tls_worker;
  XPILER_ENTRY_PROLOGUE(w);
  for (unsigned i = 0; i < w->nthreads; ++i) {
    enter_lane(w, &w->lanes[i]);
    w->cur->state = kRunnable;
    w->call->invoke(w->call->data);
    w = tls_worker;
    w->cur->state = kDone;
    if (w->fiber_mode) {  // promoted: this fiber belonged to lane i, which has finished now
      w->give_stack(w->cur->stack);
      leave_forever(w);
    }
  }
  w->driver_done = true;
  leave_forever(w);
}
#else
XPILER_ENGINE_FN XPILER_ENTRY(driver_entry);
#endif

inline bool force_fibers() {
  static const bool v = [] {
    const char* e = getenv("XPILER_FORCE_FIBERS");
    return e && *e && *e != '0';
  }();
  return v;
}

[[noreturn]] inline void report_deadlock(Worker* w, const char* why) {
  char msg[1024];
  snprintf(msg, sizeof msg, "xpiler: deadlock in kernel %s: block (%u,%u,%u): %s\n", g_launch.name,
           w->block_idx.x, w->block_idx.y, w->block_idx.z, why);
  die(kExitDeadlock, msg);
}

// Called by a lane before any collective: on the fast path, turn the block into fibers first.
inline void ensure_fiber_mode(Worker* w) {
  if (!w->fiber_mode) {
    w->fiber_mode = true;
    w->cur->stack = w->driver_stack;  // the driver fiber is this lane's fiber from now on
  }
}

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void complete_barrier(Worker* w) {
  int site = -1, count = 0, all = 1, any = 0;
  unsigned waiting = 0, done = 0;
  int other_site = -1;
  unsigned at_site = 0;
  for (unsigned i = 0; i < w->nthreads; ++i) {
    Lane& l = w->lanes[i];
    if (l.state == kDone) {
      ++done;
      continue;
    }
    ++waiting;
    if (site < 0) site = l.site;
    if (l.site == site) {
      ++at_site;
    } else {
      other_site = l.site;
    }
    count += l.pred != 0;
    all &= l.pred != 0;
    any |= l.pred != 0;
  }
  if (other_site >= 0) {
    char why[256];
    snprintf(why, sizeof why,
             "__syncthreads in divergent code: %u threads wait at line %d, %u at line %d (%u exited)", at_site,
             site, waiting - at_site, other_site, done);
    report_deadlock(w, why);
  }
  w->bar_count = count;
  w->bar_and = all;
  w->bar_or = any;
  for (unsigned i = 0; i < w->nthreads; ++i)
    if (w->lanes[i].state == kAtBarrier) w->lanes[i].state = kRunnable;
}
#else
XPILER_ENGINE_FN void complete_barrier(Worker* w);
#endif

// Which lanes of a warp round may proceed: every group of lanes at one call site whose masks name only
// lanes that are at that site or have exited (a converged collective). Exited lanes do not count: PTX waits
// for the "non-exited threads" of the mask. Returns 0 when no group is complete.
// Lanes at a legacy collective without a mask wait while other lanes of the warp are at a lockstep step (a
// statement through a volatile pointer inside a branch they did not take): those lanes are behind, in the
// branch, and a wavefront that has left the branch runs the collective with them (HIP's `__ballot` after an
// `if` that some lanes took sees all of them). Released alone, the collective would leave them a step behind.
// Of the lanes at legacy maskless collectives, only those at the earliest line go first: the others are
// ahead of them (they skipped a branch the earlier ones are in), and on a GPU the wavefront finishes the branch
// and meets them at the later collective with every lane (HIP's `if (t) r = __all(p); ... __any(q)`: lane 0 skips
// the first vote, and its `__any` must see the other lanes). Earliest by line: the one at the smallest line is
// always released, so no group waits forever.
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN lanemask_t complete_groups(const WarpRound& r, lanemask_t alive) {
  lanemask_t remaining = r.arrived, release = 0, implicit = 0, later = 0;
  bool lockstep_pending = false;
  int first_implicit_site = INT_MAX;
  for (int lane = 0; lane < kWarpSize; ++lane)
    if ((r.arrived >> lane & 1) && (r.op[lane] & kImplicitMask) && (r.op[lane] & ~kImplicitMask) != kOpActiveMask &&
        r.op[lane] != kOpLockstep && r.site[lane] < first_implicit_site)
      first_implicit_site = r.site[lane];
  while (remaining) {
    const int lead = __builtin_ctzll(remaining);
    lanemask_t group = 0, need = 0;
    for (int lane = lead; lane < kWarpSize; ++lane)
      if ((remaining >> lane & 1) && r.site[lane] == r.site[lead]) {
        group |= 1ull << lane;
        if (!(r.op[lane] & kImplicitMask)) need |= r.mask[lane];
      }
    if ((need & alive & ~group) == 0) release |= group;
    if (r.op[lead] == kOpLockstep) lockstep_pending = true;
    // (not __activemask, CUDA's one maskless form: a lane spinning on a volatile flag another lane sets after
    // calling it would wait forever, where independent thread scheduling lets both go on)
    else if ((r.op[lead] & kImplicitMask) && (r.op[lead] & ~kImplicitMask) != kOpActiveMask) {
      implicit |= group;
      if (r.site[lead] > first_implicit_site) later |= group;
    }
    remaining &= ~group;
  }
  return (lockstep_pending ? release & ~implicit : release) & ~later;
}
#else
XPILER_ENGINE_FN lanemask_t complete_groups(const WarpRound& r, lanemask_t alive);
#endif

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN const char* collective_name(uint8_t op) {
  static const char* const names[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
                                      "__ballot_sync", "__any_sync", "__all_sync", "__activemask",
                                      "__syncwarp", "__match_any_sync", "__reduce_*_sync",
                                      "a warp-synchronous step"};
  const unsigned i = op & ~kImplicitMask;
  return i < sizeof names / sizeof names[0] ? names[i] : "warp collective";
}
#else
XPILER_ENGINE_FN const char* collective_name(uint8_t op);
#endif

// No group of the warp can complete: some lane waits for a lane of its mask that is alive but somewhere
// else. That lane is at a block barrier (which cannot complete while this warp waits) or at another warp
// collective. On hardware this is a deadlock or garbage, so it is reported as a deadlock, except when every
// waiting lane calls the same intrinsic with the same mask from different call sites: since sm_70 those
// lanes meet in one collective, and they are run as one here.
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void resolve_divergent_collective(Worker* w, WarpRound& r, unsigned first, lanemask_t alive) {
  const int lead = __builtin_ctzll(r.arrived);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!(r.arrived >> lane & 1) || (r.op[lane] & kImplicitMask)) continue;
    const lanemask_t missing = r.mask[lane] & alive & ~r.arrived;
    const bool mismatch = r.op[lane] != r.op[lead] || r.mask[lane] != r.mask[lead];
    if (!missing && !mismatch) continue;
    char why[512];
    const Lane& me = w->lanes[first + lane];
    if (missing) {
      const int other = __builtin_ctzll(missing);
      const Lane& o = w->lanes[first + other];
      snprintf(why, sizeof why,
               "%s at line %d (mask 0x%llx) in divergent code: thread (%u,%u,%u) waits for lane %d (thread "
               "(%u,%u,%u)), which is at __syncthreads at line %d",
               collective_name(r.op[lane]), r.site[lane], r.mask[lane], me.idx.x, me.idx.y, me.idx.z, other,
               o.idx.x, o.idx.y, o.idx.z, o.site);
    } else {
      snprintf(why, sizeof why,
               "%s at line %d (mask 0x%llx) in divergent code: lanes of its mask are at %s at line %d (mask "
               "0x%llx) instead",
               collective_name(r.op[lane]), r.site[lane], r.mask[lane], collective_name(r.op[lead]), r.site[lead],
               r.mask[lead]);
    }
    report_deadlock(w, why);
  }
  for (int lane = 0; lane < kWarpSize; ++lane)
    if (r.arrived >> lane & 1) r.site[lane] = r.site[lead];
}
#else
XPILER_ENGINE_FN void resolve_divergent_collective(Worker* w, WarpRound& r, unsigned first, lanemask_t alive);
#endif

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN lanemask_t lanes_to_release(Worker* w, WarpRound& r, unsigned first) {
  lanemask_t alive = 0;
  for (int lane = 0; lane < kWarpSize && first + lane < w->nthreads; ++lane)
    if (w->lanes[first + lane].state != kDone) alive |= 1ull << lane;
  const lanemask_t release = complete_groups(r, alive);
  if (release) return release;
  resolve_divergent_collective(w, r, first, alive);
  return r.arrived;
}
#else
XPILER_ENGINE_FN lanemask_t lanes_to_release(Worker* w, WarpRound& r, unsigned first);
#endif

// After a sweep that released no warp: false when a lane waiting on an object may go on (the next sweep runs
// it); true when none waits. A lane whose object cannot complete (every other lane has exited or waits at a
// barrier or on an object) is a deadlock on a GPU too.
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN bool objects_settled(Worker* w) {
  const Lane* stuck = nullptr;
  unsigned at_barrier = 0, waiting = 0, done = 0;
  for (unsigned i = 0; i < w->nthreads; ++i) {
    const Lane& l = w->lanes[i];
    if (l.state == kAtObject) {
      if (l.ready(l.object, l.token)) return false;
      if (stuck == nullptr) stuck = &l;
      ++waiting;
    } else if (l.state == kAtBarrier) {
      ++at_barrier;
    } else if (l.state == kDone) {
      ++done;
    }
  }
  if (stuck == nullptr) return true;
  char why[384];
  snprintf(why, sizeof why,
           "thread (%u,%u,%u) waits at line %d for a barrier phase that cannot complete: %u threads wait on "
           "barrier objects, %u at __syncthreads, %u have exited",
           stuck->idx.x, stuck->idx.y, stuck->idx.z, stuck->site, waiting, at_barrier, done);
  report_deadlock(w, why);
}
#else
XPILER_ENGINE_FN bool objects_settled(Worker* w);
#endif

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void run_sweeps(Worker* w) {
  for (;;) {
    bool alive = false;
    for (unsigned i = 0; i < w->nthreads; ++i) {
      Lane& l = w->lanes[i];
      if (l.state == kNotStarted) {
        l.stack = w->take_stack();
        make_context(l.ctx, w, l.stack, lane_entry);
        l.state = kRunnable;
      }
      if (l.state == kAtObject && l.ready(l.object, l.token)) l.state = kRunnable;
      if (l.state == kRunnable) {
        enter_lane(w, &l);
        resume(w, l.ctx);
      }
      alive |= l.state != kDone;
    }
    if (!alive) return;
    bool released = false;
    for (WarpState& ws : w->warps) {
      WarpRound& r = ws.buf[ws.round & 1];
      if (!r.arrived) continue;
      const unsigned first = static_cast<unsigned>(&ws - w->warps.data()) * kWarpSize;
      const lanemask_t release = lanes_to_release(w, r, first);
      // Lanes not released are carried into the next round (values, masks and sites move with them);
      // released lanes read this round's buffer, which is not reused before they have all run again.
      WarpRound& next = ws.buf[(ws.round + 1) & 1];
      next.arrived = 0;
      for (int lane = 0; lane < kWarpSize; ++lane) {
        if (!(r.arrived >> lane & 1)) continue;
        Lane& l = w->lanes[first + lane];
        if (release >> lane & 1) {
          l.state = kRunnable;
        } else {
          next.value[lane] = r.value[lane];
          next.mask[lane] = r.mask[lane];
          next.site[lane] = r.site[lane];
          next.op[lane] = r.op[lane];
          next.arrived |= 1ull << lane;
          l.round = ws.round + 1;
        }
      }
      ++ws.round;
      released = true;
    }
    if (!released && !objects_settled(w)) continue;
    if (!released) complete_barrier(w);
  }
}
#else
XPILER_ENGINE_FN void run_sweeps(Worker* w);
#endif

#ifndef XPILER_ENGINE_EXTERN
// One block's thread 0 at grid.sync() (its block at a barrier around it): wait for every block still running.
XPILER_ENGINE_FN void grid_barrier_wait() {
  std::unique_lock<std::mutex> hold(g_grid_barrier.lock);
  const unsigned long long generation = g_grid_barrier.generation;
  if (++g_grid_barrier.arrived >= g_grid_barrier.expected) {
    g_grid_barrier.arrived = 0;
    ++g_grid_barrier.generation;
    g_grid_barrier.released.notify_all();
    return;
  }
  g_grid_barrier.released.wait(hold, [&] { return g_grid_barrier.generation != generation; });
}
// A block of a cooperative launch has finished: the barriers to come wait for one block fewer.
XPILER_ENGINE_FN void grid_barrier_leave() {
  std::lock_guard<std::mutex> hold(g_grid_barrier.lock);
  --g_grid_barrier.expected;
  if (g_grid_barrier.arrived > 0 && g_grid_barrier.arrived >= g_grid_barrier.expected) {
    g_grid_barrier.arrived = 0;
    ++g_grid_barrier.generation;
    g_grid_barrier.released.notify_all();
  }
}
#else
XPILER_ENGINE_FN void grid_barrier_wait();
XPILER_ENGINE_FN void grid_barrier_leave();
#endif

#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN void run_block(Worker* w, const KernelCall* call, uint3 bidx) {
  w->block_idx = bidx;
  w->block_serial = ++tls_block_serial;
  ::blockIdx = bidx;
  ::blockDim = w->block_dim;
  ::gridDim = w->grid_dim;
  for (SharedFiller f : file_scope_shared()) f();
  w->call = call;
  const dim3 b = w->block_dim;
  unsigned n = w->nthreads;
  for (unsigned i = 0; i < n; ++i) {
    Lane& l = w->lanes[i];
    l.idx = uint3{i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
    l.linear = i;
    l.state = kNotStarted;
    l.stack = -1;
  }
  for (WarpState& ws : w->warps) {
    ws.round = 0;
    ws.buf[0].arrived = 0;
    ws.buf[1].arrived = 0;
  }
  if (force_fibers()) {
    w->fiber_mode = true;
    run_sweeps(w);
    return;
  }
  w->fiber_mode = false;
  w->driver_done = false;
  w->driver_stack = w->take_stack();
  Context driver;
  make_context(driver, w, w->driver_stack, driver_entry);
  enter_lane(w, &w->lanes[0]);
  resume(w, driver);
  if (w->driver_done) {
    w->give_stack(w->driver_stack);
    return;
  }
  run_sweeps(w);
}
#else
XPILER_ENGINE_FN void run_block(Worker* w, const KernelCall* call, uint3 bidx);
#endif

}  // namespace xpiler
