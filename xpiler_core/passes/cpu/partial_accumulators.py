"""Partial accumulators: a serial reduction loop ``for (k...) L = L op E(k)`` keeps ``W`` independent lane
accumulators (``L`` combined once at the end), so the loop is no longer one dependency chain and vectorizes.

The shape is a perfect loop nest whose innermost body is one reduction statement:

    for (k0 = 0; k0 < N0; ++k0) ... for (kn = a; kn < b; ++kn)
        L = L op E;  |  L op= E;  |  L = E op L;  |  L = f(L, E);  |  L = f(E, L);  [each optionally under if (G)]

with ``op`` one of ``+ * & | ^`` and ``f`` one of ``max min fmaxf fminf fmax fmin``. Loops whose variables
occur in ``E`` only inside affine subscripts that walk the merged range contiguously (``k0 * 605 + k1 * 121 +
k2 * 11 + k3`` over 12×5×11×11) are merged into one loop first (a TVM-style ``max`` over a 4-D tensor becomes
one 7260-element loop), the rest stay as they are around it. The merged loop becomes

    T p[W] = {L, id, ...};  for (v = a; v + W <= b; v += W) for (l < W) p[l] = p[l] op E(v + l);
    T acc = p[0] op ... op p[W-1];  for (; v < b; ++v) acc = acc op E(v);  L = acc;

(max/min/&/| lanes all start from ``L``, as they are idempotent). Lane ``l`` folds the elements ``l, l + W,
...`` in order. Exact for integers and for max/min (our CPU ``max``/``min`` ignore NaN like ``fmaxf``, so they
are associative and commutative; only the sign of an equal zero may differ); floating-point sums and
products are reassociated (the verification tolerances decide, and the plan drops this step first when a
candidate fails).

Preconditions, else the site is left alone (the pass refuses when none qualifies): ``L`` is a scalar of an
arithmetic type or an element of an array with an index that does not change in the nest; ``E`` and ``G``
have no side effects (no assignment, increment or call outside the pure math functions), do not read ``L``'s
variable or array, and hold no opaque code; the loops are canonical with step 1 and bounds that do not
change in the nest. Distinct pointer names are taken not to overlap, as elsewhere. Parameters: ``lanes``
(W), ``function``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    enter,
    fresh_namer,
    int_param,
    leave,
    names_in,
    side_effect_free,
    subscript_root,
)
from xpiler_core.passes.support.independence import affine_poly

INFO = PassInfo(
    name="partial_accumulators",
    summary="Serial reduction loops → independent lane accumulators combined at the end (vectorizable)",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("lanes", "int", 32, "independent accumulators per reduction loop", (8, 16, 32, 64)),
        ParamSpec("function", "str", "", "only this function (default: every function)"),
    ),
)

_BINARY = frozenset({"+", "*", "&", "|", "^"})
_CALLS = frozenset({"max", "min", "fmaxf", "fminf", "fmax", "fmin"})
_IDEMPOTENT = frozenset({"&", "|"}) | _CALLS
_ARITHMETIC = frozenset({
    "float", "double", "int", "unsigned", "unsigned int", "long", "unsigned long", "long long",
    "unsigned long long", "short", "unsigned short", "char", "signed char", "unsigned char", "int8_t", "int16_t",
    "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t", "uint",
})
_FLOATS = frozenset({"float", "double"})


@dataclass(frozen=True)
class _Scope:
    """What the rewrites of one function need: fresh names, declared types, array ranks, its own variables."""

    namer: Callable[[str], str]
    types: dict[str, A.Type]
    dims: dict[str, int]
    local: set[str]  # declared in the function (per block or thread: never written by another team thread)


@dataclass(frozen=True)
class _Reduction:
    """One reduction statement: target ``L``, combine form, the other operand ``E``, optional guard."""

    target: A.Expr
    form: str  # "compound", "left", "right", "call-left", "call-right"
    op: str  # binary operator or function name
    operand: A.Expr
    guard: A.Expr | None


def _plain(stmts: tuple[A.Stmt, ...]) -> tuple[A.Stmt, ...]:
    return tuple(s for s in stmts if not isinstance(s, (A.Comment, A.Empty)))


def _match_statement(stmt: A.Stmt) -> _Reduction | None:
    guard: A.Expr | None = None
    if isinstance(stmt, A.If) and stmt.else_ is None:
        inner = _plain(A.stmts_of(stmt.then))
        if len(inner) != 1:
            return None
        guard, stmt = stmt.cond, inner[0]
    if not isinstance(stmt, A.ExprStmt) or not isinstance(stmt.expr, A.Assign):
        return None
    assign = stmt.expr
    target, value = assign.target, assign.value
    if not isinstance(target, (A.Name, A.Index)):
        return None
    if assign.op != "=":
        op = assign.op[:-1]
        return _Reduction(target, "compound", op, value, guard) if op in _BINARY else None
    if isinstance(value, A.Binary) and value.op in _BINARY:
        if value.left == target:
            return _Reduction(target, "left", value.op, value.right, guard)
        if value.right == target:
            return _Reduction(target, "right", value.op, value.left, guard)
    if isinstance(value, A.Call) and value.callee in _CALLS and len(value.args) == 2:
        first, second = value.args
        if first == target:
            return _Reduction(target, "call-left", value.callee or "", value.args[1], guard)
        if second == target:
            return _Reduction(target, "call-right", value.callee or "", value.args[0], guard)
    return None


def _combined(red: _Reduction, target: A.Expr, operand: A.Expr) -> A.Stmt:
    """``target = target op operand`` in the statement's own form (same conversions as the source)."""
    if red.form == "compound":
        expr: A.Expr = A.assign(target, operand, red.op + "=")
    elif red.form == "left":
        expr = A.assign(target, A.binop(red.op, target, operand))
    elif red.form == "right":
        expr = A.assign(target, A.binop(red.op, operand, target))
    elif red.form == "call-left":
        expr = A.assign(target, A.call(red.op, target, operand))
    else:
        expr = A.assign(target, A.call(red.op, operand, target))
    return A.ExprStmt(expr)


