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
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    bool_param,
    called_functions,
    calls_in,
    enter,
    has_jumps,
    int_param,
    is_serial_copy,
    leave,
    names_in,
    parallel_or_serial,
    scalar_writes,
    strip_int_casts,
)
from xpiler_core.passes.support.cpu_prelude import PRELUDE_MARK
from xpiler_core.passes.support.gpu_reduction import (
    SumReduction,
    find_sum_reductions,
    host_combine,
    host_setup,
    kernel_params,
    partial_decls,
    partial_flush,
    rewrite_updates,
)
from xpiler_core.passes.support.independence import independence_problem

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
        ParamSpec("bound_guards", "bool", True, "turn thread loops' remainder guards (if (i < n)) into loop "
                  "bounds and unswitch thread-independent branches, so the loops vectorize", (True, False)),
        ParamSpec("isa", "str", "", "instruction-set extensions to compile the CPU output for "
                  "(#pragma GCC target), e.g. avx2,fma,f16c; empty: the compiler's baseline",
                  ("", "avx2,fma,f16c", "avx512f,avx512bw,avx512vl,fma,f16c")),
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
    prev = stmts[index - 1] if index > 0 else None
    if isinstance(prev, A.Pragma) and prev.text.startswith("omp"):
        return stmts
    return (*stmts[:index], A.Pragma(text), *stmts[index:])


# ---- remainder guards → loop bounds (so the thread loop has no control flow and vectorizes) ----------
_THREAD_LOCAL = ("xp_tx", "xp_t")


def _invariant(expr: A.Expr, local: set[str]) -> bool:
    """Thread-independent and side-effect free: no thread index, no body-local names, no memory or calls."""
    for n in A.walk(expr):
        if isinstance(n, A.Name) and (n.id in _THREAD_LOCAL or n.id in local):
            return False
        if isinstance(n, (A.Index, A.Call, A.Assign, A.Opaque)) or (isinstance(n, A.Unary) and n.op in (
                "*", "++", "--")):
            return False
    return True


def _tx_offset(expr: A.Expr, local: set[str]) -> A.Expr | None:
    """``expr`` = ``xp_tx + X`` with X invariant → X; else ``None``."""
    while isinstance(expr, A.Cast) and expr.type.base == "int" and not expr.type.pointers:
        expr = expr.operand
    if expr == A.Name("xp_tx"):
        return A.lit(0)
    if isinstance(expr, A.Binary) and expr.op == "+":
        for a, b in ((expr.left, expr.right), (expr.right, expr.left)):
            inner = _tx_offset(a, local)
            if inner is not None and _invariant(b, local):
                return b if inner == A.lit(0) else A.binop("+", b, inner)
    return None


def _guard_bound(cond: A.Expr, defs: dict[str, A.Expr], local: set[str]) -> A.Expr | None:
    """``E < N`` with E = xp_tx + X (after substituting the body's definitions) → N - X."""
    if not (isinstance(cond, A.Binary) and cond.op in ("<", ">")):
        return None
    e, bound = (cond.left, cond.right) if cond.op == "<" else (cond.right, cond.left)
    for _ in range(4):
        names = {n.id for n in A.walk(e) if isinstance(n, A.Name)} & set(defs)
        if not names:
            break
        e = A.substitute(e, {k: defs[k] for k in names})
    offset = _tx_offset(e, local)
    if offset is None or not _invariant(bound, local):
        return None
    return A.binop("-", bound, offset)


def _nondecreasing(e: A.Expr, var: str) -> bool:
    """``e`` never decreases when ``var`` grows (the others fixed): built from ``var`` by ``+``, ``-`` of what
    does not read it, products with non-negative constants, ``/`` and ``>>`` by positive constants."""
    e = strip_int_casts(e)
    if var not in names_in(e):
        return True
    if e == A.Name(var):
        return True
    if isinstance(e, A.Binary):
        if e.op == "+":
            return _nondecreasing(e.left, var) and _nondecreasing(e.right, var)
        if e.op == "-":
            return _nondecreasing(e.left, var) and var not in names_in(e.right)
        if e.op == "*":
            for a, b in ((e.left, e.right), (e.right, e.left)):
                k = A.const_int(a)
                if k is not None and k >= 0:
                    return _nondecreasing(b, var)
            return False
        if e.op in ("/", ">>"):
            k = A.const_int(e.right)
            return k is not None and k > 0 and _nondecreasing(e.left, var)
    return False


