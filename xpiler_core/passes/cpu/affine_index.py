"""Affine indices: a subscript that computes an affine function of the block and thread indices through
``/``, ``%``, ``>>`` and ``&`` (TVM's reshapes and flattens: ``((bx * 16 + (tx >> 6)) / 5) * 320 + ...``, which is
``bx * 1024 + tx`` over the launch) is replaced by that affine form, so the thread loop reads memory
contiguously (it vectorizes without gathers) and divides nothing.

The launch must be known: every call of the kernel in the module passes constant ``dim3`` grid and block
extents (one configuration). Each candidate subscript (block/thread indices and integer literals only, with a
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
from xpiler_core.passes.support.ast_support import enter, int_param, leave, strip_int_casts
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

# recovered names of the block and thread indices, and the launch extents that bound them
_INDEX_EXTENTS = {"xp_bx": ("grid", 0), "xp_by": ("grid", 1), "xp_bz": ("grid", 2),
                  "xp_tx": ("block", 0), "xp_ty": ("block", 1), "xp_tz": ("block", 2)}
_EXTENT_NAMES = {("grid", 0): "xp_gdx", ("grid", 1): "xp_gdy", ("grid", 2): "xp_gdz",
                 ("block", 0): "xp_bdx", ("block", 1): "xp_bdy", ("block", 2): "xp_bdz"}
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_NONLINEAR = frozenset({"/", "%", ">>", "&"})

Launch = tuple[tuple[int, int, int], tuple[int, int, int]]


def _dim3(e: A.Expr) -> tuple[int, int, int] | None:
    """``dim3(a, b, c)`` / ``dim3(a)`` / an integer literal with constant extents."""
    e = strip_int_casts(e)
    if isinstance(e, A.Call) and e.callee == "dim3" and 1 <= len(e.args) <= 3:
        values = [A.const_int(a) for a in e.args]
        if any(v is None for v in values):
            return None
        dims = [int(v) for v in values if v is not None] + [1] * (3 - len(e.args))
        return dims[0], dims[1], dims[2]
    value = A.const_int(e)
    return (value, 1, 1) if value is not None else None


def _launch_of(module: A.Module, name: str) -> Launch | None:
    """The one constant launch of kernel ``name`` in the module (None: none, or several, or not constant)."""
    seen: set[Launch] = set()
    for fn in module.functions():
        for n in A.walk(fn.body):
            if isinstance(n, A.Call) and n.callee == name and len(n.args) >= 2:
                grid, block = _dim3(n.args[0]), _dim3(n.args[1])
                if grid is None or block is None:
                    return None
                seen.add((grid, block))
    return next(iter(seen)) if len(seen) == 1 else None


def _evaluate(e: A.Expr, env: dict[str, np.ndarray]) -> np.ndarray | None:
    """``e`` with C ``int`` semantics at every point (None: unsupported, or a value leaves ``int``)."""
    e = strip_int_casts(e)
    out: np.ndarray | None
    if isinstance(e, A.Literal):
        v = e.int_value
        return None if v is None else np.full(1, v, dtype=np.int64)
    if isinstance(e, A.Name):
        return env.get(e.id)
    if isinstance(e, A.Unary) and e.op == "-":
        inner = _evaluate(e.operand, env)
        out = None if inner is None else -inner
    elif isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%", ">>", "<<", "&"):
        left, right = _evaluate(e.left, env), _evaluate(e.right, env)
        if left is None or right is None:
            return None
        if e.op == "+":
            out = left + right
        elif e.op == "-":
            out = left - right
        elif e.op == "*":
            out = left * right
        elif e.op in ("/", "%"):
            if np.any(right == 0):
                return None
            quotient = np.abs(left) // np.abs(right) * np.sign(left) * np.sign(right)  # C truncates
            out = quotient if e.op == "/" else left - right * quotient
        elif e.op in (">>", "<<"):
            if np.any(right < 0) or np.any(right > 31) or (e.op == "<<" and np.any(left < 0)):
                return None
            out = left >> right if e.op == ">>" else left << right
        else:
            out = left & right
    else:
        return None
    if out is None or np.any(out < _INT_MIN) or np.any(out > _INT_MAX):
        return None
    return out


def _candidate(e: A.Expr) -> bool:
    names = {n.id for n in A.walk(e) if isinstance(n, A.Name)}
    return bool(names) and names <= set(_INDEX_EXTENTS) | {"xp_t"} and any(
        isinstance(n, A.Binary) and n.op in _NONLINEAR for n in A.walk(e))


def _affine_fit(e: A.Expr, launch: Launch, max_points: int) -> A.Expr | None:
    grid, block = launch
    extents = {v: (grid if kind == "grid" else block)[axis] for v, (kind, axis) in _INDEX_EXTENTS.items()}
    total = int(np.prod([extents[v] for v in _INDEX_EXTENTS]))
    if total <= 0 or total > max_points:
        return None
    axes = np.meshgrid(*[np.arange(extents[v], dtype=np.int64) for v in _INDEX_EXTENTS], indexing="ij")
    env = {v: a.reshape(-1) for v, a in zip(_INDEX_EXTENTS, axes, strict=True)}
    env["xp_t"] = env["xp_tx"] + block[0] * (env["xp_ty"] + block[1] * env["xp_tz"])
    values = _evaluate(e, env)
    if values is None:
        return None
    values = np.broadcast_to(values, (total,))
    base = int(values[0])
    fitted = np.full(total, base, dtype=np.int64)
    form: A.Expr = A.lit(base)
    terms: list[tuple[str, int]] = []
    for v in _INDEX_EXTENTS:
        if extents[v] < 2:
            continue
        # the step along v from the origin
        at = int(np.prod([extents[u] for u in list(_INDEX_EXTENTS)[list(_INDEX_EXTENTS).index(v) + 1:]]))
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
        launch = _launch_of(module, fn.name)
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
    grid, block = launch
    cond: A.Expr | None = None
    for (kind, axis), name in _EXTENT_NAMES.items():
        bound = (grid if kind == "grid" else block)[axis]
        check = A.binop("<=", A.Name(name), A.lit(bound))
        cond = check if cond is None else A.binop("&&", cond, check)
    assert cond is not None
    versioned = A.If(cond, fast, rest)
    return A.replace(fn, body=A.replace(fn.body, stmts=(*stmts[:index], versioned)))
