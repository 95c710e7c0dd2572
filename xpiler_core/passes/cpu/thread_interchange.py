"""Thread-stride interchange: the block's threads each walking ``for (c = t; c < N; c += S)`` become tiles of
``S`` consecutive ``c`` that the threads walk together, so the inner loop runs over threads and touches
memory contiguously (it vectorizes) instead of striding by ``S`` per thread.

After loop recovery a block-stride loop sits inside the thread nest:

    for (tx = 0; tx < bdx; ++tx) { P(t); for (int c = t; c < N; c += S) L(t, c); Q(t) }

becomes, for a one-dimensional block (checked at run time, with ``S > 0``),

    for (tx ...) { P(t); v_e[tx] = v; }                      // scalars P declares and L/Q use: expanded
    for (cb = 0; cb < N; cb += S)
        for (tx = 0; tx < min(bdx, N - cb); ++tx) L(tx, cb + tx)[v -> v_e[tx]]
    for (tx ...) { v = v_e[tx]; Q(t) }

Thread ``t`` still visits ``t, t + S, t + 2S, ...`` in that order, so per-thread accumulations give the same
bits; only the interleaving of different threads changes. That is legal when threads do not share what they
write: P, L and Q may write locals, scalars P declares, arrays at the thread's own slot (``a[t]``) and, in L
only, arrays at an index injective in ``c`` (then also ``S >= bdx`` at run time, so no two threads meet at
one ``c``); every access to a written array uses that same index; calls are side-effect-free math; no
barrier, jump or address-of. Otherwise the pass refuses, and other launches run the original nest.

A **uniform** loop (``form`` ``uniform``; the bounds are the same in every thread, TVM's
cross-thread reductions ``for (o = 0; o < N; ++o) if (o * 16 + (tx >> 1) < n) acc[0] += x[o * 32 + tx]``)
goes outside the threads: ``for (o ...) for (tx ...) L(tx, o)``, each thread still visiting its ``o`` in
order. It may write only what is private to a thread: locals, arrays the thread body declares with constant
extents (expanded to a row per thread, ``acc_x[tx][0]``), arrays at the thread's own slot (``a[t]``,
``a[t][k]``) and arrays every access of which uses one index ``X + t`` with ``X`` free of thread indices and of
what the loop varies (TVM's pools: ``pool[bx * 64 + tx] = max(pool[bx * 64 + tx], ...)``; then only for blocks
of 16 threads or more). A perfect nest of such loops goes outside whole. When its body is ``if (G) S`` with
``G`` equivalent to ``a * o + R(thread) < 0`` (``a > 0``), the iterations where every thread passes (``o``
below a cut computed once from the largest ``R``) run ``S`` unguarded and only the tail keeps the guard.

Every qualifying nest is rewritten (``loop`` narrows that to loops over one variable; ``form`` picks uniform,
strided, any, or ``auto``, the plan's default: uniform loops, and block-strided ones whose body does not branch —
the tiled form took OLCF's row sums from 2.0 to 0.8 ms on 2048 rows and the suite's row mean 2.4x faster, but a
branching body (an arg-max's ``if (v > best) {best = v; at = c;}``) becomes masked stores into the expanded
arrays, 1.4x slower on the suite's arg-max). C -> CUDA lifts a tiled loop back by sharing its iterations among
a block's threads (``rebind_gpu``). Parameters: ``loop``, ``form``, ``function``.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    PURE_CALLS,
    declares_prefix,
    enter,
    fresh_namer,
    has_jumps,
    leave,
    names_in,
    scalar_writes,
    side_effect_free,
    strip_int_casts,
    subscript_root,
    target_function,
)
from xpiler_core.passes.support.independence import injective_index

INFO = PassInfo(
    name="thread_interchange",
    summary="Per-thread strided loops of a block → tiles the threads walk together (contiguous, vectorizable)",
    kind="ast",
    directions=("cuda->cpu",),
    search_priority=1,
    params=(
        ParamSpec("loop", "str", "", "only strided loops over this variable (default: every one that qualifies)"),
        ParamSpec("form", "str", "auto", "which loops: uniform (the same bounds in every thread), block-strided "
                  "(c = t; c += S), any, or auto (the plan's default: uniform ones and block-strided ones whose "
                  "body does not branch)", ("auto", "uniform", "strided", "any")),
        ParamSpec("function", "str", "", "function holding the loop (default: first with loops)"),
    ),
)

TX, TY, TZ, T = "xp_tx", "xp_ty", "xp_tz", "xp_t"
BDX, BDY, BDZ, NT = "xp_bdx", "xp_bdy", "xp_bdz", "xp_nt"
_THREAD_NAMES = frozenset({TX, TY, TZ, T})
_MIN_OWN_THREADS = 16  # one AVX-512 vector of floats
_UNIFORM_MARK = "// the loop every thread runs alike, outside; the block's threads inside it"
_LINEAR = A.binop("+", A.Name(TX), A.binop("*", A.Name(BDX), A.binop("+", A.Name(TY),
                                                                       A.binop("*", A.Name(BDY), A.Name(TZ)))))
def _is_slot(e: A.Expr) -> bool:
    """The thread's own linear index (in a one-dimensional block all of these are ``tx``)."""
    e = strip_int_casts(e)
    return e in (A.Name(TX), A.Name(T), _LINEAR)