def _last_thread_passes(cond: A.Expr, defs: dict[str, A.Expr], local: set[str]) -> A.Expr | None:
    """For ``L < R`` (or ``R > L``, ``<=``/``>=``) with ``L`` non-decreasing in ``xp_tx`` and ``R`` thread-
    independent, the guard evaluated for the block's last thread: when it holds, every thread's does."""
    if not (isinstance(cond, A.Binary) and cond.op in ("<", "<=", ">", ">=")):
        return None
    for _ in range(4):
        names = {n.id for n in A.walk(cond) if isinstance(n, A.Name)} & set(defs)
        if not names:
            break
        cond = A.substitute(cond, {k: defs[k] for k in names})
    assert isinstance(cond, A.Binary)
    growing, fixed = (cond.left, cond.right) if cond.op in ("<", "<=") else (cond.right, cond.left)
    if not _invariant(fixed, local) or not _nondecreasing(growing, "xp_tx"):
        return None
    names = names_in(growing)
    if "xp_tx" not in names or (names - {"xp_tx"}) & (local | {"xp_t"}) or any(
            isinstance(n, (A.Index, A.Call, A.Assign, A.Opaque)) for n in A.walk(growing)):
        return None
    last = A.binop("-", A.Name("xp_bdx"), A.lit(1))
    return A.substitute(cond, {"xp_tx": last})


def _negated_guard(cond: A.Expr) -> A.Expr | None:
    """The continue condition ``E >= N`` as the keep condition ``E < N``."""
    if isinstance(cond, A.Binary) and cond.op == ">=":
        return A.binop("<", cond.left, cond.right)
    if isinstance(cond, A.Binary) and cond.op == "<=":
        return A.binop(">", cond.left, cond.right)
    return None


def _refine_thread_loop(loop: A.For, counter: list[int]) -> A.Stmt:
    body = list(A.stmts_of(loop.body))
    head = [s for s in body[:1] if isinstance(s, A.DeclStmt) and s.decls[0].name == "xp_t"]
    rest = body[len(head):]
    local = {d.name for s in rest for d in (s.decls if isinstance(s, A.DeclStmt) else ())}
    # unswitch a thread-independent if/else
    if len(rest) == 1 and isinstance(rest[0], A.If) and _invariant(rest[0].cond, local | {"xp_t"}):
        branch = rest[0]
        then = _refine_thread_loop(A.replace(loop, body=A.Block((*head, *A.stmts_of(branch.then)))), counter)
        other = None if branch.else_ is None else _refine_thread_loop(
            A.replace(loop, body=A.Block((*head, *A.stmts_of(branch.else_)))), counter)
        return A.If(branch.cond, A.Block((then,)), None if other is None else A.Block((other,)))
    defs: dict[str, A.Expr] = {}
    k = 0
    while k < len(rest) and isinstance(rest[k], A.DeclStmt):
        decl_stmt = rest[k]
        assert isinstance(decl_stmt, A.DeclStmt)
        for d in decl_stmt.decls:
            if d.init is not None and not d.dims:
                defs[d.name] = d.init
        k += 1
    if k >= len(rest) or not isinstance(rest[k], A.If):
        return loop
    guard = rest[k]
    assert isinstance(guard, A.If)
    kept: list[A.Stmt] | None = None
    bound: A.Expr | None = None
    if k == len(rest) - 1 and guard.else_ is None:
        bound = _guard_bound(guard.cond, defs, local)
        kept = [*rest[:k], *A.stmts_of(guard.then)]
        last = _last_thread_passes(guard.cond, defs, local) if bound is None else None
        if last is not None and not any(isinstance(n, A.Continue) for st in kept for n in A.walk(st)):
            # every thread passes when the last one does: that block runs the body unguarded
            return A.If(last, A.Block((A.replace(loop, body=A.Block((*head, *kept))),)), A.Block((loop,)))
    elif guard.else_ is None and A.stmts_of(guard.then) in ((A.Continue(),),):
        keep = _negated_guard(guard.cond)
        bound = _guard_bound(keep, defs, local) if keep is not None else None
        kept = [*rest[:k], *rest[k + 1:]]
    if bound is None or kept is None:
        return loop
    if any(isinstance(n, A.Continue) for s in kept for n in A.walk(s)):
        return loop
    counter[0] += 1
    hi = f"xp_hi{counter[0]}"
    limit = A.decl(hi, A.ctype("int", 0, ("const",)), A.call("xp_min", A.Name("xp_bdx"), A.Cast(A.ctype("int"), bound)))
    new_loop = A.For(loop.init, A.binop("<", A.Name("xp_tx"), A.Name(hi)), loop.step, A.Block((*head, *kept)))
    return A.Block((limit, new_loop))


