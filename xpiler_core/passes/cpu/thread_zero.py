"""Statements one thread of the block runs → run once, without a loop over the threads (a CPU speed pass after
loop recovery).

``if (threadIdx.x == 0) out[blockIdx.x] = s[0];`` (the end of most block reductions, an ``atomicAdd`` of the
block's partial, a flag set by one thread) becomes, after loop recovery, a loop over the block's threads that
tests every thread: 256 iterations with a branch each, not vectorized, to run one statement per block — on a
reduction over millions of elements that loop costs more than the sum. Where a recovered thread loop nest's
whole body is ``if (C) S`` and ``C`` is a conjunction of the thread's coordinates compared equal to zero
(``xp_tx``, ``xp_ty``, ``xp_tz``, the flat ``xp_t``, per-thread copies of ``threadIdx.x``), ``S`` runs for the
threads whose tested coordinates are zero; when the block's extent along every coordinate not tested is 1
(checked at run time) that is thread 0 alone, so the nest becomes ``S`` with the thread's coordinates (and its
per-thread slots ``a[xp_t]``) at zero, once, when the block has a thread; else the loops run as written. ``S``
must not leave the thread loop (``continue``/``break``/``return``) or hold code the AST does not model.
"""

from __future__ import annotations

import itertools
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave, parse_expr, side_effect_free
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each
from xpiler_core.passes.support.recovered_threads import (
    THREAD_VARS,
    read_copies_as_index,
    thread_body,
    thread_index_copies,
)

INFO = PassInfo(
    name="thread_zero",
    summary="Statements only thread 0 runs (if (threadIdx.x == 0) S) → S once per block, not a loop over threads",
    kind="ast",
    directions=("cuda->cpu",),
)


def _zero_tested(cond: A.Expr) -> set[str] | None:
    """The thread coordinates ``cond`` requires to be zero (``xp_tx == 0 && xp_ty == 0``; ``xp_t == 0`` all of
    them), or None when it is not such a conjunction."""
    if isinstance(cond, A.Binary) and cond.op == "&&":
        left, right = _zero_tested(cond.left), _zero_tested(cond.right)
        return None if left is None or right is None else left | right
    if isinstance(cond, A.Binary) and cond.op == "==":
        for side, other in ((cond.left, cond.right), (cond.right, cond.left)):
            if A.const_int(other) == 0 and isinstance(side, A.Name):
                if side.id == "xp_t":
                    return set(THREAD_VARS)
                if side.id in THREAD_VARS:
                    return {side.id}
    return None


def _leaves(s: A.Stmt) -> bool:
    """Whether ``s`` may leave the thread loop or holds text the AST does not model."""
    return any(isinstance(n, A.Continue | A.Break | A.Return | A.Opaque) for n in A.walk(s))


def _once(nest: A.For, tx_copies: set[str]) -> A.Stmt | None:
    body = thread_body(nest, tx_copies)
    if body is None:
        return None
    # values every thread declares first (loop recovery recomputes them in each thread loop): thread 0's
    # are declared once, before its statements
    values = list(itertools.takewhile(lambda s: isinstance(s, A.DeclStmt) and side_effect_free(s), body))
    if len(body) != len(values) + 1:
        return None
    guard = read_copies_as_index(body[-1], tx_copies)
    if not isinstance(guard, A.If) or guard.else_ is not None or _leaves(guard.then):
        return None
    tested = _zero_tested(guard.cond)
    if tested is None:
        return None
    zero = A.lit(0)
    thread_zero = {**{v: zero for v in THREAD_VARS}, "xp_t": zero}

    def at_zero(s: A.Stmt) -> A.Stmt:
        return A.substitute(read_copies_as_index(s, tx_copies), thread_zero)

    once = A.If(parse_expr("xp_nt > 0", Dialect.C), A.Block(
        (*(at_zero(v) for v in values), *A.stmts_of(at_zero(guard.then)))), None)
    others = [f"xp_bd{v[-1]} == 1" for v in THREAD_VARS if v not in tested]
    if not others:
        return once
    return A.If(parse_expr(" && ".join(others), Dialect.C), A.Block((once,)), A.Block((nest,)))


def _rewrite(fn: A.Function, counts: list[int]) -> A.Function:
    tx_copies, _ = thread_index_copies(fn.body)
    chosen: dict[int, A.Stmt] = {}
    for n in A.walk(fn.body):
        view = n.canonical() if isinstance(n, A.For) else None
        if isinstance(n, A.For) and view is not None and view.var == THREAD_VARS[0]:
            once = _once(n, tx_copies)
            if once is not None:
                chosen[id(n)] = once
    if not chosen:
        raise PassRefused("no thread loop whose whole body is if (threadIdx == 0) S")
    counts[0] += len(chosen)
    return A.replace(fn, body=A.rewrite(fn.body, lambda n: chosen.get(id(n)) if isinstance(n, A.For) else None))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    counts = [0]
    result = rewrite_each(module, is_bound_kernel, lambda fn: _rewrite(fn, counts), nothing="no bound kernels")
    ctx.notes.append(f"thread_zero: {counts[0]} statement(s) of thread 0 run once per block, not in a loop over "
                     f"the threads ({', '.join(result.done)})")
    return leave(unit, result.module, ctx)
