"""C → CUDA for loop-recovered code: block loops → ``blockIdx``, thread loops → ``threadIdx``.

The inverse of loop recovery's shape. A function ``F(dim3 xp_grid, dim3 xp_block, size_t xp_smem, ...)``
whose body is the block loop nest becomes ``__global__ F_gpu`` launched by a host ``F`` with the same
signature. In the kernel each thread runs the block-level code redundantly (it is thread-independent by
construction) and its own iteration of every thread loop, wrapped in ``do { ... } while (0)`` so the
loop's ``continue`` still leaves the iteration; ``__syncthreads()`` goes before and after every thread loop
(what one loop writes the next or the block-level code may read). Per-thread arrays (``T v[xp_nt]``) and
block arrays move into shared memory (dynamic for the former, sized at launch).
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassRefused
from xpiler_core.passes.support.ast_support import called_functions
from xpiler_core.passes.support.cpu_prelude import GEMM_ENTRY, GEMM_MARK
from xpiler_core.printer import print_node

GPU_PRELUDE = r"""/* xpiler GPU prelude */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <limits.h>
#include <float.h>
template <class T> __host__ __device__ __forceinline__ T xp_min(T a, T b) { return a < b ? a : b; }
template <class T> __device__ __forceinline__ T xp_shfl_idx(const T* a, int t, int n, int w, int src, int width) {
  int lane = t % w, base = t - lane + (lane / width) * width, s = base + (src % width + width) % width;
  return s < n ? a[s] : a[t];
}
template <class T> __device__ __forceinline__ T xp_shfl_down(const T* a, int t, int n, int w, unsigned d, int width) {
  int lane = t % w, pos = lane % width, s = t + (int)d;
  return (pos + (int)d < width && s < n) ? a[s] : a[t];
}
template <class T> __device__ __forceinline__ T xp_shfl_up(const T* a, int t, int n, int w, unsigned d, int width) {
  int lane = t % w, pos = lane % width;
  return (pos - (int)d >= 0) ? a[t - (int)d] : a[t];
}
template <class T> __device__ __forceinline__ T xp_shfl_xor(const T* a, int t, int n, int w, int m, int width) {
  int lane = t % w, base = t - lane, s_lane = lane ^ m;
  if ((s_lane / width) != (lane / width) && width < w) return a[t];
  int s = base + s_lane;
  return s < n && s_lane < w ? a[s] : a[t];
}
__device__ __forceinline__ unsigned int xp_ballot(const int* a, int t, int n, int w) {
  int base = t - t % w; unsigned int r = 0;
  for (int j = 0; j < w && j < 32 && base + j < n; ++j) if (a[base + j]) r |= 1u << j;
  return r;
}
__device__ __forceinline__ int xp_any(const int* a, int t, int n, int w) { return xp_ballot(a, t, n, w) != 0u; }
__device__ __forceinline__ int xp_all(const int* a, int t, int n, int w) {
  int base = t - t % w;
  for (int j = 0; j < w && base + j < n; ++j) if (!a[base + j]) return 0;
  return 1;
}
__device__ __forceinline__ float xp_atomic_max_float(float* p, float v) {
  int* u = (int*)p; int old = *u, assumed;
  do { assumed = old; if (!(v > __int_as_float(assumed))) break; old = atomicCAS(u, assumed, __float_as_int(v)); }
  while (assumed != old);
  return __int_as_float(old);
}
"""

_BLOCK_VARS = ("xp_bz", "xp_by", "xp_bx")
_THREAD_VARS = ("xp_tz", "xp_ty", "xp_tx")


def is_recovered(fn: A.Function) -> bool:
    names = [p.name for p in fn.params[:3] if isinstance(p, A.Param)]
    return names == ["xp_grid", "xp_block", "xp_smem"]


def _loop_var(s: A.Stmt) -> str | None:
    if isinstance(s, A.For):
        view = s.canonical()
        return view.var if view else None
    return None


def _strip_to(s: A.Stmt, var: str) -> A.For | None:
    """The For over ``var`` at ``s`` (skipping a block wrapper holding pragmas)."""
    if isinstance(s, A.Block):
        loops = [x for x in s.stmts if isinstance(x, A.For)]
        others = [x for x in s.stmts if not isinstance(x, (A.For, A.Pragma))]
        if len(loops) == 1 and not others:
            s = loops[0]
    return s if isinstance(s, A.For) and _loop_var(s) == var else None


def _thread_body(s: A.Stmt) -> A.Stmt | None:
    """The code one CUDA thread runs for a thread loop nest ``for tz / for ty / ... for tx`` (``None`` if ``s``
    is not one). Loops over ``xp_tx`` (possibly bounded by a guard, possibly under thread-independent
    branches) become ``if (cond) do { body } while (0)`` for the thread's own ``xp_tx``."""
    tz = _strip_to(s, "xp_tz")
    ty = _strip_to(tz.body, "xp_ty") if tz is not None else None
    if ty is None:
        return None
    found = [False]

    def to_thread(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Pragma):
            return A.Empty()
        if isinstance(n, A.For) and _loop_var(n) == "xp_tx":
            found[0] = True
            stmts = tuple(x for x in A.stmts_of(n.body)
                          if not (isinstance(x, A.DeclStmt) and x.decls[0].name == "xp_t"))
            cond = n.cond if n.cond is not None else A.lit(1)
            return A.If(cond, A.DoWhile(A.Block(stmts), A.lit(0)))
        return None

    body = A.rewrite(ty.body, to_thread)
    return body if found[0] else None