def _refine_guards(fn: A.Function) -> A.Function:
    counter = [0]

    def visit(loop: A.For) -> A.Stmt | None:
        view = loop.canonical()
        if view is not None and view.var == "xp_tx":
            return _refine_thread_loop(loop, counter)
        return None

    from xpiler_core.passes.support.ast_support import map_loops

    out: A.Function = map_loops(fn, visit)
    return out


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
                    if view is not None and view.var == outer_var and not is_serial_copy(stmts, i):
                        depth = min(collapse, _perfect_depth(s)) if recovered else 1
                        if not recovered:
                            _check_parallel(s)
                        clause = f"omp parallel for schedule({schedule})"
                        if depth > 1:
                            clause = f"omp parallel for collapse({depth}) schedule({schedule})"
                        if threads:
                            clause += f" num_threads({threads})"
                        prev = stmts[i - 1] if i > 0 else None
                        # g++ (12) leaves `omp simd reduction` loops of the block body scalar when the nest is not
                        # outlined by an OpenMP region (measured: a layernorm row 5x slower): such nests keep the
                        # region, with an if clause
                        simd_reduction = any(isinstance(n, A.Pragma) and "simd" in n.text and "reduction(" in n.text
                                             for n in A.walk(s))
                        if recovered and min_parallel > 0 and simd_reduction:
                            clause += f" if(xp_gdx * xp_gdy * xp_gdz * xp_nt >= {min_parallel})"
                        if recovered and min_parallel > 0 and not simd_reduction and not (
                                isinstance(prev, A.Pragma) and prev.text.startswith("omp")):
                            total = A.binop("*", A.binop("*", A.binop("*", A.name("xp_gdx"), A.name("xp_gdy")),
                                                         A.name("xp_gdz")), A.name("xp_nt"))
                            versioned = parallel_or_serial(s, clause, A.binop(">=", total, A.lit(min_parallel)))
                            stmts = (*stmts[:i], versioned, *stmts[i + 1:])
                            bound += 1
                            i += 1
                            continue
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

    if recovered and bool_param(params, "bound_guards", True):
        fn = _refine_guards(fn)
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


def _sum_reductions(fn: A.Function, loop: A.For) -> list[SumReduction]:
    """The loop's carried scalars when every one is a sum reduction (bound with atomics); else none."""
    view = loop.canonical()
    if view is None:
        return []
    declared = {d.name for d in A.walk(loop.body) if isinstance(d, A.VarDecl)}
    carried = scalar_writes(loop.body) - declared - {view.var}
    if not carried:
        return []
    found = find_sum_reductions(loop, carried, A.declared_types(fn))
    return found if isinstance(found, list) else []


