"""Parts of a thread index in the symbolic thread (``support/bang_thread``): ``threadIdx.x % 32`` and
``threadIdx.x / 32`` are a digit and a quotient of ``threadIdx.x``; which of them a staged tile value may vary
with decides whether forwarding the tile to another thread is exact. Checked against the arithmetic they stand
for (``tx = d0 + 32 q1``, ``d0 = tx % 32``, ``q1 = tx / 32``), enumerated over a block of 1024 threads."""

from __future__ import annotations

import pytest

from xpiler_core.passes.base import PassRefused
from xpiler_core.passes.support.bang_thread import Poly, ThreadEvaluator


def _split_evaluator() -> tuple[ThreadEvaluator, str, str]:
    ev = ThreadEvaluator(set(), set(), {})
    tx, radix = Poly.atom("xp_tx"), Poly.const(32)
    digit = ev.combine("%", tx, radix)
    quotient = ev.combine("/", tx, radix)
    (d0,), (q1,) = digit.atoms(), quotient.atoms()
    return ev, d0, q1


def _values(name: str, tx: int) -> int:
    return {"xp_tx": tx, "d0": tx % 32, "q1": tx // 32}[name]


def test_parts_are_digit_and_quotient() -> None:
    ev, d0, q1 = _split_evaluator()
    assert ev.thread_part("xp_tx") == ("x", 1, None)
    assert ev.thread_part(d0) == ("x", 1, 32)
    assert ev.thread_part(q1) == ("x", 32, None)
    assert ev.thread_part("N") is None


@pytest.mark.parametrize(("atom", "part"), [("xp_tx", "d0"), ("xp_tx", "q1"), ("d0", "q1"), ("q1", "d0"),
                                            ("d0", "xp_tx"), ("q1", "xp_tx")])
def test_depends_matches_the_arithmetic(atom: str, part: str) -> None:
    # `atom` varies with `part` when two threads that differ in `part`, and in no other part of the index's
    # decomposition (d0, q1), can give `atom` different values; the whole index varies with everything
    ev, d0, q1 = _split_evaluator()
    names = {"d0": d0, "q1": q1, "xp_tx": "xp_tx"}
    others = [o for o in ("d0", "q1") if o != part] if part != "xp_tx" else []
    varies = any(_values(atom, a) != _values(atom, b) for a in range(0, 1024, 7) for b in range(1024)
                 if _values(part, a) != _values(part, b) and all(_values(o, a) == _values(o, b) for o in others))
    assert ev.depends(names[atom], names[part]) == varies


def test_part_ranges() -> None:
    ev, d0, q1 = _split_evaluator()
    assert ev.part_range(d0, 32, "t") is None  # a digit's radix is its range
    assert ev.part_range(q1, 32, "t") == "1024 == xp_bdx"  # the quotient ranges over blockDim.x / 32
    assert ev.part_range("xp_tx", 256, "t") == "256 == xp_bdx"
    with pytest.raises(PassRefused):
        ev.part_range(d0, 16, "t")
