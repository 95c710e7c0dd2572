"""The BANG C → CUDA pass: detensorization of the MLU program into CUDA (the plan is ``plans/bang_to_cuda.py``).

Mapping (correctness first; one MLU task per CUDA block, run by the block's thread 0):

* ``taskId``/``taskDim`` (and X/Y/Z) are the linear block index and the block count; the launch's task type
  sets the cluster shape: a Block task is its own cluster (``coreId = 0``, ``coreDim = 1``), a UnionN task
  is one of 4 cores of its cluster (``coreId = taskId % 4``, ``clusterId = taskId / 4``), as on the MLU370.
  Kernels return at once on threads other than thread 0, so any block size launches the same tasks.
* ``__bang_*`` intrinsics become scalar loops over their element count, from the ``[detensor]`` table of
  ``tables/bang_intrinsics.toml``; ``__memcpy``/``__memcpy_async`` become byte copies; ``__sync_io`` and
  friends disappear (the copies are synchronous).
* ``__bang_matmul`` (WRAM filter layout), ``__bang_transpose`` and the HWC poolings (sum/avg/max) become
  calls of prelude helpers;
* ``__nram__`` and ``__wram__`` arrays become ``__shared__`` arrays of the task's block (thread 0 alone uses
  them); per-thread arrays of recovered blocks too large for thread 0's stack go to the device heap;
  ``__mlu_func__``/``__mlu_global__`` map to ``__device__``/``__global__`` (printer styles);
  launches ``K<<<dim, type, queue>>>`` become ``K<<<xp_cuda_grid(dim, type), 1>>>`` (the grid, and the
  cluster shape stored in a device variable before the launch).
* Refused (unresolved, with the construct named): cluster/SRAM synchronisation (``__sync_cluster``,
  ``__sync_all``, ``__mlu_shared__``), LDRAM, and intrinsics without a detensorization rule
  (conv, min pooling, reductions in this version).

The Xpiler BANG prelude that CUDA → BANG outputs start with (CUDA vocabulary spelled for the MLU model) is
recognised and replaced by CUDA's own headers plus the ``xp_*`` helpers as ``__host__ __device__``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from xpiler_core import ast as A
from xpiler_core.diagnostics import Span
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused, SourceUnit, Unresolved
from xpiler_core.passes.support.bang_prelude import TASKS
from xpiler_core.passes.support.cpu_prelude import PRELUDE
from xpiler_core.passes.support.reserved_names import C_MATH_NAMES, CUDA_C_LINKAGE_NAMES
from xpiler_core.printer import print_expr, print_module, print_node

UNSUPPORTED = ("__sync_cluster", "__sync_all", "__mlu_shared__", "__ldram__")
# intrinsics with a layout of their own: calls of device helpers of the CUDA prelude (same argument order)
LAYOUT_CALLS = {"__bang_matmul": "xp_bang_matmul", "__bang_transpose": "xp_bang_transpose",
                "__bang_sumpool": "xp_bang_sumpool", "__bang_avgpool": "xp_bang_avgpool",
                "__bang_maxpool": "xp_bang_maxpool", "__bang_minpool": "xp_bang_minpool",
                "__bang_reshape_filter": "xp_bang_reshape_filter", "__memset_nram": "xp_memset_nram",
                "__bang_conv": "xp_bang_conv", "__bang_mlp": "xp_bang_mlp"}
LAYOUT_ARITY = {"__bang_matmul": (6, 7), "__bang_transpose": (4,), "__bang_sumpool": (9,), "__bang_avgpool": (9,),
                "__bang_maxpool": (9,), "__bang_minpool": (9,), "__bang_reshape_filter": (6,), "__memset_nram": (3,),
                "__bang_conv": (11, 12), "__bang_mlp": (5, 6)}
SYNC_CALLS = frozenset({"__sync_io", "__sync_compute", "__sync", "__sync_io_move_compute"})
MAX_BLOCK_THREADS = 1024
SHARED_STATIC_BYTES = 48 * 1024  # CUDA's static shared memory per block
# per-thread arrays of a recovered block up to this many bytes at 1024 threads stay on the stack; larger ones
# (fragments, per-thread tiles) go to the device heap, since thread 0 runs the whole task on one stack
THREAD_ARRAY_STACK_BYTES = 16 * 1024
COPY_CALLS = frozenset({"__memcpy", "__memcpy_async"})

CUDA_PRELUDE_HEAD = r"""/* xpiler BANG->CUDA prelude */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* BANG's fixed-width integer type names (bang.h declares them) */
typedef int8_t int8; typedef int16_t int16; typedef int32_t int32; typedef int64_t int64;
typedef uint8_t uint8; typedef uint16_t uint16; typedef uint32_t uint32; typedef uint64_t uint64;
#define taskId ((int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)))
#define taskDim ((int)(gridDim.x * gridDim.y * gridDim.z))
#define taskIdX ((int)blockIdx.x)
#define taskIdY ((int)blockIdx.y)
#define taskIdZ ((int)blockIdx.z)
#define taskDimX ((int)gridDim.x)
#define taskDimY ((int)gridDim.y)
#define taskDimZ ((int)gridDim.z)
/* the cores of a task's cluster: 1 for a Block task, 4 (an MLU370 cluster) for the Union types; set at launch */
__device__ int xp_cores_per_cluster = 1;
#define coreDim xp_cores_per_cluster
#define coreId (taskId % xp_cores_per_cluster)
#define clusterId (taskId / xp_cores_per_cluster)
#define clusterDim (taskDim / xp_cores_per_cluster)
typedef struct { unsigned int x, y, z; } cnrtDim3_t;
typedef enum { cnrtFuncTypeBlock = 1, cnrtFuncTypeUnion1 = 4, cnrtFuncTypeUnion2 = 8, cnrtFuncTypeUnion4 = 16,
               cnrtFuncTypeUnion8 = 32, cnrtFuncTypeUnion16 = 64 } cnrtFunctionType_t;
