"""Flat forms: in a kernel launched on one dimension, block/thread index arithmetic re-expressed over the flat
element index ``i = bx * B + tx`` (used by ``grid_flatten``).

TVM and other generators spell each output coordinate in the block and thread indices separately
(``((bx * 6 + (tx >> 2)) % 250) / 25``, guard ``bx * 8 + (tx >> 7) < 375``): correct, but nothing shows that the
kernel walks a flat range. Over the kernel's one constant launch each maximal integer subexpression of the
indices in a thread body is evaluated at every point (C ``int`` semantics) and replaced by the form
``o + s * ((i / a) % b)`` (or ``i / a``, ``i % b``, ``i``) that equals it everywhere; a comparison that holds
exactly on a prefix of the flat range becomes ``i < n``. The forms hold only for launches within the checked
one: the caller versions the code on that.
"""

from __future__ import annotations

import numpy as np

from xpiler_core import ast as A
from xpiler_core.passes.support.ast_support import INT_TYPES
from xpiler_core.passes.support.launch_points import INDEX_NAMES, Launch, evaluate, launch_points

_ARITHMETIC = frozenset({"+", "-", "*", "/", "%", ">>", "<<", "&"})
_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
_PLACEHOLDER = "xp_flat_i"


def _integer(e: A.Expr) -> bool:
    """Integer arithmetic of index names and integer literals only."""
    for n in A.walk(e):
        if not isinstance(n, A.Expr):
            continue  # the type of a cast
        if isinstance(n, A.Name):
            if n.id not in INDEX_NAMES:
                return False
        elif isinstance(n, A.Literal):
            if n.int_value is None:
                return False
        elif isinstance(n, A.Cast):
            if n.type.pointers or n.type.base not in INT_TYPES:
                return False
        elif isinstance(n, A.Binary):
            if n.op not in _ARITHMETIC:
                return False
        elif not (isinstance(n, A.Unary) and n.op == "-"):
            return False
    return any(isinstance(n, A.Name) for n in A.walk(e))


def _candidate(e: A.Expr) -> bool:
    if isinstance(e, A.Binary) and e.op in _COMPARISONS:
        return (_integer(e.left) or A.const_int(e.left) is not None) and (
            _integer(e.right) or A.const_int(e.right) is not None) and bool(A.free_names(e) & INDEX_NAMES)
    return _integer(e)


