"""Constraints from observed stores: a write-only output's store log instead of a symbolic memory.

Why: when a hole moves a store's address, interpreting the store symbolically merges the value into every
cell the address can reach (threads × cells z3 terms: slow, and refused over large ranges). Observed instead,
each store ``out[off] = v`` (off depending on the hole, v concrete or a few hole-dependent cases) says:
``off`` must be a position where the reference holds ``v`` — a handful of linear equalities over the hole's
unknown coefficients — and every position whose expected value differs from the initial contents must be hit
by some store. These conditions are necessary for the outputs to match; the engine re-checks every model
concretely and on the full spec cases, so a weaker encoding can cost a retry, never a wrong repair.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import z3

from xpiler_core.repair.interp import Buffer, Choice, Infeasible, Ite, _zb, and_, merge, or_

MAX_POSITIONS = 48  # candidate positions of one store before its value counts as too common to pin it down
MAX_RANGES = 64  # contiguous runs of positions encoded for a common value before only bounds are kept
MAX_LEAVES = 64  # concrete alternatives of one hole-dependent stored value


class TooSymbolic(Exception):
    """A stored value is a symbolic integer: the log cannot be turned into position sets."""


def _close_mask(exp: np.ndarray, v: float, atol: float, rtol: float) -> np.ndarray:
    """The harness's element rule, vectorized over the expected values."""
    if math.isnan(v):
        return np.isnan(exp)
    if math.isinf(v):
        return exp == v
    with np.errstate(invalid="ignore"):
        return np.isfinite(exp) & (np.abs(exp - v) <= atol + rtol * np.abs(exp))


def _leaves(v: Any, out: list[float]) -> bool:
    """Concrete alternatives of a stored value; False when it is symbolic beyond cases (z3 integers)."""
    if isinstance(v, Choice):
        return all(_leaves(c.value, out) for c in v.cases)
    if isinstance(v, Ite):
        return _leaves(v.then, out) and _leaves(v.else_, out)
    if isinstance(v, z3.ExprRef):
        return False
    out.append(float(v))
    return len(out) <= MAX_LEAVES


def _ranges(positions: np.ndarray) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for p in positions.tolist():
        if out and out[-1][1] == p - 1:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return out


def replay(buf: Buffer) -> list[Any] | None:
    """Apply a log whose offsets are all concrete to the cells, in order (plain store semantics).

    Returns the obligations (stores that must not run); None when a store that always runs faults."""
    obligations: list[Any] = []
    assert buf.events is not None
    for pc, off, value, _ in buf.events:
        if not 0 <= off < len(buf.data):
            if pc is True:
                return None
            obligations.append(z3.Not(_zb(pc)))
            continue
        buf.data[off] = merge(pc, value, buf.data[off])
    buf.events = None
    return obligations


def store_constraints(
    buf: Buffer, exp: np.ndarray, atol: float, rtol: float, matches: Any, cover: bool = True
) -> list[Any] | None:
    """Constraints that the logged stores put the reference's values in place; None when impossible.

    ``matches(value, expected)`` is the engine's closeness rule for (possibly hole-dependent) values.
    ``cover``: also require every position that needs a new value to be stored to (all threads ran)."""
    assert buf.events is not None
    n = len(buf.data)
    out: list[Any] = []
    hits_at: dict[int, list[Any]] = {}
    for pc, off, value, _ in buf.events:
        if isinstance(off, int):
            if not 0 <= off < n:
                if pc is True:
                    raise Infeasible(f"out-of-bounds write of {buf.name}[{off}]")
                out.append(z3.Not(_zb(pc)))
                continue
            m = matches(value, float(exp[off]))
            if m is False:
                if pc is True:
                    return None
                out.append(z3.Not(_zb(pc)))
                continue
            if m is not True:
                out.append(z3.Implies(_zb(pc), _zb(m)))
            hits_at.setdefault(off, []).append(pc)
            continue
        leaves: list[float] = []
        if not _leaves(value, leaves):
            raise TooSymbolic(buf.name)
        mask = np.zeros(n, dtype=bool)
        for v in set(leaves):
            mask |= _close_mask(exp, v, atol, rtol)
        positions = np.nonzero(mask)[0]
        if len(positions) == 0:
            if pc is True:
                return None
            out.append(z3.Not(_zb(pc)))
            continue
        if len(positions) > MAX_POSITIONS:
            # A common value (zeros of a ReLU): keep it in the positions holding it when they form few runs.
            runs = _ranges(positions)
            within = (
                z3.Or([z3.And(off >= a, off <= b) for a, b in runs]) if len(runs) <= MAX_RANGES
                else z3.And(off >= 0, off < n)
            )
            out.append(z3.Implies(_zb(pc), within))
            continue
        alternatives: list[Any] = []
        for p in positions.tolist():
            m = matches(value, float(exp[p]))
            if m is False:
                continue
            hit = off == p
            alternatives.append(hit if m is True else z3.And(hit, _zb(m)))
            hits_at.setdefault(p, []).append(and_(pc, hit))
        if not alternatives:
            if pc is True:
                return None
            out.append(z3.Not(_zb(pc)))
            continue
        out.append(z3.Implies(_zb(pc), z3.Or(alternatives)))
    # Coverage: every position whose reference value differs from what the buffer held must be stored to
    # (positions holding a common value may be stored by a store encoded only by bounds: not required).
    if not cover:
        return out
    init = np.array([float(v) for v in buf.data])
    for p in range(n):
        if _close_mask(init[p : p + 1], float(exp[p]), atol, rtol)[0]:
            continue
        if np.count_nonzero(_close_mask(exp, float(exp[p]), atol, rtol)) > MAX_POSITIONS:
            continue
        hits = hits_at.get(p)
        if not hits:
            return None
        any_hit: Any = False
        for h in hits:
            any_hit = or_(any_hit, h)
        if any_hit is not True:
            out.append(_zb(any_hit))
    return out

__all__ = ["MAX_POSITIONS", "TooSymbolic", "replay", "store_constraints"]