def _own_index(e: A.Expr, varying: set[str]) -> bool:
    """``X + slot``: the thread's own slot plus terms free of thread indices, of what varies in the body and of
    loads and calls (``bx * 64 + tx``), so distinct threads never meet at one index."""
    terms: list[tuple[int, A.Expr]] = []
    _terms(e, 1, terms)
    slots = [sign for sign, t in terms if _is_slot(t)]
    rest = [t for _, t in terms if not _is_slot(t)]
    return slots == [1] and all(not (names_in(t) & (_THREAD_NAMES | varying)) and not any(
        isinstance(n, (A.Index, A.Call, A.Assign)) for n in A.walk(t)) for t in rest)


def _alike_nest(stmts: tuple[A.Stmt, ...], varying: frozenset[str] | set[str]
                ) -> tuple[list[A.For], tuple[A.Stmt, ...]]:
    """The perfect nest of counted loops opening ``stmts`` whose bounds are the same in every thread and
    iteration (free of ``varying`` names, calls, loads and assignments), and the statements inside it."""
    chain: list[A.For] = []
    while len(stmts) == 1 and isinstance(stmts[0], A.For):
        loop = stmts[0]
        view = loop.canonical()
        if view is None or view.var_type is None:
            break
        bounds = (view.start, view.stop, view.step)
        if any(names_in(e) & varying or any(isinstance(n, (A.Call, A.Assign, A.Index)) for n in A.walk(e))
               for e in bounds):
            break
        chain.append(loop)
        varying = varying | {view.var}
        stmts = A.stmts_of(loop.body)
    return chain, stmts


def _thread_nest(loop: A.For) -> tuple[list[A.For], tuple[A.Stmt, ...]] | None:
    """The tz/ty/tx loops of a recovered thread nest (outer to inner) and the innermost body's statements."""
    loops: list[A.For] = []
    cur: A.Stmt = loop
    for var, bound in ((TZ, BDZ), (TY, BDY), (TX, BDX)):
        if isinstance(cur, A.Block) and len(cur.stmts) == 1:
            cur = cur.stmts[0]
        if not isinstance(cur, A.For):
            return None
        view = cur.canonical()
        if view is None or view.var != var or A.const_int(view.start) != 0 or view.stop != A.Name(bound) \
                or A.const_int(view.step) != 1:
            return None
        loops.append(cur)
        cur = cur.body
    return loops, A.stmts_of(cur)


def _writes(node: A.Node) -> list[A.Expr]:
    out: list[A.Expr] = []
    for n in A.walk(node):
        if isinstance(n, A.Assign):
            out.append(n.target)
        elif isinstance(n, A.Unary) and n.op in ("++", "--"):
            out.append(n.operand)
    return out


def _private_arrays(prefix: tuple[A.Stmt, ...]) -> dict[str, A.VarDecl]:
    """Arrays the thread body declares with constant extents and no initializer (``float acc[1]``): private
    to each thread, so they expand to one row per thread."""
    out: dict[str, A.VarDecl] = {}
    for s in prefix:
        if isinstance(s, A.DeclStmt):
            for d in s.decls:
                if d.dims and d.init is None and not d.storage and all(
                        x is not None and A.const_int(x) is not None for x in d.dims):
                    out[d.name] = d
    return out


