"""Affine indices: a subscript that computes an affine function of the block and thread indices through
``/``, ``%``, ``>>`` and ``&`` (TVM's reshapes and flattens: ``((bx * 16 + (tx >> 6)) / 5) * 320 + ...``, which is
``bx * 1024 + tx`` over the launch) is replaced by that affine form, so the thread loop reads memory
contiguously (it vectorizes without gathers) and divides nothing.

The launch must be known: every call of the kernel in the module passes constant ``dim3`` grid and block
extents (one configuration); a kernel called nowhere in the module with ``__launch_bounds__(B)`` and subscripts of
the x indices alone (TVM's device code) is checked over ``B`` threads and up to 2^20 / ``B`` blocks. Each candidate subscript (block/thread indices and integer literals only, with a
division, remainder, shift or mask) is evaluated with C's integer semantics at every point of that launch
(at most 2^24 points; every intermediate within ``int``); when one affine form ``c + sum(k_v * v)`` matches
at every point it is used. The rewritten block nest runs behind the run-time precondition that the launch
lies within the verified one (each grid and block extent at most the checked one); any other launch runs the
original nest. Parameter: ``max_points``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, int_param, leave
from xpiler_core.passes.support.launch_points import (
    INDEX_EXTENTS,
    INDEX_NAMES,
    Launch,
    bounded_launch,
    evaluate,
    launch_of,
    launch_points,
    within_launch,
)
from xpiler_core.passes.support.per_function import is_bound_kernel

INFO = PassInfo(
    name="affine_index",
    summary="Subscripts that are affine in block/thread indices over the launch (through / % >> &) → affine form",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("max_points", "int", 1 << 22, "largest launch (blocks × threads) checked point by point",
                  (1 << 16, 1 << 20, 1 << 22, 1 << 24)),
    ),
)

_NONLINEAR = frozenset({"/", "%", ">>", "&"})


def _candidate(e: A.Expr) -> bool:
    names = {n.id for n in A.walk(e) if isinstance(n, A.Name)}
    return bool(names) and names <= INDEX_NAMES and any(
        isinstance(n, A.Binary) and n.op in _NONLINEAR for n in A.walk(e))


def _affine_fit(e: A.Expr, launch: Launch, max_points: int) -> A.Expr | None:
    grid, block = launch
    extents = {v: (grid if kind == "grid" else block)[axis] for v, (kind, axis) in INDEX_EXTENTS.items()}
    points = launch_points(launch, max_points)
    if points is None:
        return None
    total, env = points
    values = evaluate(e, env)
    if values is None:
        return None
    values = np.broadcast_to(values, (total,))
    base = int(values[0])
    fitted = np.full(total, base, dtype=np.int64)
    form: A.Expr = A.lit(base)
    terms: list[tuple[str, int]] = []
    for v in INDEX_EXTENTS:
        if extents[v] < 2:
            continue
        # the step along v from the origin
        at = int(np.prod([extents[u] for u in list(INDEX_EXTENTS)[list(INDEX_EXTENTS).index(v) + 1:]]))
        step = int(values[at]) - base
        if step:
            terms.append((v, step))
            fitted = fitted + step * env[v]
    if not np.array_equal(fitted, values):
        return None
    for v, step in terms:
        term: A.Expr = A.Name(v) if step == 1 else A.binop("*", A.Name(v), A.lit(step))
        form = term if form == A.lit(0) else A.binop("+", form, term)
    return form


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    max_points = int_param(params, "max_points", 1 << 22, 1, 1 << 26)
    done: list[str] = []
    reasons: list[str] = []
    new_module = module
    for fn in module.functions():
        if not is_bound_kernel(fn):
            continue
        subscripts = [n.index for n in A.walk(fn.body) if isinstance(n, A.Index) and _candidate(n.index)]
        if not subscripts:
            continue
        launch = launch_of(module, fn.name) or bounded_launch(fn, subscripts)
        if launch is None:
            reasons.append(f"{fn.name}: no single constant launch in the module to check its indices over")
            continue
        fits: dict[A.Expr, A.Expr] = {}
        for sub in subscripts:
            if sub not in fits:
                fit = _affine_fit(sub, launch, max_points)
                if fit is not None:
                    fits[sub] = fit
        if not fits:
            reasons.append(f"{fn.name}: no division/remainder subscript is affine over the launch")
            continue
        new_fn = _versioned(fn, fits, launch)
        if new_fn is None:
            reasons.append(f"{fn.name}: the block loop nest was not found")
            continue
        new_module = new_module.replace_function(fn.name, new_fn)
        done.append(f"{fn.name} ({len(fits)} subscript(s))")
    if not done:
        raise PassRefused("; ".join(reasons) or "no subscript divides block/thread indices")
    ctx.notes.append(f"affine_index: {', '.join(done)} affine over the launch (checked at every point)")
    return leave(unit, new_module, ctx)


def _versioned(fn: A.Function, fits: dict[A.Expr, A.Expr], launch: Launch) -> A.Function | None:
    """From the first statement that holds a fitted subscript on: the fitted copy when the launch lies within
    the checked one, else the original statements."""
    stmts = fn.body.stmts
    index = next((i for i, s in enumerate(stmts) if any(isinstance(n, A.Index) and n.index in fits
                                                         for n in A.walk(s))), None)
    if index is None:
        return None
    rest = A.Block(tuple(stmts[index:]))

    def fitted(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Index) and n.index in fits:
            return A.replace(n, index=fits[n.index], base=A.rewrite(n.base, fitted))
        return None

    fast = A.rewrite(rest, fitted)
    versioned = A.If(within_launch(launch), fast, rest)
    return A.replace(fn, body=A.replace(fn.body, stmts=(*stmts[:index], versioned)))
