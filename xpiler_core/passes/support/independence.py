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

Or, for arrays accessed at several indices: every access is an affine form ``c*v + sum c_j*j + k + E`` of the
loop variable ``v`` and the variables ``j`` of enclosing counted loops with constant ranges (local scalars
defined once in their scope are substituted, ``int idx = i * 20 + j * 5 + k``; the function's constant
scalars count as constants), with one coefficient ``c`` and one loop-invariant part ``E`` for all accesses;
when the addresses one iteration can touch lie in a window narrower than ``|c|``, iterations touch disjoint
windows (row-major flattening of a nest is the common case).

Distinct pointer parameters are assumed not to alias, as ``#pragma omp parallel for`` on the same loop would.
"""

from __future__ import annotations

from xpiler_core import ast as A
from xpiler_core.passes.support.ast_support import scalar_writes, subscript_root
from xpiler_core.passes.support.bang_thread import Poly


def independence_problem(loop: A.For, consts: dict[str, int] | None = None) -> str | None:
    """``None`` when the iterations are provably independent in memory; else why not (for the refusal).
    ``consts``: the enclosing function's scalars that hold one integer constant throughout."""
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
        if any(isinstance(n, A.Index) and isinstance(n.base, A.Index) and subscript_root(n.base) == name
               for n in A.walk(loop.body)):
            return f"'{name}' is subscripted more than once"
        if any(isinstance(n, A.Name) and n.id == name for n in _unsubscripted_uses(loop.body, name)):
            return f"'{name}' is used other than through a subscript"
        first = indices[0]
        if any(ix != first for ix in indices[1:]) and not _disjoint_regions(loop, view.var, name, consts or {}):
            return f"'{name}' is accessed at different indices, which other iterations may write"
        if not injective_index(first, view.var, varying, inner_ranges) and not _disjoint_regions(
                loop, view.var, name, consts or {}):
            return f"the index of '{name}' is not provably distinct per iteration"
    return None


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


def _disjoint_regions(loop: A.For, var: str, name: str, consts: dict[str, int]) -> bool:
    inside = scalar_writes(loop.body) | {d.name for d in A.walk(loop.body) if isinstance(d, A.VarDecl)}
    accesses: list[tuple[A.Expr, dict[str, A.Expr | None], dict[str, tuple[int, int] | None]]] = []
    assigned = scalar_writes(loop.body)

    def visit(node: A.Node, defs: dict[str, A.Expr | None], ranges: dict[str, tuple[int, int] | None]) -> None:
        if isinstance(node, A.Block):
            scope = dict(defs)
            for st in node.stmts:
                visit(st, scope, ranges)
            return
        if isinstance(node, A.DeclStmt):
            for d in node.decls:
                if d.init is not None:
                    visit(d.init, defs, ranges)
                plain = d.init is not None and not d.dims and not d.type.pointers and d.name not in assigned
                defs[d.name] = d.init if plain else None
            return
        if isinstance(node, A.For):
            view = node.canonical()
            inner = dict(ranges)
            if view is not None:
                lo, hi = _const(view.start, consts), _const(view.stop, consts)
                bounded = lo is not None and hi is not None and A.const_int(view.step) == 1 \
                    and view.var not in scalar_writes(node.body)
                inner[view.var] = (lo, hi) if bounded and lo is not None and hi is not None else None
                visit(node.body, {**defs, view.var: None}, inner)
                return
        if isinstance(node, A.Index) and node.base == A.Name(name):
            accesses.append((node.index, dict(defs), dict(ranges)))
        for child in A.children(node):
            visit(child, defs, ranges)

    visit(loop.body, {}, {})
    windows: list[tuple[int, int]] = []
    coeff: int | None = None
    invariant: dict[tuple[str, ...], int] | None = None
    for index, defs, ranges in accesses:
        poly = _affine(index, {k: v for k, v in defs.items() if v is not None}, 0, consts)
        if poly is None:
            return False
        c_v, lo, hi = 0, 0, 0
        rest: dict[tuple[str, ...], int] = {}
        for monomial, c in poly.terms:
            if not monomial:
                lo, hi = lo + c, hi + c
            elif monomial == (var,):
                c_v = c
            elif len(monomial) == 1 and monomial[0] in ranges:
                bounds = ranges[monomial[0]]
                if bounds is None or bounds[1] <= bounds[0]:
                    return False
                a, b = c * bounds[0], c * (bounds[1] - 1)
                lo, hi = lo + min(a, b), hi + max(a, b)
            elif any(atom == var or atom in ranges or atom in inside or atom in defs for atom in monomial):
                return False
            else:
                rest[monomial] = c
        if coeff is None:
            coeff, invariant = c_v, rest
        elif c_v != coeff or rest != invariant:
            return False
        windows.append((lo, hi))
    if not coeff or not windows:
        return False
    return max(h for _, h in windows) - min(lo for lo, _ in windows) < abs(coeff)


def _const(e: A.Expr, consts: dict[str, int]) -> int | None:
    poly = _affine(e, {}, 0, consts)
    return None if poly is None or poly.atoms() else poly.as_dict().get((), 0)


def _affine(e: A.Expr, defs: dict[str, A.Expr], depth: int, consts: dict[str, int] | None = None) -> Poly | None:
    """``e`` as a polynomial over names (local definitions and constants substituted), or None."""
    e = _strip(e)
    if depth > 16:
        return None
    if isinstance(e, A.Literal):
        return None if e.int_value is None else Poly.const(e.int_value)
    if isinstance(e, A.Name):
        if e.id in defs:
            return _affine(defs[e.id], defs, depth + 1, consts)
        return Poly.const(consts[e.id]) if consts and e.id in consts else Poly.atom(e.id)
    if isinstance(e, A.Unary) and e.op in ("+", "-"):
        inner = _affine(e.operand, defs, depth + 1, consts)
        return None if inner is None else (-inner if e.op == "-" else inner)
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*"):
        left, right = _affine(e.left, defs, depth + 1, consts), _affine(e.right, defs, depth + 1, consts)
        if left is None or right is None:
            return None
        return left + right if e.op == "+" else left - right if e.op == "-" else left * right
    return None


def affine_poly(e: A.Expr, consts: dict[str, int] | None = None) -> Poly | None:
    """``e`` as a polynomial over the names it reads (``consts`` substituted), or None when it is not one."""
    return _affine(e, {}, 0, consts)


__all__ = ["affine_poly", "independence_problem", "injective_index"]
