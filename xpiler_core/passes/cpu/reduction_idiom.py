"""Butterfly warp all-reductions → one sequential reduction per warp segment (CPU, after loop recovery).

Loop recovery turns ``for (m = S/2; m > 0; m >>= 1) v = op(v, __shfl_xor_sync(mask, v, m, S))`` into a
loop over ``m`` holding two thread loops per step (copy ``v`` into a scratch array, then combine with
``xp_shfl_xor`` from it). When ``op`` is associative and commutative, the butterfly leaves every lane of each
``S``-lane segment holding ``op`` over the whole segment; this pass recognizes that shape and replaces it by
one reduction per segment plus a broadcast: O(threads) work instead of O(threads · log S) with two passes
per step. Floating-point sums are reassociated (the verification tolerances decide whether that is kept).
The tree form (``__shfl_down_sync``, lane 0 gets the total) is replaced by the exact per-lane tree computed
in place per segment (one pass per step, no scratch copy, no shuffle helper calls).

Preconditions, else the site is left alone (and the pass refuses when no site qualifies): the offset loop
runs exactly S/2, S/4, ..., 1; the combine is ``+ * & | ^`` (plain or compound), ``fmaxf fminf fmax fmin
max min`` or a select ``a > b ? a : b`` (max/min; ``<``, ``<=``, ``>=`` too), with the shuffled operand on
either side, possibly through a temporary declared in the combine (selects are max/min only without NaNs,
which verification's inputs decide); the scratch array is used nowhere else in the function; the guard
(``if (g) continue;``, the same in both thread loops) does not read the reduced or scratch array. At run time the fast path is taken only when the thread count is a multiple of S and the guard is uniform
over each segment (a partially active segment reads stale lanes in the original, so it keeps the original
code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave

INFO = PassInfo(
    name="reduction_idiom",
    summary="Butterfly warp all-reductions (recovered shuffle loops) → one sequential reduction per warp",
    kind="ast",
    directions=("cuda->cpu",),
)

# Combiners that are associative and commutative (floating point up to reassociation).
ASSOCIATIVE_BINARY_OPS = frozenset({"+", "*", "&", "|", "^"})
ASSOCIATIVE_CALLS = frozenset({"fmaxf", "fminf", "fmax", "fmin", "max", "min"})

_THREAD_VARS = ("xp_tz", "xp_ty", "xp_tx")


@dataclass(frozen=True)
class _Site:
    """One recognized butterfly: reduced array, scratch array, combine form, guard, segment size."""

    reduced: str
    scratch: str
    form: tuple[str, str]  # ("binary", op), ("call", function name) or ("select", order + comparison)
    shuffle: str  # "xor" (butterfly: every lane gets the total) or "down" (tree: lane 0 gets the total)
    guard: A.Expr | None
    threads: A.Expr
    segment: int
    nest: A.For  # the copy thread-loop nest, reused (body replaced) for the per-segment work


def _loop_var(loop: A.Stmt) -> str | None:
    if isinstance(loop, A.For) and isinstance(loop.init, A.DeclStmt) and len(loop.init.decls) == 1:
        return loop.init.decls[0].name
    return None


def _thread_body(stmt: A.Stmt) -> tuple[A.Stmt, ...] | None:
    """The innermost statements of a recovered thread-loop nest (tz → ty → tx), else ``None``."""
    node: A.Stmt = stmt
    for var in _THREAD_VARS:
        inner = [s for s in A.stmts_of(node) if not isinstance(s, (A.Pragma, A.Comment))] if var != "xp_tz" else [node]
        if len(inner) != 1 or _loop_var(inner[0]) != var:
            return None
        loop = inner[0]
        assert isinstance(loop, A.For)
        node = loop.body
    return A.stmts_of(node)


def _split_body(stmts: tuple[A.Stmt, ...]) -> tuple[A.Expr | None, A.Expr] | None:
    """``const int xp_t = ...; [if (g) continue;] expr;`` → (g, expr)."""
    body = [s for s in stmts if not isinstance(s, A.Comment)]
    if not body or not isinstance(body[0], A.DeclStmt) or [d.name for d in body[0].decls] != ["xp_t"]:
        return None
    guard: A.Expr | None = None
    rest = body[1:]
    if rest and isinstance(rest[0], A.If) and rest[0].else_ is None:
        then = A.stmts_of(rest[0].then)
        if len(then) != 1 or not isinstance(then[0], A.Continue):
            return None
        guard, rest = rest[0].cond, rest[1:]
    if len(rest) == 2 and isinstance(rest[0], A.DeclStmt) and len(rest[0].decls) == 1 \
            and rest[0].decls[0].init is not None and not rest[0].decls[0].dims:
        # ``T other = shuffle; combine(other)``: the temporary stands for the shuffled value (which holds a
        # copy of a value of the reduced array, so the conversion to T is exact)
        temp = rest[0].decls[0]
        assert temp.init is not None
        if not isinstance(rest[1], A.ExprStmt) or temp.name in A.free_names(temp.init):
            return None
        rest = [A.ExprStmt(A.substitute(rest[1].expr, {temp.name: temp.init}))]
    if len(rest) != 1 or not isinstance(rest[0], A.ExprStmt):
        return None
    return guard, rest[0].expr


def _element(expr: A.Expr) -> str | None:
    """``a[xp_t]`` → ``a``."""
    if isinstance(expr, A.Index) and expr.index == A.Name("xp_t") and isinstance(expr.base, A.Name):
        return expr.base.id
    return None


def _offsets(loop: A.For) -> tuple[str, int] | None:
    """(variable, start) for ``for (int m = start; m > 0; m >>= 1 | m /= 2 | m = m >> 1 | m = m / 2)``."""
    var = _loop_var(loop)
    if var is None or not isinstance(loop.init, A.DeclStmt) or loop.init.decls[0].init is None:
        return None
    start = A.const_int(loop.init.decls[0].init)
    if loop.cond != A.binop(">", A.Name(var), A.lit(0)) and loop.cond != A.binop(">=", A.Name(var), A.lit(1)):
        return None
    v = A.Name(var)
    halving = (A.assign(v, A.lit(1), ">>="), A.assign(v, A.lit(2), "/="),
               A.assign(v, A.binop(">>", v, A.lit(1))), A.assign(v, A.binop("/", v, A.lit(2))))
    if start is None or loop.step not in halving:
        return None
    return var, start


def _select_form(value: A.Expr) -> str | None:
    """The comparison of ``x CMP y ? x : y`` or ``x CMP y ? y : x`` ("then-first"/"else-first" + CMP)."""
    if not (isinstance(value, A.Ternary) and isinstance(value.cond, A.Binary)
            and value.cond.op in ("<", ">", "<=", ">=")):
        return None
    left, right = value.cond.left, value.cond.right
    if (value.then, value.else_) == (left, right):
        return "keep" + value.cond.op
    if (value.then, value.else_) == (right, left):
        return "swap" + value.cond.op
    return None


def _combine(expr: A.Expr, reduced: str, shuffle_ok: Any) -> tuple[str, str] | None:
    """The combine form of ``V[t] = op(V[t], shfl)`` (either operand order, or compound ``op=``)."""
    if not isinstance(expr, A.Assign) or _element(expr.target) != reduced:
        return None
    if expr.op != "=":
        op = expr.op[:-1]
        return ("binary", op) if op in ASSOCIATIVE_BINARY_OPS and shuffle_ok(expr.value) else None
    value = expr.value
    if isinstance(value, A.Binary) and value.op in ASSOCIATIVE_BINARY_OPS:
        operands = (value.left, value.right)
        form = ("binary", value.op)
    elif isinstance(value, A.Call) and value.callee in ASSOCIATIVE_CALLS and len(value.args) == 2:
        operands = (value.args[0], value.args[1])
        form = ("call", str(value.callee))
    elif _select_form(value) is not None:
        # ``a > b ? a : b`` (max) and its relatives: the comparison picks one operand
        assert isinstance(value, A.Ternary) and isinstance(value.cond, A.Binary)
        operands = (value.cond.left, value.cond.right)
        form = ("select", str(_select_form(value)))
    else:
        return None
    for own, other in (operands, operands[::-1]):
        if _element(own) == reduced and shuffle_ok(other):
            return form
    return None


def _match(loop: A.For) -> _Site | str:
    """The site a butterfly offset loop is, or why it is not one."""
    offsets = _offsets(loop)
    if offsets is None:
        return "not a halving offset loop"
    mvar, start = offsets
    stmts = [s for s in A.stmts_of(loop.body) if not isinstance(s, A.Comment)]
    if len(stmts) != 2:
        return "the offset loop does not hold exactly a copy and a combine thread loop"
    bodies = [_thread_body(s) for s in stmts]
    if bodies[0] is None or bodies[1] is None:
        return "not recovered thread loops"
    copy, comb = _split_body(bodies[0]), _split_body(bodies[1])
    if copy is None or comb is None or copy[0] != comb[0]:
        return "thread loop bodies are not a guarded copy and combine"
    guard, copy_expr = copy
    if not (isinstance(copy_expr, A.Assign) and copy_expr.op == "="):
        return "the first thread loop is not a copy"
    scratch, reduced = _element(copy_expr.target), _element(copy_expr.value)
    if scratch is None or reduced is None or scratch == reduced:
        return "the first thread loop is not a copy into a scratch array"
    found: dict[str, Any] = {}

    def shuffle_ok(e: A.Expr) -> bool:
        if not (isinstance(e, A.Call) and e.callee in ("xp_shfl_xor", "xp_shfl_down") and len(e.args) == 6):
            return False
        arr, t, n, w, m, width = e.args
        warp, seg = A.const_int(w), A.const_int(width)
        if arr != A.Name(scratch) or t != A.Name("xp_t") or m != A.Name(mvar) or warp is None or seg is None:
            return False
        if seg > warp:  # CUDA requires width <= warpSize; the emulation would cross warps
            return False
        found["threads"], found["segment"], found["shuffle"] = n, seg, str(e.callee)[len("xp_shfl_"):]
        return True

    form = _combine(comb[1], reduced, shuffle_ok)
    if form is None:
        return "the combine is not an associative, commutative operator applied to the shuffled value"
    segment = int(found["segment"])
    if segment < 2 or segment & (segment - 1) or start != segment // 2:
        return "the offsets do not run the whole segment (S/2 down to 1)"
    if guard is not None and ({reduced, scratch, mvar} & A.free_names(guard)):
        return "the guard reads the reduced values"
    if found["threads"] != A.Name("xp_nt"):
        # the fast path's lanes are the thread-loop nest's, which covers exactly xp_nt threads
        return "the shuffle's thread count is not the block's (xp_nt)"
    nest = stmts[0]
    assert isinstance(nest, A.For)
    return _Site(reduced, scratch, form, str(found["shuffle"]), guard, found["threads"], segment, nest)


def _combined(site: _Site, acc: A.Expr, other: A.Expr) -> A.Expr:
    kind, op = site.form
    if kind == "binary":
        return A.binop(op, acc, other)
    if kind == "call":
        return A.call(op, acc, other)
    order, cmp = op[:4], op[4:]
    return A.Ternary(A.binop(cmp, other, acc), other, acc) if order == "keep" else \
        A.Ternary(A.binop(cmp, other, acc), acc, other)


def _replacement(site: _Site, original: A.For, scope: A.Node) -> A.Stmt:
    """``if (segments are whole and uniformly guarded) { reduce + broadcast } else original``."""
    seg = A.lit(site.segment)
    ok, lane = (A.fresh_name(scope, n) for n in ("xp_red_ok", "xp_red_l"))
    # the segment's first thread does the segment's work, inside a thread loop: thread loops stay the only
    # code that touches per-thread arrays, so rebinding to GPU threads (C → CUDA) keeps segments disjoint
    base = "xp_t"
    lane_v, base_v, ok_v = A.Name(lane), A.Name(base), A.Name(ok)

    def guard_at(index: A.Expr) -> A.Expr:
        assert site.guard is not None
        return A.Unary("!", A.Unary("!", A.substitute(site.guard, {"xp_t": index})))

    stmts: list[A.Stmt] = [A.decl(ok, "int", A.binop("==", A.binop("%", site.threads, seg), A.lit(0)))]
    if site.guard is not None:
        seg_start = A.binop("-", lane_v, A.binop("%", lane_v, seg))
        check = A.if_(A.binop("!=", guard_at(lane_v), guard_at(seg_start)),
                      A.expr_stmt(A.assign(ok_v, A.lit(0))))
        stmts.append(A.For(A.decl(lane, "int", A.lit(0)),
                           A.binop("&&", ok_v, A.binop("<", lane_v, site.threads)),
                           A.Unary("++", lane_v), check))
    element = A.index(A.Name(site.reduced), base_v)
    segment_body: list[A.Stmt] = [A.if_(A.binop("!=", A.binop("%", base_v, seg), A.lit(0)), A.Continue())]
    if site.guard is not None:
        segment_body.append(A.if_(guard_at(base_v), A.Continue()))
    lane_at = A.index(A.Name(site.reduced), A.binop("+", base_v, lane_v))
    if site.shuffle == "xor":
        # butterfly: every lane ends with the combination of the whole segment
        segment_body.append(A.for_range(lane, A.lit(1), seg,
                                         A.expr_stmt(A.assign(element, _combined(site, element, lane_at)))))
        segment_body.append(A.for_range(lane, A.lit(1), seg, A.expr_stmt(A.assign(lane_at, element))))
    else:
        # tree: the exact per-lane values. Updating lanes in ascending order in place reads each partner
        # (a higher lane) before it is updated in this step, as the scratch copy did; a lane whose partner
        # is past the segment combines with its own value, as CUDA's out-of-range rule gives.
        offset = A.fresh_name(scope, "xp_red_d")
        offset_v = A.Name(offset)
        partner = A.Ternary(A.binop("<", A.binop("+", lane_v, offset_v), seg),
                            A.index(A.Name(site.reduced), A.binop("+", A.binop("+", base_v, lane_v), offset_v)),
                            lane_at)
        step = A.for_range(lane, A.lit(0), seg, A.expr_stmt(A.assign(lane_at, _combined(site, lane_at, partner))))
        segment_body.append(A.For(A.decl(offset, "int", A.lit(site.segment // 2)),
                                  A.binop(">", offset_v, A.lit(0)), A.assign(offset_v, A.lit(1), ">>="), step))
    fast = _with_innermost_body(site.nest, segment_body)
    stmts.append(A.if_(ok_v, A.Block((fast,)), original))
    return A.Block(tuple(stmts))


def _with_innermost_body(nest: A.For, work: list[A.Stmt]) -> A.For:
    """The thread-loop nest with its innermost body's statements after ``const int xp_t = ...`` replaced."""
    if _loop_var(nest) == "xp_tx":
        head = A.stmts_of(nest.body)[0]
        return A.replace(nest, body=A.Block((head, *work)))
    stmts = A.stmts_of(nest.body)
    inner = tuple(_with_innermost_body(s, work) if isinstance(s, A.For) else s for s in stmts)
    return A.replace(nest, body=A.Block(inner) if isinstance(nest.body, A.Block) else inner[0])