def _element_type(target: A.Expr, types: dict[str, A.Type], dims: dict[str, int]) -> str | None:
    base = subscript_root(target)
    if base is None or base not in types:
        return None
    t = types[base]
    depth = 0
    e = target
    while isinstance(e, A.Index):
        depth += 1
        e = e.base
    if depth != len(t.pointers) + dims.get(base, 0) or t.reference:
        return None
    return t.base if t.base in _ARITHMETIC else None


def _index_polys(e: A.Expr, loop_vars: set[str]) -> list[A.Expr] | None:
    """The subscripts of ``e`` that mention loop variables; None when a loop variable occurs elsewhere."""
    out: list[A.Expr] = []
    covered: set[int] = set()
    for n in A.walk(e):
        if isinstance(n, A.Index) and names_in(n.index) & loop_vars:
            out.append(n.index)
            covered.update(id(m) for m in A.walk(n.index))
    for n in A.walk(e):
        if isinstance(n, A.Name) and n.id in loop_vars and id(n) not in covered:
            return None
    return out


def _mergeable(outer: A.LoopView, inner_var: str, inner_count: A.Expr, e: A.Expr, nest_vars: set[str]) -> bool:
    """Every subscript is affine in both variables with coef(outer) = coef(inner) * count(inner)."""
    if A.const_int(outer.start) != 0 or names_in(outer.stop) & nest_vars:
        return False
    subscripts = _index_polys(e, {outer.var, inner_var})
    count = affine_poly(inner_count)
    if subscripts is None or not subscripts or count is None:
        return False
    for sub in subscripts:
        poly = affine_poly(sub)
        if poly is None:
            return False
        c_out: dict[tuple[str, ...], int] = {}
        c_in: dict[tuple[str, ...], int] = {}
        for monomial, coef in poly.as_dict().items():
            n_out, n_in = monomial.count(outer.var), monomial.count(inner_var)
            if n_out + n_in > 1 or (n_out + n_in and any(
                    a in nest_vars for a in monomial if a not in (outer.var, inner_var))):
                return False
            rest = tuple(a for a in monomial if a not in (outer.var, inner_var))
            if n_out:
                c_out[rest] = coef
            elif n_in:
                c_in[rest] = coef
        if not c_in:
            return False
        scaled: dict[tuple[str, ...], int] = {}
        for rest, coef in c_in.items():
            for monomial, c in count.as_dict().items():
                key = tuple(sorted(rest + monomial))
                scaled[key] = scaled.get(key, 0) + coef * c
        normalized = {tuple(sorted(k)): v for k, v in c_out.items()}
        if {k: v for k, v in scaled.items() if v} != {k: v for k, v in normalized.items() if v}:
            return False
    return True


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    lanes = int_param(params, "lanes", 32, 2, 1024)
    only = str(params.get("function") or "")
    done: list[str] = []
    reasons: list[str] = []

    def rewrite_nest(loop: A.For, scope: _Scope) -> tuple[A.Stmt, bool] | None:
        """The rewritten nest and whether it uses lane accumulators (else ``L`` kept in a local, or None)."""
        nest: list[A.For] = [loop]
        while True:
            body = _plain(A.stmts_of(nest[-1].body))
            if len(body) == 1 and isinstance(body[0], A.For):
                nest.append(body[0])
                continue
            break
        if len(body) != 1:
            return None
        red = _match_statement(body[0])
        views = [n.canonical() for n in nest]
        if any(v is None for v in views):
            return None
        loop_views: list[A.LoopView] = [v for v in views if v is not None]
        if red is None:
            kept = promote(nest, loop_views, body[0], scope)
            return None if kept is None else (kept, False)
        nest_vars = {v.var for v in loop_views}
        base = subscript_root(red.target)
        element = _element_type(red.target, scope.types, scope.dims)
        if base is None or element is None:
            return None
        if red.op in ("&", "|", "^") and element in _FLOATS:
            return None
        target_names = names_in(red.target)
        if target_names & nest_vars:
            return None
        parts = [red.operand] + ([red.guard] if red.guard is not None else [])
        if any(not side_effect_free(p) or base in names_in(p) for p in parts) or \
                any(not side_effect_free(n.stop) or base in names_in(n.stop) or
                    names_in(n.stop) & nest_vars for n in loop_views):
            reasons.append(f"reduction into '{base}': the operand, guard or bounds have side effects or read it")
            return None
        if any(A.const_int(v.step) != 1 for v in loop_views):
            return None
        operand = red.operand
        guard = red.guard
        inner = loop_views[-1]
        count: A.Expr = inner.stop if A.const_int(inner.start) == 0 else A.binop("-", inner.stop, inner.start)
        keep = len(loop_views) - 1  # loops loop_views[:keep] stay around the merged loop
        merged_var = inner.var
        probe = operand if guard is None else A.binop("&&", guard, operand)
        while keep > 0 and A.const_int(inner.start) == 0:
            outer = loop_views[keep - 1]
            if not _mergeable(outer, merged_var, count, probe, nest_vars):
                break
            fused = scope.namer("xp_f")
            mapping: dict[str, A.Expr] = {outer.var: A.lit(0), merged_var: A.name(fused)}
            probe = A.substitute(probe, mapping)
            operand = A.substitute(operand, mapping)
            guard = A.substitute(guard, mapping) if guard is not None else None
            product = A.binop("*", outer.stop, count)
            folded = A.const_int(product)
            count = A.lit(folded) if folded is not None else product
            nest_vars.discard(outer.var)
            merged_var = fused
            keep -= 1
        start = inner.start if keep == len(loop_views) - 1 else A.lit(0)
        stop = inner.stop if keep == len(loop_views) - 1 else count
        merged = keep < len(loop_views) - 1
        trips = A.const_int(A.binop("-", stop, start)) if A.const_int(start) is not None else None
        if trips is not None and trips < 2 * lanes:
            promoted = promote(nest, loop_views, body[0], scope)
            if promoted is None:
                reasons.append(f"reduction into '{base}' runs {trips} iterations: too few for {lanes} lanes")
                return None
            return promoted, False
        shared = base not in scope.local
        if shared and guard is not None:
            reasons.append(f"a guarded reduction into '{base}', which other threads may share")
            return None
        p, lane, acc = scope.namer("xp_pa"), scope.namer("xp_l"), scope.namer("xp_acc")
        v = merged_var if merged else scope.namer("xp_v")
        lane_slot = A.index(A.name(p), A.name(lane))
        shifted = {merged_var: A.binop("+", A.name(v), A.name(lane))}
        lane_step = _combined(red, lane_slot, A.substitute(operand, shifted))
        if guard is not None:
            lane_step = A.If(A.substitute(guard, shifted), A.block(lane_step))
        tail_step = _combined(red, A.name(acc), A.substitute(operand, {merged_var: A.name(v)}))
        if guard is not None:
            tail_step = A.If(A.substitute(guard, {merged_var: A.name(v)}), A.block(tail_step))
        elem_type = A.ctype(element)
        if red.op in _IDEMPOTENT:
            init: A.Expr = red.target
        else:
            identity = {"+": 0, "^": 0, "*": 1}[red.op]
            init = A.Ternary(A.binop("==", A.name(lane), A.lit(0)), red.target, A.Cast(elem_type, A.lit(identity)))
        lane_loop = A.for_range(lane, A.lit(0), A.lit(lanes), A.block(A.ExprStmt(A.assign(lane_slot, init))))
        body_loop = A.for_range(lane, A.lit(0), A.lit(lanes), A.block(lane_step))
        vec_loop = A.For(None, A.binop("<=", A.binop("+", A.name(v), A.lit(lanes)), stop),
                         A.assign(A.name(v), A.lit(lanes), "+="),
                         A.block(A.pragma("omp simd"), body_loop))
        combine = A.for_range(lane, A.lit(1), A.lit(lanes), A.block(_combined(red, A.name(acc), lane_slot)))
        tail = A.For(None, A.binop("<", A.name(v), stop), A.Unary("++", A.name(v)), A.block(tail_step))
        new_block = A.block(
            A.decl(p, elem_type, dims=(A.lit(lanes),)),
            lane_loop,
            A.decl(v, inner.var_type or "int", start),
            vec_loop,
            A.decl(acc, elem_type, A.index(A.name(p), A.lit(0))),
            combine,
            tail,
            A.ExprStmt(A.assign(red.target, A.name(acc))),
        )
        replacement: A.Stmt = new_block
        if shared and trips is None:  # the source writes L only when the loop runs
            replacement = A.If(A.binop("<", start, stop), new_block)
        for outer_loop in reversed(nest[:keep]):
            replacement = A.replace(outer_loop, body=A.block(replacement))
        done.append(f"{base} ({red.op}, {'merged ' + str(len(loop_views) - keep) + ' loops' if merged else 'one loop'})")
        return replacement, True

    def promote(nest: list[A.For], views: list[A.LoopView], stmt: A.Stmt, scope: _Scope) -> A.Stmt | None:
        """``L`` kept in a local across the nest (same operations in the same order: exact for any update):
        for a memory location a short loop updates in place (a 3×3 pooling window)."""
        if not isinstance(stmt, A.ExprStmt) or not isinstance(stmt.expr, A.Assign) or \
                not isinstance(stmt.expr.target, A.Index):
            return None
        target = stmt.expr.target
        base = subscript_root(target)
        element = _element_type(target, scope.types, scope.dims)
        nest_vars = {v.var for v in views}
        if base is None or element is None or names_in(target) & nest_vars or not side_effect_free(target) \
                or not side_effect_free(stmt.expr.value):
            return None
        if any("restrict" in q for level in scope.types[base].pointers for q in level):
            return None  # the compiler keeps a restrict location in a register itself (and may vectorize around it)
        uses = [n for n in A.walk(stmt.expr.value) if isinstance(n, A.Name) and n.id == base]
        reads = [n for n in A.walk(stmt.expr.value) if n == target]
        if len(uses) != len(reads) or (not reads and stmt.expr.op == "="):
            return None  # L's array read elsewhere than at L, or L not read at all (a plain store)
        if any(names_in(v.start) & nest_vars or names_in(v.stop) & nest_vars or base in names_in(v.stop)
               or not side_effect_free(v.stop) for v in views):
            return None
        acc = scope.namer("xp_acc")
        local = A.name(acc)
        new_stmt = A.rewrite(stmt, lambda n: local if n == target else None)
        inner: A.Stmt = A.replace(nest[-1], body=A.block(new_stmt))
        for outer_loop in reversed(nest[:-1]):
            inner = A.replace(outer_loop, body=A.block(inner))
        promoted: A.Stmt = A.block(A.decl(acc, A.ctype(element), target), inner,
                                   A.ExprStmt(A.assign(target, local)))
        empty = [v for v in views if (t := v.trip_count()) is None or t <= 0]
        if empty:  # read and write L only when the source would (every loop runs)
            cond: A.Expr = A.binop("<", empty[0].start, empty[0].stop)
            for v in empty[1:]:
                cond = A.binop("&&", cond, A.binop("<", v.start, v.stop))
            promoted = A.If(cond, promoted)
        done.append(f"{base} (kept in a register over the loop)")
        return promoted

    new_module = module
    for fn in module.functions():
        if only and fn.name != only:
            continue
        dims = {d.name: len(d.dims) for d in A.walk(fn) if isinstance(d, A.VarDecl)}
        for prm in fn.params:
            if isinstance(prm, A.Param) and prm.name:
                dims[prm.name] = len(prm.dims)
        local = {d.name for d in A.walk(fn.body) if isinstance(d, A.VarDecl) and "static" not in d.storage
                 and "__shared__" not in d.storage}
        scope = _Scope(fresh_namer(fn), A.declared_types(fn), dims, local)

        # loops an OpenMP pragma already shapes (an `omp simd reduction`, a collapsed nest) stay as they are
        pragmas: dict[int, str] = {}
        for blk in A.walk(fn.body):
            if isinstance(blk, A.Block):
                for prev, cur in zip(blk.stmts, blk.stmts[1:], strict=False):
                    if isinstance(prev, A.Pragma) and prev.text.startswith("omp") and isinstance(cur, A.For):
                        pragmas[id(cur)] = prev.text

        # loops inside a recovered thread loop: with many threads per block the threads are the vector lanes
        # (loop binding vectorizes the thread loop), so the lane accumulators run only for one-thread blocks
        in_threads: set[int] = set()
        for loop in A.walk(fn.body):
            if isinstance(loop, A.For) and (view := loop.canonical()) is not None and view.var == "xp_tx":
                in_threads |= {id(x) for x in A.walk(loop.body) if isinstance(x, A.For)}

        def visit(n: A.Node, scope: _Scope = scope, pragmas: dict[int, str] = pragmas,
                  in_threads: set[int] = in_threads) -> A.Node | None:
            if not isinstance(n, A.For):
                return None
            text = pragmas.get(id(n))
            if text is not None:
                return n if "simd" in text or "collapse" in text else None
            rewritten = rewrite_nest(n, scope)
            if rewritten is None:
                return None
            new, lanes_used = rewritten
            if lanes_used and id(n) in in_threads:
                done[-1] += " for one-thread blocks"
                return A.If(A.binop("==", A.name("xp_nt"), A.lit(1)), A.block(new), A.block(n))
            return new

        before = len(done)
        new_fn = A.rewrite(fn, visit)
        if len(done) > before:
            new_module = new_module.replace_function(fn.name, new_fn)
    if not done:
        raise PassRefused("; ".join(dict.fromkeys(reasons)) or "no serial reduction loop (L = L op E over a loop)")
    ctx.notes.append(f"partial_accumulators ({lanes} lanes): {len(done)} reduction loop(s): "
                     + ", ".join(done))
    return leave(unit, new_module, ctx)
