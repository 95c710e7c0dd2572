"""Index expressions evaluated at every point of a kernel's one constant launch.

Passes that replace block/thread index arithmetic by a simpler equivalent (``affine_index``, ``flat_index``)
prove the equivalence by evaluation rather than algebra: the module's only launch of the kernel has constant
``dim3`` extents, so every (block, thread) point can be enumerated (numpy, a few million points at most) and
both forms compared with C's ``int`` semantics. The rewritten code then runs only for launches within the
checked one (:func:`within_launch`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xpiler_core import ast as A
from xpiler_core.passes.support.ast_support import strip_int_casts

# recovered names of the block and thread indices, and the launch extents that bound them
INDEX_EXTENTS = {"xp_bx": ("grid", 0), "xp_by": ("grid", 1), "xp_bz": ("grid", 2),
                 "xp_tx": ("block", 0), "xp_ty": ("block", 1), "xp_tz": ("block", 2)}
EXTENT_NAMES = {("grid", 0): "xp_gdx", ("grid", 1): "xp_gdy", ("grid", 2): "xp_gdz",
                ("block", 0): "xp_bdx", ("block", 1): "xp_bdy", ("block", 2): "xp_bdz"}
INDEX_NAMES = frozenset({*INDEX_EXTENTS, "xp_t"})
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_COMPARISONS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                "==": np.equal, "!=": np.not_equal}

Launch = tuple[tuple[int, int, int], tuple[int, int, int]]


def dim3_of(e: A.Expr) -> tuple[int, int, int] | None:
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


def launch_of(module: A.Module, name: str) -> Launch | None:
    """The one constant launch of kernel ``name`` in the module (None: none, or several, or not constant)."""
    seen: set[Launch] = set()
    for fn in module.functions():
        for n in A.walk(fn.body):
            if isinstance(n, A.Call) and n.callee == name and len(n.args) >= 2:
                grid, block = dim3_of(n.args[0]), dim3_of(n.args[1])
                if grid is None or block is None:
                    return None
                seen.add((grid, block))
    return next(iter(seen)) if len(seen) == 1 else None


# blocks × threads checked for a kernel known only by its __launch_bounds__ (a file of kernels alone)
BOUNDED_POINTS = 1 << 20


def bounded_launch(fn: A.Function, uses: Sequence[A.Node]) -> Launch | None:
    """A kernel with no launch in the module but ``__launch_bounds__(B)`` whose index uses (``uses``) read only
    the x indices (TVM's device code): checked over ``B`` threads and as many blocks as ``BOUNDED_POINTS``
    allows; the rewritten code runs only for launches within that (the caller's precondition)."""
    if not fn.launch_bounds:
        return None
    threads = A.const_int(fn.launch_bounds[0])
    names = {n.id for e in uses for n in A.walk(e) if isinstance(n, A.Name)} & INDEX_NAMES
    if threads is None or not 0 < threads <= BOUNDED_POINTS or not names <= {"xp_bx", "xp_tx"}:
        return None
    return (BOUNDED_POINTS // threads, 1, 1), (threads, 1, 1)


def launch_points(launch: Launch, max_points: int) -> tuple[int, dict[str, np.ndarray]] | None:
    """(number of points, index name → its value at each point), block-major with ``xp_tx`` fastest; None
    beyond ``max_points``."""
    grid, block = launch
    extents = {v: (grid if kind == "grid" else block)[axis] for v, (kind, axis) in INDEX_EXTENTS.items()}
    total = int(np.prod([extents[v] for v in INDEX_EXTENTS]))
    if total <= 0 or total > max_points:
        return None
    axes = np.meshgrid(*[np.arange(extents[v], dtype=np.int64) for v in INDEX_EXTENTS], indexing="ij")
    env = {v: a.reshape(-1) for v, a in zip(INDEX_EXTENTS, axes, strict=True)}
    env["xp_t"] = env["xp_tx"] + block[0] * (env["xp_ty"] + block[1] * env["xp_tz"])
    return total, env


_UNSIGNED_TYPES = frozenset({"unsigned int", "unsigned", "unsigned long", "unsigned long long", "size_t",
                             "uint32_t", "uint64_t"})


def _has_unsigned(e: A.Expr) -> bool:
    return any((isinstance(n, A.Cast) and not n.type.pointers and n.type.base in _UNSIGNED_TYPES)
               or (isinstance(n, A.Literal) and n.kind == "number" and "u" in n.text.lower())
               for n in A.walk(e))


def evaluate(e: A.Expr, env: dict[str, np.ndarray]) -> np.ndarray | None:
    """``e`` with C ``int`` semantics at every point (None: unsupported, or a value leaves ``int``);
    comparisons give 0/1. With an unsigned cast or literal inside, every intermediate value must be
    non-negative (there signed and unsigned arithmetic agree); else None."""
    return _evaluate(e, env, non_negative=_has_unsigned(e))


def _evaluate(e: A.Expr, env: dict[str, np.ndarray], non_negative: bool) -> np.ndarray | None:
    out = _evaluate_node(e, env, non_negative)
    if out is not None and non_negative and np.any(out < 0):
        return None
    return out


def _evaluate_node(e: A.Expr, env: dict[str, np.ndarray], non_negative: bool) -> np.ndarray | None:
    e = strip_int_casts(e)
    out: np.ndarray | None
    if isinstance(e, A.Literal):
        v = e.int_value
        return None if v is None else np.full(1, v, dtype=np.int64)
    if isinstance(e, A.Name):
        return env.get(e.id)
    if isinstance(e, A.Unary) and e.op == "-":
        inner = _evaluate(e.operand, env, non_negative)
        out = None if inner is None else -inner
    elif isinstance(e, A.Binary) and e.op in _COMPARISONS:
        left, right = _evaluate(e.left, env, non_negative), _evaluate(e.right, env, non_negative)
        if left is None or right is None:
            return None
        return _COMPARISONS[e.op](left, right).astype(np.int64)
    elif isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%", ">>", "<<", "&"):
        left, right = _evaluate(e.left, env, non_negative), _evaluate(e.right, env, non_negative)
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


def within_launch(launch: Launch) -> A.Expr:
    """The run-time test that the launch lies within ``launch`` (each extent at most the checked one)."""
    grid, block = launch
    cond: A.Expr | None = None
    for (kind, axis), name in EXTENT_NAMES.items():
        bound = (grid if kind == "grid" else block)[axis]
        check = A.binop("<=", A.Name(name), A.lit(bound))
        cond = check if cond is None else A.binop("&&", cond, check)
    assert cond is not None
    return cond