typedef void* cnrtQueue_t;
static inline dim3 xp_cuda_grid(cnrtDim3_t d, int type = 1) {
  const int cores = type == 1 ? 1 : 4;
  cudaMemcpyToSymbol(xp_cores_per_cluster, &cores, sizeof cores);
  return dim3(d.x, d.y, d.z);
}
/* CNRT host API on the CUDA runtime (queues are the default stream) */
typedef int cnrtRet_t;
enum { cnrtSuccess = 0 };
typedef enum { cnrtMemcpyHostToDev = 1, cnrtMemcpyDevToHost = 2, cnrtMemcpyDevToDev = 3,
               cnrtMemcpyHostToHost = 0 } cnrtMemTransDir_t;
static inline cnrtRet_t cnrtQueueCreate(cnrtQueue_t* q) { *q = 0; return 0; }
static inline cnrtRet_t cnrtQueueDestroy(cnrtQueue_t) { return 0; }
static inline cnrtRet_t cnrtQueueSync(cnrtQueue_t) { return (cnrtRet_t)cudaDeviceSynchronize(); }
static inline cnrtRet_t cnrtSyncDevice(void) { return (cnrtRet_t)cudaDeviceSynchronize(); }
static inline cnrtRet_t cnrtMalloc(void** p, size_t bytes) { return (cnrtRet_t)cudaMalloc(p, bytes); }
static inline cnrtRet_t cnrtFree(void* p) { return (cnrtRet_t)cudaFree(p); }
static inline cnrtRet_t cnrtMemset(void* p, int v, size_t bytes) { return (cnrtRet_t)cudaMemset(p, v, bytes); }
static inline cnrtRet_t cnrtMemcpy(void* dst, void* src, size_t bytes, cnrtMemTransDir_t dir) {
  return (cnrtRet_t)cudaMemcpy(dst, src, bytes, (cudaMemcpyKind)dir);
}
/* BANG matmul: dst[m][n] = src0[m][k] . filter[n][k] (WRAM filter layout); BANG transpose: [h][w] -> [w][h] */
template <typename D, typename S, typename W>
__device__ static inline void xp_bang_matmul(D* dst, const S* src0, const W* filter, int m, int k, int n) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int p = 0; p < k; ++p) acc += (float)src0[(size_t)i * k + p] * (float)filter[(size_t)j * k + p];
      dst[(size_t)i * n + j] = (D)acc;
    }
}
/* BANG fully connected layer: dst[height] = filter[height][width] . src[width] (a matmul of one row) */
template <typename D, typename S, typename W>
__device__ static inline void xp_bang_mlp(D* dst, const S* src, const W* filter, int height, int width) {
  xp_bang_matmul(dst, src, filter, 1, width, height);
}
template <typename T>
__device__ static inline void xp_bang_transpose(T* dst, const T* src, int h, int w) {
  for (int i = 0; i < h; ++i)
    for (int j = 0; j < w; ++j) dst[(size_t)j * h + i] = src[(size_t)i * w + j];
}
/* BANG pooling over an HWC tile [h][w][c], window kh x kw, strides sw then sh, no padding (mode 0 sum,
   1 average, 2 maximum, 3 minimum) */
