"""Repair on kernels written in styles outside the suite (``benchmarks/repair_styles``): a host entry that
allocates, copies and launches (``sizeof``, casts, ``nullptr``, ``dim3``, ``__constant__`` tables); warp
shuffles inside ``__device__`` helpers; launch-time dynamic shared memory; half buffers. Each injected bug is
repaired at one site and the fix is checked against the spec's numpy reference on other inputs (harness,
seed 7). Edits read as a person's: folded constants, ``x - (-1)`` as ``x + 1`` (a property test: the tidied
text computes what the edited one does)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.repair.engine import apply_edits, repair_candidate
from xpiler_core.repair.sketch import Edit, _span_at, tidy
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

STYLES = Path(__file__).resolve().parents[2] / "benchmarks" / "repair_styles"

BUGS = [
    # (folder, original text, injected bug, the kernel is reached through a host entry). The fix found may be
    # another spelling of the original (`c <= cols - 1` for `c < cols`): right by the reference, tidy by text.
    ("const_stencil", "i < n - 1 ? i + 1", "i < n - 1 ? i + 2", True),
    ("host_2d_bias", "if (r < rows && c < cols)", "if (r < rows && c <= cols)", True),
    ("dyn_shared_host", "t >= d ?", "t > d ?", True),
    ("warp_helper_softmax", "s = red[0] + red[1];", "s = red[0] + red[0];", False),
    ("warp_rowmax", "offset > 0; offset /= 2", "offset > 0 + 1; offset /= 2", False),
    ("half_axpby", "if (i < n)", "if (i < n - 1)", False),
]


@pytest.mark.parametrize(("folder", "old", "new", "host"), BUGS)
def test_bug_in_another_style_is_repaired(folder: str, old: str, new: str, host: bool) -> None:
    spec = load_spec(STYLES / folder / "spec.toml")
    assert (spec.kind == "host") is host
    original = spec.source_text()
    assert original.count(old) == 1
    buggy = original.replace(old, new)
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed, "the injected bug is visible to the tests"
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=60.0, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text is not None and apply_edits(buggy, result.edits) == result.text
    assert len(result.edits) <= 2 and "(-" not in "".join(e.new for e in result.edits)  # one site, tidied
    assert run_spec(spec, candidate_text=result.text, seed=7).passed


PREFIXES = ["x - ", "x + ", "x * ", "x > ", "(", "x == ", "f(", "y = "]
SUFFIXES = ["", " * 2", " + x", " - 3"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PREFIXES), st.integers(0, 9), st.sampled_from(["+", "-"]), st.integers(0, 9),
       st.sampled_from(SUFFIXES), st.integers(-9, 9), st.integers(-5, 5))
def test_tidied_edits_compute_the_same(prefix: str, c: int, op: str, m: int, suffix: str, value: int,
                                       x: int) -> None:
    # an edit of the constant c in `prefix c op m suffix`: the tidied text must evaluate like the edited one
    # (Python's grouping of + - * > == is C's)
    close = ")" if prefix.endswith("(") else ""
    text = f"{prefix}{c} {op} {m}{suffix}{close}"
    start = len(prefix)
    new = str(value) if value >= 0 else f"({value})"
    edit = Edit(_span_at(text.encode(), start, start + 1), str(c), new)
    edited = apply_edits(text, [edit])
    tidied = tidy(text, edit)
    result = apply_edits(text, [tidied])
    env = {"x": x, "f": lambda v: v}
    plain = edited.removeprefix("y = ")
    assert eval(result.removeprefix("y = "), env) == eval(plain, env)  # noqa: S307 - generated arithmetic


@pytest.mark.slow  # a full repair through a step budget run out (42 s): the default run stays near its 15-minute budget
def test_a_loop_that_never_ends_is_localized_and_repaired() -> None:
    # `offset >= 0` with `offset /= 2` never ends: the interpreter's step budget runs out on the small case,
    # the loop that ran longest is the suspect, and the repaired loop may only run as long as a normal one
    spec = dataclasses.replace(load_spec(STYLES / "warp_rowmax" / "spec.toml"), timeout_s=3.0)
    buggy = spec.source_text().replace("offset > 0; offset /= 2", "offset >= 0; offset /= 2")
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=90.0, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text is not None
    assert run_spec(dataclasses.replace(spec, timeout_s=60.0), candidate_text=result.text, seed=7).passed