def _problem(prefix: tuple[A.Stmt, ...], loop: A.For, suffix: tuple[A.Stmt, ...], var: str,
             expanded: set[str], uniform: bool = False) -> tuple[str | None, bool, bool]:
    """Why the interchange would be wrong (None: legal), whether L writes memory indexed by ``c``, and whether
    a thread writes memory at its own index ``X + t`` (not a slot).

    A uniform loop (the same iterations in every thread) may write only what is private to a thread: locals,
    arrays the thread body declares, and arrays at the thread's own slot."""
    private = _private_arrays(prefix)
    parts: tuple[A.Node, ...] = (*prefix, loop.body, *suffix)
    for part in parts:
        for n in A.walk(part):
            if isinstance(n, A.Opaque) or A.is_barrier(n):
                return "the thread body holds a barrier or code the AST does not model", False, False
            if isinstance(n, A.Unary) and n.op == "&":
                return "an address is taken in the thread body", False, False
            if isinstance(n, A.Call) and (n.callee is None or n.callee not in PURE_CALLS):
                return f"the thread body calls '{n.callee or 'a function'}' (effects unknown)", False, False
            if isinstance(n, A.VarDecl) and n.dims and part is not loop.body and n.name not in private:
                return f"the thread body declares the array '{n.name}'", False, False
    if has_jumps(parts):
        return "the thread body jumps (break/continue/return)", False, False
    local = {d.name for part in parts for d in A.walk(part) if isinstance(d, A.VarDecl)}
    by_c = own = False
    written: dict[str, list[A.Expr]] = {}
    for part in parts:
        for target in _writes(part):
            target = strip_int_casts(target)
            if isinstance(target, A.Name):
                if target.id not in local and target.id not in expanded:
                    return f"threads share the scalar '{target.id}' they write", False, False
                continue
            root = subscript_root(target) if isinstance(target, A.Index) else None
            if root in private:
                continue
            if isinstance(target, A.Index) and root is not None and not isinstance(target.base, A.Name):
                chains = [n for part in parts for n in A.walk(part) if isinstance(n, A.Index)
                          and isinstance(n.base, A.Name) and n.base.id == root]
                if all(_is_slot(c.index) for c in chains):
                    continue  # a[slot][k]: a row per thread
                return f"'{root}' is subscripted more than once at an index that is not the thread's", False, False
            if not (isinstance(target, A.Index) and isinstance(target.base, A.Name)):
                return "a memory write that is not a one-dimensional subscript of a named array", False, False
            written.setdefault(target.base.id, []).append(target.index)
    varying = local | {var}
    for base, _ in written.items():
        indices = [(part is loop.body, n.index) for part in parts for n in A.walk(part)
                   if isinstance(n, A.Index) and n.base == A.Name(base)]
        if any(isinstance(n, A.Index) and isinstance(n.base, A.Index) for part in parts for n in A.walk(part)
               if isinstance(n, A.Index) and subscript_root(n) == base):
            return f"'{base}' is subscripted more than once", False, False
        if all(_is_slot(ix) for _, ix in indices):
            continue
        if uniform:
            first = strip_int_casts(indices[0][1])
            if all(strip_int_casts(ix) == first for _, ix in indices) and _own_index(first, varying):
                own = True
                continue  # out[bx * B + tx]: one location per thread, the same in every iteration
            return f"every thread's iterations write '{base}' at indices that are not its own", False, False
        first = indices[0][1]
        if not all(in_loop and ix == first for in_loop, ix in indices):
            return f"'{base}' is accessed at different indices by different threads", False, False
        if not injective_index(first, var, varying - {var}, {}):
            return f"the index of '{base}' is not provably distinct per iteration", False, False
        by_c = True
    return None, by_c, own


def _terms(e: A.Expr, sign: int, out: list[tuple[int, A.Expr]]) -> None:
    """``e`` as signed additive terms."""
    if isinstance(e, A.Binary) and e.op in ("+", "-"):
        _terms(e.left, sign, out)
        _terms(e.right, sign if e.op == "+" else -sign, out)
    else:
        out.append((sign, e))


