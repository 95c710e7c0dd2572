"""Loop binding: map loops onto the target's parallel constructs.

CPU target (``c``): the block loop nest made by loop recovery (``xp_bz``/``xp_by``/``xp_bx``), or the loop
named by ``loop=VAR`` in plain C, gets ``#pragma omp parallel for`` (with ``collapse``, ``schedule``,
``num_threads``); innermost thread loops (``xp_tx``) or the innermost loop under a named loop get
``#pragma omp simd`` when their body is free of atomics, jumps out and unmodeled code.

CUDA target: a C function's parallel loop (``#pragma omp parallel for`` or ``loop=VAR``), canonical
``for (i = a; i < n; i += 1)``, becomes a ``__global__`` kernel with ``i = a + blockIdx.x * blockDim.x +
threadIdx.x`` and a remainder guard ``if (i < n)``; a second collapsed loop binds to the y dimension.
The C function becomes an ``extern "C"`` host entry that launches it (``block`` threads per block).
Refuses when the loop body carries a dependence it cannot see through (scalar written and read across
iterations, ``break``/``return``, unmodeled code).
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.frontend.dialect import Dialect
from xpiler_core.passes._ast_support import (
    bool_param,
    calls_in,
    enter,
    has_jumps,
    int_param,
    leave,
    scalar_writes,
)
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused

INFO = PassInfo(
    name="loop_binding",
    summary="Bind loops to OpenMP threads/SIMD lanes (CPU) or to CUDA blocks/threads with remainder guards",
    kind="ast",
    directions=("cuda->cpu", "c->cuda"),
    params=(
        ParamSpec("loop", "str", "", "variable of the loop to bind (default: recovered block loops / omp loops)"),
        ParamSpec("collapse", "int", 3, "loops collapsed into the parallel loop", (1, 2, 3)),
        ParamSpec("schedule", "str", "static", "OpenMP schedule", ("static", "dynamic", "guided")),
        ParamSpec("threads", "int", 0, "OpenMP num_threads (0: runtime default)", (0, 1, 2, 4, 8, 16)),
        ParamSpec("simd", "bool", True, "add #pragma omp simd to innermost thread loops when safe", (True, False)),
        ParamSpec("block", "int", 256, "CUDA threads per block (c->cuda)", (64, 128, 256, 512, 1024)),
        ParamSpec("min_parallel", "int", 65536, "recovered kernels run serially below this many CUDA threads "
                  "(an OpenMP fork/join costs more than small grids take)", (0, 4096, 16384, 65536, 262144)),
    ),
)

_ATOMIC_PREFIX = ("atomic", "xp_shfl", "xp_ballot", "xp_any", "xp_all", "printf", "memset")


def _simd_safe(body: A.Stmt) -> bool:
    if any(isinstance(n, (A.Opaque, A.Break, A.Return)) for n in A.walk(body)):
        return False
    if any(c.startswith(_ATOMIC_PREFIX) for c in calls_in(body)):
        return False
    # a nested loop inside keeps the inner loop as the vector candidate
    return not any(isinstance(n, (A.For, A.While, A.DoWhile)) for n in A.walk(body) if n is not body)


def _pragma_before(stmts: tuple[A.Stmt, ...], index: int, text: str) -> tuple[A.Stmt, ...]:
    if index > 0 and isinstance(stmts[index - 1], A.Pragma) and stmts[index - 1].text.startswith("omp"):
        return stmts
    return (*stmts[:index], A.Pragma(text), *stmts[index:])


def _bind_cpu(fn: A.Function, params: dict[str, Any]) -> A.Function:
    wanted = str(params.get("loop") or "")
    collapse = int_param(params, "collapse", 3, 1, 3)
    schedule = str(params.get("schedule") or "static")
    if schedule not in ("static", "dynamic", "guided"):
        raise PassRefused(f"unknown OpenMP schedule '{schedule}'")
    threads = int_param(params, "threads", 0, 0, 4096)
    simd = bool_param(params, "simd", True)
    min_parallel = int_param(params, "min_parallel", 65536, 0, 1 << 30)
    outer_var = wanted or "xp_bz"
    recovered = not wanted
    bound = 0

    class _Bind(A.Transformer):
        def visit_Block(self, block: A.Block) -> A.Block:  # noqa: N802
            nonlocal bound
            block = self.generic_visit(block)
            stmts = block.stmts
            i = 0
            while i < len(stmts):
                s = stmts[i]
                if isinstance(s, A.For):
                    view = s.canonical()
                    if view is not None and view.var == outer_var:
                        depth = min(collapse, _perfect_depth(s)) if recovered else 1
                        if not recovered:
                            _check_parallel(s)
                        clause = f"omp parallel for schedule({schedule})"
                        if depth > 1:
                            clause = f"omp parallel for collapse({depth}) schedule({schedule})"
                        if threads:
                            clause += f" num_threads({threads})"
                        if recovered and min_parallel > 0:
                            clause += f" if(xp_gdx * xp_gdy * xp_gdz * xp_nt >= {min_parallel})"
                        new = _pragma_before(stmts, i, clause)
                        if new is not stmts:
                            bound += 1
                            stmts = new
                            i += 1
                    elif simd and view is not None and view.var == "xp_tx" and _simd_safe(s.body):
                        new = _pragma_before(stmts, i, "omp simd")
                        if new is not stmts:
                            stmts = new
                            i += 1
                i += 1
            return A.replace(block, stmts=stmts) if stmts is not block.stmts else block

        def visit_For(self, loop: A.For) -> A.For:  # noqa: N802
            # single-statement bodies (thread loop nests) are wrapped so pragmas have a place
            inner = self.generic_visit(loop)
            if isinstance(inner.body, A.For):
                wrapped = self.visit_Block(A.Block((inner.body,)))
                if len(wrapped.stmts) > 1:
                    return A.replace(inner, body=wrapped)
            return inner

    out = _Bind().visit(fn)
    if not bound:
        raise PassRefused(f"no loop over '{outer_var}' to bind in '{fn.name}'")
    return out


def _perfect_depth(loop: A.For) -> int:
    depth, cur = 1, loop.body
    while isinstance(cur, A.For) and depth < 3:
        depth += 1
        cur = cur.body
    return depth


def _check_parallel(loop: A.For) -> None:
    """Iterations must be independent as far as scalars go: a scalar declared outside and written inside
    is a carried dependence (reductions included), which plain ``parallel for`` would race on."""
    view = loop.canonical()
    if view is None:
        raise PassRefused("the loop is not a canonical counted loop", loop.span)
    if has_jumps([loop.body]):
        raise PassRefused("the loop body jumps out (break/return/goto)", loop.span)
    declared = {d.name for d in A.walk(loop.body) if isinstance(d, A.VarDecl)}
    carried = scalar_writes(loop.body) - declared - {view.var}
    if carried:
        raise PassRefused(f"scalar(s) {', '.join(sorted(carried))} carried across iterations", loop.span)


def _bind_cuda(module: A.Module, fn: A.Function, params: dict[str, Any]) -> A.Module:
    wanted = str(params.get("loop") or "")
    block_size = int_param(params, "block", 256, 1, 1024)
    target: A.For | None = None
    stmts = list(fn.body.stmts)
    pos = -1
    for i, s in enumerate(stmts):
        if isinstance(s, A.For):
            view = s.canonical()
            marked = i > 0 and isinstance(stmts[i - 1], A.Pragma) and "parallel for" in stmts[i - 1].text
            if view is not None and ((wanted and view.var == wanted) or (not wanted and marked)):
                target, pos = s, i
                break
    if target is None:
        raise PassRefused(f"no top-level parallel loop{' over ' + wanted if wanted else ''} in '{fn.name}'")
    _check_parallel(target)
    view = target.canonical()
    assert view is not None
    if A.const_int(view.step) != 1:
        raise PassRefused("only unit-stride loops bind to threads", target.span)
    if pos != len(stmts) - 1 and any(not isinstance(s, (A.Return, A.Empty, A.Comment)) for s in stmts[pos + 1:]):
        raise PassRefused("statements after the parallel loop would need a grid-wide barrier", target.span)
    pre = [s for s in stmts[:pos] if not (isinstance(s, A.Pragma) and s.text.startswith("omp"))]
    if any(isinstance(n, (A.Assign,)) and not isinstance(n.target, A.Name) for s in pre for n in A.walk(s)):
        raise PassRefused("memory writes before the parallel loop would run once per thread", target.span)
    body = target.body
    inner_bind: list[A.Stmt] = []
    dims = 1
    inner_loop = body if isinstance(body, A.For) else (
        body.stmts[-1] if isinstance(body, A.Block) and len(body.stmts) == 1 and isinstance(body.stmts[0], A.For)
        else None)
    collapse = int_param(params, "collapse", 1, 1, 3)
    guard = A.binop("<", A.Name(view.var), view.stop)
    if collapse >= 2 and isinstance(inner_loop, A.For):
        iview = inner_loop.canonical()
        if iview is not None and A.const_int(iview.step) == 1 and not (
                A.walk(iview.stop) and {n.id for n in A.walk(iview.stop) if isinstance(n, A.Name)} & {view.var}):
            dims = 2
            inner_bind.append(A.decl(iview.var, iview.var_type or A.ctype("int"),
                                     A.binop("+", iview.start, A.binop("+", A.binop(
                                         "*", A.member(A.Name("blockIdx"), "x"), A.member(A.Name("blockDim"), "x")),
                                         A.member(A.Name("threadIdx"), "x")))))
            guard = A.binop("&&", guard, A.binop("<", A.Name(iview.var), iview.stop))
            body = inner_loop.body
    axis = "y" if dims == 2 else "x"
    index = A.binop("+", view.start, A.binop("+", A.binop("*", A.member(A.Name("blockIdx"), axis),
                                                           A.member(A.Name("blockDim"), axis)),
                                              A.member(A.Name("threadIdx"), axis)))
    kbody = A.Block((*pre, A.decl(view.var, view.var_type or A.ctype("int"), index), *inner_bind,
                     A.If(A.Unary("!", guard), A.Return()), *A.stmts_of(body)))
    kname = f"{fn.name}_kernel"
    params_list = tuple(p for p in fn.params if isinstance(p, A.Param))
    kernel = A.Function(kname, A.ctype("void"), params_list, kbody, qualifiers=("__global__",))
    args = tuple(A.Name(p.name) for p in params_list if p.name)
    bs = A.lit(block_size if dims == 1 else 16)
    count_outer = A.binop("-", view.stop, view.start)
    if dims == 1:
        grid: A.Expr = A.binop("/", A.binop("+", count_outer, A.binop("-", bs, A.lit(1))), bs)
        block: A.Expr = bs
    else:
        iview = inner_loop.canonical() if isinstance(inner_loop, A.For) else None
        assert iview is not None
        count_inner = A.binop("-", iview.stop, iview.start)
        grid = A.call("dim3", A.binop("/", A.binop("+", count_inner, A.lit(15)), A.lit(16)),
                      A.binop("/", A.binop("+", count_outer, A.lit(15)), A.lit(16)))
        block = A.call("dim3", A.lit(16), A.lit(16))
    launch = A.Launch(A.Name(kname), (grid, block), args)
    host_pre: list[A.Stmt] = []
    count_pos = A.binop(">", count_outer, A.lit(0))
    host = A.replace(fn, body=A.Block((*host_pre, A.If(count_pos, A.ExprStmt(launch)),)), linkage="C",
                     qualifiers=tuple(q for q in fn.qualifiers if q not in ("static", "inline")))
    items: list[Any] = []
    for item in module.items:
        if item is fn:
            items.extend([kernel, host])
        else:
            items.append(item)
    return A.replace(module, items=tuple(items), dialect=Dialect.CUDA)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    if ctx.target is Dialect.CUDA or ctx.target is Dialect.HIP:
        from xpiler_core.passes._rebind_gpu import is_recovered, rebind_module

        if any(is_recovered(f) for f in module.functions()):
            out = rebind_module(module)
            ctx.notes.append("loop binding: recovered block loops → blockIdx, thread loops → threadIdx")
            return leave(unit, out, ctx, Dialect.CUDA)
        candidates = [f for f in module.functions() if not f.is_kernel and any(
            isinstance(s, A.For) for s in f.body.stmts)]
        if not candidates:
            raise PassRefused("no function with a top-level loop to bind to CUDA threads")
        wanted_fn = str(params.get("function") or "")
        fn = next((f for f in candidates if f.name == wanted_fn), candidates[0])
        out = _bind_cuda(module, fn, params)
        ctx.notes.append(f"loop binding: {fn.name} → __global__ {fn.name}_kernel")
        return leave(unit, out, ctx, Dialect.CUDA)
    changed = False
    items: list[Any] = []
    reasons: list[str] = []
    for item in module.items:
        if isinstance(item, A.Function) and (params.get("loop") or any(
                isinstance(n, A.For) and (n.canonical() or None) and n.canonical().var == "xp_bz"  # type: ignore[union-attr]
                for n in A.walk(item.body))):
            try:
                item = _bind_cpu(item, params)
                changed = True
            except PassRefused as refusal:
                reasons.append(refusal.reason)
        items.append(item)
    if not changed:
        raise PassRefused("; ".join(reasons) or "no recovered block loop (run loop_recovery) and no loop=VAR given")
    ctx.notes.append("loop binding: OpenMP parallel for over blocks" + (", simd over threads" if
                                                                       bool_param(params, "simd", True) else ""))
    return leave(unit, A.replace(module, items=tuple(items)), ctx, Dialect.C)