class _Rebinder:
    def __init__(self, runtime_names: set[str] | None = None) -> None:
        self.runtime_names = runtime_names or set()
        self.dynamic: list[tuple[str, A.Type, tuple[A.Expr | None, ...]]] = []
        self.thread_arrays: set[str] = set()

    def block_stmts(self, stmts: tuple[A.Stmt, ...]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        for s in stmts:
            out.extend(self.block_stmt(s))
        return out

    def block_stmt(self, s: A.Stmt) -> list[A.Stmt]:
        body = _thread_body(s) if isinstance(s, (A.For, A.Block)) else None
        if body is not None:
            barrier = A.ExprStmt(A.call("__syncthreads"))
            return [barrier, A.Block((body,)) if not isinstance(body, A.Block) else body, barrier]
        if isinstance(s, A.DeclStmt):
            out: list[A.Stmt] = []
            for d in s.decls:
                if d.dims and any(isinstance(x, A.Name) and x.id == "xp_nt" for x in d.dims[:1]):
                    self.thread_arrays.add(d.name)
                    self.dynamic.append((d.name, d.type, d.dims[1:]))
                    out.append(A.Opaque(f"{self._pointer_decl(d.name, d.type, d.dims[1:])}"))
                elif d.name == "xp_dsmem":
                    self.dynamic.append((d.name, d.type, ()))
                    out.append(A.Opaque("double* xp_dsmem = (double*)(xp_shm + xp_off_xp_dsmem);"))
                elif d.dims:
                    runtime = {n.id for x in d.dims if x is not None for n in A.walk(x) if isinstance(n, A.Name)
                               and (n.id in self.runtime_names or n.id.startswith("xp_"))}
                    if runtime:
                        raise PassRefused(f"block array '{d.name}' is sized by run-time values "
                                          f"({', '.join(sorted(runtime))})")
                    out.append(A.DeclStmt((A.replace(d, storage=("__shared__",)),)))
                elif d.init is None:
                    # block-level scalars without an initializer were __shared__ variables in the source
                    # (thread-independent values recovery hoisted always carry their initializer)
                    out.append(A.DeclStmt((A.replace(d, storage=("__shared__",)),)))
                else:
                    out.append(A.DeclStmt((d,)))
            return out
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.callee == "memset" and isinstance(
                s.expr.args[0], A.Name) and s.expr.args[0].id in self.thread_arrays:
            return [A.ExprStmt(A.assign(A.Index(s.expr.args[0], A.Name("xp_t")), A.lit(0))),
                    A.ExprStmt(A.call("__syncthreads"))]
        if isinstance(s, A.For):
            return [A.replace(s, body=A.Block(tuple(self.block_stmts(A.stmts_of(s.body)))))]
        if isinstance(s, A.While):
            return [A.replace(s, body=A.Block(tuple(self.block_stmts(A.stmts_of(s.body)))))]
        if isinstance(s, A.If):
            return [A.replace(s, then=A.Block(tuple(self.block_stmts(A.stmts_of(s.then)))),
                              else_=None if s.else_ is None else A.Block(tuple(self.block_stmts(A.stmts_of(s.else_)))))]
        if isinstance(s, A.Block):
            return [A.Block(tuple(self.block_stmts(s.stmts)))]
        return [s]

    @staticmethod
    def _pointer_decl(name: str, t: A.Type, extra: tuple[A.Expr | None, ...]) -> str:
        base = print_node(t, Dialect.CUDA)
        if not extra:
            return f"{base}* {name} = ({base}*)(xp_shm + xp_off_{name});"
        dims = "".join(f"[{print_node(x, Dialect.CUDA)}]" for x in extra if x is not None)
        return f"{base} (*{name}){dims} = ({base} (*){dims})(xp_shm + xp_off_{name});"


def _calls(s: A.Stmt, name: str) -> bool:
    return any(isinstance(n, A.Call) and isinstance(n.func, A.Name) and n.func.id == name for n in A.walk(s))


def _general_nest(stmts: list[A.Stmt], depth: int = 0) -> tuple[list[A.Stmt], int] | None:
    """The statements with the recovered block nest at top level, and its index. CPU fast paths keep the
    nest as the general (else) branch of ``if (special launch) {...} else {nest}`` (grid_flatten,
    affine_index, the serial copy of a parallel loop), possibly nested: the else branches are followed."""
    for i, s in enumerate(stmts):
        if _loop_var(s) == "xp_bz":
            return stmts, i
    if depth > 8:
        return None
    for i, s in enumerate(stmts):
        if isinstance(s, A.If) and s.else_ is not None:
            inner = _general_nest(list(A.stmts_of(s.else_)), depth + 1)
            if inner is not None:
                general, at = inner
                return [*stmts[:i], *general, *stmts[i + 1:]], i + at
    return None


def rebind_function(fn: A.Function) -> tuple[A.Function, A.Function]:
    """(kernel, host launcher) for one recovered function."""
    found = _general_nest(list(fn.body.stmts))
    stmts, nest_at = found if found is not None else ([], None)
    if nest_at is None:
        raise PassRefused(f"'{fn.name}' does not have the recovered block loop nest")
    prefix = [s for s in stmts[:nest_at] if not isinstance(s, A.Pragma)]
    cur: A.Stmt = stmts[nest_at]
    for var in _BLOCK_VARS:
        loop = _strip_to(cur, var)
        if loop is None:
            raise PassRefused(f"'{fn.name}': block loop over {var} not found")
        cur = loop.body
    rb = _Rebinder({p.name for p in fn.params if isinstance(p, A.Param) and p.name}
                   | {d.name for d in A.walk(fn.body) if isinstance(d, A.VarDecl)})
    body = rb.block_stmts(A.stmts_of(cur))
    ids = [A.Opaque("const int xp_bx = blockIdx.x, xp_by = blockIdx.y, xp_bz = blockIdx.z;"),
           A.Opaque("const int xp_tx = threadIdx.x, xp_ty = threadIdx.y, xp_tz = threadIdx.z;"),
           A.Opaque("const int xp_t = xp_tx + xp_bdx * (xp_ty + xp_bdy * xp_tz);"),
           A.Opaque("extern __shared__ double xp_shm_words[];"),
           A.Opaque("char* xp_shm = (char*)xp_shm_words;")]
    offsets: list[A.Stmt] = []
    sizes: list[str] = []
    running = "(size_t)0"
    for name, t, extra in rb.dynamic:
        base = print_node(t, Dialect.CUDA)
        count = " * ".join([f"(size_t)({print_node(x, Dialect.CUDA)})" for x in extra if x is not None]) or "1"
        if name == "xp_dsmem":
            size = "((xp_smem + 15) / 16 * 16)"
        else:
            size = f"(((size_t)xp_nt * sizeof({base}) * {count} + 15) / 16 * 16)"
        offsets.append(A.Opaque(f"const size_t xp_off_{name} = {running};"))
        running = f"{running} + {size}"
        sizes.append(size)
    kernel_body = A.Block((*prefix, *offsets, *ids, *body))
    kname = f"{fn.name}_gpu"
    quals = tuple(q for q in fn.qualifiers if q not in ("static", "inline")) + ("__global__",)
    kernel = A.replace(fn, name=kname, body=kernel_body, qualifiers=quals, linkage=None)
    names = [p.name for p in fn.params if isinstance(p, A.Param) and p.name]
    templ = ""
    if fn.template:
        targs = [w.split()[-1] for w in fn.template.strip().strip("<>").split(",")]
        templ = "<" + ", ".join(targs) + ">"
    launch_text = (f"const int xp_nt = (int)(xp_block.x * xp_block.y * xp_block.z); (void)xp_nt;\n"
                   f"    const size_t xp_bytes = {running};\n"
                   f"    if (xp_grid.x * xp_grid.y * xp_grid.z == 0 || xp_nt == 0) return;\n"
                   f"    {kname}{templ}<<<xp_grid, xp_block, xp_bytes>>>({', '.join(names)});")
    host = A.replace(fn, body=A.Block((A.Opaque(launch_text),)))
    return kernel, host


def _device_side(module: A.Module) -> tuple[set[str], set[str], set[str]]:
    """(functions called from recovered kernels, functions called from host code, globals kernels read)."""
    kernels = [f for f in module.functions() if is_recovered(f)]
    hosts = [f for f in module.functions() if not is_recovered(f) and (f.linkage == "C" or "static" not in f.qualifiers)]
    device = called_functions(module, kernels, is_recovered)
    host = called_functions(module, hosts, is_recovered)
    global_names = {d.name for i in module.items if isinstance(i, A.DeclStmt) for d in i.decls}
    read = {n.id for f in kernels for n in A.walk(f.body) if isinstance(n, A.Name)} & global_names
    return device, host, read


def _without_cpu_gemm(module: A.Module) -> A.Module:
    """The module without cpu_gemm's CPU-only micro-kernel: its helpers (named ``xp_gemm_*``/``xp_sgemm``) and
    the fast paths that call it (``if (launch fits) { xp_sgemm(...); return; }``); the loops stay."""
    items: list[Any] = []
    for item in module.items:
        if isinstance(item, A.Comment) and item.text.strip() == GEMM_MARK:
            continue
        if isinstance(item, A.Opaque) and ("XP_GEMM_" in item.text or "xp_gemm_v8" in item.text):
            continue
        if isinstance(item, A.Function) and (item.name.startswith("xp_gemm_") or item.name == GEMM_ENTRY):
            continue
        if isinstance(item, A.Function) and is_recovered(item):
            kept = tuple(s for s in item.body.stmts if not (isinstance(s, A.If) and _calls(s, GEMM_ENTRY)))
            item = A.replace(item, body=A.replace(item.body, stmts=kept))
        items.append(item)
    return A.replace(module, items=tuple(items))


def rebind_module(module: A.Module) -> A.Module:
    module = _without_cpu_gemm(module)
    items: list[Any] = []
    found = False
    device, host, device_globals = _device_side(module)
    for item in module.items:
        if isinstance(item, A.Pragma) and item.text.startswith("GCC target"):
            continue  # host vector extensions of the CPU build mean nothing to nvcc
        if isinstance(item, A.Opaque) and item.text.strip().startswith("#define XPILER_"):
            continue
        if isinstance(item, A.DeclStmt) and any(d.name in device_globals for d in item.decls):
            item = A.DeclStmt(tuple(A.replace(d, storage=(*d.storage, "__device__")) for d in item.decls))
        if isinstance(item, A.Opaque) and item.text.startswith("/* xpiler CPU prelude */"):
            items.append(A.Opaque(GPU_PRELUDE))
            continue
        if isinstance(item, A.Function) and is_recovered(item):
            kernel_fn, host_fn = rebind_function(item)
            items.extend([kernel_fn, host_fn])
            found = True
            continue
        if isinstance(item, A.Function) and item.name in device:
            extra = ("__host__", "__device__") if item.name in host else ("__device__",)
            item = A.replace(item, qualifiers=(*item.qualifiers, *extra))
        items.append(item)
    if not found:
        raise PassRefused("no loop-recovered function to bind to CUDA blocks and threads")
    if not any(isinstance(i, A.Opaque) and i.text.startswith("/* xpiler GPU prelude */") for i in items):
        items.insert(0, A.Opaque(GPU_PRELUDE))
    return A.replace(module, items=tuple(items), dialect=Dialect.CUDA)
