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

Every qualifying nest is rewritten (``loop`` narrows that to strided loops over one variable).
Parameters: ``loop``, ``function``.
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
    strip_int_casts,
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
        ParamSpec("function", "str", "", "function holding the loop (default: first with loops)"),
    ),
)

TX, TY, TZ, T = "xp_tx", "xp_ty", "xp_tz", "xp_t"
BDX, BDY, BDZ = "xp_bdx", "xp_bdy", "xp_bdz"
_THREAD_NAMES = frozenset({TX, TY, TZ, T})
_LINEAR = A.binop("+", A.Name(TX), A.binop("*", A.Name(BDX), A.binop("+", A.Name(TY),
                                                                       A.binop("*", A.Name(BDY), A.Name(TZ)))))
def _is_slot(e: A.Expr) -> bool:
    """The thread's own linear index (in a one-dimensional block all of these are ``tx``)."""
    e = strip_int_casts(e)
    return e in (A.Name(TX), A.Name(T), _LINEAR)


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


def _problem(prefix: tuple[A.Stmt, ...], loop: A.For, suffix: tuple[A.Stmt, ...], var: str,
             expanded: set[str]) -> tuple[str | None, bool]:
    """Why the interchange would be wrong (None: legal) and whether L writes memory indexed by ``c``."""
    parts: tuple[A.Node, ...] = (*prefix, loop.body, *suffix)
    for part in parts:
        for n in A.walk(part):
            if isinstance(n, A.Opaque) or A.is_barrier(n):
                return "the thread body holds a barrier or code the AST does not model", False
            if isinstance(n, A.Unary) and n.op == "&":
                return "an address is taken in the thread body", False
            if isinstance(n, A.Call) and (n.callee is None or n.callee not in PURE_CALLS):
                return f"the thread body calls '{n.callee or 'a function'}' (effects unknown)", False
            if isinstance(n, A.VarDecl) and n.dims and part is not loop.body:
                return f"the thread body declares the array '{n.name}'", False
    if has_jumps(parts):
        return "the thread body jumps (break/continue/return)", False
    local = {d.name for part in parts for d in A.walk(part) if isinstance(d, A.VarDecl)}
    by_c = False
    written: dict[str, list[A.Expr]] = {}
    for part in parts:
        for target in _writes(part):
            target = strip_int_casts(target)
            if isinstance(target, A.Name):
                if target.id not in local and target.id not in expanded:
                    return f"threads share the scalar '{target.id}' they write", False
                continue
            if not (isinstance(target, A.Index) and isinstance(target.base, A.Name)):
                return "a memory write that is not a one-dimensional subscript of a named array", False
            written.setdefault(target.base.id, []).append(target.index)
    varying = local | {var}
    for base, _ in written.items():
        indices = [(part is loop.body, n.index) for part in parts for n in A.walk(part)
                   if isinstance(n, A.Index) and n.base == A.Name(base)]
        if any(isinstance(n, A.Index) and isinstance(n.base, A.Index) for part in parts for n in A.walk(part)
               if isinstance(n, A.Index) and _root(n) == base):
            return f"'{base}' is subscripted more than once", False
        if all(_is_slot(ix) for _, ix in indices):
            continue
        first = indices[0][1]
        if not all(in_loop and ix == first for in_loop, ix in indices):
            return f"'{base}' is accessed at different indices by different threads", False
        if not injective_index(first, var, varying - {var}, {}):
            return f"the index of '{base}' is not provably distinct per iteration", False
        by_c = True
    return None, by_c


def _root(e: A.Expr) -> str | None:
    while isinstance(e, A.Index):
        e = e.base
    return e.id if isinstance(e, A.Name) else None


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    wanted = str(params.get("loop") or "")
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
        if view is None or (wanted and view.var != wanted) or not _is_slot(view.start):
            return None
        prefix, suffix = body[:at[0]], body[at[0] + 1:]
        thread_names = _THREAD_NAMES | {d.name for s in prefix for d in A.walk(s) if isinstance(d, A.VarDecl)}
        if names_in(view.step) & thread_names or names_in(view.stop) & thread_names:
            state["reason"] = f"the stride or bound of '{view.var}' differs between threads"
            return None
        if any(isinstance(n, (A.Call, A.Assign, A.Index)) for e in (view.step, view.stop) for n in A.walk(e)):
            state["reason"] = f"the stride or bound of '{view.var}' is not a plain expression"
            return None
        if view.var_type is None:
            state["reason"] = f"loop '{view.var}' does not declare its variable"
            return None
        declared = [d for s in prefix if isinstance(s, A.DeclStmt) for d in s.decls if d.name != T]
        used_later = names_in(strided.body) | {n for s in suffix for n in names_in(s)}
        expanded = {d.name: d for d in declared if d.name in used_later}
        reason, by_c = _problem(prefix, strided, suffix, view.var, set(expanded))
        if reason is not None:
            state["reason"] = reason
            return None
        state["done"] += 1

        fresh = fresh_namer(fn)
        names = {k: fresh(f"xp_ti_{k}") for k in ("cb", "lim")}
        slot = A.Name(TX)
        arrays = {v: fresh(f"{v}_x") for v in expanded}

        def nest_with(stmts: tuple[A.Stmt, ...]) -> A.Stmt:
            inner: A.Stmt = A.replace(loops[2], body=A.Block(stmts))
            inner = A.replace(loops[1], body=inner)
            return A.replace(loops[0], body=inner)

        def to_array(n: A.Node) -> A.Node | None:
            if isinstance(n, A.Name) and n.id in arrays:
                return A.Index(A.Name(arrays[n.id]), slot)
            return None

        out: list[A.Stmt] = []
        for v, d in expanded.items():
            out.append(A.DeclStmt((A.VarDecl(arrays[v], A.replace(d.type, quals=()), (A.Name(BDX),)),)))
        save = tuple(A.ExprStmt(A.assign(A.Index(A.Name(arrays[v]), slot), A.Name(v))) for v in expanded)
        if prefix or save:
            out.append(nest_with((*prefix, *save)))
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
        return A.If(cond, A.Block(tuple(out)), outer)

    class _Nests(A.Transformer):
        def visit_If(self, node: A.If) -> Any:  # noqa: N802
            # an earlier interchange: its tiles are done and its else branch is the fallback original
            return node if declares_prefix(node.then, "xp_ti_cb") else self.generic_visit(node)

        def visit_For(self, loop: A.For) -> Any:  # noqa: N802
            inner = self.generic_visit(loop)
            replaced = rewrite_nest(inner)
            return inner if replaced is None else replaced

    new_fn = _Nests().visit(fn)
    if not state["done"]:
        raise PassRefused(state["reason"] or f"no thread nest of '{fn.name}' runs a block-strided loop "
                          "(for (c = t; c < N; c += S))")
    ctx.notes.append(f"thread_interchange: {state['done']} strided loop(s) of {fn.name} walked in tiles by the threads")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
