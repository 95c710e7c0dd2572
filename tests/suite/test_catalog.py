"""The suite catalog's size expressions agree with plain integer arithmetic and with the harness's evaluator."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from suite_catalog import SuiteEntry, eval_int_expr, iter_entries

ENTRIES = list(iter_entries())


@given(st.integers(0, 10**6), st.integers(1, 4096), st.integers(-50, 50))
def test_size_expressions_match_integer_arithmetic(n: int, block: int, k: int) -> None:
    env = {"n": n, "b": block, "k": k}
    assert eval_int_expr("ceil_div(n, b)", env) == (n + block - 1) // block
    assert eval_int_expr("(n - k) // b + 1", env) == (n - k) // block + 1
    assert eval_int_expr("min(ceil_div(n, b), 8) * b % 7", env) == min((n + block - 1) // block, 8) * block % 7
    assert eval_int_expr("max(1, n // 4)", env) == max(1, n // 4)
    assert eval_int_expr("-k + n * 2", env) == -k + n * 2


@pytest.mark.parametrize("bad", ["__import__('os')", "n ** 2", "n.real", "lambda: 1", "[n]"])
def test_size_expressions_refuse_anything_else(bad: str) -> None:
    with pytest.raises((ValueError, KeyError)):
        eval_int_expr(bad, {"n": 3})


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.test_id for e in ENTRIES])
def test_catalog_and_harness_evaluate_every_expression_alike(entry: SuiteEntry) -> None:
    expr_module = pytest.importorskip("xpiler_core.verify.expr", reason="the harness is not built yet")
    data = entry.data
    expressions = list(data.get("grid", [])) + list(data.get("block", [])) + [data.get("shared_bytes", 0)]
    for arg in data["args"]:
        expressions += list(arg.get("shape", []))
        if arg["role"] == "scalar":
            expressions.append(arg["value"])
    for case in entry.cases:
        for expr in expressions:
            assert eval_int_expr(expr, case) == expr_module.evaluate_int(expr, case), (expr, case)
