"""Observed stores (a write-only output's store log) turn a hole in a store address into position constraints
whose solutions are exactly the addresses that put a numpy-computed reference in place; sampled, faulting
and endless threads are handled without hanging; the repairs they enable restore the correct kernel."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import z3

from xpiler_core.repair import observe as OB
from xpiler_core.repair.engine import repair_candidate
from xpiler_core.repair.interp import Buffer, Case, Choice, Ite, Unsupported, lift
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"


def _close(v: object, e: float) -> bool:
    return abs(float(v) - e) <= 1e-6  # type: ignore[arg-type]


def test_store_log_pins_the_address_coefficients() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=12).astype(np.float32)
    expected = np.zeros(12)
    expected[::2] = np.abs(x[:6])  # out[2 * t] = |x[t]| for t < 6 (numpy reference)
    c0, c1 = z3.Int("c0"), z3.Int("c1")
    buf = Buffer("out", "float", [np.float32(0)] * 12, None, [])
    assert buf.events is not None
    for t in range(6):
        buf.events.append((True, c0 + c1 * t, np.float32(abs(x[t])), t))
    cs = OB.store_constraints(buf, expected, 1e-6, 0.0, lambda v, e: _close(v, e))
    assert cs is not None
    s = z3.Solver()
    s.add(*cs)
    assert s.check() == z3.sat
    m = s.model()
    assert (m.eval(c0).as_long(), m.eval(c1).as_long()) == (0, 2)
    s.add(z3.Or(c0 != 0, c1 != 2))
    assert s.check() == z3.unsat  # the only addresses that reproduce the reference


def test_a_needed_position_nobody_can_store_to_is_infeasible() -> None:
    expected = np.array([1.0, 2.0, 3.0])
    c = z3.Int("c")
    buf = Buffer("out", "float", [np.float32(0)] * 3, None, [(True, c, np.float32(1.0), 0), (True, c + 1, np.float32(2.0), 1)])
    assert OB.store_constraints(buf, expected, 1e-6, 0.0, lambda v, e: _close(v, e)) is None  # 3.0 never stored


def test_lifting_a_deep_hole_dependent_value_is_refused_not_exponential() -> None:
    x = z3.Int("x")
    v: object = np.float32(0)
    for i in range(40):  # a running max merged under 40 hole-dependent branches: 2**40 paths unfolded
        v = Ite(x > i, v, Choice((Case(x == i, (), np.float32(i)), Case(x != i, (), np.float32(-i)))))
    started = time.monotonic()
    with pytest.raises(Unsupported):
        lift(max, v, v)
    assert time.monotonic() - started < 30  # generous: the refusal is immediate, the unfolding would not end


@pytest.mark.slow
@pytest.mark.parametrize(
    ("op", "old", "new"),
    [
        # a store address in the tail branch of a two-branch kernel (seen only with two blocks)
        ("activation/relu", "compute[((((int)blockIdx.x) * 1024) + ((int)threadIdx.x))] = max(data[((((int)blockIdx.x) * 1024) + ((int)threadIdx.x))], 0.000000e+00f);\n    }\n  }",
         "compute[((((int)blockIdx.x) * 1025) + ((int)threadIdx.x))] = max(data[((((int)blockIdx.x) * 1024) + ((int)threadIdx.x))], 0.000000e+00f);\n    }\n  }"),
        ("elementwise/sign", "i < n", "i >= n"),  # a grid-stride loop that never runs, threads that fault
    ],
)
def test_sampled_observed_repairs_restore_the_kernel(op: str, old: str, new: str) -> None:
    spec = load_spec(SUITE / op / "spec.toml")
    original = spec.source_text()
    assert original.count(old) == 1
    buggy = original.replace(old, new)
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=120, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text == original
    assert run_spec(spec, candidate_text=result.text, seed=5).passed