def _check_parallel(loop: A.For, reduced: set[str] | frozenset[str] = frozenset()) -> None:
    """Iterations must be independent as far as scalars go: a scalar declared outside and written inside
    is a carried dependence (reductions included), which plain ``parallel for`` would race on."""
    view = loop.canonical()
    if view is None:
        raise PassRefused("the loop is not a canonical counted loop", loop.span)
    if has_jumps([loop.body]):
        raise PassRefused("the loop body jumps out (break/return/goto)", loop.span)
    declared = {d.name for d in A.walk(loop.body) if isinstance(d, A.VarDecl)}
    carried = scalar_writes(loop.body) - declared - {view.var} - reduced
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
            prev = stmts[i - 1] if i > 0 else None
            marked = isinstance(prev, A.Pragma) and "parallel for" in prev.text
            if view is not None and ((wanted and view.var == wanted) or (not wanted and marked)):
                target, pos = s, i
                break
    if target is None and not wanted:
        # no OpenMP marking: a top-level loop whose iterations are provably independent binds all the same
        reasons: list[str] = []
        for i, s in enumerate(stmts):
            if isinstance(s, A.For):
                problem = independence_problem(s, _constant_scalars(fn))
                if problem is None:
                    try:
                        _check_parallel(s, {r.name for r in _sum_reductions(fn, s)})
                    except PassRefused as refusal:
                        problem = refusal.reason
                if problem is None:
                    target, pos = s, i
                    break
                reasons.append(problem)
        if target is None and reasons:
            raise PassRefused(f"no loop of '{fn.name}' is marked parallel (#pragma omp parallel for) and none is "
                              f"provably parallel: {reasons[0]}", next(s for s in stmts if isinstance(s, A.For)).span)
    if target is None:
        raise PassRefused(f"no top-level parallel loop{' over ' + wanted if wanted else ''} in '{fn.name}'")
    reductions = _sum_reductions(fn, target)
    _check_parallel(target, {r.name for r in reductions})
    view = target.canonical()
    assert view is not None
    if A.const_int(view.step) != 1:
        raise PassRefused("only unit-stride loops bind to threads", target.span)
    post = [s for s in stmts[pos + 1:] if not isinstance(s, (A.Empty, A.Comment))]
    if post and not reductions:
        raise PassRefused("statements after the parallel loop would need a grid-wide barrier", target.span)
    if any(isinstance(n, A.Return) for s in post for n in A.walk(s)) and not isinstance(post[-1], A.Return):
        raise PassRefused("an early return after the parallel loop", target.span)
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
    if collapse >= 2 and isinstance(inner_loop, A.For) and not _independent(inner_loop, _constant_scalars(fn)):
        inner_loop = None  # its iterations share memory or scalars: it stays a loop inside each thread
    if collapse >= 2 and isinstance(inner_loop, A.For):
        iview = inner_loop.canonical()
        if iview is not None and A.const_int(iview.step) == 1 and not (
                A.walk(iview.stop) and {n.id for n in A.walk(iview.stop) if isinstance(n, A.Name)} & {view.var}):
            dims = 2
            inner_bind.append(A.decl(iview.var, iview.var_type or A.ctype("int"),
                                     _global_thread_index(iview.start, "x")))
            guard = A.binop("&&", guard, A.binop("<", A.Name(iview.var), iview.stop))
            body = inner_loop.body
    axis = "y" if dims == 2 else "x"
    index = _global_thread_index(view.start, axis)
    work = A.stmts_of(rewrite_updates(body, reductions)) if reductions else A.stmts_of(body)
    reduced = {r.name for r in reductions}
    kernel_pre = [s for s in pre if not (isinstance(s, A.DeclStmt) and all(d.name in reduced for d in s.decls))]
    kbody = A.Block((*kernel_pre, A.decl(view.var, view.var_type or A.ctype("int"), index), *inner_bind,
                     A.If(A.Unary("!", guard), A.Return()), *partial_decls(reductions), *work,
                     *partial_flush(reductions)))
    kname = f"{fn.name}_kernel"
    params_list = tuple(p for p in fn.params if isinstance(p, A.Param))
    kernel = A.Function(kname, A.ctype("void"), (*params_list, *kernel_params(reductions)), kbody,
                        qualifiers=("__global__",))
    args = tuple(A.Name(p.name) for p in params_list if p.name) + tuple(A.Name(r.pointer) for r in reductions)
    bs = A.lit(block_size if dims == 1 else 16)
    count_outer = A.binop("-", view.stop, view.start)
    if dims == 1:
        grid: A.Expr = _blocks_for(count_outer, bs)
        block: A.Expr = bs
    else:
        iview = inner_loop.canonical() if isinstance(inner_loop, A.For) else None
        assert iview is not None
        count_inner = A.binop("-", iview.stop, iview.start)
        grid = A.call("dim3", A.binop("/", A.binop("+", count_inner, A.lit(15)), A.lit(16)),
                      A.binop("/", A.binop("+", count_outer, A.lit(15)), A.lit(16)))
        block = A.call("dim3", A.lit(16), A.lit(16))
    launch = A.Launch(A.Name(kname), (grid, block), args)
    count_pos = A.binop(">", count_outer, A.lit(0))
    launch_stmt = A.If(count_pos, A.ExprStmt(launch))
    # with sum reductions the host keeps its own statements: it owns the scalars the kernel adds into
    host_stmts = ([*pre, *host_setup(reductions), launch_stmt, *host_combine(reductions), *post] if reductions
                  else [*_host_scalars(pre, launch, target), launch_stmt])
    host = A.replace(fn, body=A.Block(tuple(host_stmts)), linkage="C",
                     qualifiers=tuple(q for q in fn.qualifiers if q not in ("static", "inline")))
    device = called_functions(module, [kernel])
    items: list[Any] = []
    for item in module.items:
        if item is fn:
            items.extend([kernel, host])
        elif isinstance(item, A.Function) and item.name in device and "__device__" not in item.qualifiers:
            # a C helper the bound loop calls runs on the GPU too (and stays callable from the host)
            items.append(A.replace(item, qualifiers=(*item.qualifiers, "__host__", "__device__")))
        else:
            items.append(item)
    return A.replace(module, items=tuple(items), dialect=Dialect.CUDA)


