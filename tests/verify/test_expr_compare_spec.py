"""Spec expressions, comparisons and spec loading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from xpiler_core.diagnostics import XpilerError
from xpiler_core.verify.compare import compare_arrays
from xpiler_core.verify.expr import ExprError, evaluate, evaluate_int
from xpiler_core.verify.spec import load_spec


@given(n=st.integers(0, 10**6), b=st.integers(1, 1024))
def test_ceil_div_matches_math(n: int, b: int) -> None:
    assert evaluate_int("ceil_div(n, b)", {"n": n, "b": b}) == -(-n // b)
    assert (
        evaluate_int("min(n, b) + max(n, b) * 2 - n % b", {"n": n, "b": b})
        == min(n, b) + max(n, b) * 2 - n % b
    )


@pytest.mark.parametrize(
    "bad", ["__import__('os')", "n.__class__", "[1,2]", "lambda: 1", "open('x')", "2**1000", "n if"]
)
def test_expressions_are_whitelisted(bad: str) -> None:
    with pytest.raises(ExprError):
        evaluate(bad, {"n": 3})


def test_unknown_name() -> None:
    with pytest.raises(ExprError, match="unknown name 'm'"):
        evaluate("m + 1", {"n": 1})


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1, max_size=50), st.integers(0, 49))
def test_compare_finds_first_mismatch(values: list[float], k: int) -> None:
    exp = np.array(values, np.float32)
    got = exp.copy()
    k = k % len(values)
    got[k] = got[k] + 1.0 + abs(got[k])
    c = compare_arrays(exp, got, atol=1e-6, rtol=1e-6)
    assert not c.passed and c.mismatches == 1 and c.first_mismatch == (k,)
    assert c.expected == pytest.approx(float(exp[k])) and c.got == pytest.approx(float(got[k]))
    assert compare_arrays(exp, exp.copy(), 0.0, 0.0).passed


def test_compare_nan_inf_and_shapes() -> None:
    e = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert compare_arrays(e, e.copy(), 0, 0).passed
    g = np.array([1.0, np.inf, np.inf, 1.0])
    c = compare_arrays(e, g, 1e-3, 1e-3)
    assert c.mismatches == 2 and c.first_mismatch == (0,)
    c2 = compare_arrays(np.zeros((2, 3)), np.zeros(5), 0, 0)
    assert not c2.passed and c2.error is not None and "shape" in c2.error
    c3 = compare_arrays(np.zeros((2, 2)), np.array([[0, 0], [0, 1.0]]), 0.1, 0)
    assert c3.first_mismatch == (1, 1) and c3.max_abs_err == 1.0


def test_spec_errors_are_located(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        'source = "k.cu"\nentry = "k"\nreference = "r.py:f"\n[[args]]\nname = "x"\ndtype = "float33"\n'
    )
    with pytest.raises(XpilerError, match="unknown dtype"):
        load_spec(p)
    p.write_text("source = \n")
    with pytest.raises(XpilerError, match="invalid TOML") as info:
        load_spec(p)
    assert info.value.file == str(p)
    p.write_text('source = "k.cu"\nentry = "k"\n')
    with pytest.raises(XpilerError, match="reference"):
        load_spec(p)


_LEAVES = st.one_of(st.integers(-50, 50).map(str), st.sampled_from(["a", "b", "c"]))


def _expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        _LEAVES,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "//", "%", "/"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["max", "min", "ceil_div"]), inner, inner).map(
                lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            inner.map(lambda e: f"-{e}"),
        ),
        max_leaves=8,
    )


@given(expr=_expressions(), a=st.integers(-20, 20), b=st.integers(1, 20), c=st.integers(-5, 30))
@example(expr="-(0 + ceil_div(0, 0))", a=0, b=1, c=0)  # found by a CI-like run: both must say ExprError
def test_compiled_expressions_agree_with_the_interpreter(expr: str, a: int, b: int, c: int) -> None:
    from xpiler_core.verify.expr import compile_int

    env = {"a": a, "b": b, "c": c}
    try:
        expected: int | str = evaluate_int(expr, env)
    except (ExprError, ZeroDivisionError) as exc:
        expected = type(exc).__name__
    try:
        got: int | str = compile_int(expr)(env)
    except (ExprError, ZeroDivisionError) as exc:
        got = type(exc).__name__
    assert got == expected
