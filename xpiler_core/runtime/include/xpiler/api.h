// The host runtime API (device memory is host memory; streams and events are synchronous).
// XPILER_RUNTIME_API(P) spells the whole API with prefix P, so `cuda*` and `hip*` are the same code.
#pragma once
#include <cstdlib>
#include <cstring>
#include <chrono>

#include "simt.h"
#include "cuda_enums.h"

namespace xpiler {
inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline int take_last_error() { int e = g_last_error; g_last_error = 0; return e; }
inline const char* error_name(int e) {
  switch (e) {
#define XP_ERROR_NAME(name, value) case value: return #name;
    XPILER_CUDA_ERRORS(XP_ERROR_NAME)
#undef XP_ERROR_NAME
    default: return "ErrorUnknown";
  }
}
inline const char* error_string(int e) {
  switch (e) {
    case 0: return "no error";
    case 1: return "invalid argument";
    case 2: return "out of memory";
    case 9: return "invalid configuration argument";
    default: return "unknown error";
  }
}
// Device attributes this runtime answers, in CUDA's numbering (HIP's names map onto it).
enum DeviceAttribute {
#define XP_ATTR(name, value) kAttr##name = value,
  XPILER_CUDA_DEVICE_ATTRS(XP_ATTR)
#undef XP_ATTR
};
#ifndef XPILER_ENGINE_EXTERN
XPILER_ENGINE_FN int device_attribute(int attr) {
  switch (attr) {
    case kAttrMaxThreadsPerBlock: case kAttrMaxBlockDimX: case kAttrMaxBlockDimY: return 1024;
    case kAttrMaxBlockDimZ: return 64;
    case kAttrMaxGridDimX: return 2147483647;
    case kAttrMaxGridDimY: case kAttrMaxGridDimZ: return 65535;
    case kAttrMaxSharedMemoryPerBlock: return 48 * 1024;
    case kAttrMaxSharedMemoryPerBlockOptin: case kAttrMaxSharedMemoryPerMultiprocessor: return 164 * 1024;
    case kAttrTotalConstantMemory: return 65536;
    case kAttrWarpSize: return XPILER_WARP_SIZE;
    case kAttrMaxRegistersPerBlock: case kAttrMaxRegistersPerMultiprocessor: return 65536;
    case kAttrClockRate: case kAttrMemoryClockRate: return 1000000;
    case kAttrMultiProcessorCount: return static_cast<int>(os_threads());
    case kAttrL2CacheSize: return 1 << 22;
    case kAttrMaxThreadsPerMultiProcessor: return 2048;
    case kAttrComputeCapabilityMajor: return 8;
    case kAttrComputeCapabilityMinor: return 0;
    case kAttrConcurrentKernels: case kAttrUnifiedAddressing: case kAttrManagedMemory: case kAttrCooperativeLaunch:
    case kAttrCanMapHostMemory: case kAttrPageableMemoryAccess: case kAttrConcurrentManagedAccess: return 1;
    default: return 0;
  }
}
#else
XPILER_ENGINE_FN int device_attribute(int attr);
#endif
// cudaLaunchKernel / hipLaunchKernel with a typed kernel pointer: unpack the void* argument array.
template <class... K, size_t... I>
inline void launch_with_arg_array(void (*f)(K...), dim3 g, dim3 b, void** args, size_t smem, std::index_sequence<I...>) {
  (void)args;
  launch(f, g, b, smem)(*static_cast<std::decay_t<K>*>(args[I])...);
}
template <class... K>
inline void launch_registered(const void* fn, dim3 g, dim3 b, size_t smem, void** args) {
  launch_with_arg_array(reinterpret_cast<void (*)(K...)>(const_cast<void*>(fn)), g, b, args, smem,
                        std::index_sequence_for<K...>{});
}
// `(void*)k` in a program that builds graph kernel nodes: k's address, its parameter types registered
template <class... K>
inline void* void_pointer(void (*f)(K...)) {
  static const size_t sizes[] = {sizeof(std::decay_t<K>)..., 0};
  register_kernel(reinterpret_cast<const void*>(f), &launch_registered<K...>, sizes, sizeof...(K));
  return reinterpret_cast<void*>(f);
}
template <class T>
inline void* void_pointer(T* p) { return (void*)p; }
template <class T, std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>, int> = 0>
inline void* void_pointer(T v) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(v)); }
inline void* void_pointer(std::nullptr_t) { return nullptr; }
}  // namespace xpiler

// The graph node parameters in each API's own member order (tables/runtime_types.toml [member_order]): a
// positional brace initializer written for one fills the members it names.
#define XP_cuda_KERNEL_NODE_MEMBERS \
  void* func; dim3 gridDim; dim3 blockDim; unsigned int sharedMemBytes; void** kernelParams; void** extra;
#define XP_hip_KERNEL_NODE_MEMBERS \
  dim3 blockDim; void** extra; void* func; dim3 gridDim; void** kernelParams; unsigned int sharedMemBytes;
#define XP_cuda_MEMSET_MEMBERS \
  void* dst; size_t pitch; unsigned int value; unsigned int elementSize; size_t width; size_t height;
#define XP_hip_MEMSET_MEMBERS \
  void* dst; unsigned int elementSize; size_t height; size_t pitch; unsigned int value; size_t width;
