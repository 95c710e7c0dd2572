"""Repair through host code it does not interpret: the host entry runs for real on the runtime, recorded
(allocations, copies with their bytes, memsets, launches with their arguments), and the interpreter replays the
record and runs only the kernels. The host entry here has what defeated the old host interpreter: cudaError_t
checks, ``fprintf(stderr, …)``, a user macro, a host template launcher (``run_scale<128>``), ``sizeof *p``, a
memset to 0xFF, a host table copied to a ``__constant__`` array. Each seeded kernel bug is repaired, the fix checked
against the spec's numpy reference on other inputs (seed 7)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.repair import trace as TR
from xpiler_core.repair.engine import repair_candidate
from xpiler_core.repair.interp import Program
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.inputs import case_inputs
from xpiler_core.verify.spec import load_spec

DATA = Path(__file__).resolve().parent / "data" / "recorded_host"

BUGS = [
    ("c_weights[i % 3]", "c_weights[i % 2]"),
    ("if (i < n)", "if (i < n - 1)"),
    ("blockIdx.x * blockDim.x + threadIdx.x", "blockIdx.x * blockDim.x + threadIdx.x + 1"),
    ("flags[i] != 0 ?", "flags[i] == 0 ?"),
]


@pytest.mark.parametrize(("old", "new"), BUGS)
def test_kernel_bug_behind_real_host_code_is_repaired(old: str, new: str) -> None:
    spec = load_spec(DATA / "spec.toml")
    original = spec.source_text()
    assert original.count(old) == 1
    buggy = original.replace(old, new)
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed, "the seeded bug is visible to the tests"
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=90.0, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text is not None and run_spec(spec, candidate_text=result.text, seed=7).passed


def test_replay_of_the_record_computes_what_the_program_computes() -> None:
    """The replayed outputs equal what the program computes (numpy, written from the source by hand)."""
    spec = load_spec(DATA / "spec.toml")
    text = spec.source_text()
    case = {"n": 37}
    inputs = case_inputs(spec, case, 5, 0)
    run = TR.record_host_run(spec, text, Dialect.CUDA, spec.entry, None, inputs, case)
    assert isinstance(run, TR.HostRun), run
    kinds = [type(op).__name__ for op in run.record.ops]
    assert kinds.count("Launch") == 1 and "SymbolCopy" in kinds and "Memset" in kinds
    prog = Program.of(lower_text(text, str(spec.source), Dialect.CUDA))
    replayed = TR.replay(prog, run, dict(inputs))
    w = np.array([0.5, 2.0, -1.0], dtype=np.float32)[np.arange(37) % 3]
    expected = w * inputs["x"] + inputs["y"]
    got = np.array([float(v) for v in replayed["y"].data], dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