def _global_thread_index(start: A.Expr, axis: str) -> A.Expr:
    """``start + blockIdx.axis * blockDim.axis + threadIdx.axis``: the iteration a thread runs."""
    return A.binop("+", start, A.binop("+", A.binop("*", A.member(A.Name("blockIdx"), axis),
                                                    A.member(A.Name("blockDim"), axis)),
                                       A.member(A.Name("threadIdx"), axis)))


def _blocks_for(count: A.Expr, block: A.Expr) -> A.Expr:
    """Blocks of ``block`` threads that cover ``count`` iterations."""
    return A.binop("/", A.binop("+", count, A.binop("-", block, A.lit(1))), block)


def _independent(loop: A.For, consts: dict[str, int]) -> bool:
    """The loop's iterations touch disjoint memory and carry no scalar (safe to run as separate threads)."""
    if independence_problem(loop, consts) is not None:
        return False
    try:
        _check_parallel(loop)
    except PassRefused:
        return False
    return True


def _memory_free(node: A.Node) -> bool:
    return not any(isinstance(n, A.Index | A.Call | A.Assign) or (isinstance(n, A.Unary) and n.op in ("*", "&", "++", "--"))
                   for n in A.walk(node))


def _bind_cuda_segments(module: A.Module, fn: A.Function, params: dict[str, Any]) -> tuple[A.Module, str]:
    """Every top-level statement of ``fn`` in order on the GPU: each provably parallel loop a kernel with one
    thread per iteration, each run of other statements a one-thread kernel (correct, not fast), launched in
    source order (a stream runs them one after another, which is the grid-wide barrier between them).
    Constant scalar declarations run on the host and in every kernel. Returns the module and a summary."""
    block_size = int_param(params, "block", 256, 1, 1024)
    consts = _constant_scalars(fn)
    assigned = scalar_writes(fn.body)
    stmts = [s for s in fn.body.stmts if not isinstance(s, A.Empty | A.Comment)
             and not (isinstance(s, A.Pragma) and s.text.startswith("omp"))]
    if stmts and isinstance(stmts[-1], A.Return) and stmts[-1].value is None:
        stmts = stmts[:-1]
    if any(isinstance(n, A.Return) for st in stmts for n in A.walk(st)):
        raise PassRefused(f"'{fn.name}' returns from inside its body", fn.span)
    shared: list[A.Stmt] = []  # memory-free scalar declarations, never reassigned
    segments: list[tuple[str, list[A.Stmt]]] = []
    for st in stmts:
        if isinstance(st, A.DeclStmt) and _memory_free(st) and all(
                not d.dims and not d.type.pointers and d.name not in assigned for d in st.decls):
            shared.append(st)
            continue
        view = st.canonical() if isinstance(st, A.For) else None
        parallel = isinstance(st, A.For) and view is not None and A.const_int(view.step) == 1 \
            and independence_problem(st, consts) is None
        if parallel:
            assert isinstance(st, A.For)
            try:
                _check_parallel(st)
            except PassRefused:
                parallel = False
        if parallel:
            segments.append(("parallel", [st]))
        elif segments and segments[-1][0] == "serial":
            segments[-1][1].append(st)
        else:
            segments.append(("serial", [st]))
    if not segments:
        raise PassRefused(f"'{fn.name}' has no statement to run on the GPU", fn.span)
    local = {d.name for kind, part in segments if kind == "serial" for st in part if isinstance(st, A.DeclStmt)
             for d in st.decls}
    for i, (_kind, part) in enumerate(segments):
        later = {n.id for _k, other in segments[i + 1:] for st in other for n in A.walk(st) if isinstance(n, A.Name)}
        declared_here = {d.name for st in part if isinstance(st, A.DeclStmt) for d in st.decls}
        if declared_here & local & later:
            raise PassRefused(f"'{fn.name}': a value computed on the GPU ({', '.join(sorted(declared_here & later))}) "
                              "is needed by a later part", fn.span)
    params_list = tuple(p for p in fn.params if isinstance(p, A.Param))
    args = tuple(A.Name(p.name) for p in params_list if p.name)
    kernels: list[A.Function] = []
    launches: list[A.Stmt] = []
    for i, (kind, part) in enumerate(segments):
        kname = f"{fn.name}_kernel{i}" if len(segments) > 1 else f"{fn.name}_kernel"
        if kind == "parallel":
            loop = part[0]
            assert isinstance(loop, A.For)
            view = loop.canonical()
            assert view is not None
            index = _global_thread_index(view.start, "x")
            body = A.Block((*shared, A.decl(view.var, view.var_type or A.ctype("int"), index),
                            A.If(A.Unary("!", A.binop("<", A.Name(view.var), view.stop)), A.Return()),
                            *A.stmts_of(loop.body)))
            count = A.binop("-", view.stop, view.start)
            bs = A.lit(block_size)
            grid: A.Expr = _blocks_for(count, bs)
            launch: A.Stmt = A.If(A.binop(">", count, A.lit(0)),
                                  A.ExprStmt(A.Launch(A.Name(kname), (grid, bs), args)))
        else:
            first = A.binop("||", A.binop("!=", A.member(A.Name("blockIdx"), "x"), A.lit(0)),
                            A.binop("!=", A.member(A.Name("threadIdx"), "x"), A.lit(0)))
            body = A.Block((*shared, A.If(first, A.Return()), *part))
            launch = A.ExprStmt(A.Launch(A.Name(kname), (A.lit(1), A.lit(1)), args))
        kernels.append(A.Function(kname, A.ctype("void"), params_list, body, qualifiers=("__global__",)))
        launches.append(launch)
    # the constant scalars are memory-free: the host computes them too, for the launches' extents
    host = A.replace(fn, body=A.Block((*shared, *launches)), linkage="C",
                     qualifiers=tuple(q for q in fn.qualifiers if q not in ("static", "inline")))
    device = called_functions(module, kernels)
    items: list[Any] = []
    for item in module.items:
        if item is fn:
            items.extend([*kernels, host])
        elif isinstance(item, A.Function) and item.name in device and "__device__" not in item.qualifiers:
            items.append(A.replace(item, qualifiers=(*item.qualifiers, "__host__", "__device__")))
        else:
            items.append(item)
    serial = sum(1 for kind, _ in segments if kind == "serial")
    summary = f"{len(segments) - serial} parallel kernel(s)" + (f", {serial} on one thread" if serial else "")
    return A.replace(module, items=tuple(items), dialect=Dialect.CUDA), summary


