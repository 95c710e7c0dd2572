"""Pipeline: software prefetch of the streams a loop reads, ``distance`` iterations ahead.

Inserts ``__builtin_prefetch(&x[idx + distance * step])`` at the top of the loop body for every array
read at an index affine in the loop variable (one per array). A prefetch never faults and never changes
memory, so the loop computes the same values; the parameter is a tuning knob for memory-bound loops.
Refuses loops that read no such stream and non-canonical loops. Parameters: ``loop``, ``distance``,
``function``.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, int_param, leave, names_in, target_function

INFO = PassInfo(
    name="pipeline",
    summary="Software pipelining by prefetching the loop's input streams ahead",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("loop", "str", "", "loop variable (default: innermost canonical loop with array reads)"),
        ParamSpec("distance", "int", 16, "iterations ahead", (4, 8, 16, 32, 64, 128)),
        ParamSpec("function", "str", "", "function holding the loop"),
    ),
)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    wanted = str(params.get("loop") or "")
    distance = int_param(params, "distance", 16, 1, 4096)
    state = {"done": False}

    from xpiler_core.passes.support.ast_support import map_loops

    def prefetch(loop: A.For) -> Any:
        view = loop.canonical()
        if state["done"] or view is None or (wanted and view.var != wanted):
            return None
        seen: set[str] = set()
        hints: list[A.Stmt] = []
        # a hint sits at the top of the body: its index may only use names visible there
        inner = {d.name for d in A.walk(loop.body) if isinstance(d, A.VarDecl)}
        for a in A.array_accesses(loop.body):
            if a.write or a.base in seen or len(a.indices) != 1 or view.var not in names_in(a.indices[0]):
                continue
            if names_in(a.indices[0]) & inner:
                continue
            seen.add(a.base)
            ahead = A.substitute(a.indices[0], {view.var: A.binop("+", A.Name(view.var),
                                                                   A.binop("*", A.lit(distance), view.step))})
            hints.append(A.ExprStmt(A.call("__builtin_prefetch", A.Unary("&", A.Index(A.Name(a.base), ahead)))))
        if not hints:
            return None
        state["done"] = True
        return A.replace(loop, body=A.Block((*hints, *A.stmts_of(loop.body))))

    new_fn = map_loops(fn, prefetch)
    if not state["done"]:
        raise PassRefused(f"no canonical loop{' over ' + wanted if wanted else ''} reads an array stream")
    ctx.notes.append(f"pipeline: prefetch distance {distance} in {fn.name}")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
