"""The whole suite through CUDA → BANG on the MLU model (slow: about five minutes on two cores)."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from xpiler_core.plans.cuda_to_bang import translate_to_bang, verify_bang
from xpiler_core.verify.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_suite_accuracy_on_the_model_and_no_capacity_violations() -> None:
    specs = sorted(glob.glob(str(ROOT / "benchmarks" / "suite" / "**" / "spec.toml"), recursive=True))
    passed, violations, failures = 0, 0, []
    for path in specs:
        spec = load_spec(path)
        candidate, records, _ = translate_to_bang(spec.source_text(), str(spec.path.parent / spec.source), spec)
        if candidate is None:
            failures.append(spec.name)
            continue
        report, _ = verify_bang(candidate, spec, records)
        violations += len(report.capacity_violations)
        if report.passed:
            passed += 1
        else:
            failures.append(spec.name)
    assert violations == 0
    assert passed / len(specs) >= 0.95, failures
