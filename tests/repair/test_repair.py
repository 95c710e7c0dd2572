"""Local SMT repair on injected single-site bugs: the repaired text passes the real harness on every spec
case (the independent check), the fix is the one-expression change that restores the correct kernel, and
what repair cannot do is said honestly (refused / unrepaired / not-needed), never a wrong "repaired"."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.repair.engine import apply_edits, repair_candidate
from xpiler_core.repair.mutate import FAMILIES, mutations, sample
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"


def _bug(op: str, old: str, new: str) -> tuple[object, str, str]:
    spec = load_spec(SUITE / op / "spec.toml")
    original = spec.source_text()
    assert original.count(old) == 1
    return spec, original, original.replace(old, new)


@pytest.mark.parametrize(
    ("op", "old", "new", "kind"),
    [
        ("elementwise/add", "& 63)", "& 62)", "const"),  # wrong constant in a broadcast index
        ("pooling/avgpool2d", "ow >= OW", "ow < OW", "compare"),  # wrong guard before an early return
        pytest.param(
            "layout/transpose", "src[(size_t)(y + j) * cols + x]", "src[(size_t)(x + j) * cols + y]", "swap",
            marks=pytest.mark.slow,
        ),  # swapped variables in a subscript (shared-memory kernel: the slow one)
    ],
)
def test_injected_bug_is_repaired_back_to_the_correct_kernel(op: str, old: str, new: str, kind: str) -> None:
    spec, original, buggy = _bug(op, old, new)
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed, "the injected bug is visible to the tests"
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=120, initial_report=before)  # type: ignore[arg-type]
    assert result.status == "repaired", result.message
    assert result.sketch == kind
    assert result.text == original  # the smallest fix is exactly the one-expression change we injected
    assert apply_edits(buggy, result.edits) == result.text
    assert run_spec(spec, candidate_text=result.text, seed=7).passed  # independent re-check, other inputs
    assert result.model and result.seconds > 0


def test_a_correct_kernel_needs_no_repair() -> None:
    spec = load_spec(SUITE / "elementwise/add/spec.toml")
    result = repair_candidate(spec.source_text(), str(spec.source), spec)
    assert result.status == "not-needed" and result.edits == []


def test_unmodeled_kernels_are_repaired_on_the_harness_alone() -> None:
    """The interpreter does not model float4 vectors through reinterpret_cast: nothing is localized or encoded,
    and completions are screened on the harness; the fix is checked independently on other inputs."""
    spec = load_spec(SUITE / "elementwise/sin/spec.toml")
    original = spec.source_text()
    buggy = original.replace("j < n;", "j < n - 1;")
    assert not run_spec(spec, candidate_text=buggy).passed
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=60)
    assert result.status == "repaired", result.message
    assert result.text is not None and run_spec(spec, candidate_text=result.text, seed=7).passed


def test_a_spent_budget_is_reported_as_unrepaired() -> None:
    spec, _, buggy = _bug("layout/transpose", "* rows + x", "* cols + x")
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=0.0)  # type: ignore[arg-type]
    assert result.status == "unrepaired" and result.text is None and result.edits == []


def test_mutations_are_single_site_and_seeded() -> None:
    spec = load_spec(SUITE / "layout/transpose/spec.toml")
    text = spec.source_text()
    every = mutations(text, str(spec.source), spec.entry)
    assert {m.family for m in every} == set(FAMILIES)
    for m in every:
        mutant = m.apply(text)
        assert mutant != text
        # one contiguous edited region: the text outside [start, end) of the edit is untouched
        assert mutant[: m.start] == text[: m.start] if text.isascii() else True
        start = next(i for i, (a, b) in enumerate(zip(text, mutant, strict=False)) if a != b)
        assert text[:start] == mutant[:start]
    a = sample(text, str(spec.source), spec.entry, 2, seed=5)
    b = sample(text, str(spec.source), spec.entry, 2, seed=5)
    assert a == b and len(a) <= 2 * len(FAMILIES)