def _tail_guard(stmts: tuple[A.Stmt, ...], view: A.LoopView) -> tuple[int, A.Expr, A.Stmt] | None:
    """A body ``if (G) S`` whose guard is ``a * v + R(threads) < 0`` after moving terms (``a > 0``, ``R`` free of
    ``v``): every thread passes while ``v`` is small, only the last iterations need the guard.
    Returns ``(a, R, S)``."""
    body = tuple(st for st in stmts if not isinstance(st, (A.Comment, A.Empty)))
    if len(body) != 1 or not isinstance(body[0], A.If) or body[0].else_ is not None \
            or A.const_int(view.step) != 1:
        return None
    cond = body[0].cond
    if not isinstance(cond, A.Binary) or cond.op not in ("<", "<=", ">", ">="):
        return None
    terms: list[tuple[int, A.Expr]] = []
    _terms(cond.left, 1, terms)
    _terms(cond.right, -1, terms)
    coef, rest = 0, []
    for sign, term in terms:
        if view.var not in names_in(term):
            rest.append((sign, term))
            continue
        t = strip_int_casts(term)
        if t == A.Name(view.var):
            coef += sign
        elif isinstance(t, A.Binary) and t.op == "*" and A.Name(view.var) in (strip_int_casts(t.left),
                                                                           strip_int_casts(t.right)):
            other = t.right if strip_int_casts(t.left) == A.Name(view.var) else t.left
            k = A.const_int(other)
            if k is None:
                return None
            coef += sign * k
        else:
            return None
    # the thread terms are evaluated once per thread, ahead of the loop: plain arithmetic only
    if not all(side_effect_free(term) and not any(isinstance(n, A.Call) for n in A.walk(term)) for _, term in rest):
        return None
    wide = A.ctype("long long")
    r: A.Expr = A.lit(0)
    for sign, term in rest:
        r = A.binop("+" if sign > 0 else "-", r, A.Cast(wide, term))
    # normalize to a * v + r < 0
    if cond.op in (">", ">="):
        coef, r = -coef, A.Unary("-", r)
    if cond.op in ("<=", ">="):
        r = A.binop("-", r, A.lit(1))
    if coef <= 0:
        return None
    return coef, r, body[0].then


