// CUDA/HIP graphs on the runtime. Streams run their work when it is enqueued, so a graph is what defers it: its
// nodes (a kernel with its arguments copied when the node was made, a host function, a copy, a memset) run in
// dependency order, ties in the order they were added, when an instantiation of the graph is launched. Stream
// capture makes a stream (and the streams that wait on its events) add nodes to a graph instead of running
// the work; a node depends on what its stream did last and on the events the stream waited for, so a captured
// graph runs in the order the host code issued the work, which is one of the orders the GPU may take.
// The bodies are engine functions (linkage.h): a template used in an inline function's body is instantiated
// again at the end of every program that includes the header, and these made each build 0.15 s slower.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "linkage.h"
#include "types.h"

namespace xpiler {
// One node's work, shared by the graph and its instantiations (a graph may be destroyed before them).
struct GraphWork {
  int refs = 1;
  virtual ~GraphWork() = default;
  virtual void run() = 0;
};
template <class F>
struct GraphWorkOf final : GraphWork {
  F fn;
  explicit GraphWorkOf(F f) : fn(std::move(f)) {}
  void run() override { fn(); }
};
template <class F>
GraphWork* graph_work(F fn) { return new GraphWorkOf<F>(std::move(fn)); }

struct GraphRecord;
struct GraphNodeRecord {
  GraphWork* work;  // null for an empty node
  std::vector<GraphNodeRecord*> deps;
  const GraphRecord* owner;
  size_t index;  // its place among its graph's nodes
};
struct StreamRecord;
struct GraphRecord {
  std::vector<GraphNodeRecord*> nodes;   // in the order they were added
  std::vector<StreamRecord*> capturing;  // the streams whose work is captured into it
};
// An instantiated graph: its nodes' work in the order it runs (later changes to the graph do not reach it).
struct GraphExecRecord {
  std::vector<GraphWork*> runs;
  std::vector<const GraphNodeRecord*> sources;  // the node each run was instantiated from
};
struct StreamRecord {
  GraphRecord* capture;                 // the graph this stream's work goes to, or null: run it now
  std::vector<GraphNodeRecord*> tails;  // what the stream's next captured node depends on
};
struct EventRecord {
  double ms;
  GraphRecord* capture;  // recorded on a capturing stream: the nodes a stream waiting on it depends on
  std::vector<GraphNodeRecord*> after;
};

// A launch on a capturing stream: its arguments copied (``held``), launched by ``launch`` when the graph runs and
// released with the graph's last holder.
using HeldLaunch = void (*)(const void* held, const char* name, dim3 grid, dim3 block, size_t smem);
using HeldRelease = void (*)(void* held);
template <class T>
void release_held(void* held) { delete static_cast<T*>(held); }
// Kernels a graph node names by a type-erased address (`params.func = (void*)k`): the runtime's rewrite turns
// `(void*)k` into ::xpiler::void_pointer(k), which registers k's parameter types so a node can copy and pass
// its arguments.
using RegisteredLaunch = void (*)(const void* fn, dim3 grid, dim3 block, size_t smem, void** args);

#ifndef XPILER_ENGINE_EXTERN
// the legacy and per-thread default streams (null, 0x1, 0x2) as one record
XPILER_ENGINE_FN StreamRecord* stream_record(StreamRecord* s) {
  static StreamRecord default_stream{nullptr, {}};
  return reinterpret_cast<std::uintptr_t>(s) < 4096 ? &default_stream : s;
}
XPILER_ENGINE_FN GraphNodeRecord* graph_add(GraphRecord* g, GraphWork* work, GraphNodeRecord* const* deps, size_t n) {
  auto* node = new GraphNodeRecord{work, {}, g, g->nodes.size()};
  if (deps) node->deps.assign(deps, deps + n);
  g->nodes.push_back(node);
  return node;
}
XPILER_ENGINE_FN void graph_release(GraphWork* w) {
  if (w && --w->refs == 0) delete w;
}
XPILER_ENGINE_FN void graph_destroy(GraphRecord* g) {
  if (!g) return;
  for (GraphNodeRecord* node : g->nodes) {
    graph_release(node->work);
    delete node;
  }
  delete g;
}
XPILER_ENGINE_FN void capture_work(StreamRecord* s, GraphWork* work) {
  GraphNodeRecord* node = graph_add(s->capture, work, s->tails.data(), s->tails.size());
  s->tails.assign(1, node);
}
XPILER_ENGINE_FN void capture_launch(StreamRecord* s, HeldLaunch launch, void* held, HeldRelease release,
                                     const char* name, dim3 grid, dim3 block, size_t smem) {
  struct HeldLaunchWork final : GraphWork {
    HeldLaunch launch; void* held; HeldRelease release; const char* name; dim3 grid, block; size_t smem;
    HeldLaunchWork(HeldLaunch l, void* h, HeldRelease r, const char* n, dim3 g, dim3 b, size_t s)
        : launch(l), held(h), release(r), name(n), grid(g), block(b), smem(s) {}
    ~HeldLaunchWork() override { release(held); }
    void run() override { launch(held, name, grid, block, smem); }
  };
  capture_work(s, new HeldLaunchWork(launch, held, release, name, grid, block, smem));
}
// The order a launched graph runs in: dependencies first, otherwise the order nodes were added.
XPILER_ENGINE_FN GraphExecRecord* graph_instantiate(const GraphRecord* g) {
  const size_t n = g->nodes.size();
  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i)
    for (const GraphNodeRecord* d : g->nodes[i]->deps) {
      if (!d || d->owner != g || d->index == i) continue;
      ++pending[i];
      users[d->index].push_back(i);
    }
  std::vector<bool> done(n, false);
  auto* exec = new GraphExecRecord{};
  for (size_t taken = 0; taken < n; ++taken) {
    size_t next = n;  // the first node, in the order added, whose dependencies have all run
    for (size_t i = 0; i < n && next == n; ++i)
      if (!done[i] && pending[i] == 0) next = i;
    if (next == n) break;  // a cycle: CUDA refuses such a graph; what cannot run does not
    done[next] = true;
    if (GraphWork* w = g->nodes[next]->work) {
      ++w->refs;
      exec->runs.push_back(w);
      exec->sources.push_back(g->nodes[next]);
    }
    for (size_t u : users[next]) --pending[u];
  }
  return exec;
}
XPILER_ENGINE_FN void graph_exec_run(const GraphExecRecord* e) {
  for (GraphWork* w : e->runs) w->run();
}
XPILER_ENGINE_FN void graph_exec_destroy(GraphExecRecord* e) {
  if (!e) return;
  for (GraphWork* w : e->runs) graph_release(w);
  delete e;
}
// cudaGraphExecUpdate: the instantiation takes the graph's nodes (their new arguments) where the graph has as
// many nodes as it was instantiated from; false otherwise (the topology changed), the instantiation unchanged.
XPILER_ENGINE_FN bool graph_exec_update(GraphExecRecord* e, const GraphRecord* g) {
  if (!e || !g || g->nodes.size() != e->sources.size()) return false;
  GraphExecRecord* fresh = graph_instantiate(g);
  for (GraphWork* w : e->runs) graph_release(w);
  e->runs.swap(fresh->runs);
  e->sources.swap(fresh->sources);
  delete fresh;
  return true;
}
XPILER_ENGINE_FN bool stream_begin_capture(StreamRecord* stream) {
  StreamRecord* r = stream_record(stream);
  if (r->capture) return false;
  r->capture = new GraphRecord{};
  r->capture->capturing.push_back(r);
  r->tails.clear();
  return true;
}
XPILER_ENGINE_FN GraphRecord* stream_end_capture(StreamRecord* stream) {
  StreamRecord* r = stream_record(stream);
  GraphRecord* g = r->capture;
  if (!g) return nullptr;
  for (StreamRecord* joined : g->capturing) {
    joined->capture = nullptr;
    joined->tails.clear();
  }
  g->capturing.clear();
  return g;
}
// An event recorded on a capturing stream: a stream that waits on it joins the capture after those nodes.
XPILER_ENGINE_FN void event_record_capture(EventRecord* e, StreamRecord* capturing) {
  e->capture = capturing ? capturing->capture : nullptr;
  e->after = capturing ? capturing->tails : std::vector<GraphNodeRecord*>{};
}
XPILER_ENGINE_FN void stream_wait_event(StreamRecord* stream, EventRecord* e) {
  if (!e || !e->capture) return;
  StreamRecord* r = stream_record(stream);
  if (!r->capture) {
    r->capture = e->capture;
    e->capture->capturing.push_back(r);
    r->tails.clear();
  }
  r->tails.insert(r->tails.end(), e->after.begin(), e->after.end());
}
XPILER_ENGINE_FN StreamRecord* new_stream() { return new StreamRecord{nullptr, {}}; }
XPILER_ENGINE_FN void delete_stream(StreamRecord* s) { delete s; }
XPILER_ENGINE_FN EventRecord* new_event() { return new EventRecord{0, nullptr, {}}; }
XPILER_ENGINE_FN void delete_event(EventRecord* e) { delete e; }
XPILER_ENGINE_FN std::map<const void*, std::pair<RegisteredLaunch, std::vector<size_t>>>& kernel_registry() {
  static std::map<const void*, std::pair<RegisteredLaunch, std::vector<size_t>>> entries;
  return entries;
}
XPILER_ENGINE_FN void register_kernel(const void* fn, RegisteredLaunch launch, const size_t* sizes, size_t n) {
  kernel_registry()[fn] = {launch, std::vector<size_t>(sizes, sizes + n)};
}
// cudaLaunchKernel((void*)k, ...): false when k's address was never registered (its parameter types are unknown).
XPILER_ENGINE_FN bool launch_by_address(const void* fn, dim3 grid, dim3 block, size_t smem, void** args) {
  auto found = kernel_registry().find(fn);
  if (found == kernel_registry().end()) return false;
  found->second.first(fn, grid, block, smem, args);
  return true;
}
// A kernel node's work (its arguments copied now, as CUDA copies them); null when the kernel's address was never
// registered (its parameter types are unknown).
XPILER_ENGINE_FN GraphWork* kernel_work(const void* fn, dim3 grid, dim3 block, size_t smem, void** params) {
  auto found = kernel_registry().find(fn);
  if (found == kernel_registry().end()) return nullptr;
  struct KernelWork final : GraphWork {
    RegisteredLaunch launch; const void* fn; dim3 grid, block; size_t smem;
    std::vector<std::vector<char>> args;  // copied when the node was made, as CUDA copies them
    KernelWork(RegisteredLaunch l, const void* f, dim3 g, dim3 b, size_t s) : launch(l), fn(f), grid(g), block(b), smem(s) {}
    void run() override {
      std::vector<std::vector<char>> copy = args;  // a kernel may not change the node's own copy
      std::vector<void*> pointers;
      for (auto& a : copy) pointers.push_back(a.data());
      launch(fn, grid, block, smem, pointers.data());
    }
  };
  auto* work = new KernelWork(found->second.first, fn, grid, block, smem);
  for (size_t i = 0; i < found->second.second.size(); ++i) {
    const char* arg = static_cast<const char*>(params[i]);
    work->args.emplace_back(arg, arg + found->second.second[i]);
  }
  return work;
}
// A kernel node: false when the kernel's address was never registered.
XPILER_ENGINE_FN bool graph_add_kernel(GraphNodeRecord** node, GraphRecord* g, GraphNodeRecord* const* deps, size_t n,
                                       const void* fn, dim3 grid, dim3 block, size_t smem, void** params) {
  GraphWork* work = g ? kernel_work(fn, grid, block, smem, params) : nullptr;
  if (!work) return false;
  *node = graph_add(g, work, deps, n);
  return true;
}
// New arguments for a kernel node of an instantiated graph (the graph's own node keeps its arguments).
XPILER_ENGINE_FN bool graph_exec_set_kernel(GraphExecRecord* e, const GraphNodeRecord* node, const void* fn, dim3 grid,
                                            dim3 block, size_t smem, void** params) {
  for (size_t i = 0; e && i < e->sources.size(); ++i) {
    if (e->sources[i] != node) continue;
    GraphWork* work = kernel_work(fn, grid, block, smem, params);
    if (!work) return false;
    graph_release(e->runs[i]);
    e->runs[i] = work;
    return true;
  }
  return false;
}
// A copy of a graph (a clone, or a child graph's own copy): the same work, the dependencies between the copies.
XPILER_ENGINE_FN GraphRecord* graph_clone(const GraphRecord* g) {
  auto* copy = new GraphRecord{};
  for (const GraphNodeRecord* node : g->nodes) {
    if (node->work) ++node->work->refs;
    copy->nodes.push_back(new GraphNodeRecord{node->work, {}, copy, node->index});
  }
  for (const GraphNodeRecord* node : g->nodes)
    for (const GraphNodeRecord* d : node->deps)
      if (d && d->owner == g) copy->nodes[node->index]->deps.push_back(copy->nodes[d->index]);
  return copy;
}
XPILER_ENGINE_FN GraphNodeRecord* graph_add_host(GraphRecord* g, GraphNodeRecord* const* deps, size_t n,
                                                 void (*fn)(void*), void* data) {
  struct HostWork final : GraphWork {
    void (*fn)(void*); void* data;
    HostWork(void (*f)(void*), void* d) : fn(f), data(d) {}
    void run() override { fn(data); }
  };
  return graph_add(g, new HostWork(fn, data), deps, n);
}
XPILER_ENGINE_FN void graph_add_dependencies(GraphNodeRecord* const* from, GraphNodeRecord* const* to, size_t n) {
  for (size_t i = 0; i < n; ++i) to[i]->deps.push_back(from[i]);
}
XPILER_ENGINE_FN size_t graph_nodes(const GraphRecord* g, GraphNodeRecord** nodes, size_t room) {
  for (size_t i = 0; nodes && i < room && i < g->nodes.size(); ++i) nodes[i] = g->nodes[i];
  return g->nodes.size();
}
#else
XPILER_ENGINE_FN StreamRecord* stream_record(StreamRecord* s);
XPILER_ENGINE_FN GraphNodeRecord* graph_add(GraphRecord* g, GraphWork* work, GraphNodeRecord* const* deps, size_t n);
XPILER_ENGINE_FN void graph_release(GraphWork* w);
XPILER_ENGINE_FN void graph_destroy(GraphRecord* g);
XPILER_ENGINE_FN void capture_work(StreamRecord* s, GraphWork* work);
XPILER_ENGINE_FN void capture_launch(StreamRecord* s, HeldLaunch launch, void* held, HeldRelease release,
                                     const char* name, dim3 grid, dim3 block, size_t smem);
