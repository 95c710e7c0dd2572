"""Loop binding's thread guards: a guard that holds for every thread of a block when it holds for the last one
(TVM's ``if (blockIdx.x * 2 + (threadIdx.x >> 4) < n)``) runs the block unguarded, else guarded.

Checked against numpy on launches whose last block is partial, and the monotonicity rule it relies on is
checked by evaluating random index expressions point by point (C integer semantics, compared with gcc in
``test_affine_index``): whatever the rule calls non-decreasing must never decrease.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.passes.method.loop_binding import _nondecreasing
from xpiler_core.passes.support.ast_support import parse_expr
from xpiler_core.passes.support.launch_points import evaluate as _evaluate
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNEL = r"""
__global__ void flag_nan(signed char* __restrict__ out, const float* __restrict__ x, int n) {
  if (blockIdx.x * 2 + (threadIdx.x >> 4) < n) {
    out[blockIdx.x * 32 + threadIdx.x] = (signed char)(x[blockIdx.x * 32 + threadIdx.x] != x[blockIdx.x * 32 + threadIdx.x]);
  }
}
extern "C" void run(signed char* out, const float* x, int n, int blocks) {
  flag_nan<<<blocks, 32>>>(out, x, n);
}
"""


@pytest.mark.parametrize(("n", "blocks"), [(7, 4), (8, 4), (1, 3), (0, 2), (21, 11)])
def test_block_guard_split_matches_numpy(cbuild, n: int, blocks: int) -> None:  # noqa: ANN001 - fixture
    text, _records, _ctx = translate_to_cpu(KERNEL, "k.cu", None, {"loop_recovery": {"wrapper": False}},
                                            ["detensorization", "loop_recovery", "loop_binding"])
    assert text is not None and "xp_bdx - 1" in text  # the last thread's guard decides the block
    lib = cbuild(text)
    x = np.random.default_rng(n).standard_normal(blocks * 32).astype(np.float32)
    x[::5] = np.nan
    out = np.full(blocks * 32, 7, dtype=np.int8)
    lib.run(out.ctypes.data_as(ctypes.c_void_p), x.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(n),
            ctypes.c_int(blocks))
    expected = np.full(blocks * 32, 7, dtype=np.int8)
    for b in range(blocks):
        for t in range(32):
            if b * 2 + (t >> 4) < n:
                expected[b * 32 + t] = int(np.isnan(x[b * 32 + t]))
    np.testing.assert_array_equal(out, expected)


def _exprs() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["xp_tx", "xp_tx", "k", "3", "0", "7"])

    def grow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        ops = st.sampled_from(["+", "-", "*", "/", ">>", "%", "&"])
        consts = st.sampled_from(["1", "2", "3", "4", "-2", "0"])
        return st.tuples(children, ops, st.one_of(children, consts)).map(lambda t: f"({t[0]} {t[1]} {t[2]})")

    return st.recursive(leaf, grow, max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(text=_exprs())
def test_nondecreasing_rule_is_sound(text: str) -> None:
    expr = parse_expr(text, Dialect.CUDA)
    if not _nondecreasing(expr, "xp_tx"):
        return
    tx = np.arange(-40, 41, dtype=np.int64)
    for k in (-5, 0, 9):
        values = _evaluate(expr, {"xp_tx": tx, "k": np.full(tx.shape, k, dtype=np.int64)})
        if values is None:
            continue  # division by zero or a value outside int: not a guard gcc would compute either
        values = np.broadcast_to(values, tx.shape)
        assert np.all(np.diff(values) >= 0), (text, k, values)
