"""Completions of one sketch built as one program that reads the completion to run from its environment (repair
on examples too big for the interpreter: one build instead of one per completion).

Judged against each completion built and run as the plain text it stands for: the same verdict and the same
errors on every case, the unset variable running the original text.
"""

from __future__ import annotations

from pathlib import Path

from xpiler_core.diagnostics import Span
from xpiler_core.dialect import Dialect
from xpiler_core.repair.engine import REPAIR_CHOICE_VARIABLE, _selector_text, apply_edits
from xpiler_core.repair.sketch import Edit
from xpiler_core.verify.harness import SpecReport, run_spec
from xpiler_core.verify.spec import KernelSpec, load_spec

POLYVAL = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "elementwise" / "polyval" / "spec.toml"


def _span(text: str, needle: str) -> Span:
    start = text.encode().index(needle.encode())
    return Span(start, start + len(needle.encode()), 0, 0, 0, 0)


def _verdict(report: SpecReport) -> list[tuple[bool, float, int]]:
    return [(c.passed, round(c.max_abs_err, 6), c.mismatches) for c in report.cases]


def _each_choice_runs_as_its_text(spec: KernelSpec, bug: str, completions: list[list[Edit]], selector: str) -> None:
    for k, edits in enumerate(completions):
        plain = run_spec(spec, candidate_text=apply_edits(bug, edits))
        chosen = run_spec(spec, candidate_text=selector, candidate_env={REPAIR_CHOICE_VARIABLE: str(k)})
        assert chosen.build_error is None, chosen.build_error
        assert chosen.passed == plain.passed and _verdict(chosen) == _verdict(plain), (k, chosen.summary())
    assert [run_spec(spec, candidate_text=apply_edits(bug, e)).passed for e in completions] == [False, True, False]


def test_selector_runs_each_completion_as_its_plain_text() -> None:
    spec = load_spec(POLYVAL)
    original = spec.source_text()
    bug = original.replace("k >= 0; --k", "k > 0; --k")  # the constant term is never added
    cond, step = _span(bug, "k > 0"), _span(bug, "DEGREE - 1")
    completions = [
        [Edit(cond, "k > 0", "k >= 1"), Edit(step, "DEGREE - 1", "DEGREE - 1")],  # still wrong
        [Edit(cond, "k > 0", "k >= 0"), Edit(step, "DEGREE - 1", "DEGREE - 1")],  # the fix
        [Edit(cond, "k > 0", "k >= 0"), Edit(step, "DEGREE - 1", "DEGREE - 2")],  # wrong elsewhere
    ]
    selector = _selector_text(bug, completions, Dialect.CUDA)
    assert selector is not None
    _each_choice_runs_as_its_text(spec, bug, completions, selector)
    unset = run_spec(spec, candidate_text=selector)
    assert _verdict(unset) == _verdict(run_spec(spec, candidate_text=bug))


def test_completions_of_apart_spans_share_one_program_and_overlapping_ones_do_not() -> None:
    """Completions of different suspects share a program when their edits lie apart: each choice runs exactly as
    its plain text (the verdict and errors on every case), a completion leaving the other's span as it was."""
    spec = load_spec(POLYVAL)
    original = spec.source_text()
    bug = original.replace("k >= 0; --k", "k > 0; --k")
    cond, step = _span(bug, "k > 0"), _span(bug, "DEGREE - 1")
    completions = [
        [Edit(step, "DEGREE - 1", "DEGREE - 2")],  # another suspect's completion: still wrong
        [Edit(cond, "k > 0", "k >= 0")],  # the fix
        [Edit(cond, "k > 0", "k >= 1")],  # still wrong
    ]
    selector = _selector_text(bug, completions, Dialect.CUDA)
    assert selector is not None
    _each_choice_runs_as_its_text(spec, bug, completions, selector)
    text = "__global__ void k(int* a) { a[0] = 1 + 2; }"
    whole, part = _span(text, "1 + 2"), _span(text, "2")
    assert _selector_text(text, [[Edit(whole, "1 + 2", "3")], [Edit(part, "2", "4")]], Dialect.CUDA) is None
    assert _selector_text(text, [[Edit(part, "2", "4")]], Dialect.C) is None