#define XP_cuda_ENUMERATOR(name, value) cuda##name = value,
#define XP_hip_ENUMERATOR(name, value) hip##name = value,
#define XPILER_RUNTIME_API(P)                                                                             \
  enum P##Error_t { XPILER_CUDA_ERRORS(XP_##P##_ENUMERATOR) P##ErrorOutOfMemory = 2 };                    \
  typedef P##Error_t P##Error;                                                                            \
  enum P##MemcpyKind { P##MemcpyHostToHost = 0, P##MemcpyHostToDevice = 1, P##MemcpyDeviceToHost = 2,    \
                       P##MemcpyDeviceToDevice = 3, P##MemcpyDefault = 4 };                               \
  typedef ::xpiler::StreamRecord* P##Stream_t;                                                            \
  typedef ::xpiler::EventRecord* P##Event_t;                                                              \
  /* CUDA arrays (texture memory) are not modeled: the types exist for code that names them */              \
  struct P##Array { int unused; };                                                                        \
  typedef P##Array* P##Array_t;                                                                           \
  typedef const P##Array* P##Array_const_t;                                                               \
  /* the special streams: every stream's work is done when enqueued here, these as much as any other */      \
  inline P##Stream_t const P##StreamLegacy = reinterpret_cast<P##Stream_t>(0x1);                          \
  inline P##Stream_t const P##StreamPerThread = reinterpret_cast<P##Stream_t>(0x2);                       \
  struct P##DeviceProp {                                                                                  \
    char name[256]; size_t totalGlobalMem; size_t sharedMemPerBlock; int regsPerBlock; int warpSize;      \
    int maxThreadsPerBlock; int maxThreadsDim[3]; int maxGridSize[3]; int clockRate;                      \
    int multiProcessorCount; int major; int minor; size_t totalConstMem; int maxThreadsPerMultiProcessor; \
    size_t sharedMemPerMultiprocessor; size_t maxSharedMemoryPerMultiProcessor; /* HIP's name of it */    \
    int l2CacheSize; char gcnArchName[256];                                                                \
    size_t sharedMemPerBlockOptin; size_t memPitch; size_t textureAlignment; int regsPerMultiprocessor;   \
    int memoryClockRate; int memoryBusWidth; int concurrentKernels; int computeMode; int integrated;       \
    int canMapHostMemory; int unifiedAddressing; int managedMemory; int asyncEngineCount; int deviceOverlap;\
    int pciBusID; int pciDeviceID; int pciDomainID; int ECCEnabled; int cooperativeLaunch;                 \
    int kernelExecTimeoutEnabled; int maxBlocksPerMultiProcessor; int pageableMemoryAccess;               \
    int concurrentManagedAccess; int persistingL2CacheMaxSize;                                            \
  };                                                                                                      \
  /* bounds-checked blocks (device_heap.h); the call site names the buffer in an out-of-bounds report */ \
  inline P##Error_t P##Malloc(void** p, size_t n, const char* file = __builtin_FILE(),                    \
                              int line = __builtin_LINE()) {                                              \
    ::xpiler::install_fault_handlers(); /* host code overrunning the block is reported too */             \
    *p = ::xpiler::device_alloc(n, file, line);                                                           \
    if (*p) { ::xpiler::record_alloc(*p, n); ::xpiler::copyback_alloc(*p, n, false); }                    \
    return *p ? P##Success : P##ErrorMemoryAllocation;                                                    \
  }                                                                                                       \
  template <class T> inline P##Error_t P##Malloc(T** p, size_t n, const char* file = __builtin_FILE(),     \
                                                 int line = __builtin_LINE()) {                           \
    P##Error_t e = P##Malloc(reinterpret_cast<void**>(p), n, file, line);                                 \
    ::xpiler::copyback_type(*p, ::xpiler::copy_type<T>());                                                \
    return e;                                                                                             \
  }                                                                                                       \
  template <class T> inline P##Error_t P##MallocManaged(T** p, size_t n, unsigned = 1,                    \
      const char* file = __builtin_FILE(), int line = __builtin_LINE()) {                                 \
    return P##Malloc(p, n, file, line);                                                                   \
  }                                                                                                       \
  template <class T> inline P##Error_t P##MallocHost(T** p, size_t n, unsigned = 0,                       \
      const char* file = __builtin_FILE(), int line = __builtin_LINE()) {                                 \
    return P##Malloc(reinterpret_cast<void**>(p), n, file, line);                                         \
  }                                                                                                       \
  template <class T> inline P##Error_t P##HostAlloc(T** p, size_t n, unsigned = 0,                        \
      const char* file = __builtin_FILE(), int line = __builtin_LINE()) {                                 \
    return P##Malloc(reinterpret_cast<void**>(p), n, file, line);                                         \
  }                                                                                                       \
  /* mapped host memory is device memory here: the device pointer is the host one */                     \
  template <class T> inline P##Error_t P##HostGetDevicePointer(T** d, void* h, unsigned = 0) {           \
    *d = static_cast<T*>(h); return h ? P##Success : P##ErrorInvalidValue;                                \
  }                                                                                                       \
  /* rows padded to 256 bytes, as GPUs align them: code that indexes by the pitch is exercised */         \
  template <class T> inline P##Error_t P##MallocPitch(T** p, size_t* pitch, size_t w, size_t h,           \
      const char* file = __builtin_FILE(), int line = __builtin_LINE()) {                                 \
    *pitch = (w + 255) / 256 * 256;                                                                       \
    return P##Malloc(reinterpret_cast<void**>(p), *pitch * h, file, line);                                \
  }                                                                                                       \
  inline P##Error_t P##Free(void* p) {                                                                    \
    /* inside a kernel only a by-value parameter's destructor, run per thread here, reaches this host-only */ \
    /* API (a lock that frees its mutex): a GPU runs no parameter destructor on the device, so nothing */   \
    if (::xpiler::tls_worker && ::xpiler::tls_worker->cur) return P##Success;                             \
    ::xpiler::copyback_free(p, 'b');                                                                      \
    return ::xpiler::device_free(p) ? P##Success : P##ErrorInvalidValue;                                  \
  }                                                                                                       \
  /* a typed block: the record of its contents at the free says how to compare them */                   \
  template <class T> inline P##Error_t P##Free(T* p) {                                                    \
    if (!(::xpiler::tls_worker && ::xpiler::tls_worker->cur)) ::xpiler::copyback_free(p, ::xpiler::copy_type<T>()); \
    return P##Free(const_cast<void*>(static_cast<const void*>(p)));                                       \
  }                                                                                                       \
  inline P##Error_t P##FreeHost(void* p) { return P##Free(p); }                                           \
  /* stream-ordered allocation: the stream's earlier work is done when enqueued here, so plain blocks do */   \
  template <class T, class S>                                                                             \
  inline P##Error_t P##MallocAsync(T** p, size_t n, S, const char* file = __builtin_FILE(),               \
                                   int line = __builtin_LINE()) {                                         \
    return P##Malloc(reinterpret_cast<void**>(p), n, file, line);                                         \
  }                                                                                                       \
  template <class S> inline P##Error_t P##FreeAsync(void* p, S) { return P##Free(p); }                     \
  inline P##Error_t P##Memcpy(void* d, const void* s, size_t n, P##MemcpyKind k = P##MemcpyDefault) {     \
    if (n && (!d || !s)) return P##ErrorInvalidValue;                                                     \
    ::xpiler::record_copy(d, s, n); memmove(d, s, n); ::xpiler::copyback_host_write(d, n);                \
    if (k == P##MemcpyDeviceToHost) ::xpiler::record_copy_back(d, n);                                     \
    return P##Success;                                                                                    \
  }                                                                                                       \
  /* a typed destination: the record of a copy back says how to compare its data */                      \
  template <class T>                                                                                      \
  inline P##Error_t P##Memcpy(T* d, const void* s, size_t n, P##MemcpyKind k = P##MemcpyDefault) {        \
    if (n && (!d || !s)) return P##ErrorInvalidValue;                                                     \
    ::xpiler::record_copy(d, s, n); memmove(static_cast<void*>(d), s, n);                                 \
    ::xpiler::copyback_host_write(d, n);                                                                  \
    if (k == P##MemcpyDeviceToHost) ::xpiler::record_copy_back(d, n, ::xpiler::copy_type<T>());          \
    return P##Success;                                                                                    \
  }                                                                                                       \
  template <class D, class S = int>                                                                       \
  inline P##Error_t P##MemcpyAsync(D* d, const void* s, size_t n, P##MemcpyKind k = P##MemcpyDefault,     \
                                   S stream = S()) {                                                      \
    if (::xpiler::StreamRecord* c = ::xpiler::capturing_stream(stream)) {                                 \
      ::xpiler::capture_work(c, ::xpiler::graph_work([=] { P##Memcpy(d, s, n, k); })); return P##Success;                       \
    }                                                                                                     \
    return P##Memcpy(d, s, n, k);                                                                         \
  }                                                                                                       \
  inline P##Error_t P##Memcpy2D(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h,         \
                                P##MemcpyKind = P##MemcpyDefault) {                                       \
    ::xpiler::record_copy2d(d, dp, s, sp, w, h);                                                          \
    for (size_t r = 0; r < h; ++r) memmove(static_cast<char*>(d) + r * dp, static_cast<const char*>(s) + r * sp, w); \
    ::xpiler::copyback_host_write(d, dp * h);                                                             \
    return P##Success;                                                                                    \
  }                                                                                                       \
  /* 3-D memory: rows of width bytes, `pitch` apart, ysize rows a slice (pitched like cudaMallocPitch) */    \
  struct P##Extent { size_t width, height, depth; };                                                      \
  struct P##PitchedPtr { void* ptr; size_t pitch, xsize, ysize; };                                        \
  struct P##Pos { size_t x, y, z; };                                                                      \
  struct P##Memcpy3DParms { P##Array_t srcArray; P##Pos srcPos; P##PitchedPtr srcPtr;                     \
                            P##Array_t dstArray; P##Pos dstPos; P##PitchedPtr dstPtr;                     \
                            P##Extent extent; P##MemcpyKind kind; };                                      \
  inline P##Extent make_##P##Extent(size_t w, size_t h, size_t d) { return P##Extent{w, h, d}; }          \
  inline P##PitchedPtr make_##P##PitchedPtr(void* p, size_t pitch, size_t xsize, size_t ysize) {          \
    return P##PitchedPtr{p, pitch, xsize, ysize};                                                         \
  }                                                                                                       \
  inline P##Pos make_##P##Pos(size_t x, size_t y, size_t z) { return P##Pos{x, y, z}; }                   \
  inline P##Error_t P##Malloc3D(P##PitchedPtr* p, P##Extent e, const char* file = __builtin_FILE(),       \
                                int line = __builtin_LINE()) {                                            \
    size_t pitch = (e.width + 255) / 256 * 256;                                                           \
    void* block = nullptr;                                                                                \
    P##Error_t err = P##Malloc(&block, pitch * e.height * e.depth, file, line);                           \
    *p = P##PitchedPtr{block, pitch, e.width, e.height};                                                  \
    return err;                                                                                           \
  }                                                                                                       \
  inline P##Error_t P##Memcpy3D(const P##Memcpy3DParms* m) {                                              \
    if (!m || m->srcArray || m->dstArray) return P##ErrorInvalidValue; /* arrays: textures, not modelled */ \
    const P##PitchedPtr& s = m->srcPtr; const P##PitchedPtr& d = m->dstPtr;                               \
    for (size_t z = 0; z < m->extent.depth; ++z) {                                                        \
      char* dst = static_cast<char*>(d.ptr) + ((m->dstPos.z + z) * d.ysize + m->dstPos.y) * d.pitch + m->dstPos.x; \
      const char* src = static_cast<const char*>(s.ptr) + ((m->srcPos.z + z) * s.ysize + m->srcPos.y) * s.pitch \
                        + m->srcPos.x;                                                                    \
      P##Memcpy2D(dst, d.pitch, src, s.pitch, m->extent.width, m->extent.height, m->kind);                \
    }                                                                                                     \
    return P##Success;                                                                                    \
  }                                                                                                       \
  template <class S = int>                                                                                \
  inline P##Error_t P##Memcpy3DAsync(const P##Memcpy3DParms* m, S = S()) { return P##Memcpy3D(m); }      \
  inline P##Error_t P##Memset2D(void* d, size_t pitch, int v, size_t w, size_t h) {                       \
    for (size_t r = 0; r < h; ++r) memset(static_cast<char*>(d) + r * pitch, v, w);                       \
    ::xpiler::copyback_host_write(d, pitch * h);                                                          \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##Memset3D(P##PitchedPtr p, int v, P##Extent e) {                                    \
    for (size_t z = 0; z < e.depth; ++z) P##Memset2D(static_cast<char*>(p.ptr) + z * p.ysize * p.pitch, p.pitch, v, e.width, e.height); \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##Memset(void* d, int v, size_t n) {                                                 \
    if (n && !d) return P##ErrorInvalidValue;                                                             \
    ::xpiler::record_memset(d, v, n); memset(d, v, n); ::xpiler::copyback_host_write(d, n);               \
    return P##Success;                                                                                    \
  }                                                                                                       \
  /* one address space on the CPU: prefetches and placement advice change nothing */                       \
  enum { P##CpuDeviceId = -1, P##InvalidDeviceId = -2 };                                                  \
  enum P##MemoryAdvise { P##MemAdviseSetReadMostly = 1, P##MemAdviseUnsetReadMostly = 2,                  \
                         P##MemAdviseSetPreferredLocation = 3, P##MemAdviseUnsetPreferredLocation = 4,    \
                         P##MemAdviseSetAccessedBy = 5, P##MemAdviseUnsetAccessedBy = 6 };                \
  /* CUDA 13 names a place by a location (type and id) where CUDA 12 gave a device number */              \
  enum P##MemLocationType { P##MemLocationTypeInvalid = 0, P##MemLocationTypeDevice = 1,                  \
                            P##MemLocationTypeHost = 2, P##MemLocationTypeHostNuma = 3,                   \
                            P##MemLocationTypeHostNumaCurrent = 4 };                                      \
  struct P##MemLocation { P##MemLocationType type; int id; };                                             \
  /* (a device or a location, then CUDA 13's flags, then the stream) */                                   \
  template <class D, class... Rest>                                                                       \
  inline P##Error_t P##MemPrefetchAsync(const void*, size_t, D, Rest...) { return P##Success; }           \
  template <class A, class D>                                                                             \
  inline P##Error_t P##MemAdvise(const void*, size_t, A, D) { return P##Success; }                        \
  template <class S = int> inline P##Error_t P##MemsetAsync(void* d, int v, size_t n, S stream = S()) {   \
    if (::xpiler::StreamRecord* c = ::xpiler::capturing_stream(stream)) {                                 \
      ::xpiler::capture_work(c, ::xpiler::graph_work([=] { P##Memset(d, v, n); })); return P##Success;                          \
    }                                                                                                     \
    return P##Memset(d, v, n);                                                                            \
  }                                                                                                       \
  template <class T>                                                                                      \
  inline P##Error_t P##MemcpyToSymbol(T& sym, const void* s, size_t n = sizeof(T), size_t off = 0,        \
                                      P##MemcpyKind = P##MemcpyHostToDevice) {                            \
    if (off + n > sizeof(T)) return P##ErrorInvalidValue;                                                 \
    ::xpiler::record_symbol_copy(true, &sym, off, s, n);                                                  \
    memcpy(reinterpret_cast<char*>(&sym) + off, s, n); return P##Success;                                 \
  }                                                                                                       \
  template <class T, class S = int>                                                                       \
  inline P##Error_t P##MemcpyToSymbolAsync(T& sym, const void* s, size_t n, size_t off = 0,               \
                                           P##MemcpyKind k = P##MemcpyHostToDevice, S = S()) {            \
    return P##MemcpyToSymbol(sym, s, n, off, k);                                                          \
  }                                                                                                       \
  template <class T>                                                                                      \
  inline P##Error_t P##MemcpyFromSymbol(void* d, const T& sym, size_t n = sizeof(T), size_t off = 0,      \
                                        P##MemcpyKind = P##MemcpyDeviceToHost) {                          \
    if (off + n > sizeof(T)) return P##ErrorInvalidValue;                                                \
    ::xpiler::record_symbol_copy(false, &sym, off, d, n);                                                 \
    memcpy(d, reinterpret_cast<const char*>(&sym) + off, n);                                              \
    ::xpiler::record_copy_back(d, n, ::xpiler::copy_type<T>());   \
    return P##Success;                                                                                    \
  }                                                                                                       \
  template <class T> inline P##Error_t P##GetSymbolAddress(void** p, const T& sym) {                      \
    *p = const_cast<void*>(static_cast<const void*>(&sym)); return P##Success;                            \
  }                                                                                                       \
  /* stream work is done when it is enqueued here: a callback or host function runs at once, in order */    \
  typedef void (*P##StreamCallback_t)(P##Stream_t, P##Error_t, void*);                                    \
  typedef void (*P##HostFn_t)(void*);                                                                     \
  inline P##Error_t P##StreamAddCallback(P##Stream_t stream, P##StreamCallback_t callback, void* data,    \
                                         unsigned = 0) {                                                  \
    callback(stream, P##Success, data); return P##Success;                                                \
  }                                                                                                       \
  inline P##Error_t P##LaunchHostFunc(P##Stream_t stream, P##HostFn_t fn, void* data) {                   \
    if (::xpiler::StreamRecord* c = ::xpiler::capturing_stream(stream)) {                                 \
      ::xpiler::capture_work(c, ::xpiler::graph_work([=] { fn(data); })); return P##Success;                                    \
    }                                                                                                     \
    fn(data); return P##Success;                                                                          \
  }                                                                                                       \
  inline P##Error_t P##DeviceSynchronize() { return P##Success; }                                         \
  inline P##Error_t P##ThreadSynchronize() { return P##Success; }                                         \
  inline P##Error_t P##DeviceReset() { return P##Success; }                                               \
  inline P##Error_t P##ProfilerStart() { return P##Success; }  /* no profiler on the CPU: a no-op */         \
  inline P##Error_t P##ProfilerStop() { return P##Success; }                                              \
  inline P##Error_t P##GetLastError() { return static_cast<P##Error_t>(::xpiler::take_last_error()); }    \
  inline P##Error_t P##PeekAtLastError() { return static_cast<P##Error_t>(::xpiler::g_last_error); }      \
  inline const char* P##GetErrorString(P##Error_t e) { return ::xpiler::error_string(e); }                \
  inline const char* P##GetErrorName(P##Error_t e) {                                                      \
    static thread_local char buf[64];                                                                     \
    snprintf(buf, sizeof buf, "%s%s", #P, ::xpiler::error_name(e)); return buf;                           \
  }                                                                                                       \
  inline P##Error_t P##SetDevice(int) { return P##Success; }                                              \
  inline P##Error_t P##GetDevice(int* d) { *d = 0; return P##Success; }                                   \
  inline P##Error_t P##GetDeviceCount(int* n) { *n = 1; return P##Success; }                              \
  inline P##Error_t P##GetDeviceProperties(P##DeviceProp* p, int) {                                       \
    memset(p, 0, sizeof *p); snprintf(p->name, sizeof p->name, "xpiler CPU runtime");                     \
    snprintf(p->gcnArchName, sizeof p->gcnArchName, "gfx90a");                                            \
    p->totalGlobalMem = 1ull << 34; p->sharedMemPerBlock = 48 * 1024; p->regsPerBlock = 65536;            \
    p->warpSize = XPILER_WARP_SIZE; p->maxThreadsPerBlock = 1024; p->maxThreadsDim[0] = 1024;              \
    p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64; p->maxGridSize[0] = 2147483647;                 \
    p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535; p->clockRate = 1000000;                         \
    p->multiProcessorCount = static_cast<int>(::xpiler::os_threads()); p->major = 8; p->minor = 0;        \
    p->totalConstMem = 65536; p->maxThreadsPerMultiProcessor = 2048;                                      \
    p->sharedMemPerMultiprocessor = p->maxSharedMemoryPerMultiProcessor = 164 * 1024;                     \
    p->l2CacheSize = 1 << 22;                                                                             \
    p->sharedMemPerBlockOptin = 164 * 1024; p->regsPerMultiprocessor = 65536; p->memoryClockRate = 1000000; \
    p->memoryBusWidth = 64; p->concurrentKernels = p->canMapHostMemory = p->unifiedAddressing = 1;        \
    p->managedMemory = p->cooperativeLaunch = p->pageableMemoryAccess = p->concurrentManagedAccess = 1;   \
    p->maxBlocksPerMultiProcessor = 32; p->deviceOverlap = p->asyncEngineCount = 1; /* copies overlap */  \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##DeviceGetAttribute(int* v, int attr, int) {                                        \
    *v = ::xpiler::device_attribute(attr); return P##Success;                                             \
  }                                                                                                       \
  template <class... K, class S = int>                                                                    \
  inline P##Error_t P##LaunchKernel(void (*f)(K...), dim3 g, dim3 b, void** args, size_t smem = 0,        \
                                    S = S()) {                                                            \
    ::xpiler::launch_with_arg_array(f, g, b, args, smem, std::index_sequence_for<K...>{});                \
    return static_cast<P##Error_t>(::xpiler::g_last_error);                                               \
  }                                                                                                       \
  /* the kernel by its address ((void*)k, registered by the rewrite): launched with its own parameter types */ \
  template <class S = int>                                                                                \
  inline P##Error_t P##LaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t smem = 0, S = S()) { \
    if (!::xpiler::launch_by_address(f, g, b, smem, args)) return P##ErrorInvalidDeviceFunction;          \
    return static_cast<P##Error_t>(::xpiler::g_last_error);                                               \
  }                                                                                                       \
  template <class F, class S = int>                                                                       \
  inline P##Error_t P##LaunchCooperativeKernel(F f, dim3 g, dim3 b, void** args, size_t smem = 0, S s = S()) { \
    ::xpiler::g_next_cooperative = true; /* every block resident: grid.sync() works */                      \
    const P##Error_t status = P##LaunchKernel(f, g, b, args, smem, s);                                    \
    ::xpiler::g_next_cooperative = false;                                                                 \
    return status;                                                                                        \
  }                                                                                                       \
  /* the extensible launch (CUDA 12): a cooperative attribute gives every block an OS thread, as the     \
     cooperative launch does; clusters of blocks are not modelled; the other attributes are scheduling hints */ \
  enum P##LaunchAttributeID { P##LaunchAttributeIgnore = 0, P##LaunchAttributeAccessPolicyWindow = 1,     \
    P##LaunchAttributeCooperative = 2, P##LaunchAttributeSynchronizationPolicy = 3,                       \
    P##LaunchAttributeClusterDimension = 4, P##LaunchAttributeClusterSchedulingPolicyPreference = 5,      \
    P##LaunchAttributeProgrammaticStreamSerialization = 6, P##LaunchAttributeProgrammaticEvent = 7,       \
    P##LaunchAttributePriority = 8, P##LaunchAttributeMemSyncDomainMap = 9, P##LaunchAttributeMemSyncDomain = 10, \
    P##LaunchAttributePreferredClusterDimension = 11, P##LaunchAttributeLaunchCompletionEvent = 12,       \
    P##LaunchAttributeDeviceUpdatableKernelNode = 13, P##LaunchAttributePreferredSharedMemoryCarveout = 14 }; \
  union P##LaunchAttributeValue {                                                                         \
    char pad[64];                                                                                         \
    int cooperative;                                                                                      \
    struct { unsigned int x, y, z; } clusterDim;                                                          \
    int clusterSchedulingPolicyPreference;                                                                \
    int programmaticStreamSerializationAllowed;                                                           \
    struct { P##Event_t event; int flags; int triggerAtBlockStart; } programmaticEvent;                   \
    int priority;                                                                                         \
    struct { unsigned int x, y, z; } preferredClusterDim;                                                 \
    struct { P##Event_t event; int flags; } launchCompletionEvent;                                        \
    unsigned int sharedMemCarveout;                                                                       \
  };                                                                                                      \
  struct P##LaunchAttribute { P##LaunchAttributeID id; char pad[8 - sizeof(P##LaunchAttributeID)];        \
                              P##LaunchAttributeValue val; };                                             \
  struct P##LaunchConfig_t { dim3 gridDim; dim3 blockDim; size_t dynamicSmemBytes; P##Stream_t stream;    \
                             P##LaunchAttribute* attrs; unsigned int numAttrs; };                         \
  inline bool xpiler_##P##_cooperative(const P##LaunchConfig_t* config) {                                 \
    bool cooperative = false;                                                                             \
    for (unsigned int i = 0; i < config->numAttrs; ++i) {                                                 \
      const P##LaunchAttribute& a = config->attrs[i];                                                     \
      if (a.id == P##LaunchAttributeCooperative && a.val.cooperative) cooperative = true;                 \
      if (a.id == P##LaunchAttributeClusterDimension &&                                                   \
          1ull * a.val.clusterDim.x * a.val.clusterDim.y * a.val.clusterDim.z > 1)                        \
        ::xpiler::die(::xpiler::kExitLaunch, "xpiler: thread block clusters (a cluster dimension above 1) "  \
                      "are not modelled by the runtime\n");                                               \
    }                                                                                                     \
    return cooperative;                                                                                   \
  }                                                                                                       \
  template <class... K, class... A>                                                                       \
  inline P##Error_t P##LaunchKernelEx(const P##LaunchConfig_t* config, void (*f)(K...), A&&... args) {    \
    ::xpiler::g_next_cooperative = xpiler_##P##_cooperative(config);                                      \
    ::xpiler::launch(f, config->gridDim, config->blockDim, config->dynamicSmemBytes, config->stream)(     \
        std::forward<A>(args)...);                                                                        \
    ::xpiler::g_next_cooperative = false;                                                                 \
    return static_cast<P##Error_t>(::xpiler::g_last_error);                                               \
  }                                                                                                       \
  inline P##Error_t P##LaunchKernelExC(const P##LaunchConfig_t* config, const void* f, void** args) {     \
    ::xpiler::g_next_cooperative = xpiler_##P##_cooperative(config);                                      \
    const bool known = ::xpiler::launch_by_address(f, config->gridDim, config->blockDim,                  \
                                                   config->dynamicSmemBytes, args);                       \
    ::xpiler::g_next_cooperative = false;                                                                 \
    return known ? static_cast<P##Error_t>(::xpiler::g_last_error) : P##ErrorInvalidDeviceFunction;        \
  }                                                                                                       \
  template <class... A> inline P##Error_t P##FuncSetAttribute(A...) { return P##Success; }                \
  template <class... A> inline P##Error_t P##FuncSetCacheConfig(A...) { return P##Success; }              \
  template <class... A> inline P##Error_t P##DeviceSetCacheConfig(A...) { return P##Success; }            \
  template <class... A> inline P##Error_t P##DeviceSetSharedMemConfig(A...) { return P##Success; }        \
  /* cache and bank preferences: accepted, and reported as the defaults a GPU would report */             \
  enum P##FuncCache { P##FuncCachePreferNone = 0, P##FuncCachePreferShared = 1, P##FuncCachePreferL1 = 2,  \
                      P##FuncCachePreferEqual = 3 };                                                      \
  typedef P##FuncCache P##FuncCache_t; /* HIP's name of it */                                             \
  enum P##SharedMemConfig { P##SharedMemBankSizeDefault = 0, P##SharedMemBankSizeFourByte = 1,            \
                            P##SharedMemBankSizeEightByte = 2 };                                          \
  inline P##Error_t P##DeviceGetCacheConfig(P##FuncCache* c) { *c = P##FuncCachePreferNone; return P##Success; } \
  inline P##Error_t P##DeviceGetSharedMemConfig(P##SharedMemConfig* c) {                                  \
    *c = P##SharedMemBankSizeFourByte; return P##Success;                                                 \
  }                                                                                                       \
  template <class... A> inline P##Error_t P##OccupancyMaxActiveBlocksPerMultiprocessor(int* n, A...) {    \
    *n = 1; return P##Success;                                                                            \
  }                                                                                                       \
  /* The block size with the most resident threads on this "device" (1024 per block, 2048 per SM: 1024 */ \
  /* unless the caller caps it) and the grid that fills every SM (its multiprocessors are the OS threads) */ \
  template <class F>                                                                                      \
  inline P##Error_t P##OccupancyMaxPotentialBlockSize(int* min_grid, int* block, F, size_t = 0, int limit = 0) { \
    int b = limit > 0 && limit < 1024 ? limit : 1024;                                                     \
    *block = b; *min_grid = static_cast<int>(::xpiler::os_threads()) * (2048 / b); return P##Success;     \
  }                                                                                                       \
  template <class F, class S>                                                                             \
  inline P##Error_t P##OccupancyMaxPotentialBlockSizeVariableSMem(int* min_grid, int* block, F f, S,       \
                                                                  int limit = 0) {                        \
    return P##OccupancyMaxPotentialBlockSize(min_grid, block, f, 0, limit);                               \
  }                                                                                                       \
  inline P##Error_t P##StreamCreate(P##Stream_t* s) { *s = ::xpiler::new_stream(); return P##Success; } \
  inline P##Error_t P##StreamCreateWithFlags(P##Stream_t* s, unsigned) { return P##StreamCreate(s); }     \
  inline P##Error_t P##StreamCreateWithPriority(P##Stream_t* s, unsigned, int) { return P##StreamCreate(s); } \
  /* the range recent GPUs report (lower numbers are higher priorities); priorities change no order here */ \
  inline P##Error_t P##DeviceGetStreamPriorityRange(int* least, int* greatest) {                          \
    if (least) *least = 0;                                                                                \
    if (greatest) *greatest = -5;                                                                         \
    return P##Success;                                                                                    \
  }                                                                                                       \
  enum { P##DeviceScheduleAuto = 0, P##DeviceScheduleSpin = 1, P##DeviceScheduleYield = 2,                \
         P##DeviceScheduleBlockingSync = 4, P##DeviceMapHost = 8, P##DeviceLmemResizeToMax = 16 };         \
  inline P##Error_t P##SetDeviceFlags(unsigned) { return P##Success; }                                    \
  inline P##Error_t P##GetDeviceFlags(unsigned* f) { *f = P##DeviceMapHost; return P##Success; }          \
  inline P##Error_t P##StreamDestroy(P##Stream_t s) { ::xpiler::delete_stream(s); return P##Success; }     \
  inline P##Error_t P##StreamSynchronize(P##Stream_t) { return P##Success; }                              \
  /* waiting on an event recorded on a capturing stream joins the capture (and depends on what it followed) */ \
  inline P##Error_t P##StreamWaitEvent(P##Stream_t stream, P##Event_t e, unsigned = 0) {                  \
    ::xpiler::stream_wait_event(stream, e); return P##Success;                                            \
  }                                                                                                       \
  inline P##Error_t P##EventCreate(P##Event_t* e) { *e = ::xpiler::new_event(); return P##Success; }     \
  inline P##Error_t P##EventCreateWithFlags(P##Event_t* e, unsigned) { return P##EventCreate(e); }        \
  template <class S = int> inline P##Error_t P##EventRecord(P##Event_t e, S stream = S()) {               \
    ::xpiler::event_record_capture(e, ::xpiler::capturing_stream(stream));                                \
    e->ms = ::xpiler::now_ms(); return P##Success;                                                        \
  }                                                                                                       \
  inline P##Error_t P##EventSynchronize(P##Event_t) { return P##Success; }                                \
  inline P##Error_t P##EventQuery(P##Event_t) { return P##Success; }                                      \
  inline P##Error_t P##EventElapsedTime(float* ms, P##Event_t a, P##Event_t b) {                          \
    *ms = static_cast<float>(b->ms - a->ms); return P##Success;                                           \
  }                                                                                                       \
  inline P##Error_t P##EventDestroy(P##Event_t e) { ::xpiler::delete_event(e); return P##Success; }