XPILER_ENGINE_FN GraphExecRecord* graph_instantiate(const GraphRecord* g);
XPILER_ENGINE_FN void graph_exec_run(const GraphExecRecord* e);
XPILER_ENGINE_FN void graph_exec_destroy(GraphExecRecord* e);
XPILER_ENGINE_FN bool graph_exec_update(GraphExecRecord* e, const GraphRecord* g);
XPILER_ENGINE_FN bool stream_begin_capture(StreamRecord* stream);
XPILER_ENGINE_FN GraphRecord* stream_end_capture(StreamRecord* stream);
XPILER_ENGINE_FN void event_record_capture(EventRecord* e, StreamRecord* capturing);
XPILER_ENGINE_FN void stream_wait_event(StreamRecord* stream, EventRecord* e);
XPILER_ENGINE_FN StreamRecord* new_stream();
XPILER_ENGINE_FN void delete_stream(StreamRecord* s);
XPILER_ENGINE_FN EventRecord* new_event();
XPILER_ENGINE_FN void delete_event(EventRecord* e);
XPILER_ENGINE_FN std::map<const void*, std::pair<RegisteredLaunch, std::vector<size_t>>>& kernel_registry();
XPILER_ENGINE_FN void register_kernel(const void* fn, RegisteredLaunch launch, const size_t* sizes, size_t n);
XPILER_ENGINE_FN bool launch_by_address(const void* fn, dim3 grid, dim3 block, size_t smem, void** args);
XPILER_ENGINE_FN GraphWork* kernel_work(const void* fn, dim3 grid, dim3 block, size_t smem, void** params);
XPILER_ENGINE_FN bool graph_exec_set_kernel(GraphExecRecord* e, const GraphNodeRecord* node, const void* fn, dim3 grid,
                                            dim3 block, size_t smem, void** params);
XPILER_ENGINE_FN GraphRecord* graph_clone(const GraphRecord* g);
XPILER_ENGINE_FN bool graph_add_kernel(GraphNodeRecord** node, GraphRecord* g, GraphNodeRecord* const* deps, size_t n,
                                       const void* fn, dim3 grid, dim3 block, size_t smem, void** params);
XPILER_ENGINE_FN GraphNodeRecord* graph_add_host(GraphRecord* g, GraphNodeRecord* const* deps, size_t n,
                                                 void (*fn)(void*), void* data);
XPILER_ENGINE_FN void graph_add_dependencies(GraphNodeRecord* const* from, GraphNodeRecord* const* to, size_t n);
XPILER_ENGINE_FN size_t graph_nodes(const GraphRecord* g, GraphNodeRecord** nodes, size_t room);
#endif

// The stream a launch or an asynchronous call names, when it is being captured (an integer stream never is).
template <class S>
StreamRecord* capturing_stream(const S& s) {
  if constexpr (std::is_convertible_v<S, StreamRecord*> && !std::is_integral_v<S>) {
    StreamRecord* r = stream_record(static_cast<StreamRecord*>(s));
    return r->capture ? r : nullptr;
  } else {
    return nullptr;
  }
}
}  // namespace xpiler
