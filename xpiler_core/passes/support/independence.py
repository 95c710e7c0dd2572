"""Are the iterations of a plain C loop independent? A conservative test for binding unmarked loops.

A loop may run its iterations in parallel (one GPU thread each) when, besides the scalar checks of loop
binding (no carried scalars, no jumps), every memory location written in one iteration is touched by no
other iteration. The test proves that only for simple, common shapes and refuses everything else:

* each written array (a pointer or array name, one-dimensional subscripts) is accessed, read or written,
  only at one index expression, the same everywhere in the body, and
* that index is injective in the loop variable: ``v + e`` / ``e + v`` / ``v`` / ``v * K + j`` /
  ``K * v + j`` where ``e`` does not change inside the loop and ``j`` is the variable of an inner counted
  loop with range ``[0, K)`` (so row ``v`` of a ``K``-wide matrix belongs to iteration ``v`` alone);
* nothing is written through a pointer dereference, a member or a call with a pointer to written memory.

Distinct pointer parameters are assumed not to alias, as ``#pragma omp parallel for`` on the same loop would.
"""

from __future__ import annotations

from xpiler_core import ast as A
from xpiler_core.passes.support.ast_support import scalar_writes


def independence_problem(loop: A.For) -> str | None:
    """``None`` when the iterations are provably independent in memory; else why not (for the refusal)."""
    view = loop.canonical()
    if view is None:
        return "the loop is not a canonical counted loop"
    if A.const_int(view.step) != 1:
        return "the loop is not unit-stride"
    varying = scalar_writes(loop.body) | {d.name for d in A.walk(loop.body) if isinstance(d, A.VarDecl)}
    inner_ranges: dict[str, A.Expr] = {}
    for n in A.walk(loop.body):
        if isinstance(n, A.For) and (inner := n.canonical()) is not None and A.const_int(inner.start) == 0 \
                and A.const_int(inner.step) == 1:
            inner_ranges[inner.var] = inner.stop

    written: set[str] = set()
    for n in A.walk(loop.body):
        target = n.target if isinstance(n, A.Assign) else (
            n.operand if isinstance(n, A.Unary) and n.op in ("++", "--") else None)
        if target is None or isinstance(target, A.Name):
            continue
        if not (isinstance(target, A.Index) and isinstance(target.base, A.Name)):
            return "a memory write that is not a one-dimensional subscript of a named array"
        written.add(target.base.id)
    for n in A.walk(loop.body):
        if isinstance(n, A.Unary) and n.op == "&":
            return "an address is taken inside the loop"
        if isinstance(n, A.Call) and any(
                isinstance(m, A.Name) and m.id in written for arg in n.args for m in A.walk(arg)
                if not _inside_subscript(arg, m)):
            return f"a call receives a pointer to written memory ({n.callee or 'call'})"

    for name in sorted(written):
        indices = [n.index for n in A.walk(loop.body) if isinstance(n, A.Index) and n.base == A.Name(name)]
        if any(isinstance(n, A.Index) and isinstance(n.base, A.Index) and _root(n.base) == name
               for n in A.walk(loop.body)):
            return f"'{name}' is subscripted more than once"
        if any(isinstance(n, A.Name) and n.id == name for n in _unsubscripted_uses(loop.body, name)):
            return f"'{name}' is used other than through a subscript"
        first = indices[0]
        if any(ix != first for ix in indices[1:]):
            return f"'{name}' is accessed at different indices, which other iterations may write"
        if not injective_index(first, view.var, varying, inner_ranges):
            return f"the index of '{name}' is not provably distinct per iteration"
    return None


def _root(e: A.Expr) -> str | None:
    while isinstance(e, A.Index):
        e = e.base
    return e.id if isinstance(e, A.Name) else None


def _inside_subscript(arg: A.Expr, name: A.Node) -> bool:
    """True when ``name`` occurs in ``arg`` only as the base of a subscript (``f(x[i])`` passes a value)."""
    return any(isinstance(n, A.Index) and n.base is name for n in A.walk(arg))


def _unsubscripted_uses(body: A.Node, name: str) -> list[A.Node]:
    bases = {id(n.base) for n in A.walk(body) if isinstance(n, A.Index)}
    return [n for n in A.walk(body) if isinstance(n, A.Name) and n.id == name and id(n) not in bases]


def _names(e: A.Expr) -> set[str]:
    return {n.id for n in A.walk(e) if isinstance(n, A.Name)}


def _strip(e: A.Expr) -> A.Expr:
    while isinstance(e, A.Cast):
        e = e.operand
    return e


def injective_index(index: A.Expr, var: str, varying: set[str], inner_ranges: dict[str, A.Expr]) -> bool:
    index = _strip(index)
    if index == A.Name(var):
        return True
    if not (isinstance(index, A.Binary) and index.op == "+"):
        return False
    for head, rest in ((index.left, index.right), (index.right, index.left)):
        head, rest = _strip(head), _strip(rest)
        if head == A.Name(var) and var not in _names(rest) and not (_names(rest) & varying):
            return True  # v + e, e fixed during the loop
        if isinstance(head, A.Binary) and head.op == "*" and isinstance(rest, A.Name) and rest.id in inner_ranges:
            for v, k in ((head.left, head.right), (head.right, head.left)):
                if _strip(v) == A.Name(var) and _strip(k) == _strip(inner_ranges[rest.id]) \
                        and not (_names(k) & (varying | {var})):
                    return True  # v * K + j with j in [0, K)
    return False


__all__ = ["independence_problem", "injective_index"]
