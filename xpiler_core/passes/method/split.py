"""Split (strip-mining): ``for (i = a; i < n; ++i) B`` → full tiles of ``factor`` plus a remainder loop.

    for (i_o = a; i_o <= n - factor; i_o += factor)   // full tiles
        for (int i = i_o; i < i_o + factor; ++i) B
    for (int i = i_o; i < n; ++i) B                     // remainder (starts where the tiles stopped)

Parameters: ``loop`` (variable of the loop; default the first canonical unit-stride loop), ``factor``,
``unroll`` (``#pragma GCC unroll factor`` on the tile loop), ``function``. Refuses non-canonical or
non-unit-stride loops, bodies that jump out, and factors below 2.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    bool_param,
    enter,
    has_jumps,
    int_param,
    leave,
    target_function,
)

INFO = PassInfo(
    name="split",
    summary="Strip-mine a loop into tiles of `factor` with a remainder loop",
    kind="ast",
    directions=("cuda->cpu", "c->cuda"),
    params=(
        ParamSpec("loop", "str", "", "loop variable of the loop to split (default: first canonical loop)"),
        ParamSpec("factor", "int", 8, "tile size", (2, 4, 8, 16, 32, 64)),
        ParamSpec("unroll", "bool", False, "unroll the tile loop", (True, False)),
        ParamSpec("function", "str", "", "function holding the loop (default: first with loops)"),
    ),
)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    factor = int_param(params, "factor", 8, 2, 4096)
    wanted = str(params.get("loop") or "")
    unroll = bool_param(params, "unroll", False)
    done = False

    def split(loop: A.For) -> Any:
        nonlocal done
        view = loop.canonical()
        if done or view is None or (wanted and view.var != wanted):
            return None
        if A.const_int(view.step) != 1:
            if wanted:
                raise PassRefused(f"loop '{view.var}' does not have unit stride", loop.span)
            return None
        if has_jumps([loop.body]):
            raise PassRefused(f"loop '{view.var}' jumps out of its body (break/continue/return)", loop.span)
        if any(isinstance(n, A.Opaque) for n in A.walk(loop.body)):
            raise PassRefused(f"loop '{view.var}' holds code the AST does not model", loop.span)
        done = True
        outer = A.fresh_name(fn, f"{view.var}_o")
        vtype = view.var_type or A.ctype("int")
        tile = A.for_range(view.var, A.Name(outer), A.binop("+", A.Name(outer), A.lit(factor)), loop.body,
                           var_type=vtype)
        tile_body: list[A.Stmt] = [A.Pragma(f"GCC unroll {factor}"), tile] if unroll else [tile]
        tiles = A.For(A.ExprStmt(A.assign(A.Name(outer), view.start)),
                      A.binop("<=", A.Name(outer), A.binop("-", view.stop, A.lit(factor))),
                      A.assign(A.Name(outer), A.lit(factor), "+="), A.Block(tuple(tile_body)))
        rest = A.for_range(view.var, A.Name(outer), view.stop, loop.body, var_type=vtype)
        return A.Block((A.decl(outer, vtype), tiles, rest))

    from xpiler_core.passes.support.ast_support import map_loops

    new_fn = map_loops(fn, split)
    if not done:
        raise PassRefused(f"no canonical unit-stride loop{' over ' + wanted if wanted else ''} in '{fn.name}'")
    ctx.notes.append(f"split: {fn.name} loop {wanted or '(first)'} by {factor}")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