def _constant_scalars(fn: A.Function) -> dict[str, int]:
    """The function's top-level integer scalars initialized with a constant and never assigned again."""
    assigned = scalar_writes(fn.body)
    out: dict[str, int] = {}
    for s in fn.body.stmts:
        if isinstance(s, A.DeclStmt):
            for d in s.decls:
                value = A.const_int(d.init) if d.init is not None and not d.dims and not d.type.pointers else None
                if value is not None and d.name not in assigned:
                    out[d.name] = value
    return out


def _host_scalars(pre: list[A.Stmt], launch: A.Launch, loop: A.For) -> list[A.Stmt]:
    """Declarations before the loop that the launch's extent needs, for the host (they read no memory)."""
    needed = {n.id for n in A.walk(launch) if isinstance(n, A.Name)}
    out: list[A.Stmt] = []
    for s in reversed(pre):
        if not isinstance(s, A.DeclStmt) or not any(d.name in needed for d in s.decls):
            continue
        if any(isinstance(n, A.Index | A.Call) or (isinstance(n, A.Unary) and n.op == "*") for n in A.walk(s)):
            raise PassRefused("the loop's extent depends on values read from memory before it", loop.span)
        out.insert(0, s)
        needed |= {n.id for n in A.walk(s) if isinstance(n, A.Name)}
    return out


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    if ctx.target is Dialect.CUDA or ctx.target is Dialect.HIP:
        from xpiler_core.passes.support.rebind_gpu import is_recovered, rebind_module

        if any(is_recovered(f) for f in module.functions()):
            out = rebind_module(module)
            ctx.notes.append("loop binding: recovered block loops → blockIdx, thread loops → threadIdx")
            return leave(unit, out, ctx, Dialect.CUDA)
        candidates = [f for f in module.functions() if not f.is_kernel and any(
            isinstance(s, A.For) for s in f.body.stmts)]
        if not candidates:
            raise PassRefused("no function with a top-level loop to bind to CUDA threads")
        wanted_fn = str(params.get("function") or "")
        if wanted_fn:
            fn = next((f for f in candidates if f.name == wanted_fn), None)
            if fn is None:
                raise PassRefused(f"function={wanted_fn}: no function of that name with a top-level loop")
            out = _bind_cuda(module, fn, params)
            ctx.notes.append(f"loop binding: {fn.name} → __global__ {fn.name}_kernel")
            return leave(unit, out, ctx, Dialect.CUDA)
        # every function with a parallel top-level loop gets a kernel; the others stay host code, said why
        out, bound_names, kept = module, [], []
        called = {n.callee.split("<")[0] for f in module.functions() for n in A.walk(f.body)
                  if isinstance(n, A.Call) and n.callee}
        for fn in candidates:
            try:
                out = _bind_cuda(out, fn, params)
                bound_names.append(fn.name)
            except PassRefused as refusal:
                reason = refusal.reason
                # an entry (called by nobody here, taking device pointers): its statements in order, as kernels
                if fn.name not in called and any(isinstance(p, A.Param) and p.type.pointers for p in fn.params):
                    try:
                        out, summary = _bind_cuda_segments(out, fn, params)
                        bound_names.append(fn.name)
                        ctx.notes.append(f"loop binding: {fn.name} in source order: {summary} ({reason})")
                        continue
                    except PassRefused as second:
                        reason = f"{reason}; {second.reason}"
                if len(candidates) == 1:
                    raise PassRefused(reason, refusal.span) from None
                kept.append(f"{fn.name} ({reason})")
        if not bound_names:
            raise PassRefused("no function has a loop to bind to CUDA threads: " + "; ".join(kept))
        ctx.notes.append("loop binding: " + ", ".join(f"{n} → __global__ {n}_kernel" for n in bound_names)
                         + (f"; left on the host: {'; '.join(kept)}" if kept else ""))
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
    recovered = any(isinstance(i, A.Opaque) and i.text.startswith(PRELUDE_MARK) for i in module.items)
    if not changed and not (recovered and not reasons):
        # a recovered module whose kernels became flat loops (grid_flatten) still gets its target ISA
        raise PassRefused("; ".join(reasons) or "no recovered block loop (run loop_recovery) and no loop=VAR given")
    isa = str(params.get("isa") or "").strip()
    if isa:
        if not all(part.strip().replace("_", "").replace("-", "").isalnum() for part in isa.split(",")):
            raise PassRefused(f"isa={isa!r} is not a comma-separated list of extension names")
        items.insert(0, A.Pragma(f'GCC target("{isa}")'))
        # g++ does not define __F16C__/__AVX512F__ for a target pragma: tell the prelude explicitly
        for ext, macro in (("avx512f", "XPILER_AVX512F"), ("f16c", "XPILER_F16C")):
            if ext in isa.split(","):
                items.insert(1, A.Opaque(f"#define {macro} 1\n", reason="isa"))
    ctx.notes.append("loop binding: OpenMP parallel for over blocks" + (", simd over threads" if
                                                                       bool_param(params, "simd", True) else "")
                     + (f", compiled for {isa}" if isa else ""))
    return leave(unit, A.replace(module, items=tuple(items)), ctx, Dialect.C)
