"""Comparing an output array with its expected value under atol/rtol, with NaN/inf handling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Comparison:
    passed: bool
    max_abs_err: float
    max_rel_err: float
    mismatches: int
    first_mismatch: tuple[int, ...] | None
    expected: float | None
    got: float | None
    error: str | None = None


def compare_arrays(expected: np.ndarray, got: np.ndarray, atol: float, rtol: float) -> Comparison:
    """Element-wise ``|got - expected| <= atol + rtol * |expected|``; NaN matches only NaN, inf only the
    same inf. Errors are measured over the elements where both are finite."""
    exp = np.asarray(expected)
    out = np.asarray(got)
    if exp.shape != out.shape:
        if exp.size == out.size:
            exp = exp.reshape(out.shape)
        else:
            return Comparison(
                False,
                float("inf"),
                float("inf"),
                int(max(exp.size, out.size)),
                None,
                None,
                None,
                f"shape mismatch: expected {exp.shape}, got {out.shape}",
            )
    with np.errstate(invalid="ignore", over="ignore"):  # whatever the outputs hold (NaN, huge) is compared below
        e = exp.astype(np.float64)
        g = out.astype(np.float64)
    both_nan = np.isnan(e) & np.isnan(g)
    finite = np.isfinite(e) & np.isfinite(g)
    same_inf = np.isinf(e) & np.isinf(g) & (np.sign(e) == np.sign(g))
    with np.errstate(invalid="ignore", over="ignore"):
        abs_err = np.where(finite, np.abs(np.where(finite, g, 0.0) - np.where(finite, e, 0.0)), 0.0)
    e_finite = np.abs(np.where(finite, e, 0.0))
    ok = both_nan | same_inf | (finite & (abs_err <= atol + rtol * e_finite))
    with np.errstate(over="ignore"):  # a huge error over a tiny expected value is an infinite relative error
        rel_err = abs_err / np.maximum(e_finite, np.finfo(np.float64).tiny)
    bad = ~ok
    count = int(bad.sum())
    first: tuple[int, ...] | None = None
    exp_v = got_v = None
    if count:
        flat = int(np.flatnonzero(bad.reshape(-1))[0])
        first = tuple(int(i) for i in np.unravel_index(flat, e.shape)) if e.ndim else ()
        exp_v = float(e.reshape(-1)[flat])
        got_v = float(g.reshape(-1)[flat])
    return Comparison(
        passed=count == 0,
        max_abs_err=float(abs_err.max()) if abs_err.size else 0.0,
        max_rel_err=float(rel_err.max()) if rel_err.size else 0.0,
        mismatches=count,
        first_mismatch=first,
        expected=exp_v,
        got=got_v,
    )