def rewrite_function(fn: A.Function) -> tuple[A.Function, int, list[str]]:
    """The function with every qualifying butterfly replaced, the count, and reasons for the others."""
    reasons: list[str] = []
    count = 0

    def scratch_used_elsewhere(site: _Site, loop: A.For) -> bool:
        inside = sum(1 for n in A.walk(loop) if isinstance(n, A.Name) and n.id == site.scratch)
        total = sum(1 for n in A.walk(fn.body) if isinstance(n, A.Name) and n.id == site.scratch) if fn.body else 0
        declared = sum(1 for n in A.walk(fn.body) if isinstance(n, A.VarDecl) and n.name == site.scratch) if fn.body \
            else 0
        return total != inside or declared > 1

    def visit(node: A.Node) -> A.Node | None:
        nonlocal count
        if not isinstance(node, A.For) or _offsets(node) is None:
            return None
        site = _match(node)
        if isinstance(site, str):
            reasons.append(site)
            return None
        if scratch_used_elsewhere(site, node):
            reasons.append(f"the scratch array {site.scratch} is used outside the butterfly")
            return None
        count += 1
        return _replacement(site, node, fn)

    if fn.body is None:
        return fn, 0, reasons
    return A.replace(fn, body=A.rewrite(fn.body, visit)), count, reasons


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    total = 0
    reasons: list[str] = []
    for fn in module.functions():
        new_fn, count, why = rewrite_function(fn)
        if count:
            module = module.replace_function(fn.name, new_fn)
        total += count
        reasons.extend(why)
    if total == 0:
        detail = f": {reasons[0]}" if reasons else ""
        raise PassRefused("no recovered butterfly warp all-reduction with an associative combiner" + detail)
    ctx.notes.append(f"reduction idiom: {total} butterfly all-reduction(s) → one reduction per warp segment")
    return leave(unit, module, ctx)
