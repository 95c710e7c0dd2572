"""Delinearize: split a flat loop by a loop-invariant divisor its body divides the index by, then hoist what
depends only on the quotient.

TVM-style kernels (and grid-flattened ones) index per-channel data as ``x[i / hw % C]`` inside one flat loop
over ``i``: an integer division by a run-time value per element (no SIMD division on x86), and per-channel
loads and math (``sqrtf(var[c] + eps)``) redone for every element. Splitting ``i`` by the divisor ``d``
(strip-mining by a symbolic factor) gives

    for (q = s / d; q < ceil(N / d); ++q) {               // the quotient: i / d == q inside
        lo = max(s, q * d), hi = min(N, q * d + d);
        const T0 h0 = <part of the body that depends only on q and invariants>;   // once per q
        for (int i = lo; i < hi; ++i) BODY[i / d -> q, i % d -> i - q * d, part -> h0]
    }

which visits the same ``i`` in the same order. The split form runs only when ``d > 0`` and ``s >= 0``
(checked at run time: C's truncating division is the floor there); otherwise the original loop runs.

Hoisted parts are evaluated unconditionally in the body (not under an ``if``, ``?:`` branch, ``&&``/``||``
right side or in a nested loop's body; a nested loop's condition is, at least once per element: an adaptive
pool's window bound ``rv < f(i / 8)``), free of the loop variable and of anything the body writes, and made of
arithmetic, reads of arrays the body does not write, and side-effect-free math calls. Distinct pointer
parameters are taken not to overlap, as the CUDA threads that ran the iterations concurrently require.

An OpenMP ``parallel for`` on the flat loop moves to the quotient loop, ``simd`` to the inner loop.
Every loop that qualifies and holds no loop already split is split (``loop`` narrows that to loops over one variable; loops over the
recovered block indices are left to the OpenMP loop that collapses them; a thread loop is split only where that
leaves no division of its index: a gather made a strided read).
The divisor chosen is the one most other divisors are multiples of (TVM's nests of flattened axes divide by
``w``, ``h * w``, ``c * h * w``): with ``D = k * d``, ``i / D`` is ``q / k`` and ``i % D`` is
``(q % k) * d + (i - q * d)``, so every level's index math moves out of the inner loop. A divisor below
``min_divisor`` (constant, or checked at run time) leaves the loop as it is: its inner loops would be too short
to pay for the per-quotient work; a constant divisor below ``short_loop`` is taken only when the split hoists a
load or a call (a resize's source row) or a nested loop's bound, else the next larger divisor is tried.
Parameters: ``loop``, ``hoist``, ``function`` (default: every function), ``min_divisor``, ``short_loop``.
Shifts and masks of the index (``i >> k``, ``i & (2^k - 1)``) count as division and remainder by ``2^k``.
A thread loop from 0 that one split leaves divided, whose divisors are constants ``D1 > D2 > ...`` each a multiple
of the next (a TVM 3-D pool's ``tx >> 5``, ``(tx & 31) >> 3``, ``tx & 7``), becomes one loop per digit of its index
in that mixed radix (``tx = t0 * 32 + t1 * 8 + t2``), each division folded where the digits' ranges prove C's
quotient and remainder (the innermost digit must end up undivided); a run-time extent runs the digits behind the
check that ``D1`` divides it, the original loop otherwise. A loop the threads run alike (thread_interchange's
window loop) around such a nest gets the outer digits outside it, the innermost digit (the SIMD lanes) inside, where
distinct digit tuples write distinct elements (one subscript per written array, one-to-one in the digits, the rest
free of the loop's variables): each row of lanes then runs its whole window (TVM's 3-D pool: 0.89x -> 1.22x).
Refuses when no unit-stride loop divides its index by an invariant, or the body jumps out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    INT_TYPES,
    PURE_CALLS,
    bool_param,
    declares_prefix,
    enter,
    fresh_namer,
    has_jumps,
    int_param,
    leave,
    map_loops_with_pragmas,
    names_in,
    scalar_writes,
    split_loop_pragma,
    strip_int_casts,
    target_function,
)
from xpiler_core.passes.support.launch_points import INDEX_NAMES
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="delinearize",
    summary="Split a flat loop by the run-time divisor its body divides the index by; hoist per-quotient work",
    kind="ast",
    directions=("cuda->cpu",),
    search_priority=1,
    params=(
        ParamSpec("loop", "str", "", "only loops over this variable (default: every loop whose index is divided)"),
        ParamSpec("hoist", "bool", True, "compute the parts that depend only on the quotient once per quotient",
                  (True, False)),
        ParamSpec("function", "str", "", "function holding the loop (default: every function)"),
        ParamSpec("min_divisor", "int", 8, "smallest divisor split (shorter inner loops do not pay for the "
                  "per-quotient work)", (2, 8, 16, 32)),
        ParamSpec("short_loop", "int", 16, "constant divisors below this are split only when the split hoists a "
                  "load or a call", (0, 16, 32)),
    ),
)

# Block loops are collapsed into the OpenMP work-sharing loop (a split would break the perfect nest) and the
# linear thread number is a derived value; a thread loop is an ordinary loop here (a TVM transpose gathers
# ``A[(tx & 63) * 320 + (tx >> 6)]`` across a 1024-wide simd loop: split by 64 it reads with one stride).
_THREAD_LOOPS = frozenset({"xp_tx", "xp_ty", "xp_tz"})
_BOUND_ELSEWHERE = frozenset(INDEX_NAMES - _THREAD_LOOPS)


def _still_divided(body: A.Node, var: str) -> bool:
    """Whether ``var`` is still divided, taken a remainder of, shifted right or masked somewhere in ``body``."""
    return any(isinstance(n, A.Binary) and n.op in ("/", "%", ">>", "&") and var in names_in(n)
               for n in A.walk(body))


def _is_index(e: A.Expr, var: str) -> bool:
    return strip_int_casts(e) == A.Name(var)


def _invariant(e: A.Expr, changing: set[str], types: dict[str, A.Type]) -> bool:
    """An integer, loop-invariant and cheap to evaluate once: integer literals and declared integer names not
    written in the loop, combined by integer arithmetic (a float divisor would not be a floor division)."""
    for n in A.walk(e):
        if isinstance(n, A.Literal) and n.int_value is None:
            return False
        if isinstance(n, A.Name) and (n.id not in types or types[n.id].pointers or types[n.id].base not in
                                      INT_TYPES):
            return False
        if isinstance(n, A.Cast) and (n.type.pointers or n.type.base not in INT_TYPES):
            return False
        if not isinstance(n, (A.Literal, A.Name, A.Cast, A.Binary, A.Unary)):
            return False
        if isinstance(n, A.Binary) and n.op not in ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"):
            return False
        if isinstance(n, A.Unary) and n.op not in ("-", "+", "~"):
            return False
    return not (names_in(e) & changing)


def _as_division(n: A.Node, var: str) -> tuple[str, A.Expr] | None:
    """``("/", d)`` or ``("%", d)`` when ``n`` is the index divided by ``d`` or its remainder; the shift and
    mask forms (``i >> k``, ``i & (2^k - 1)``) count as division by ``2^k`` (the index is >= 0 where the
    split form runs)."""
    if not (isinstance(n, A.Binary) and _is_index(n.left, var)):
        return None
    right = strip_int_casts(n.right)
    if n.op in ("/", "%"):
        value = A.const_int(right)
        return (n.op, right) if value is None or value > 1 else None
    value = A.const_int(right)
    if value is None:
        return None
    if n.op == ">>" and 0 < value < 31:
        return "/", A.lit(1 << value)
    if n.op == "&" and value > 0 and (value + 1) & value == 0:
        return "%", A.lit(value + 1)
    return None


def _divisors(body: A.Stmt, var: str, changing: set[str], types: dict[str, A.Type]) -> Counter[A.Expr]:
    found: Counter[A.Expr] = Counter()
    for n in A.walk(body):
        division = _as_division(n, var)
        if division is not None and _invariant(division[1], changing, types):
            found[division[1]] += 2 if division[0] == "/" else 1
    return found


def _pure(e: A.Expr, written_bases: set[str], changing: set[str]) -> bool:
    for n in A.walk(e):
        if isinstance(n, (A.Assign, A.Opaque, A.Launch, A.InitList)):
            return False
        if isinstance(n, A.Unary) and n.op in ("++", "--", "&"):
            return False
        if isinstance(n, A.Call) and (n.callee is None or n.callee not in PURE_CALLS):
            return False
        if isinstance(n, A.Index):
            base = n.base
            while isinstance(base, A.Index):
                base = base.base
            if not isinstance(base, A.Name) or base.id in written_bases:
                return False
        if isinstance(n, A.Unary) and n.op == "*":
            return False
    return not (names_in(e) & changing)


def _worth_hoisting(e: A.Expr) -> bool:
    return any(isinstance(n, (A.Index, A.Call)) or (isinstance(n, A.Binary) and n.op in ("/", "%"))
               for n in A.walk(e))


class _Hoister:
    """Collects maximal hoistable subexpressions at unconditionally evaluated places and names them."""

    def __init__(self, fresh: Callable[[str], str], quotient: str, written_bases: set[str],
                 changing: set[str]) -> None:
        self.fresh, self.quotient = fresh, quotient
        self.written_bases, self.changing = written_bases, changing
        self.hoisted: dict[A.Expr, str] = {}
        self.order: list[tuple[str, A.Expr]] = []
        self.loop_bounds: set[str] = set()  # hoisted from an inner loop's condition

    def _name_for(self, e: A.Expr) -> A.Expr:
        if e not in self.hoisted:
            name = self.fresh(f"xp_h{len(self.order)}")
            self.hoisted[e] = name
            self.order.append((name, e))
        return A.Name(self.hoisted[e])

    def expr(self, e: A.Expr) -> A.Expr:
        """``e`` with its hoistable parts replaced, visiting only unconditionally evaluated subexpressions."""
        if self.quotient in names_in(e) and _pure(e, self.written_bases, self.changing) and _worth_hoisting(e):
            return self._name_for(e)
        if isinstance(e, A.Binary):
            if e.op in ("&&", "||", ","):
                return A.replace(e, left=self.expr(e.left))
            return A.replace(e, left=self.expr(e.left), right=self.expr(e.right))
        if isinstance(e, A.Unary) and e.op not in ("++", "--", "&"):
            return A.replace(e, operand=self.expr(e.operand))
        if isinstance(e, A.Cast):
            return A.replace(e, operand=self.expr(e.operand))
        if isinstance(e, A.Ternary):
            return A.replace(e, cond=self.expr(e.cond))
        if isinstance(e, A.Assign):
            target = e.target
            if isinstance(target, A.Index):
                target = A.replace(target, index=self.expr(target.index))
            return A.replace(e, target=target, value=self.expr(e.value))
        if isinstance(e, A.Index):
            return A.replace(e, index=self.expr(e.index))
        if isinstance(e, A.Call) and e.callee in PURE_CALLS:
            return A.replace(e, args=tuple(self.expr(a) for a in e.args))
        return e

    def stmt(self, s: A.Stmt) -> A.Stmt:
        if isinstance(s, A.ExprStmt):
            return A.replace(s, expr=self.expr(s.expr))
        if isinstance(s, A.DeclStmt):
            return A.replace(s, decls=tuple(A.replace(d, init=self.expr(d.init)) if d.init is not None and
                                            d.init_style == "=" and not d.dims else d for d in s.decls))
        if isinstance(s, A.If):
            return A.replace(s, cond=self.expr(s.cond))
        if isinstance(s, A.For) and s.cond is not None:
            # an inner loop's condition is evaluated at least once per element; its bound moves out (not its
            # body, which may run zero times)
            before = len(self.order)
            cond = self.expr(s.cond)
            self.loop_bounds.update(name for name, _ in self.order[before:])
            return A.replace(s, cond=cond)
        if isinstance(s, A.Block):
            return A.replace(s, stmts=tuple(self.stmt(x) for x in s.stmts))
        return s


def _preference(divisors: Counter[A.Expr], e: A.Expr) -> tuple[int, int, int]:
    """How many occurrences are ``e`` or multiples of it (so become quotient math), then its own count, then
    its size."""
    covered = sum(c for f, c in divisors.items() if f == e or _multiple(f, e) is not None)
    return covered, divisors[e], A.const_int(e) or 0


def _expensive(e: A.Expr) -> bool:
    return any(isinstance(n, (A.Index, A.Call)) for n in A.walk(e))


def _multiple(candidate: A.Expr, divisor: A.Expr) -> A.Expr | None:
    """``k`` when ``candidate`` is ``k * divisor``: both constants with ``k > 1``, or a product one of whose
    factors is ``divisor`` (then ``k``, the other factor, must be positive at run time)."""
    big, small = A.const_int(candidate), A.const_int(divisor)
    if big is not None and small is not None:
        if small <= 0 or big <= small or big % small:
            return None
        return A.lit(big // small)
    bare = strip_int_casts(candidate)
    if isinstance(bare, A.Binary) and bare.op == "*":
        for factor, other in ((bare.left, bare.right), (bare.right, bare.left)):
            if strip_int_casts(factor) == strip_int_casts(divisor):
                return other
    return None


def _digit_terms(e: A.Expr, digits: set[str] | dict[str, int]) -> tuple[dict[str, int], list[tuple[int, A.Expr]]] | None:
    """``e`` as ``sum(k * digit) + sum(f * rest)``, the rest terms free of digits (integer literals, ``+ - *`` and
    ``<<`` by a constant, integer casts), or None where a digit enters otherwise."""
    e = strip_int_casts(e)
    if not names_in(e) & set(digits):
        return {}, [(1, e)]
    if isinstance(e, A.Name):
        return {e.id: 1}, []
    if isinstance(e, A.Unary) and e.op in ("-", "+"):
        inner = _digit_terms(e.operand, digits)
        return inner if inner is None or e.op == "+" else _scaled(inner, -1)
    if isinstance(e, A.Binary) and e.op in ("+", "-"):
        left, right = _digit_terms(e.left, digits), _digit_terms(e.right, digits)
        if left is None or right is None:
            return None
        if e.op == "-":
            right = _scaled(right, -1)
        coeffs = dict(left[0])
        for v, k in right[0].items():
            coeffs[v] = coeffs.get(v, 0) + k
        return {v: k for v, k in coeffs.items() if k}, left[1] + right[1]
    if isinstance(e, A.Binary) and e.op == "<<":
        shift = A.const_int(e.right)
        inner = _digit_terms(e.left, digits) if shift is not None and 0 <= shift < 31 else None
        return None if inner is None or shift is None else _scaled(inner, 1 << shift)
    if isinstance(e, A.Binary) and e.op == "*":
        for factor, other in ((e.right, e.left), (e.left, e.right)):
            scale = A.const_int(factor)
            if scale is not None:
                inner = _digit_terms(other, digits)
                return None if inner is None else _scaled(inner, scale)
    return None


def _scaled(terms: tuple[dict[str, int], list[tuple[int, A.Expr]]], factor: int
            ) -> tuple[dict[str, int], list[tuple[int, A.Expr]]]:
    return {v: k * factor for v, k in terms[0].items()}, [(f * factor, r) for f, r in terms[1]]


def _affine(e: A.Expr, ranges: dict[str, int]) -> tuple[dict[str, int], int] | None:
    """``e`` as ``const + sum(k * v)`` over the digit variables in ``ranges``; None where the rest is not constant."""
    terms = _digit_terms(e, ranges)
    if terms is None:
        return None
    values = [A.const_int(r) for _, r in terms[1]]
    if any(v is None for v in values):
        return None
    return terms[0], sum(f * v for (f, _), v in zip(terms[1], values, strict=True) if v is not None)


def _affine_expr(coeffs: dict[str, int], const: int, order: list[str]) -> A.Expr:
    terms: list[A.Expr] = [A.Name(v) if coeffs[v] == 1 else A.binop("*", A.Name(v), A.lit(coeffs[v]))
                           for v in order if coeffs.get(v)]
    if const or not terms:
        terms.append(A.lit(const))
    out = terms[0]
    for t in terms[1:]:
        out = A.binop("+", out, t)
    return out


_NodeT = TypeVar("_NodeT", bound=A.Node)


def _simplify_digits(node: _NodeT, ranges: dict[str, int], order: list[str]) -> _NodeT:
    """Divisions, remainders, shifts and masks by a constant ``D`` of an affine form of the digits, folded where
    the form splits into a part of multiples of ``D`` and a rest that stays within ``[0, D)`` over the digits'
    ranges (then C's quotient and remainder are the two parts exactly)."""
    def fold(n: A.Node) -> A.Node | None:
        if not (isinstance(n, A.Binary) and n.op in ("/", "%", ">>", "&")):
            return None
        left = _simplify_digits(n.left, ranges, order)
        right = _simplify_digits(n.right, ranges, order)
        same = A.replace(n, left=left, right=right)
        by = A.const_int(right)
        form = _affine(left, ranges)
        if by is None or form is None:
            return same
        op = n.op
        if op == ">>":
            if not 0 <= by < 31:
                return same
            op, by = "/", 1 << by
        elif op == "&":
            if by < 0 or (by + 1) & by:
                return same
            op, by = "%", by + 1
        if by <= 0:
            return same
        coeffs, const = form
        high = {v: k // by for v, k in coeffs.items() if k % by == 0}
        low = {v: k for v, k in coeffs.items() if k % by}
        low_const = const % by
        high_const = const // by
        least = low_const + sum(min(0, k * (ranges[v] - 1)) for v, k in low.items())
        most = low_const + sum(max(0, k * (ranges[v] - 1)) for v, k in low.items())
        if least < 0 or most >= by or const < 0 or any(k < 0 for k in coeffs.values()):
            return same
        return _affine_expr(high, high_const, order) if op == "/" else _affine_expr(low, low_const, order)
    return A.rewrite(node, fold)


def _radix_nest(loop: A.For, view: Any, pragma: A.Pragma | None, fresh: Callable[[str], str],
                min_divisor: int, types: dict[str, A.Type]) -> A.Stmt | None:
    """``for (v = 0; v < N; ++v) BODY`` whose body divides ``v`` only by constants ``D1 > D2 > ...`` each a
    multiple of the next (``v >> 5``, ``(v & 31) >> 3``, ``v & 7``) as one loop per digit of ``v`` in that mixed
    radix, the divisions folded: every subscript affine in the innermost digit (a TVM 3-D pool's 64 threads as
    2 x 4 x 8). None when the loop is not of that form or a division of the innermost digit remains."""
    start, stop = A.const_int(view.start), A.const_int(view.stop)
    if start != 0 or view.var in scalar_writes(loop.body) or (stop is not None and stop <= 0):
        return None
    if stop is None and not (_invariant(view.stop, scalar_writes(loop.body) | {view.var}, types)
                             and all(isinstance(n, (A.Name, A.Literal)) for n in A.walk(view.stop))):
        return None
    if pragma is not None and "parallel" in pragma.text:
        return None
    found: set[int] = set()
    for n in A.walk(loop.body):
        division = _as_division(n, view.var)
        if division is not None:
            value = A.const_int(division[1])
            if value is None:
                return None
            found.add(value)
    radices = sorted(found, reverse=True)
    if not radices or radices[-1] < min_divisor or (stop is not None and stop % radices[0]):
        return None
    if any(big % small for big, small in zip(radices, radices[1:], strict=False)):
        return None
    inner_extents = [big // small for big, small in zip(radices, radices[1:], strict=False)] + [radices[-1]]
    # a run-time extent (the block's) is split behind the check that the largest divisor divides it
    outer_extent = A.lit(stop // radices[0]) if stop is not None else A.binop("/", view.stop, A.lit(radices[0]))
    extents = [1 << 30 if stop is None else stop // radices[0]] + inner_extents
    weights = radices + [1]
    digits = [fresh(f"xp_dl_t{i}") for i in range(len(extents))]
    ranges = dict(zip(digits, extents, strict=True))
    index = _affine_expr(dict(zip(digits, weights, strict=True)), 0, digits)
    body = _simplify_digits(A.substitute(loop.body, {view.var: index}), ranges, digits)
    if _still_divided(body, digits[-1]) or view.var in names_in(body):
        return None
    vtype = A.replace(view.var_type, quals=())
    nest: A.Stmt = A.for_range(digits[-1], A.lit(0), A.lit(extents[-1]), body, var_type=vtype)
    if pragma is not None:
        nest = A.Block((pragma, nest))
    bounds = [outer_extent] + [A.lit(e) for e in inner_extents]
    for digit, bound in zip(reversed(digits[:-1]), reversed(bounds[:-1]), strict=True):
        nest = A.for_range(digit, A.lit(0), bound, nest, var_type=vtype)
    if stop is None:
        original = A.Block((pragma, loop)) if pragma is not None else loop
        return A.If(A.binop("==", A.binop("%", view.stop, A.lit(radices[0])), A.lit(0)), nest, original)
    return nest


def _single(stmt: A.Stmt) -> A.Stmt:
    while isinstance(stmt, A.Block) and len(stmt.stmts) == 1:
        stmt = stmt.stmts[0]
    return stmt


def _digit_loop(stmt: A.Stmt) -> A.For | None:
    view = stmt.canonical() if isinstance(stmt, A.For) else None
    return stmt if isinstance(stmt, A.For) and view is not None and view.var.startswith("xp_dl_t") else None


def _digit_chain(stmt: A.Stmt) -> tuple[list[A.For], A.Stmt] | None:
    """The leading perfect nest of digit loops of a radix nest, outermost first, and the last one's body."""
    chain: list[A.For] = []
    current = _single(stmt)
    while (loop := _digit_loop(current)) is not None:
        chain.append(loop)
        current = _single(loop.body)
    return (chain, current) if chain else None


def _injective(coeffs: dict[str, int], extents: dict[str, int | None]) -> bool:
    """Whether ``sum(k * digit)`` takes a distinct value at every point of the digits' ranges (each coefficient
    exceeds what the smaller ones can reach); an unknown extent is allowed for the largest coefficient only."""
    if set(coeffs) != set(extents) or any(k == 0 for k in coeffs.values()):
        return False
    reach = 0
    ordered = sorted(coeffs, key=lambda v: abs(coeffs[v]))
    for i, v in enumerate(ordered):
        if abs(coeffs[v]) <= reach:
            return False
        extent = extents[v]
        if extent is None:
            if i != len(ordered) - 1:
                return False
            continue
        reach += abs(coeffs[v]) * (extent - 1)
    return True


def _hoist_outer_digits(loop: A.For, pragma: A.Pragma | None, view: Any) -> list[A.Stmt] | None:
    """``for (v) { for (t0) for (t1) { simd for (t2) B } }`` -> ``for (t0) for (t1) for (v) { simd for (t2) B }``
    (and through ``if (G) DIGITS else ORIGINAL`` with ``G`` invariant, the ``if`` outside): the threads'
    digits outside a loop each thread runs alike (thread_interchange's window loops), so the innermost
    digit's lanes stay inside. Sound where distinct digit tuples touch distinct elements of whatever ``B``
    writes: every write and read of a written array uses one subscript, affine and one-to-one in the digits
    plus a part free of ``v`` and of anything the loop writes; ``B`` writes no scalar it does not declare,
    calls only pure math and does not jump."""
    if view is None or (pragma is not None and "parallel" in pragma.text):
        return None
    written = scalar_writes(loop.body) | {view.var}
    body = _single(loop.body)

    def rebuild(new_body: A.Stmt) -> A.Stmt:
        moved = A.replace(loop, body=new_body)
        return A.Block((pragma, moved)) if pragma is not None else moved

    if isinstance(body, A.If) and body.else_ is not None:
        cond = body.cond
        if names_in(cond) & written or any(isinstance(n, A.Call | A.Assign | A.Index) or (
                isinstance(n, A.Unary) and n.op in ("++", "--", "*")) for n in A.walk(cond)):
            return None
        then = _hoist_outer_digits(A.replace(loop, body=body.then), pragma, view)
        if then is None:
            return None
        return [A.If(cond, A.Block(tuple(then)), rebuild(body.else_))]
    found = _digit_chain(body)
    if found is None:
        return None
    outers, inner = found
    if not any(_digit_loop(n) is not None for n in A.walk(inner) if isinstance(n, A.For)):
        outers, inner = outers[:-1], outers[-1]  # the last digit is the lanes': it stays inside
    extents: dict[str, int | None] = {}
    for d_loop in [*outers, *(n for n in A.walk(inner) if isinstance(n, A.For) and _digit_loop(n) is not None)]:
        d_view = d_loop.canonical()
        if d_view is None or A.const_int(d_view.start) != 0 or A.const_int(d_view.step) != 1 or (
                names_in(d_view.stop) & written):
            return None
        extents[d_view.var] = A.const_int(d_view.stop)
    if not outers:
        return None
    digits = set(extents)
    declared = {d.name for n in A.walk(inner) if isinstance(n, A.DeclStmt) for d in n.decls}
    if scalar_writes(inner) - declared or has_jumps([inner]) or any(
            isinstance(n, A.Opaque | A.Launch) or (isinstance(n, A.Call) and n.callee not in PURE_CALLS)
            or (isinstance(n, A.Unary) and n.op in ("*", "&")) for n in A.walk(inner)):
        return None
    written_arrays = A.read_write(inner).mem_writes
    if written_arrays and any(isinstance(n, A.Index) and isinstance(n.base, A.Index) for n in A.walk(inner)):
        return None  # a multi-dimensional access: its subscripts are not one affine form
    for base in written_arrays:
        subscripts = {n.index for n in A.walk(inner)
                      if isinstance(n, A.Index) and isinstance(n.base, A.Name) and n.base.id == base}
        if len(subscripts) != 1:
            return None
        terms = _digit_terms(next(iter(subscripts)), digits)
        if terms is None or not _injective(terms[0], extents):
            return None
        if any(names_in(rest) & (written | declared) for _, rest in terms[1]):
            return None
    nest: A.Stmt = rebuild(inner)
    for d_loop in reversed(outers):
        nest = A.replace(d_loop, body=nest)
    return [nest]


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    functions = [target_function(module, params)] if params.get("function") else list(module.functions())
    new_module = module
    notes: list[str] = []
    reason: str | None = None
    for fn in functions:
        new_fn, note, why = _split_function(fn, params)
        reason = reason or why
        if new_fn is not None:
            new_module = new_module.replace_function(fn.name, new_fn)
            notes.append(note)
    if not notes:
        raise PassRefused(reason or "no unit-stride loop divides its index by a loop-invariant value")
    ctx.notes.append("delinearize: " + "; ".join(notes))
    return leave(unit, new_module, ctx)


def _split_function(fn: A.Function, params: dict[str, Any]) -> tuple[A.Function | None, str, str | None]:
    """``fn`` with its qualifying loops split (None when none was), the note, and why a loop was left."""
    wanted = str(params.get("loop") or "")
    hoist = bool_param(params, "hoist", True)
    min_divisor = int_param(params, "min_divisor", 8, 1, 1 << 20)
    short_loop = int_param(params, "short_loop", 16, 0, 1 << 20)
    types = {**{p.name: p.type for p in fn.params if isinstance(p, A.Param) and p.name}, **A.declared_types(fn)}
    state: dict[str, Any] = {"done": 0, "reason": None, "hoisted": 0, "moved": 0}

    def rewrite_loop(loop: A.For, pragma: A.Pragma | None) -> list[A.Stmt] | None:
        view = loop.canonical()
        if view is None or (wanted and view.var != wanted) or (not wanted and view.var in _BOUND_ELSEWHERE):
            return None
        if any(isinstance(n, A.While | A.DoWhile) for n in A.walk(loop.body)):
            return None
        if any(isinstance(n, A.VarDecl) and n.name.startswith("xp_dl_") for n in A.walk(loop.body)):
            # an inner loop already split (its names would shadow this split's); the outer digits of a thread
            # loop split by digits move out of a loop every thread runs alike where that is sound
            moved = _hoist_outer_digits(loop, pragma, view)
            state["moved"] += moved is not None
            return moved
        if A.const_int(view.step) != 1:
            if wanted:
                state["reason"] = f"loop '{view.var}' does not have unit stride"
            return None
        body = loop.body
        changing = scalar_writes(body) | {view.var} | {
            d.name for n in A.walk(body) if isinstance(n, A.DeclStmt) for d in n.decls}
        if view.var_type is not None and (view.var_type.pointers or view.var_type.base not in INT_TYPES):
            return None
        divisors = _divisors(body, view.var, changing, types)
        if not divisors:
            if wanted:
                state["reason"] = f"loop '{view.var}' does not divide its index by a loop-invariant value"
            return None
        if has_jumps([body]) or any(isinstance(n, A.Opaque) for n in A.walk(body)):
            state["reason"] = f"loop '{view.var}' jumps out or holds code the AST does not model"
            return None
        large = [e for e in divisors if (value := A.const_int(e)) is None or value >= min_divisor]
        if not large:
            state["reason"] = (f"loop '{view.var}': every divisor is below min_divisor {min_divisor} "
                               "(inner loops that short do not pay for the per-quotient work)")
            return None
        if view.var_type is None:
            state["reason"] = f"loop '{view.var}' does not declare its variable (its type is needed)"
            return None
        vtype = A.replace(view.var_type, quals=())
        fresh = fresh_namer(fn)
        d_name, q_name, base_name, s_name, n_name, lo_name, hi_name, qend_name = (
            fresh(n) for n in ("xp_dl_d", "xp_dl_q", "xp_dl_base", "xp_dl_s", "xp_dl_n", "xp_dl_lo",
                                          "xp_dl_hi", "xp_dl_qend"))
        d, q, qbase = A.Name(d_name), A.Name(q_name), A.Name(base_name)
        var = A.Name(view.var)

        factors: set[A.Expr] = set()

        def split_body(divisor: A.Expr) -> tuple[A.Block, list[tuple[str, A.Expr]], bool]:
            """The inner loop's body for ``divisor``, the per-quotient values it reads, and whether an inner
            loop's bound is among them."""
            factors.clear()
            def substitute(n: A.Node) -> A.Node | None:
                division = _as_division(n, view.var)
                if division is None:
                    return None
                op, by = division
                if by == divisor:
                    return A.Cast(vtype, q) if op == "/" else A.binop("-", var, qbase)
                k = _multiple(by, divisor)
                if k is None:
                    return None
                if A.const_int(k) is None:
                    factors.add(k)  # checked positive at run time
                # i >= 0 and d, k > 0 where the split runs: floor(floor(i / d) / k) = floor(i / (k * d))
                if op == "/":
                    return A.binop("/", A.Cast(vtype, q), k)
                return A.binop("+", A.binop("*", A.binop("%", A.Cast(vtype, q), k),
                                               A.Cast(vtype, divisor)), A.binop("-", var, qbase))

            inner_body = A.Block(A.stmts_of(A.rewrite(body, substitute)))
            if not hoist:
                return inner_body, [], False
            hoister = _Hoister(fresh, q_name, set(A.read_write(body).mem_writes), changing)
            return (A.Block(tuple(hoister.stmt(s) for s in inner_body.stmts)), hoister.order,
                    bool(hoister.loop_bounds))

        ordered = sorted(large, key=lambda e: _preference(divisors, e), reverse=True)
        for divisor in ordered:
            inner_body, hoisted, bounds = split_body(divisor)
            constant = A.const_int(divisor)
            if constant is None or constant >= short_loop or bounds or any(_expensive(e) for _, e in hoisted):
                break
        else:
            state["reason"] = (f"loop '{view.var}': its divisors give inner loops shorter than {short_loop} that "
                               "hoist no load or call")
            return None
        if view.var in _THREAD_LOOPS and _still_divided(inner_body, view.var):
            # a thread loop is split only to make its subscripts affine (a gather becomes a strided read);
            # one still divided inside gains nothing and hides the loop's simple form from later passes
            # (measured: a TVM 3-D pool split by 32, still masking by 7, lost its select-form max: 0.63x -> 0.38x);
            # a constant-extent one divided by a chain of constants becomes one loop per digit instead
            nest = _radix_nest(loop, view, pragma, fresh, min_divisor, types)
            if nest is not None:
                state["done"] += 1
                return [nest]
            state["reason"] = f"thread loop '{view.var}' stays divided after a split by {print_expr(divisor, Dialect.C)}"
            return None
        state["done"] += 1
        # __typeof__ (GNU C and C++): the hoisted value keeps exactly the type the expression had
        hoisted_decls = [A.decl(name, A.ctype(f"__typeof__({print_expr(e, Dialect.C)})"), e) for name, e in hoisted]
        state["hoisted"] += len(hoisted)
        outer_pragma, inner_pragma = split_loop_pragma(pragma)
        inner = A.for_range(view.var, A.Name(lo_name), A.Name(hi_name), inner_body, var_type=vtype)
        long_t = A.ctype("long long")
        q_body = A.Block((
            A.decl(base_name, vtype, A.binop("*", q, d)),
            A.decl(lo_name, vtype, A.Ternary(A.binop("<", qbase, A.Name(s_name)), A.Name(s_name), qbase)),
            A.decl(hi_name, vtype, A.Ternary(A.binop("<", A.binop("-", A.Name(n_name), qbase), d),
                                             A.Name(n_name), A.binop("+", qbase, d))),
            *hoisted_decls,
            *([inner_pragma] if inner_pragma else []),
            inner,
        ))
        outer = A.For(A.decl(q_name, long_t, A.binop("/", A.Cast(long_t, A.Name(s_name)), d)),
                      A.binop("<", q, A.Name(qend_name)), A.Unary("++", q), q_body)
        split = A.Block((
            A.decl(qend_name, long_t, A.binop("/", A.binop("-", A.binop("+", A.Cast(long_t, A.Name(n_name)), d),
                                                           A.lit(1)), d)),
            *([outer_pragma] if outer_pragma else []),
            outer,
        ))
        original = A.Block((*([pragma] if pragma else []), loop))
        cond = A.binop("&&", A.binop(">=", d, A.lit(max(min_divisor, 1))), A.binop(">=", A.Name(s_name), A.lit(0)))
        for k in sorted(factors, key=lambda e: print_expr(e, Dialect.C)):
            cond = A.binop("&&", cond, A.binop(">", k, A.lit(0)))
        return [A.Block((
            A.decl(d_name, long_t, A.Cast(long_t, divisor)),
            A.decl(s_name, vtype, view.start),
            A.decl(n_name, vtype, view.stop),
            A.If(A.binop("&&", cond, A.binop("<", A.Name(s_name), A.Name(n_name))), split, original),
        ))]

    # an earlier split's else branch is the fallback flat loop: left alone
    new_fn = map_loops_with_pragmas(fn, rewrite_loop, skip=lambda stmt: declares_prefix(stmt.then, "xp_dl_qend")
                                      or declares_prefix(stmt.then, "xp_dl_t"))
    if not state["done"] and not state["moved"]:
        return None, "", state["reason"]
    note = f"{state['done']} loop(s) of {fn.name} split by their divisor, {state['hoisted']} expression(s) hoisted"
    if state["moved"]:
        note += f", outer digits moved out of {state['moved']} loop(s) the threads run alike"
    return new_fn, note, state["reason"]
