"""Contraction: a local array used one element per iteration becomes a scalar (the inverse of expansion).

``T a[N]; for (i ...) { a[i] = e; ... a[i] ... }`` → ``for (i ...) { T a = e; ... a ... }`` when every
access to ``a`` is inside that one loop at index ``i`` (so no value survives an iteration) and the first
statement touching it writes it unconditionally. Parameters: ``var`` (the array), ``function``. Refuses
otherwise (uses after the loop, other indices, address taken, reads before the write).
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave, names_in, target_function

INFO = PassInfo(
    name="contraction",
    summary="Array contraction: a per-iteration local array becomes a loop-local scalar",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("var", "str", "", "the local array to contract (required)"),
        ParamSpec("function", "str", "", "function holding it"),
    ),
)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    var = str(params.get("var") or "")
    if not var:
        raise PassRefused("contraction needs var=NAME")
    stmts = list(fn.body.stmts)
    decl_at = next((i for i, s in enumerate(stmts) if isinstance(s, A.DeclStmt)
                    and any(d.name == var and len(d.dims) == 1 and d.init is None and not d.is_shared
                            for d in s.decls)), None)
    if decl_at is None:
        raise PassRefused(f"no uninitialized one-dimensional local array '{var}' at the top of '{fn.name}'")
    users = [i for i, s in enumerate(stmts) if i != decl_at and var in names_in(s)]
    if len(users) != 1 or not isinstance(stmts[users[0]], A.For):
        raise PassRefused(f"'{var}' is used outside a single loop")
    loop = stmts[users[0]]
    assert isinstance(loop, A.For)
    view = loop.canonical()
    if view is None:
        raise PassRefused("the loop using it is not canonical")
    accesses = [a for a in A.array_accesses(loop.body) if a.base == var]
    refs = sum(1 for n in A.walk(loop.body) if isinstance(n, A.Name) and n.id == var)
    if refs != len({id(a.node) for a in accesses}) or any(a.indices != (A.Name(view.var),) for a in accesses):
        raise PassRefused(f"'{var}' is accessed at an index other than '{view.var}' or as a pointer")
    body = A.stmts_of(loop.body)
    first = next((k for k, s in enumerate(body) if var in names_in(s)), None)
    assert first is not None
    head = body[first]
    ok = (isinstance(head, A.ExprStmt) and isinstance(head.expr, A.Assign) and head.expr.op == "="
          and head.expr.target == A.Index(A.Name(var), A.Name(view.var)) and var not in names_in(head.expr.value))
    if not ok:
        raise PassRefused(f"the first use of '{var}' in the loop is not an unconditional write of a[{view.var}]")
    decl_stmt = stmts[decl_at]
    assert isinstance(decl_stmt, A.DeclStmt) and isinstance(head, A.ExprStmt) and isinstance(head.expr, A.Assign)
    d = next(d for d in decl_stmt.decls if d.name == var)
    scalar = A.Name(var)
    new_head = A.DeclStmt((A.VarDecl(var, d.type, (), head.expr.value),))
    rest = A.rewrite(A.Block(tuple(body[first + 1:])),
                     lambda n: scalar if isinstance(n, A.Index) and n.base == A.Name(var) else None)
    new_loop = A.replace(loop, body=A.Block((*body[:first], new_head, *rest.stmts)))
    others = tuple(x for x in decl_stmt.decls if x.name != var)
    stmts[users[0]] = new_loop
    if others:
        stmts[decl_at] = A.DeclStmt(others)
    else:
        del stmts[decl_at]
    ctx.notes.append(f"contraction: {var}[] → scalar in {fn.name}")
    return leave(unit, module.replace_function(fn.name, A.replace(fn, body=A.Block(tuple(stmts)))), ctx)
