"""Grid flattening: a recovered kernel whose every thread runs a grid-stride loop (or one guarded element)
over independent elements becomes one flat loop over the elements.

After loop recovery such a kernel is a block nest around a thread nest around the per-thread loop

    for (bx ...) for (tx ...) for (int i = bx * bdx + tx; i < N; i += gdx * bdx) BODY(i)

The threads together visit every ``i`` in ``[0, N)`` exactly once, so when the iterations of BODY are
independent this is ``for (int i = 0; i < N; ++i) BODY(i)``: unit stride, one ``omp parallel for simd`` loop
instead of strided per-thread walks (the guarded form ``int i = bx * bdx + tx; if (i < N) BODY`` covers
``[0, min(N, gdx * bdx))``). The flat loop runs when the launch is one-dimensional (checked at run time);
other launches keep the recovered nest.

Independence is shown from the body's data flow, not from names: every scalar it writes is declared inside
it; memory it writes is addressed as ``P[i]`` only, and any read of a written base is ``P[i]`` too; it calls
only side-effect-free functions (math, conversions, or module functions that write no memory but their own
locals) and uses no thread/block index except through ``i``. Otherwise the kernel is left as it is (the
pass refuses when no kernel qualifies). Distinct pointer parameters are taken not to overlap, as the CUDA
threads that run the iterations concurrently already require.

A kernel launched once, on one dimension, with constant extents whose thread body spells the element in the
block and thread indices separately (TVM: ``((bx * 6 + (tx >> 2)) % 250) / 25``, guard
``bx * 8 + (tx >> 7) < 375``) is flattened over the flat index when every such subexpression has a form in it
checked at every launch point (``support/flat_forms``); that flat loop runs for launches within the checked one.

Parameters: ``min_parallel`` (elements below which the flat loop runs on one thread), ``simd``.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo
from xpiler_core.passes.support.ast_support import bool_param, enter, int_param, leave, parallel_or_serial
from xpiler_core.passes.support.flat_forms import over_flat_index
from xpiler_core.passes.support.launch_points import (
    INDEX_NAMES,
    Launch,
    bounded_launch,
    launch_of,
    within_launch,
)
from xpiler_core.passes.support.per_function import rewrite_each

INFO = PassInfo(
    name="grid_flatten",
    summary="Grid-stride / one-element-per-thread kernels with independent iterations → one flat parallel SIMD "
            "loop",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("min_parallel", "int", 16384, "elements below which the flat loop runs on one thread "
                  "(an OpenMP fork/join costs more than small loops take)", (0, 4096, 16384, 65536, 262144)),
        ParamSpec("simd", "bool", True, "add simd to the flat loop", (True, False)),
    ),
)

_BLOCK_VARS = ("xp_bz", "xp_by", "xp_bx")
_MAX_POINTS = 1 << 22  # largest launch whose index arithmetic is checked point by point
_THREAD_VARS = ("xp_tz", "xp_ty", "xp_tx")
# calls that have effects (or read per-thread state) beyond their return value
_EFFECT_PREFIXES = ("atomic", "xp_", "printf", "fprintf", "puts", "mem", "malloc", "calloc", "free", "cuda",
                    "__sync", "__threadfence", "rand", "srand", "exit", "abort", "assert", "__assert", "std::")


def _strip(e: A.Expr) -> A.Expr:
    while isinstance(e, A.Cast) and not e.type.pointers and e.type.base in ("int", "unsigned int", "long",
                                                                             "size_t", "long long", "unsigned"):
        e = e.operand
    return e


def _terms(e: A.Expr, env: dict[str, A.Expr], depth: int = 0) -> list[tuple[str, ...]] | None:
    """``e`` as a sum of products of names (each product sorted), substituting ``env``; ``None`` otherwise."""
    e = _strip(e)
    if depth > 8:
        return None
    if isinstance(e, A.Name):
        if e.id in env:
            return _terms(env[e.id], env, depth + 1)
        return [(e.id,)]
    value = A.const_int(e)
    if value is not None:
        return [(f"#{value}",)]
    if isinstance(e, A.Binary) and e.op == "+":
        left, right = _terms(e.left, env, depth + 1), _terms(e.right, env, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(e, A.Binary) and e.op == "*":
        left, right = _terms(e.left, env, depth + 1), _terms(e.right, env, depth + 1)
        if left is None or right is None:
            return None
        return [tuple(sorted(a + b)) for a in left for b in right]
    return None


def _same_sum(e: A.Expr, env: dict[str, A.Expr], want: list[tuple[str, ...]]) -> bool:
    terms = _terms(e, env)
    return terms is not None and sorted(terms) == sorted(want)


def _block_offset_factor(e: A.Expr, env: dict[str, A.Expr]) -> A.Expr | None:
    """``e`` = ``xp_bx * B + xp_tx`` → B (``xp_bdx``, or a thread-independent name or constant that the flat
    loop then checks equals the block size at run time); else ``None``."""
    terms = _terms(e, env)
    if terms is None or len(terms) != 2 or ("xp_tx",) not in terms:
        return None
    other = next(t for t in terms if t != ("xp_tx",))
    if len(other) != 2 or "xp_bx" not in other:
        return None
    factor = other[0] if other[1] == "xp_bx" else other[1]
    if factor.startswith("#"):
        return A.lit(int(factor[1:]))
    if factor in INDEX_NAMES or factor in env:
        return A.Name("xp_bdx") if factor == "xp_bdx" else None
    return A.Name(factor)


_GLOBAL_INDEX: list[tuple[str, ...]] = [("xp_bdx", "xp_bx"), ("xp_tx",)]
_GRID_STRIDE: list[tuple[str, ...]] = [("xp_bdx", "xp_gdx")]


def _const_decls(stmts: tuple[A.Stmt, ...], body: A.Node) -> dict[str, A.Expr] | None:
    """Initialized scalar declarations never reassigned in ``body`` → name → initializer (else ``None``)."""
    env: dict[str, A.Expr] = {}
    written = A.read_write(body).writes | A.read_write(body).address_taken
    for s in stmts:
        if not (isinstance(s, A.DeclStmt) and all(d.init is not None and not d.dims for d in s.decls)):
            return None
        for d in s.decls:
            if any(isinstance(n, A.Assign) and n.target == A.Name(d.name) for n in A.walk(body)) or any(
                    isinstance(n, A.Unary) and n.op in ("++", "--", "&") and n.operand == A.Name(d.name)
                    for n in A.walk(body)):
                return None
            assert d.init is not None
            env[d.name] = d.init
    del written
    return env


def _pure_functions(module: A.Module) -> set[str]:
    """Module functions that write no memory except their own locals and call only such functions."""
    functions = {f.name: f for f in module.functions()}
    pure: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, fn in functions.items():
            if name in pure or fn.is_kernel:
                continue
            if _effect_free(fn.body, pure, set(functions), allow_local_memory=True):
                pure.add(name)
                changed = True
    return pure


def _effect_free(body: A.Node, pure: set[str], module_names: set[str], allow_local_memory: bool) -> bool:
    """No unmodeled code and only effect-free calls; with ``allow_local_memory`` (a function body) also no
    memory writes except to arrays it declares."""
    rw = A.read_write(body)
    if rw.opaque:
        return False
    declared = {d.name for d in A.walk(body) if isinstance(d, A.VarDecl)}
    if allow_local_memory and not rw.mem_writes <= declared:
        return False
    return all(c in pure if c in module_names else not c.startswith(_EFFECT_PREFIXES) for c in rw.calls)


class _Site:
    """One flattenable per-thread loop: the index variable, its type, the bound and the body."""

    def __init__(self, var: str, var_type: A.Type, stop: A.Expr, body: A.Stmt, block_factor: A.Expr) -> None:
        self.var, self.var_type, self.stop, self.body = var, var_type, stop, body
        self.block_factor = block_factor  # equals the block size when the flat loop is taken


def _escapes(node: A.Stmt, in_loop: bool = False) -> bool:
    """A return, or a break/continue that leaves the body (not one of an inner loop)."""
    if isinstance(node, A.Return):
        return True
    if isinstance(node, (A.Break, A.Continue)):
        return not in_loop
    inner = in_loop or isinstance(node, (A.For, A.While, A.DoWhile))
    return any(_escapes(c, inner) for c in A.children(node) if isinstance(c, A.Stmt))


def _independent(site: _Site, pure: set[str], module_names: set[str], outer: set[str]) -> str | None:
    """Why the iterations of the body may depend on each other (``None``: independent)."""
    body = site.body
    if any(isinstance(n, A.Opaque) for n in A.walk(body)) or _escapes(body):
        return "the body jumps out or holds unmodeled code"
    if any(A.is_barrier(n) for n in A.walk(body)):
        return "the body synchronizes"
    rw = A.read_write(body)
    declared = {d.name for d in A.walk(body) if isinstance(d, A.VarDecl)}
    carried = (rw.writes | rw.address_taken) - declared
    if carried:
        return f"scalar(s) {', '.join(sorted(carried))} written across iterations"
    used = A.free_names(body)
    if used & (INDEX_NAMES | outer):
        return "the body uses thread or block indices besides the element index"
    if not _effect_free(body, pure, module_names, allow_local_memory=False):
        return "the body calls a function with effects"
    written = rw.mem_writes - declared
    # local pointers could reach other iterations' elements: none may be written through or point into a
    # written buffer
    pointers = {d.name for d in A.walk(body) if isinstance(d, A.VarDecl) and d.type.pointers}
    if rw.mem_writes & pointers:
        return "the body writes through a local pointer"
    for n in A.walk(body):
        value = n.init if isinstance(n, A.VarDecl) and n.name in pointers else (
            n.value if isinstance(n, A.Assign) and isinstance(n.target, A.Name) and n.target.id in pointers
            else None)
        if value is not None and A.free_names(value) & written:
            return "a local pointer points into a written buffer"
    element = A.Name(site.var)
    for acc in A.array_accesses(body):
        if acc.base in written and acc.indices != (element,):
            return f"'{acc.base}' is accessed at an element other than [{site.var}]"
    # memory written or read other than by plain indexing (pointer arithmetic, members) on a written base
    for n in A.walk(body):
        if isinstance(n, A.Unary) and n.op == "*" and A.read_write(n).mem_reads & written:
            return "a written buffer is accessed through a pointer expression"
        if isinstance(n, A.Member) and A.read_write(n).mem_reads & written and not (
                isinstance(n.base, A.Index) and n.base.index == element and not n.arrow):
            return "a written buffer is accessed through a member"
    return None


def _thread_site(tbody: A.Block, env: dict[str, A.Expr]) -> _Site | str:
    """The per-thread loop (or guarded element) of a thread body, or why there is none."""
    stmts = [s for s in tbody.stmts if not isinstance(s, (A.Empty, A.Comment))]
    # the recovered linear thread index is declared first; it must be otherwise unused (checked by caller)
    local_env = dict(env)
    while stmts and isinstance(stmts[0], A.DeclStmt):
        s = stmts[0]
        if len(stmts) == 1:
            break
        nxt = stmts[1]
        if not all(d.init is not None and not d.dims for d in s.decls):
            return "a thread-local array or uninitialized declaration"
        if isinstance(nxt, A.If) and len(s.decls) == 1:
            break  # the guarded form: int i = ...; if (i < N) BODY
        for d in s.decls:
            assert d.init is not None
            local_env[d.name] = d.init
        stmts.pop(0)
    rest = [s for s in stmts if not isinstance(s, (A.Empty, A.Comment))]
    later = A.Block(tuple(rest))
    if set(local_env) - set(env) and A.read_write(later).writes & (set(local_env) - set(env)):
        return "a thread-local value is reassigned"
    if len(rest) == 1 and isinstance(rest[0], A.For):
        loop = rest[0]
        view = loop.canonical()
        if view is None or view.var_type is None:
            return "the per-thread loop is not a counted loop declaring its index"
        if not _same_sum(view.start, local_env, _GLOBAL_INDEX):
            return "the per-thread loop does not start at the global thread index"
        if view.var in A.read_write(loop.body).writes:
            return "the per-thread loop reassigns its index"
        if not _same_sum(view.step, local_env, _GRID_STRIDE):
            return "the per-thread loop does not step by the grid size"
        if A.free_names(view.stop) & (INDEX_NAMES | set(local_env) - set(env)):
            return "the loop bound depends on the thread"
        stop = A.substitute(view.stop, {k: v for k, v in local_env.items() if k not in env})
        return _Site(view.var, view.var_type, stop, loop.body, A.Name("xp_bdx"))
    guarded = _guarded_element(rest) or _guarded_expression(rest, local_env)
    if guarded is None:
        return "the thread body is not one per-thread loop or one guarded element"
    d, bound, then = guarded
    if d.init is None or d.type.pointers or d.dims or d.type.base not in ("int", "unsigned int", "long",
                                                                          "long long", "size_t", "unsigned"):
        return "the element index is not an initialized integer"
    factor = _block_offset_factor(d.init, local_env)
    if factor is None:
        return "the element index is not the global thread index"
    if A.free_names(bound) & (INDEX_NAMES | {d.name} | (set(local_env) - set(env))):
        return "the guard bound depends on the thread"
    if d.name in A.read_write(then).writes | A.read_write(then).address_taken:
        return "the element index is reassigned"
    itype = A.replace(d.type, quals=())
    grid = A.binop("*", A.Cast(itype, A.Name("xp_gdx")), A.Cast(itype, A.Name("xp_bdx")))
    return _Site(d.name, d.type, A.call("xp_min", A.Cast(itype, bound), grid), then, factor)


def _guarded_expression(rest: list[A.Stmt], env: dict[str, A.Expr]) -> tuple[A.VarDecl, A.Expr, A.Stmt] | None:
    """``if (E < N) BODY`` with E the global index spelled out (generated code repeats it): E becomes a
    variable wherever BODY spells it the same way; other spellings keep the thread index and are refused."""
    if len(rest) != 1 or not isinstance(rest[0], A.If) or rest[0].else_ is not None:
        return None
    guard = rest[0]
    cond = guard.cond
    if not (isinstance(cond, A.Binary) and cond.op == "<") or _block_offset_factor(cond.left, env) is None:
        return None
    index = _strip(cond.left)
    name = "xp_gi"
    if name in A.free_names(guard.then):
        return None
    then = A.rewrite(guard.then, lambda n: A.Name(name) if isinstance(n, A.Expr) and _strip(n) == index else None)
    return A.VarDecl(name, A.ctype("int"), (), cond.left), cond.right, then


def _guarded_element(rest: list[A.Stmt]) -> tuple[A.VarDecl, A.Expr, A.Stmt] | None:
    """``int i = E; if (i < N) BODY`` or ``int i = E; if (i >= N) continue; BODY...`` → (i, N, BODY)."""
    if len(rest) < 2 or not isinstance(rest[0], A.DeclStmt) or len(rest[0].decls) != 1:
        return None
    d, guard = rest[0].decls[0], rest[1]
    if not isinstance(guard, A.If) or guard.else_ is not None or not isinstance(guard.cond, A.Binary):
        return None
    i = A.Name(d.name)
    cond = guard.cond
    keep = {("<", True), (">", False)}  # i < N, N > i
    leave_ = {(">=", True), ("<=", False)}  # i >= N, N <= i
    side = (cond.op, cond.left == i) if i in (cond.left, cond.right) else None
    bound = cond.right if cond.left == i else cond.left
    if side in keep and len(rest) == 2:
        return d, bound, guard.then
    then = guard.then.stmts[0] if isinstance(guard.then, A.Block) and len(guard.then.stmts) == 1 else guard.then
    if side in leave_ and isinstance(then, A.Continue):
        return d, bound, A.Block(tuple(rest[2:]))
    return None


def _single_thread(tstmts: list[A.Stmt]) -> A.Stmt | None:
    """``if (tx == 0 && ty == 0 && tz == 0 && bx == 0 && by == 0 && bz == 0) BODY`` with BODY free of
    thread and block indices → BODY."""
    if len(tstmts) != 1 or not isinstance(tstmts[0], A.If) or tstmts[0].else_ is not None:
        return None
    guard = tstmts[0]
    zero: set[str] = set()
    stack = [guard.cond]
    while stack:
        c = stack.pop()
        if isinstance(c, A.Binary) and c.op == "&&":
            stack += [c.left, c.right]
        elif isinstance(c, A.Binary) and c.op == "==" and A.const_int(c.right) == 0 and isinstance(c.left, A.Name):
            zero.add(c.left.id)
        else:
            return None
    if zero != {*_BLOCK_VARS, *_THREAD_VARS} or A.free_names(guard.then) & INDEX_NAMES:
        return None
    return guard.then


def _nest(loop: A.Stmt, names: tuple[str, ...]) -> A.Stmt | None:
    """The body inside a perfect nest of loops over ``names`` (outermost first), or ``None``."""
    cur = loop
    for name in names:
        if isinstance(cur, A.Block) and len(cur.stmts) == 1:
            cur = cur.stmts[0]
        if not isinstance(cur, A.For):
            return None
        view = cur.canonical()
        if view is None or view.var != name or A.const_int(view.start) != 0:
            return None
        cur = cur.body
    return cur


def _is_block_nest(s: A.Stmt) -> bool:
    return isinstance(s, A.For) and (view := s.canonical()) is not None and view.var == "xp_bz"


def _flatten(fn: A.Function, pure: set[str], module_names: set[str], params: dict[str, Any],
             launch: Launch | None) -> A.Function | str:
    stmts = fn.body.stmts
    if not any(_is_block_nest(s) for s in stmts):
        # a nest versioned on the launch (affine_index): flattened inside the checked branch
        for k, s in enumerate(stmts):
            if isinstance(s, A.If) and isinstance(s.then, A.Block) and any(_is_block_nest(t) for t in s.then.stmts):
                inner = _flatten_container(fn, s.then.stmts, pure, module_names, params, launch)
                if isinstance(inner, str):
                    return inner
                version = A.replace(s, then=A.replace(s.then, stmts=inner))
                return A.replace(fn, body=A.replace(fn.body, stmts=(*stmts[:k], version, *stmts[k + 1:])))
    flat = _flatten_container(fn, stmts, pure, module_names, params, launch)
    return flat if isinstance(flat, str) else A.replace(fn, body=A.replace(fn.body, stmts=flat))


def _flatten_container(fn: A.Function, stmts: tuple[A.Stmt, ...], pure: set[str], module_names: set[str],
                       params: dict[str, Any], launch: Launch | None) -> tuple[A.Stmt, ...] | str:
    """``stmts`` with their block nest flattened as written, else over the flat index of the module's one
    constant launch (TVM's split index arithmetic; that form runs only for launches within the checked one)."""
    plain = _flatten_stmts(fn, stmts, pure, module_names, params)
    if not isinstance(plain, str) or launch is None:
        return plain
    index = next((i for i, s in enumerate(stmts) if _is_block_nest(s)), None)
    if index is None:
        return plain
    rewritten = over_flat_index(stmts[index], launch, _MAX_POINTS)
    if isinstance(rewritten, str):
        return f"{plain}; over the flat index: {rewritten}"
    tail = stmts[index:]
    flat = _flatten_stmts(fn, (rewritten, *tail[1:]), pure, module_names, params)
    if isinstance(flat, str):
        return f"{plain}; over the flat index: {flat}"
    return (*stmts[:index], A.If(within_launch(launch), A.Block(flat), A.Block(tail)))


def _flatten_stmts(fn: A.Function, stmts: tuple[A.Stmt, ...], pure: set[str], module_names: set[str],
                   params: dict[str, Any]) -> tuple[A.Stmt, ...] | str:
    """``stmts`` (holding one recovered block nest) with the nest flattened, or why not."""
    index = next((i for i, s in enumerate(stmts) if _is_block_nest(s)), None)
    if index is None:
        return "no recovered block loop"
    nest = stmts[index]
    if any(isinstance(s, A.For) for s in stmts[index + 1:]):
        return "several block nests"
    bbody = _nest(nest, _BLOCK_VARS)
    if bbody is None:
        return "the block loops are not a perfect nest"
    bstmts = list(A.stmts_of(bbody))
    if not bstmts or not isinstance(bstmts[-1], A.For):
        return "the block body does not end in a thread loop nest"
    prefix = tuple(bstmts[:-1])
    decls = _const_decls(prefix, bbody)
    if decls is None:
        return "the block body holds more than constant declarations before its thread loops"
    env, prefix_stmts = decls, list(prefix)
    if any(A.free_names(v) & INDEX_NAMES for v in env.values()):
        return "a block-level value depends on the block index"
    tbody = _nest(bstmts[-1], _THREAD_VARS)
    if tbody is None:
        return "the thread loops are not a perfect nest"
    tstmts = list(A.stmts_of(tbody))
    if tstmts and isinstance(tstmts[0], A.DeclStmt) and [d.name for d in tstmts[0].decls] == ["xp_t"]:
        if "xp_t" in A.free_names(A.Block(tuple(tstmts[1:]))):
            return "the thread body uses the linear thread index"
        tstmts = tstmts[1:]
    once = _single_thread(tstmts)
    if once is not None:
        # the body runs for thread 0 of block 0 only: once, when the launch is not empty
        once_block = A.Block((*prefix_stmts, *A.stmts_of(once)))
        nonempty = A.binop(">", A.binop("*", A.binop("*", A.Name("xp_nt"), A.Name("xp_gdx")),
                                        A.binop("*", A.Name("xp_gdy"), A.Name("xp_gdz"))), A.lit(0))
        # the nest stays as the (empty-launch) else branch: the shape C → CUDA rebinds
        return (*stmts[:index], A.If(nonempty, once_block, A.Block((nest,))), *stmts[index + 1:])
    site = _thread_site(A.Block(tuple(tstmts)), env)
    if isinstance(site, str):
        return site
    locals_in_thread = {d.name for s in tstmts for d in A.walk(s) if isinstance(d, A.VarDecl)} - {site.var}
    locals_in_thread -= {d.name for d in A.walk(site.body) if isinstance(d, A.VarDecl)}
    reason = _independent(site, pure, module_names, locals_in_thread)
    if reason:
        return reason
    min_parallel = int_param(params, "min_parallel", 16384, 0, 1 << 30)
    simd = bool_param(params, "simd", True)
    count = A.fresh_name(fn, "xp_flat_n")
    var_type = A.replace(site.var_type, quals=tuple(q for q in site.var_type.quals if q not in (
        "const", "volatile", "constexpr", "static")))
    pragma_text = "omp parallel for" + (" simd" if simd else "") + " schedule(static)"
    flat = A.For(A.decl(site.var, var_type, A.lit(0)), A.binop("<", A.Name(site.var), A.Name(count)),
                 A.Unary("++", A.Name(site.var)), A.Block(A.stmts_of(site.body)))
    one_dim = A.binop("&&", A.binop("&&", A.binop("==", A.Name("xp_gdy"), A.lit(1)),
                                    A.binop("==", A.Name("xp_gdz"), A.lit(1))),
                      A.binop("&&", A.binop("==", A.Name("xp_bdy"), A.lit(1)),
                              A.binop("==", A.Name("xp_bdz"), A.lit(1))))
    if site.block_factor != A.Name("xp_bdx"):
        one_dim = A.binop("&&", one_dim, A.binop("==", site.block_factor, A.Name("xp_bdx")))
    bound: tuple[A.Stmt, ...] = (A.Pragma(pragma_text), flat)
    if min_parallel > 0:
        bound = (parallel_or_serial(flat, pragma_text, A.binop(">=", A.Name(count), A.lit(min_parallel))),)
    fast = A.Block((*prefix_stmts, A.decl(count, var_type, site.stop), *bound))
    first = index
    before = stmts[index - 1] if index > 0 else None
    if isinstance(before, A.Pragma) and before.text.startswith("omp"):
        first = index - 1  # the nest was already bound: its pragma goes with it
    versioned = A.If(one_dim, fast, A.Block(tuple(stmts[first:index + 1])))
    return (*stmts[:first], versioned, *stmts[index + 1:])


def _checked_launch(module: A.Module, fn: A.Function) -> Launch | None:
    """The module's one constant launch of ``fn``, else the one its ``__launch_bounds__`` bounds."""
    thread_stmts = [s for n in A.walk(fn.body)
                    if isinstance(n, A.For) and (view := n.canonical()) is not None and view.var == "xp_tx"
                    for s in A.stmts_of(n.body)
                    if not (isinstance(s, A.DeclStmt) and [d.name for d in s.decls] == ["xp_t"])]
    return launch_of(module, fn.name) or bounded_launch(fn, thread_stmts)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    int_param(params, "min_parallel", 16384, 0, 1 << 30)
    pure = _pure_functions(module)
    names = {f.name for f in module.functions()}
    def recovered(fn: A.Function) -> bool:
        return any(isinstance(n, A.For) and (view := n.canonical()) is not None and view.var == "xp_bz"
                   for n in A.walk(fn.body))

    result = rewrite_each(module, recovered,
                          lambda fn: _flatten(fn, pure, names, params, _checked_launch(module, fn)),
                          nothing="no recovered kernel (run loop_recovery first)")
    ctx.notes.append(f"grid flatten: {', '.join(result.done)} as one flat loop over elements")
    return leave(unit, result.module, ctx)