def _split_at_guard(loop: A.For, view: A.LoopView, each: A.Stmt, split: tuple[int, A.Expr, A.Stmt],
                    fresh: Any) -> A.Stmt:
    """The uniform loop in two ranges: iterations where every thread passes the guard run the body without
    it (no masked loads, which compilers turn into gathers), the rest keep it. The split point comes from
    the largest thread term, computed once: every thread passes iff ``a * v + max R < 0``."""
    coef, r, then = split
    m, x, cut = fresh("xp_ti_max"), fresh("xp_ti_x"), fresh("xp_ti_cut")
    wide = "long long"
    value = fresh("xp_ti_r")
    scan = A.for_range(TX, A.lit(0), A.Name(BDX), A.Block((
        A.decl(value, wide, r),
        A.If(A.binop("||", A.binop("==", A.Name(TX), A.lit(0)), A.binop(">", A.Name(value), A.Name(m))),
             A.ExprStmt(A.assign(A.Name(m), A.Name(value)))))))
    a = A.lit(coef)
    ceil_div = A.Ternary(A.binop(">=", A.Name(x), A.lit(0)),
                         A.binop("/", A.binop("+", A.Name(x), A.lit(coef - 1)), a), A.binop("/", A.Name(x), a))
    start, stop = A.Cast(A.ctype(wide), view.start), A.Cast(A.ctype(wide), view.stop)
    clamped = A.Ternary(A.binop("<", A.Name(cut), start), start,
                        A.Ternary(A.binop(">", A.Name(cut), stop), stop, A.Name(cut)))
    var_type = A.replace(view.var_type, quals=()) if view.var_type is not None else A.ctype("int")
    first = A.For(A.decl(view.var, var_type, view.start),
                  A.binop("<", A.Name(view.var), A.Name(cut)), A.Unary("++", A.Name(view.var)),
                  A.Block((A.for_range(TX, A.lit(0), A.Name(BDX), A.Block(A.stmts_of(then))),)))
    rest = A.For(A.decl(view.var, var_type, A.Cast(var_type, A.Name(cut))), A.binop("<", A.Name(view.var), view.stop),
                 A.Unary("++", A.Name(view.var)),
                 A.Block((A.for_range(TX, A.lit(0), A.Name(BDX), A.Block(A.stmts_of(each))),)))
    return A.Block((A.decl(m, wide, A.lit(0)), scan, A.decl(x, wide, A.Unary("-", A.Name(m))),
                    A.decl(cut, wide, ceil_div), A.ExprStmt(A.assign(A.Name(cut), clamped)), first, rest))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    targets = [target_function(module, params)] if params.get("function") else [
        f for f in module.functions() if any(isinstance(n, A.For) for n in A.walk(f.body))]
    wanted = str(params.get("loop") or "")
    form = str(params.get("form") or "auto")
    if form not in ("auto", "any", "strided", "uniform"):
        raise PassRefused(f"unknown form '{form}' (auto, any, strided, uniform)")
    state: dict[str, Any] = {"done": 0, "reason": None}

    def rewrite_nest(outer: A.For) -> A.Stmt | None:
        nest = _thread_nest(outer)
        if nest is None:
            return None
        loops, body = nest
        at = [i for i, s in enumerate(body) if isinstance(s, A.For)]
        if len(at) != 1:
            return None
        strided = body[at[0]]
        assert isinstance(strided, A.For)
        view = strided.canonical()
        if view is None or (wanted and view.var != wanted):
            return None
        prefix, suffix = body[:at[0]], body[at[0] + 1:]
        thread_names = _THREAD_NAMES | {d.name for s in prefix for d in A.walk(s) if isinstance(d, A.VarDecl)}
        uniform = not _is_slot(view.start)
        if uniform and (form == "strided" or names_in(view.start) & thread_names or any(
                isinstance(n, (A.Call, A.Assign, A.Index)) for n in A.walk(view.start))):
            return None
        if not uniform and form == "uniform":
            return None
        if not uniform and form == "auto" and any(isinstance(n, A.If) for n in A.walk(strided.body)):
            return None  # masked stores into the expanded arrays: slower than the per-thread loop
        if names_in(view.step) & thread_names or names_in(view.stop) & thread_names:
            state["reason"] = f"the stride or bound of '{view.var}' differs between threads"
            return None
        if any(isinstance(n, (A.Call, A.Assign, A.Index)) for e in (view.step, view.stop) for n in A.walk(e)):
            state["reason"] = f"the stride or bound of '{view.var}' is not a plain expression"
            return None
        if view.var_type is None:
            state["reason"] = f"loop '{view.var}' does not declare its variable"
            return None
        private = _private_arrays(prefix)
        declared = [d for s in prefix if isinstance(s, A.DeclStmt) for d in s.decls if d.name != T
                    and d.name not in private]
        used_later = names_in(strided.body) | {n for s in suffix for n in names_in(s)}
        expanded = {d.name: d for d in declared if d.name in used_later}
        reason, by_c, own = _problem(prefix, strided, suffix, view.var, set(expanded), uniform)
        if reason is not None:
            state["reason"] = reason
            return None
        state["done"] += 1

        fresh = fresh_namer(fn)
        names = {k: fresh(f"xp_ti_{k}") for k in ("cb", "lim")}
        slot = A.Name(TX)
        arrays = {v: fresh(f"{v}_x") for v in (*expanded, *private)}

        def nest_with(stmts: tuple[A.Stmt, ...]) -> A.Stmt:
            inner: A.Stmt = A.replace(loops[2], body=A.Block(stmts))
            inner = A.replace(loops[1], body=inner)
            return A.replace(loops[0], body=inner)

        def to_array(n: A.Node) -> A.Node | None:
            if isinstance(n, A.Name) and n.id in arrays:
                return A.Index(A.Name(arrays[n.id]), slot)
            return None

        out: list[A.Stmt] = []
        # sized xp_nt (loop recovery declares it), which is xp_bdx in this one-dimensional branch: C -> CUDA
        # knows per-thread arrays by it
        rows = A.Name(NT if any(isinstance(d, A.VarDecl) and d.name == NT for d in A.walk(fn.body)) else BDX)
        for v, d in expanded.items():
            out.append(A.DeclStmt((A.VarDecl(arrays[v], A.replace(d.type, quals=()), (rows,)),)))
        for v, d in private.items():  # a row per thread; its uses below read the thread's row
            out.append(A.DeclStmt((A.VarDecl(arrays[v], A.replace(d.type, quals=()), (rows, *d.dims)),)))
        if private:
            def private_rows(n: A.Node) -> A.Node | None:
                if isinstance(n, A.Name) and n.id in private:
                    return A.Index(A.Name(arrays[n.id]), slot)
                return None

            kept = tuple(A.replace(st, decls=tuple(d for d in st.decls if d.name not in private))
                         if isinstance(st, A.DeclStmt) else st for st in prefix)
            prefix = tuple(A.rewrite(st, private_rows) for st in kept
                           if not (isinstance(st, A.DeclStmt) and not st.decls))
            suffix = tuple(A.rewrite(st, private_rows) for st in suffix)
        save = tuple(A.ExprStmt(A.assign(A.Index(A.Name(arrays[v]), slot), A.Name(v))) for v in expanded)
        if prefix or save:
            out.append(nest_with((*prefix, *save)))
        if uniform:
            # every thread runs the same iterations: the loop goes outside, the threads inside
            each = A.substitute(A.rewrite(strided.body, to_array), {T: slot, TY: A.lit(0), TZ: A.lit(0)})
            out.append(A.Comment(_UNIFORM_MARK))
            split = _tail_guard(A.stmts_of(each), view)
            if split is None:
                # a perfect nest of loops alike in every thread goes outside whole: the threads innermost
                chain, innermost = _alike_nest(A.stmts_of(each), thread_names | scalar_writes(each))
                inner_loop: A.Stmt = A.for_range(TX, A.lit(0), A.Name(BDX), A.Block(innermost))
                for alike in reversed(chain):
                    inner_loop = A.replace(alike, body=A.Block((inner_loop,)))
                out.append(A.replace(strided, body=A.Block((inner_loop,))))
            else:
                out.append(_split_at_guard(strided, view, each, split, fresh))
        else:
            # c is cb + tx (substituted, not declared: later passes see the access a[cb + tx] contiguous in tx)
            inner_body = A.substitute(A.rewrite(strided.body, to_array), {
                T: slot, TY: A.lit(0), TZ: A.lit(0), view.var: A.binop("+", A.Name(names["cb"]), slot)})
            inner = A.for_range(TX, A.lit(0), A.Name(names["lim"]), A.Block(A.stmts_of(inner_body)))
            remaining = A.binop("-", view.stop, A.Name(names["cb"]))
            tile = A.Block((A.decl(names["lim"], "int", A.Ternary(A.binop("<", remaining, A.Name(BDX)), remaining,
                                                                  A.Name(BDX))), inner))
            out.append(A.For(A.decl(names["cb"], A.replace(view.var_type, quals=()), A.lit(0)),
                             A.binop("<", A.Name(names["cb"]), view.stop),
                             A.assign(A.Name(names["cb"]), view.step, "+="), tile))
        if suffix:
            restore = tuple(A.DeclStmt((A.replace(d, init=A.Index(A.Name(arrays[v]), slot), init_style="="),))
                            for v, d in expanded.items())
            t_decls = tuple(s for s in prefix if isinstance(s, A.DeclStmt) and any(d.name == T for d in s.decls))
            out.append(nest_with((*t_decls, *restore, *suffix)))
        cond = A.binop("&&", A.binop("&&", A.binop("==", A.Name(BDY), A.lit(1)), A.binop("==", A.Name(BDZ), A.lit(1))),
                       A.binop(">", view.step, A.lit(0)))
        if by_c:
            cond = A.binop("&&", cond, A.binop(">=", view.step, A.Name(BDX)))
        if own:
            # threads writing their own outputs vectorize only over enough of them (a 6-thread TVM pool block
            # measured 1.5x slower interchanged: the window loops then wrap a 6-iteration loop)
            cond = A.binop("&&", cond, A.binop(">=", A.Name(BDX), A.lit(_MIN_OWN_THREADS)))
        return A.If(cond, A.Block(tuple(out)), outer)

    class _Nests(A.Transformer):
        def visit_If(self, node: A.If) -> Any:  # noqa: N802
            # an earlier interchange: its tiles are done and its else branch is the fallback original
            done = declares_prefix(node.then, "xp_ti_cb") or any(
                isinstance(st, A.Comment) and st.text == _UNIFORM_MARK for st in A.stmts_of(node.then))
            return node if done else self.generic_visit(node)

        def visit_For(self, loop: A.For) -> Any:  # noqa: N802
            inner = self.generic_visit(loop)
            replaced = rewrite_nest(inner)
            return inner if replaced is None else replaced

    new_module, touched = module, []
    for fn in targets:
        before = state["done"]
        new_fn = _Nests().visit(fn)
        if state["done"] > before:
            new_module = new_module.replace_function(fn.name, new_fn)
            touched.append(fn.name)
    if not state["done"]:
        raise PassRefused(state["reason"] or "no thread nest runs a block-strided loop (for (c = t; c < N; c += S))"
                          " or a loop alike in every thread")
    ctx.notes.append(f"thread_interchange: {state['done']} loop(s) of {', '.join(touched)} walked by the threads "
                     "together")
    return leave(unit, new_module, ctx)