template <typename T>
__device__ static inline void xp_bang_pool(int mode, T* dst, const T* src, int c, int h, int w, int kh, int kw,
                                           int sw, int sh) {
  const int oh = (h - kh) / sh + 1, ow = (w - kw) / sw + 1;
  for (int y = 0; y < oh; ++y)
    for (int x = 0; x < ow; ++x)
      for (int ch = 0; ch < c; ++ch) {
        float a = mode == 2 ? -INFINITY : mode == 3 ? INFINITY : 0.0f;
        for (int i = 0; i < kh; ++i)
          for (int j = 0; j < kw; ++j) {
            const float v = (float)src[((size_t)(y * sh + i) * w + (x * sw + j)) * c + ch];
            a = mode == 2 ? fmaxf(a, v) : mode == 3 ? fminf(a, v) : a + v;
          }
        dst[((size_t)y * ow + x) * c + ch] = (T)(mode == 1 ? a / (float)(kh * kw) : a);
      }
}
template <typename T> __device__ static inline void xp_bang_sumpool(T* d, const T* s, int c, int h, int w, int kh,
                                                                    int kw, int sw, int sh) { xp_bang_pool(0, d, s, c, h, w, kh, kw, sw, sh); }
template <typename T> __device__ static inline void xp_bang_avgpool(T* d, const T* s, int c, int h, int w, int kh,
                                                                    int kw, int sw, int sh) { xp_bang_pool(1, d, s, c, h, w, kh, kw, sw, sh); }
template <typename T> __device__ static inline void xp_bang_maxpool(T* d, const T* s, int c, int h, int w, int kh,
                                                                    int kw, int sw, int sh) { xp_bang_pool(2, d, s, c, h, w, kh, kw, sw, sh); }
template <typename T> __device__ static inline void xp_bang_minpool(T* d, const T* s, int c, int h, int w, int kh,
                                                                    int kw, int sw, int sh) { xp_bang_pool(3, d, s, c, h, w, kh, kw, sw, sh); }
/* BANG convolution of an HWC tile [h][w][ci] with a WRAM filter [co][kh][kw][ci], strides sw then sh, no padding:
   dst [oh][ow][co] (the fixed-point position, a 12th argument, does not change float results) */
