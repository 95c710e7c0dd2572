"""Reorder (interchange) two perfectly nested loops, with a dependence check that refuses illegal cases.

``loop=i`` names the outer loop; its body must be exactly one canonical loop (``j``) whose bounds do not
depend on ``i``. The interchange is legal here when every dependence has distance zero in both loops:
each array written in the body is accessed (read or written) only at the same index expressions as the
write, no scalar declared outside is written, and nothing unmodeled or with side effects is called.
Anything else (``a[i][j] = a[i-1][j+1]``, reductions into a scalar, calls) is refused with the reason.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    PURE_CALLS,
    calls_in,
    enter,
    has_jumps,
    leave,
    scalar_writes,
    target_function,
)

INFO = PassInfo(
    name="reorder",
    summary="Interchange two perfectly nested loops when the dependence check allows it",
    kind="ast",
    directions=("cuda->cpu", "c->cuda"),
    params=(
        ParamSpec("loop", "str", "", "variable of the outer loop of the pair (default: first perfect nest)"),
        ParamSpec("function", "str", "", "function holding the loops"),
    ),
)

def _inner(loop: A.For) -> A.For | None:
    body = loop.body
    if isinstance(body, A.Block):
        stmts = [s for s in body.stmts if not isinstance(s, (A.Comment, A.Empty))]
        body = stmts[0] if len(stmts) == 1 else body
    return body if isinstance(body, A.For) else None


def check_interchange(outer: A.For) -> str | None:
    """``None`` when interchanging ``outer`` with its inner loop is legal, else the reason it is not."""
    inner = _inner(outer)
    ov, iv = outer.canonical(), inner.canonical() if inner else None
    if inner is None or ov is None or iv is None:
        return "the loops are not a perfect nest of two canonical loops"
    names_inner_bounds = {n.id for e in (iv.start, iv.stop, iv.step) for n in A.walk(e) if isinstance(n, A.Name)}
    if ov.var in names_inner_bounds:
        return f"the bounds of '{iv.var}' depend on '{ov.var}' (triangular nest)"
    body = inner.body
    if has_jumps([body]) or any(isinstance(n, A.Opaque) for n in A.walk(body)):
        return "the body jumps out or holds unmodeled code"
    impure = calls_in(body) - PURE_CALLS
    if impure:
        return f"the body calls {', '.join(sorted(impure))} (side effects unknown)"
    declared = {d.name for d in A.walk(body) if isinstance(d, A.VarDecl)}
    carried = scalar_writes(body) - declared
    if carried:
        return f"scalar(s) {', '.join(sorted(carried))} carry a dependence across iterations"
    accesses = A.array_accesses(body)
    rw = A.read_write(body)
    for base in rw.mem_writes:
        writes = [a for a in accesses if a.base == base and a.write]
        if not writes:
            return f"'{base}' is written through a pointer expression the check cannot analyze"
        shape = writes[0].indices
        for a in accesses:
            if a.base == base and a.indices != shape:
                return f"'{base}' is written at {len(shape)}-d index and accessed at a different index: a " \
                       "loop-carried dependence may reverse"
        deref = [n for n in A.walk(body) if isinstance(n, A.Unary) and n.op == "*"]
        if deref:
            return "pointer dereferences in the body"
    return None


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    wanted = str(params.get("loop") or "")
    result: dict[str, Any] = {"done": False, "reason": None}

    from xpiler_core.passes.support.ast_support import map_loops

    def swap(loop: A.For) -> Any:
        view = loop.canonical()
        if result["done"] or view is None or (wanted and view.var != wanted):
            return None
        inner = _inner(loop)
        if inner is None:
            if wanted:
                result["reason"] = f"loop '{wanted}' has no single inner loop"
            return None
        reason = check_interchange(loop)
        if reason:
            result["reason"] = reason
            return None
        result["done"] = True
        return A.replace(inner, body=A.replace(loop, body=inner.body))

    new_fn = map_loops(fn, swap)
    if not result["done"]:
        raise PassRefused(result["reason"] or f"no perfect loop nest{' at ' + wanted if wanted else ''} in '{fn.name}'")
    ctx.notes.append(f"reorder: interchanged loops at '{wanted or 'first nest'}' in {fn.name}")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