def _fit(values: np.ndarray, comparison: bool, flat: A.Expr) -> A.Expr | None:
    """The form over ``flat`` that takes ``values`` at flat index 0, 1, ... (None: no form of the family)."""
    total = len(values)
    i = np.arange(total, dtype=np.int64)
    if comparison:
        n = int(values.sum())
        return A.binop("<", flat, A.lit(n)) if np.array_equal(values, (i < n).astype(np.int64)) else None
    if np.all(values == values[0]):
        return A.lit(int(values[0]))
    a = int(np.argmax(values != values[0]))  # the first change: the run length
    if not np.array_equal(values, values[(i // a) * a]):
        return None
    runs = values[::a]
    k = np.arange(len(runs), dtype=np.int64)
    offset, step = int(runs[0]), int(runs[1] - runs[0])
    period: int | None = None
    if not np.array_equal(runs, offset + step * k):
        again = np.nonzero(runs[1:] == runs[0])[0]
        if not len(again):
            return None
        period = int(again[0]) + 1
        if not np.array_equal(runs, offset + step * (k % period)):
            return None
    form = flat if a == 1 else A.binop("/", flat, A.lit(a))
    if period is not None and period * a < total:
        form = A.binop("%", form, A.lit(period))
    if step != 1:
        form = A.binop("*", form, A.lit(step))
    if offset:
        form = A.binop("+", form, A.lit(offset))
    return form


class _Fitter:
    """Rewrites maximal index subexpressions over the flat index, memoized per expression."""

    def __init__(self, env: dict[str, np.ndarray], total: int, flat: A.Expr) -> None:
        self.env, self.total, self.flat = env, total, flat
        self.fits: dict[A.Expr, A.Expr | None] = {}

    def fit(self, e: A.Expr) -> A.Expr | None:
        if e not in self.fits:
            values = evaluate(e, self.env)
            comparison = isinstance(e, A.Binary) and e.op in _COMPARISONS
            self.fits[e] = None if values is None else _fit(
                np.broadcast_to(values, (self.total,)), comparison, self.flat)
        return self.fits[e]

    def rewrite_body(self, body: A.Stmt) -> A.Stmt:
        """A thread body with every index subexpression that has a flat form replaced by it."""
        def visit(x: A.Node) -> A.Node | None:
            if isinstance(x, A.DeclStmt) and [d.name for d in x.decls] == ["xp_t"]:
                return x  # the recovered linear thread index: grid_flatten drops it when unused
            if isinstance(x, A.Expr) and _candidate(x) and x != self.flat:
                return self.fit(x)
            return None

        return A.rewrite(body, visit)


def _costly_mixed(n: A.Node, with_loops: bool) -> bool:
    """A division or remainder by other than a power of two whose operand mixes block and thread indices; in a
    body with inner loops any division, remainder, shift or mask of such an operand (the flat loop's split then
    takes the inner loops' per-element bounds and offsets out of the element loop)."""
    if not (isinstance(n, A.Binary) and {"xp_bx", "xp_tx"} <= A.free_names(n.left)):
        return False
    if with_loops and n.op in (">>", "&", "/", "%"):
        return True
    if n.op not in ("/", "%"):
        return False
    divisor = A.const_int(n.right)
    return divisor is None or divisor <= 0 or divisor & (divisor - 1) != 0


def _worth_flattening(fitter: _Fitter, flat: A.Expr, with_loops: bool) -> bool:
    """The flat loop pays when the body is element-wise over the flat index (index and guard ``i < n`` only),
    or when a division or remainder by other than a power of two mixes block and thread indices (TVM's
    coordinates straddling blocks, ``(bx * 6 + (tx >> 2)) % 250``: only the flat loop can be split by the axis
    sizes, which hoists them). Terms of the block index alone, of the thread index alone or shifts and masks
    are as cheap in the block nest, which keeps its block-invariant work out of the thread loop."""
    used = [(e, f) for e, f in fitter.fits.items() if f is not None]
    if all(f == flat or (isinstance(f, A.Binary) and f.op == "<" and f.left == flat) for _, f in used):
        return True
    return any(_costly_mixed(n, with_loops) for e, _ in used for n in A.walk(e))


def flat_index(launch: Launch) -> A.Expr | None:
    """``xp_bx * B + xp_tx`` for a one-dimensional launch (None otherwise)."""
    (_gx, gy, gz), (bx, by, bz) = launch
    if (gy, gz, by, bz) != (1, 1, 1, 1):
        return None
    return A.binop("+", A.binop("*", A.Name("xp_bx"), A.lit(bx)), A.Name("xp_tx"))


def over_flat_index(nest: A.Stmt, launch: Launch, max_points: int) -> A.Stmt | str:
    """The recovered block nest with its thread bodies indexed by the flat index and guarded by ``i < n``
    (an unguarded body gets ``i < points``: true within the launch), or why not: a launch that is not
    one-dimensional or too large, a thread body with loops, or index uses no flat form matches."""
    flat = flat_index(launch)
    if flat is None:
        return "the launch is not one-dimensional"
    points = launch_points(launch, max_points)
    if points is None:
        return "the launch has more points than max_points"
    total, env = points
    fitter = _Fitter(env, total, flat)
    failed: list[str] = []

    def thread_loops(n: A.Node) -> A.Node | None:
        if not (isinstance(n, A.For) and (view := n.canonical()) is not None and view.var == "xp_tx"):
            return None
        if any(isinstance(x, (A.While, A.DoWhile)) for x in A.walk(n.body)):
            failed.append("loops")
            return n
        stmts = list(A.stmts_of(fitter.rewrite_body(n.body)))
        head = stmts[:1] if stmts and isinstance(stmts[0], A.DeclStmt) and [
            d.name for d in stmts[0].decls] == ["xp_t"] else []
        rest = stmts[len(head):]
        guarded = len(rest) == 1 and isinstance(rest[0], A.If) and rest[0].else_ is None and isinstance(
            rest[0].cond, A.Binary) and rest[0].cond.op == "<" and rest[0].cond.left == flat
        if not guarded:
            rest = [A.If(A.binop("<", flat, A.lit(total)), A.Block(tuple(rest)))]
        body = A.Block((*head, *rest))
        hidden = A.rewrite(A.Block(tuple(rest)), lambda x: A.Name(_PLACEHOLDER)
                           if isinstance(x, A.Expr) and x == flat else None)
        if A.free_names(hidden) & INDEX_NAMES:
            failed.append("index")
        return A.replace(n, body=body)

    rewritten = A.rewrite(nest, thread_loops)
    if "loops" in failed:
        return "the thread body holds while loops"
    with_loops = any(isinstance(x, A.For) and (view := x.canonical()) is not None and view.var not in INDEX_NAMES
                     for x in A.walk(nest))
    if not _worth_flattening(fitter, flat, with_loops):
        return ("block and thread indices enter the thread body separately (per-block terms the block loop "
                "computes once)")
    if failed or rewritten == nest:
        return "the thread body uses block/thread indices in a way no flat-index form matches"
    return rewritten