template <typename D, typename S, typename W>
__device__ static inline void xp_bang_conv(D* dst, const S* src, const W* filter, int ci, int h, int w, int kh,
                                           int kw, int sw, int sh, int co) {
  const int oh = (h - kh) / sh + 1, ow = (w - kw) / sw + 1;
  for (int y = 0; y < oh; ++y)
    for (int x = 0; x < ow; ++x)
      for (int o = 0; o < co; ++o) {
        float acc = 0.0f;
        for (int i = 0; i < kh; ++i)
          for (int j = 0; j < kw; ++j)
            for (int c = 0; c < ci; ++c)
              acc += (float)src[((size_t)(y * sh + i) * w + (x * sw + j)) * ci + c] *
                     (float)filter[(((size_t)o * kh + i) * kw + j) * ci + c];
        dst[((size_t)y * ow + x) * co + o] = (D)acc;
      }
}
/* __memset_nram(dst, count, value): count elements of dst set to value */
template <typename T, typename V> __device__ static inline void xp_memset_nram(T* d, int n, V v) {
  for (int i = 0; i < n; ++i) d[i] = (T)v;
}
/* BANG filter reshape: the matrix unit's arrangement is a detail of the MLU; CUDA keeps the logical order */
template <typename T>
__device__ static inline void xp_bang_reshape_filter(T* dst, const T* src, int n, int h, int w, int c) {
  const size_t count = (size_t)n * h * w * c;
  if (dst != src) memcpy(dst, src, sizeof(T) * count);  /* distinct NRAM buffers in the BANG source */
}
/* a per-block array of n elements on the device heap, freed when its scope ends (any exit) */
template <typename T> struct xp_block_array {
  T* p;
  __device__ explicit xp_block_array(int n) : p(static_cast<T*>(malloc(sizeof(T) * (size_t)(n > 0 ? n : 1)))) {}
  __device__ ~xp_block_array() { free(p); }
  xp_block_array(const xp_block_array&) = delete;
  xp_block_array& operator=(const xp_block_array&) = delete;
};
__device__ static inline void xp_memcpy(void* dst, const void* src, int bytes) { memcpy(dst, src, (size_t)bytes); }
__device__ static inline void xp_memcpy_strided(void* dst, const void* src, int bytes, int dst_stride, int src_stride,
                                                int segnum) {
  for (int s = 0; s <= segnum; ++s)
    memcpy((char*)dst + (size_t)s * dst_stride, (const char*)src + (size_t)s * src_stride, (size_t)bytes);
}
"""


@cache
def _detensor_table() -> dict[str, dict[str, Any]]:
    with resources.files("xpiler_core.tables").joinpath("bang_intrinsics.toml").open("rb") as f:
        data: dict[str, dict[str, Any]] = tomllib.load(f)["detensor"]
    return data


def _xp_helpers() -> str:
    """The ``xp_*`` helpers of the CPU prelude (min, shuffles over per-thread arrays) for host and device."""
    kept: list[str] = []
    current: list[str] = []
    depth = 0
    for line in PRELUDE.splitlines():
        if depth == 0:
            current = []
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and current:
            head = current[0]
            # whole top-level definitions of xp_* functions only (CUDA has the rest; xp_host_*: the stream and
            # graph emulation, which CUDA has for real)
            if re.match(r"(template <[^>]*> )?static inline [\w ]+\b(xp_(?!host_)\w+)\(", head):
                kept.append("\n".join(current))
            current = []
    return "\n".join(kept).replace("static inline", "__host__ __device__ static inline") + "\n"


def _split_xpiler_prelude(text: str) -> tuple[str, bool]:
    """Drop the CUDA → BANG prelude (everything up to its last line) when the file starts with it."""
    from xpiler_core.passes.support.bang_prelude import BANG_PRELUDE_MARK

    if not text.lstrip().startswith(BANG_PRELUDE_MARK):
        return text, False
    end_marker = "static inline cnrtDim3_t xp_task_dim(void)"
    at = text.find(end_marker)
    if at < 0:
        return text, False
    line_end = text.find("\n", at)
    task_dim_line = text[at:line_end]
    return task_dim_line + "\n" + text[line_end + 1:], True


def _buffer_names(module: A.Module) -> tuple[set[str], set[str]]:
    """The names the module declares as pointers or arrays, and those it declares as anything else."""
    buffers: set[str] = set()
    values: set[str] = set()
    for n in A.walk(module):
        if isinstance(n, A.VarDecl | A.Param) and n.name:
            (buffers if n.type.pointers or n.dims else values).add(n.name)
    return buffers, values


def _scalar_valued(e: A.Expr, buffers: set[str], values: set[str]) -> bool:
    """Whether ``e`` is surely a number, not a buffer: literals, elements (``x[0]``), names declared only as
    scalars, and arithmetic of those (anything else counts as a buffer, the intrinsic's usual form)."""
    if isinstance(e, A.Literal | A.Index):
        return not isinstance(e, A.Literal) or e.kind == "number"
    if isinstance(e, A.Cast):
        return not e.type.pointers and _scalar_valued(e.operand, buffers, values)
    if isinstance(e, A.Name):
        return e.id in values and e.id not in buffers
    if isinstance(e, A.Unary) and e.op in ("-", "+"):
        return _scalar_valued(e.operand, buffers, values)
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/"):
        return _scalar_valued(e.left, buffers, values) and _scalar_valued(e.right, buffers, values)
    if isinstance(e, A.Call) and (e.callee or "") in C_MATH_NAMES:  # sqrt(512)
        return all(_scalar_valued(a, buffers, values) for a in e.args)
    return False


def _element_loop(call: A.Call, rule: dict[str, Any], counter: list[int],
                  scalar: Callable[[A.Expr], bool] = lambda e: False) -> A.Stmt:
    # the table's argument names, or an older form of the same intrinsic with as many arguments as the call
    forms: list[list[str]] = [list(rule["args"]), *(list(f) for f in rule.get("older_forms", []))]
    names = next((f for f in forms if len(f) == len(call.args)), forms[0])
    if len(call.args) != len(names):
        raise ValueError(f"{call.func}: expected {' or '.join(str(len(f)) for f in forms)} arguments")
    counter[0] += 1
    ivar = f"xp_i{counter[0]}"
    element = rule["element"]
    if "scalar_element" in rule and names == list(rule["args"]) and scalar(call.args[names.index("b")]):
        element = rule["scalar_element"]  # the same intrinsic with a number where the second source goes
    module = lower_text(f"void xp_f() {{ {element}; }}", "<detensor>", Dialect.CUDA)
    fn = module.function("xp_f")
    assert fn is not None
    stmt = fn.body.stmts[0]
    mapping: dict[str, A.Expr] = {n: a for n, a in zip(names, call.args, strict=True) if n != "n"}
    if element is not rule["element"]:
        # a number computed in device code by a math call of integer literals (`sqrt(512)`): as a double, the
        # device overload (an int argument picks the host-only std::sqrt template under nvcc)
        mapping["b"] = A.rewrite(mapping["b"], lambda e: A.replace(e, args=tuple(
            A.Cast(A.Type("double"), a) if isinstance(a, A.Literal) and a.int_value is not None else a
            for a in e.args)) if isinstance(e, A.Call) and (e.callee or "") in C_MATH_NAMES else None)
    mapping["i"] = A.name(ivar)
    body = A.substitute(stmt, mapping)
    count = call.args[names.index("n")]
    return A.for_range(ivar, A.lit(0), count, body)


def detensorize(module: A.Module, kernels: frozenset[str] = frozenset(),
                device_functions: frozenset[str] = frozenset()) -> A.Module:
    """``__bang_*``/``__memcpy``/``__sync_*`` calls → loops and copies; ``__nram__`` → ``__shared__``."""
    table = _detensor_table()
    counter = [0]
    missing: list[str] = []

    on_heap = _oversized_on_chip(module)
    buffers, values = _buffer_names(module)

    def visit(node: A.Node) -> A.Node | None:
        if isinstance(node, A.DeclStmt) and any(id(d) in on_heap for d in node.decls):
            return A.Opaque("\n".join(_heap_task_decl(d) if id(d) in on_heap else
                                      print_node(A.DeclStmt((A.rewrite(d, visit),)), Dialect.CUDA).strip()
                                      for d in node.decls), "on-chip buffers larger than shared memory")
        if isinstance(node, A.DeclStmt) and any(_heap_thread_array(d) for d in node.decls):
            return A.Opaque("\n".join(_heap_decl(d) if _heap_thread_array(d) else
                                      print_node(A.DeclStmt((A.rewrite(d, visit),)), Dialect.CUDA).strip()
                                      for d in node.decls), "per-thread array on the device heap")
        if isinstance(node, A.ExprStmt) and isinstance(node.expr, A.Call) and isinstance(node.expr.func, A.Name):
            name = node.expr.func.id
            if name in table:
                return _element_loop(node.expr, table[name], counter,
                                     lambda e: _scalar_valued(e, buffers, values))
            arity = LAYOUT_ARITY.get(name, ())
            if name in LAYOUT_CALLS and len(node.expr.args) in arity:
                # matmul's fixed-point position (7th argument) does not change float results
                return A.expr_stmt(A.call(LAYOUT_CALLS[name], *node.expr.args[:arity[0]]))
            if name in COPY_CALLS:
                args = node.expr.args
                if len(args) == 4:
                    return A.expr_stmt(A.call("xp_memcpy", args[0], args[1], args[2]))
                if len(args) == 7:
                    return A.expr_stmt(A.call("xp_memcpy_strided", args[0], args[1], args[2], *args[4:7]))
            if name in SYNC_CALLS:
                return A.Empty()
            if name.startswith("__bang_"):
                missing.append(name)
        if isinstance(node, A.VarDecl) and any(isinstance(d, A.Name) and d.id == "xp_nt" for d in node.dims):
            # per-thread arrays of a recovered CUDA block (dim xp_nt = threads per block) are bounded by
            # CUDA's 1024 threads per block; CUDA device code has no variable-length arrays
            dims = tuple(A.lit(MAX_BLOCK_THREADS) if isinstance(d, A.Name) and d.id == "xp_nt" else d
                         for d in node.dims)
            return A.replace(node, dims=dims, storage=tuple(
                "__shared__" if q == "__nram__" else q for q in node.storage))
        if isinstance(node, A.VarDecl) and len(node.dims) == 1 and node.dims[0] is not None \
                and "xp_smem" in A.free_names(node.dims[0]):
            # recovered dynamic shared memory (sized by the launch's byte count): CUDA's own dynamic shared
            # memory of the task's block, sized by the same launch argument
            return A.replace(node, dims=(None,), storage=("extern", "__shared__"))
        if isinstance(node, A.VarDecl) and ("__nram__" in node.storage or "__wram__" in node.storage):
            # on-chip buffers of the task: shared memory of its block (WRAM filters included)
            return A.replace(node, storage=tuple("__shared__" if q in ("__nram__", "__wram__") else q
                                                 for q in node.storage))
        if isinstance(node, A.Launch):
            dim = node.config[0] if node.config else A.call("xp_task_dim")
            kind = (node.config[1],) if len(node.config) > 1 else ()  # Block or UnionN: the cluster shape
            config: tuple[A.Expr, ...] = (A.call("xp_cuda_grid", dim, *kind), A.lit(1))
            kernel = node.kernel.id if isinstance(node.kernel, A.Name) else ""
            if kernel.split("<")[0].endswith("_mlu") and len(node.args) >= 3:
                config += (node.args[2],)  # a recovered kernel's dynamic shared memory bytes (xp_smem)
            return A.replace(node, config=config)
        return None

    out = A.rewrite(module, visit)
    if missing:
        raise ValueError(f"no detensorization rule for {', '.join(sorted(set(missing)))}")
    items: list[A.TopItem] = []
    for item in out.items:
        if isinstance(item, A.Function) and (item.name in kernels or item.is_kernel
                                             or any(q in ("__mlu_global__", "__mlu_entry__") for q in item.qualifiers)):
            only_thread0 = lower_text("void xp_f() { if (threadIdx.x + threadIdx.y + threadIdx.z != 0) return; }",
                                      "<detensor>", Dialect.CUDA).function("xp_f")
            assert only_thread0 is not None
            quals = tuple(q for q in item.qualifiers if q not in ("__mlu_global__", "__mlu_entry__", "__global__"))
            item = A.replace(item, body=A.replace(item.body, stmts=only_thread0.body.stmts + item.body.stmts),
                             qualifiers=("__global__", *quals))
        elif isinstance(item, A.Function) and item.name in device_functions and not item.is_device:
            quals = tuple(q for q in item.qualifiers if q not in ("__mlu_func__", "__mlu_device__"))
            item = A.replace(item, qualifiers=("__device__", *quals))
        items.append(item)
    return A.replace(out, items=tuple(items))


def _is_thread_dim(d: A.Expr | None) -> bool:
    return isinstance(d, A.Name) and d.id == "xp_nt"


def _heap_thread_array(d: A.VarDecl) -> bool:
    """A per-thread array (first dim ``xp_nt``) too large for thread 0's stack at 1024 threads."""
    if not d.dims or not _is_thread_dim(d.dims[0]) or d.init is not None or d.storage or d.type.pointers:
        return False
    elems = MAX_BLOCK_THREADS
    for dim in d.dims[1:]:
        n = A.const_int(dim) if dim is not None else None
        if n is None:
            return False  # an inner extent we cannot size: keep the declaration as it is
        elems *= n
    size = A.SCALAR_BYTES.get(d.type.base.replace("const ", "").strip())
    return size is not None and elems * size > THREAD_ARRAY_STACK_BYTES


def _on_chip_bytes(d: A.VarDecl) -> int | None:
    """Bytes of an ``__nram__``/``__wram__`` array of constant extents (None: not one, or not sizable)."""
    if not d.dims or not ({"__nram__", "__wram__"} & set(d.storage)) or d.type.pointers or d.init is not None:
        return None
    elems = 1
    for dim in d.dims:
        n = A.const_int(dim) if dim is not None else None
        if n is None:
            return None
        elems *= n
    size = A.SCALAR_BYTES.get(d.type.base.replace("const ", "").strip())
    return None if size is None else elems * size


def _oversized_on_chip(module: A.Module) -> set[int]:
    """The on-chip arrays of every function whose NRAM/WRAM buffers together exceed CUDA's static shared memory
    (48 KiB; an MLU core has hundreds), and those sized at run time (``__nram__ half a[rows * K]``: shared memory
    has a static size): those go to the device heap instead (only thread 0 runs the task)."""
    out: set[int] = set()
    for fn in module.functions():
        decls = [d for d in A.walk(fn.body) if isinstance(d, A.VarDecl)]
        sized = [(d, _on_chip_bytes(d)) for d in decls]
        arrays = [(d, b) for d, b in sized if b is not None]
        if sum(b for _, b in arrays) > SHARED_STATIC_BYTES:
            out |= {id(d) for d, _ in arrays}
        out |= {id(d) for d in decls if _run_time_sized_on_chip(d)}
    return out


def _run_time_sized_on_chip(d: A.VarDecl) -> bool:
    """An ``__nram__``/``__wram__`` array whose first extent is known only at run time (the others constant)."""
    if not d.dims or not ({"__nram__", "__wram__"} & set(d.storage)) or d.type.pointers or d.init is not None:
        return False
    first, rest = d.dims[0], d.dims[1:]
    return first is not None and A.const_int(first) is None and all(x is not None and A.const_int(x) is not None
                                                                     for x in rest)


def _heap_task_decl(d: A.VarDecl) -> str:
    """``__nram__ T a[d0][d1]..`` → an ``xp_block_array`` of ``d0`` rows and a pointer to rows named ``a``."""
    inner = "".join(f"[{print_expr(dim, Dialect.CUDA)}]" for dim in d.dims[1:] if dim is not None)
    first = print_expr(d.dims[0], Dialect.CUDA) if d.dims[0] is not None else "1"
    t = d.type.base
    return f"xp_block_array<{t}{inner}> {d.name}_heap({first});\n{t} (*{d.name}){inner} = {d.name}_heap.p;"


def _heap_decl(d: A.VarDecl) -> str:
    """``T a[xp_nt][d1]..`` → an ``xp_block_array`` of ``xp_nt`` rows and a pointer to rows named ``a``."""
    inner = "".join(f"[{print_expr(dim, Dialect.CUDA)}]" for dim in d.dims[1:] if dim is not None)
    t = d.type.base
    return f"xp_block_array<{t}{inner}> {d.name}_heap(xp_nt);\n{t} (*{d.name}){inner} = {d.name}_heap.p;"


def translate_bang_to_cuda(text: str, path: str) -> tuple[str | None, str]:
    """CUDA text, or None with the reason it could not be translated."""
    for word in UNSUPPORTED:
        if re.search(rf"\b{re.escape(word)}\b", text):
            return None, f"{word} has no mapping to CUDA in this version (cluster/SRAM/LDRAM semantics)"
    body, had_prelude = _split_xpiler_prelude(text)
    body = re.sub(r"#\s*include\s*[<\"](bang|mlu|cnrt)\.h[>\"]", "", body)
    module = lower_text(body, path, Dialect.BANG)
    try:
        # kernels by their qualifier in the text (the lowering may keep extern "C" kernels' qualifier apart)
        kernels = frozenset(re.findall(r"__mlu_(?:global|entry)__\s+(?:[\w:<>*&\s]+?\s)?(\w+)\s*\(", body))
        helpers = frozenset(re.findall(r"__mlu_(?:func|device)__\s+(?:[\w:<>*&\s]+?\s)?(\w+)\s*\(", body))
        module = detensorize(module, kernels, helpers)
    except ValueError as exc:
        return None, str(exc)
    printed = print_module(A.replace(module, dialect=Dialect.CUDA), Dialect.CUDA)
    printed = printed.replace("static inline cnrtDim3_t xp_task_dim", "static inline cnrtDim3_t xp_task_dim", 1)
    printed = _host_entries(printed, module, kernels)
    return CUDA_PRELUDE_HEAD + _xp_helpers() + printed, "" if had_prelude else ""


def _host_entries(printed: str, module: A.Module, kernels: frozenset[str]) -> str:
    """A C-linkage BANG kernel no host code of the file launches is what its callers link against: on the GPU a
    kernel is not callable from the host, so its symbol becomes a host entry with its signature that launches
    it (renamed ``xp_NAME_task``) as the MLU job a BANG kernel without host code is written for: Union1, 16
    tasks (4 clusters of 4 cores). Its pointers are device memory, as the kernel's were."""
    launched = {n.kernel.id for n in A.walk(module) if isinstance(n, A.Launch) and isinstance(n.kernel, A.Name)}
    for name in sorted(launched & kernels & (C_MATH_NAMES | CUDA_C_LINKAGE_NAMES)):
        # a launched kernel named like a function <math.h> or CUDA declares with C linkage (`sin`): its own name
        # in the file, as only the file's launches name it
        printed = re.sub(rf'(?:extern "C"\s+)?__global__ void {re.escape(name)}(\s*\()',
                         rf"__global__ void xp_{name}_kernel\1", printed)
        printed = re.sub(rf"\b{re.escape(name)}(\s*<<<)", rf"xp_{name}_kernel\1", printed)
    for fn in module.functions():
        if fn.name not in kernels or fn.name in launched or fn.body is None:
            continue
        head = re.search(rf'extern "C" __global__ void {re.escape(fn.name)}\s*(\([^)]*\))\s*\{{', printed)
        names = [p.name for p in fn.params if isinstance(p, A.Param)]
        if head is None or not all(names):
            continue
        task = f"xp_{fn.name}_task"
        printed = printed[:head.start()] + f'extern "C" __global__ void {task}{head.group(1)} {{' + printed[head.end():]
        entry = fn.name
        if fn.name in C_MATH_NAMES | CUDA_C_LINKAGE_NAMES:
            # a name <math.h> or CUDA declares with C linkage (a kernel called `sin` or `max`): another C++ name,
            # the same symbol
            entry = f"xp_c_{fn.name}"
            printed += f'\nextern "C" void {entry}{head.group(1)} __asm__("{fn.name}");'
        printed += (f"\n/* host entry with the BANG kernel's symbol: a Union1 job of {TASKS} tasks */\n"
                    f'extern "C" void {entry}{head.group(1)} {{\n'
                    f"  cnrtDim3_t xp_dim = {{{TASKS}, 1, 1}};\n"
                    f"  {task}<<<xp_cuda_grid(xp_dim, cnrtFuncTypeUnion1), 1>>>({', '.join(str(n) for n in names)});\n"
                    "  cudaDeviceSynchronize();\n}\n")
    return printed



INFO = PassInfo(
    name="bang_detensorize",
    summary="BANG C to CUDA: tasks become blocks run by thread 0, __bang_* intrinsics scalar loops or helpers",
    kind="cst",
    directions=("bang->cuda",),
)


def apply(unit: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    """The CUDA translation of a BANG C unit (refused, with the construct, where no mapping exists)."""
    translated, reason = translate_bang_to_cuda(unit.text, unit.path)
    if translated is None:
        ctx.unresolved.append(Unresolved(reason, Span.empty(), "bang_detensorize"))
        raise PassRefused(reason)
    return SourceUnit(translated, Dialect.CUDA, unit.path)