// Graphs (graph.h): the same API for both prefixes, spelled after XPILER_RUNTIME_API(P). Bodies that build a node's
// work are templates (instantiated only where a program calls them) or engine functions.
#define XPILER_GRAPH_API(P)                                                                               \
  typedef ::xpiler::GraphRecord* P##Graph_t;                                                              \
  typedef ::xpiler::GraphExecRecord* P##GraphExec_t;                                                      \
  typedef ::xpiler::GraphNodeRecord* P##GraphNode_t;                                                      \
  enum P##StreamCaptureMode { P##StreamCaptureModeGlobal = 0, P##StreamCaptureModeThreadLocal = 1,        \
                              P##StreamCaptureModeRelaxed = 2 };                                          \
  enum P##StreamCaptureStatus { P##StreamCaptureStatusNone = 0, P##StreamCaptureStatusActive = 1,         \
                                P##StreamCaptureStatusInvalidated = 2 };                                  \
  enum { P##GraphInstantiateFlagAutoFreeOnLaunch = 1 };                                                   \
  struct P##KernelNodeParams { XP_##P##_KERNEL_NODE_MEMBERS };                                            \
  struct P##HostNodeParams { P##HostFn_t fn; void* userData; };                                           \
  struct P##MemsetParams { XP_##P##_MEMSET_MEMBERS };                                                     \
  inline P##Error_t P##StreamBeginCapture(P##Stream_t stream, int = 0) {                                  \
    return ::xpiler::stream_begin_capture(stream) ? P##Success : P##ErrorIllegalState;                    \
  }                                                                                                       \
  inline P##Error_t P##StreamEndCapture(P##Stream_t stream, P##Graph_t* graph) {                          \
    *graph = ::xpiler::stream_end_capture(stream);                                                        \
    return *graph ? P##Success : P##ErrorIllegalState;                                                    \
  }                                                                                                       \
  inline P##Error_t P##StreamIsCapturing(P##Stream_t stream, P##StreamCaptureStatus* status) {            \
    *status = ::xpiler::stream_record(stream)->capture ? P##StreamCaptureStatusActive : P##StreamCaptureStatusNone; \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##GraphCreate(P##Graph_t* g, unsigned = 0) { *g = new ::xpiler::GraphRecord; return P##Success; } \
  inline P##Error_t P##GraphDestroy(P##Graph_t g) { ::xpiler::graph_destroy(g); return P##Success; }      \
  inline P##Error_t P##GraphAddKernelNode(P##GraphNode_t* node, P##Graph_t g, const P##GraphNode_t* deps, \
                                          size_t n, const P##KernelNodeParams* p) {                       \
    return p && ::xpiler::graph_add_kernel(node, g, deps, n, p->func, p->gridDim, p->blockDim,            \
                                           p->sharedMemBytes, p->kernelParams)                            \
               ? P##Success : P##ErrorInvalidDeviceFunction;                                              \
  }                                                                                                       \
  inline P##Error_t P##GraphAddHostNode(P##GraphNode_t* node, P##Graph_t g, const P##GraphNode_t* deps,   \
                                        size_t n, const P##HostNodeParams* p) {                           \
    *node = ::xpiler::graph_add_host(g, deps, n, p->fn, p->userData); return P##Success;                  \
  }                                                                                                       \
  inline P##Error_t P##GraphAddEmptyNode(P##GraphNode_t* node, P##Graph_t g, const P##GraphNode_t* deps,  \
                                         size_t n) {                                                      \
    *node = ::xpiler::graph_add(g, nullptr, deps, n); return P##Success;                                  \
  }                                                                                                       \
  template <class Kind>                                                                                   \
  inline P##Error_t P##GraphAddMemcpyNode1D(P##GraphNode_t* node, P##Graph_t g, const P##GraphNode_t* deps, \
                                            size_t n, void* dst, const void* src, size_t count, Kind kind) { \
    *node = ::xpiler::graph_add(g, ::xpiler::graph_work([=] { P##Memcpy(dst, src, count, kind); }), deps, n); \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##GraphAddMemcpyNode(P##GraphNode_t* node, P##Graph_t g, const P##GraphNode_t* deps,  \
                                          size_t n, const P##Memcpy3DParms* p) {                          \
    P##Memcpy3DParms m = *p;                                                                              \
    *node = ::xpiler::graph_add(g, ::xpiler::graph_work([=] { P##Memcpy3D(&m); }), deps, n);              \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##GraphAddChildGraphNode(P##GraphNode_t* node, P##Graph_t g, const P##GraphNode_t* deps, \
                                              size_t n, P##Graph_t child) {                               \
    ::xpiler::GraphExecRecord* run = ::xpiler::graph_instantiate(child);                                  \
    *node = ::xpiler::graph_add(g, ::xpiler::graph_work([=] { ::xpiler::graph_exec_run(run); }), deps, n); \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##GraphClone(P##Graph_t* copy, P##Graph_t g) {                                       \
    *copy = ::xpiler::graph_clone(g); return P##Success;                                                  \
  }                                                                                                       \
  inline P##Error_t P##GraphExecKernelNodeSetParams(P##GraphExec_t e, P##GraphNode_t node,                \
                                                    const P##KernelNodeParams* p) {                       \
    return p && ::xpiler::graph_exec_set_kernel(e, node, p->func, p->gridDim, p->blockDim, p->sharedMemBytes, \
                                                p->kernelParams) ? P##Success : P##ErrorInvalidValue;     \
  }                                                                                                       \
  template <class Params>                                                                                 \
  inline P##Error_t P##GraphAddMemsetNode(P##GraphNode_t* node, P##Graph_t g, const P##GraphNode_t* deps, \
                                          size_t n, const Params* p) {                                    \
    Params m = *p;                                                                                        \
    if (m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) return P##ErrorInvalidValue;      \
    const size_t rows = m.height ? m.height : 1, pitch = m.pitch ? m.pitch : m.width * m.elementSize;     \
    *node = ::xpiler::graph_add(g, ::xpiler::graph_work([=] {                                             \
      for (size_t row = 0; row < rows; ++row)                                                             \
        for (size_t i = 0; i < m.width; ++i) /* little-endian: the value's low bytes */                  \
          memcpy(static_cast<char*>(m.dst) + row * pitch + i * m.elementSize, &m.value, m.elementSize);   \
      ::xpiler::copyback_host_write(m.dst, rows * pitch);                                                 \
    }), deps, n);                                                                                         \
    return P##Success;                                                                                    \
  }                                                                                                       \
  inline P##Error_t P##GraphAddDependencies(P##Graph_t, const P##GraphNode_t* from, const P##GraphNode_t* to, \
                                            size_t n) {                                                   \
    ::xpiler::graph_add_dependencies(from, to, n); return P##Success;                                     \
  }                                                                                                       \
  /* CUDA 13's form, with edge data (the default edges: plain dependencies) */                             \
  inline P##Error_t P##GraphAddDependencies(P##Graph_t, const P##GraphNode_t* from, const P##GraphNode_t* to, \
                                            const void*, size_t n) {                                      \
    ::xpiler::graph_add_dependencies(from, to, n); return P##Success;                                     \
  }                                                                                                       \
  inline P##Error_t P##GraphGetNodes(P##Graph_t g, P##GraphNode_t* nodes, size_t* count) {                \
    *count = ::xpiler::graph_nodes(g, nodes, nodes ? *count : 0); return P##Success;                      \
  }                                                                                                       \
  /* CUDA 11's (exec, graph, error node, log, log size) and CUDA 12's (exec, graph, flags) */              \
  template <class... A> inline P##Error_t P##GraphInstantiate(P##GraphExec_t* e, P##Graph_t g, A...) {    \
    *e = ::xpiler::graph_instantiate(g); return P##Success;                                               \
  }                                                                                                       \
  inline P##Error_t P##GraphInstantiateWithFlags(P##GraphExec_t* e, P##Graph_t g, unsigned long long = 0) { \
    *e = ::xpiler::graph_instantiate(g); return P##Success;                                               \
  }                                                                                                       \
  template <class S = int> inline P##Error_t P##GraphLaunch(P##GraphExec_t e, S stream = S()) {           \
    if (::xpiler::StreamRecord* c = ::xpiler::capturing_stream(stream)) { /* a graph launched in a capture */ \
      ::xpiler::capture_work(c, ::xpiler::graph_work([e] { ::xpiler::graph_exec_run(e); })); return P##Success; \
    }                                                                                                     \
    ::xpiler::graph_exec_run(e);                                                                          \
    return static_cast<P##Error_t>(::xpiler::g_last_error);                                               \
  }                                                                                                       \
  template <class S = int> inline P##Error_t P##GraphUpload(P##GraphExec_t, S = S()) { return P##Success; } \
  inline P##Error_t P##GraphExecDestroy(P##GraphExec_t e) { ::xpiler::graph_exec_destroy(e); return P##Success; } \
  enum P##GraphExecUpdateResult { P##GraphExecUpdateSuccess = 0, P##GraphExecUpdateError = 1,             \
    P##GraphExecUpdateErrorTopologyChanged = 2, P##GraphExecUpdateErrorNodeTypeChanged = 3,               \
    P##GraphExecUpdateErrorFunctionChanged = 4, P##GraphExecUpdateErrorParametersChanged = 5,             \
    P##GraphExecUpdateErrorNotSupported = 6, P##GraphExecUpdateErrorUnsupportedFunctionChange = 7,        \
    P##GraphExecUpdateErrorAttributesChanged = 8 };                                                       \
  struct P##GraphExecUpdateResultInfo { P##GraphExecUpdateResult result; P##GraphNode_t errorNode;        \
                                        P##GraphNode_t errorFromNode; };                                  \
  /* the pre-CUDA-12 form (error node, result) and CUDA 12's (result info) */                              \
  inline P##Error_t P##GraphExecUpdate(P##GraphExec_t e, P##Graph_t g, P##GraphNode_t* error_node,         \
                                       P##GraphExecUpdateResult* result) {                                \
    const bool ok = ::xpiler::graph_exec_update(e, g);                                                    \
    if (error_node) *error_node = nullptr;                                                                \
    if (result) *result = ok ? P##GraphExecUpdateSuccess : P##GraphExecUpdateErrorTopologyChanged;        \
    return ok ? P##Success : P##ErrorGraphExecUpdateFailure;                                              \
  }                                                                                                       \
  inline P##Error_t P##GraphExecUpdate(P##GraphExec_t e, P##Graph_t g, P##GraphExecUpdateResultInfo* info) { \
    P##GraphExecUpdateResult result;                                                                      \
    const P##Error_t status = P##GraphExecUpdate(e, g, nullptr, &result);                                 \
    if (info) *info = P##GraphExecUpdateResultInfo{result, nullptr, nullptr};                             \
    return status;                                                                                        \
  }
