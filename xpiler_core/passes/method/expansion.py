"""Expansion: a scalar declared in a loop body becomes an array with one element per iteration.

``for (i = a; i < n; ++i) { T v = e; ... v ... }`` → ``T v_x[n - a];`` before the loop and ``v_x[i - a]``
in the body. This is what lets loop fission keep a value across a split point (loop recovery uses the
same idea for scalars live across ``__syncthreads``). Parameters: ``var`` (the scalar), ``loop`` (its
loop; default the innermost loop declaring it), ``function``. Refuses when the scalar is not declared
directly in a canonical unit-stride loop's body, is an array, or has its address taken.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave, target_function

INFO = PassInfo(
    name="expansion",
    summary="Scalar expansion: a loop-local scalar becomes a per-iteration array",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("var", "str", "", "the scalar to expand (required)"),
        ParamSpec("loop", "str", "", "loop variable of the loop that declares it"),
        ParamSpec("function", "str", "", "function holding the loop"),
    ),
)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    var = str(params.get("var") or "")
    if not var:
        raise PassRefused("expansion needs var=NAME")
    wanted = str(params.get("loop") or "")
    state = {"done": False}

    from xpiler_core.passes.support.ast_support import map_loops

    def expand(loop: A.For) -> Any:
        view = loop.canonical()
        if state["done"] or view is None or (wanted and view.var != wanted):
            return None
        stmts = A.stmts_of(loop.body)
        decl = next((s for s in stmts if isinstance(s, A.DeclStmt) and any(d.name == var for d in s.decls)), None)
        if decl is None:
            return None
        d = next(d for d in decl.decls if d.name == var)
        if d.dims or d.init_style != "=" or var in A.read_write(loop.body).address_taken:
            raise PassRefused(f"'{var}' is an array, constructor-initialized or has its address taken")
        if A.const_int(view.step) != 1:
            raise PassRefused(f"loop '{view.var}' does not have unit stride")
        state["done"] = True
        arr = f"{var}_x"
        cell = A.Index(A.Name(arr), A.binop("-", A.Name(view.var), view.start))
        new_stmts: list[A.Stmt] = []
        for s in stmts:
            if s is decl:
                others = tuple(x for x in decl.decls if x.name != var)
                if others:
                    new_stmts.append(A.DeclStmt(others))
                if d.init is not None:
                    new_stmts.append(A.ExprStmt(A.assign(A.Name(var), d.init)))
            else:
                new_stmts.append(s)
        body = A.substitute(A.Block(tuple(new_stmts)), {var: cell})
        count = A.binop("-", view.stop, view.start)
        etype = A.replace(d.type, quals=tuple(q for q in d.type.quals if q != "const"))
        size = A.Ternary(A.binop(">", count, A.lit(0)), count, A.lit(1))
        return A.Block((A.DeclStmt((A.VarDecl(arr, etype, (size,)),)), A.replace(loop, body=body)))

    new_fn = map_loops(fn, expand)
    if not state["done"]:
        raise PassRefused(f"no loop{' over ' + wanted if wanted else ''} declares scalar '{var}' in its body")
    ctx.notes.append(f"expansion: {var} → {var}_x[] in {fn.name}")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
