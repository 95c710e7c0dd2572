"""Fixtures and helpers shared by the rooms' tests: the benchmark suite, C/C++ builds of CPU translations
called through ctypes, the tuner's candidate for one inserted pass, and a CUDA text after loop recovery."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.runtime.build import build_library

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "suite"


@pytest.fixture
def suite() -> Path:
    if not SUITE.is_dir():
        pytest.skip("benchmark suite not present")
    return SUITE


def build_c(text: str, workdir: Path, cplusplus: bool | None = None) -> ctypes.CDLL:
    """Plain C unless the text has C++ linkage markers (or ``cplusplus`` says so: the CPU plan's output is C++)."""
    as_cpp = "extern \"C\"" in text if cplusplus is None else cplusplus
    result = build_library(text, Dialect.C, workdir, display_name="t.c", cplusplus_c=as_cpp)
    assert result.ok, result.log
    assert result.library is not None
    return ctypes.CDLL(str(result.library))


@pytest.fixture
def cbuild(tmp_path: Path):  # noqa: ANN201 - fixture
    return lambda text, cplusplus=None: build_c(text, tmp_path, cplusplus)


def tuner_candidate(spec: Path, pass_name: str, workdir: Path) -> tuple[Any, str]:
    """The tuning problem of a suite kernel and its candidate with ``pass_name`` inserted at the first place the
    tuner offers it (asserting that it does)."""
    from xpiler_core.tune.config import Config, Step
    from xpiler_core.tune.cpu_problem import CpuTuningProblem
    from xpiler_core.verify.spec import load_spec

    kernel_spec = load_spec(spec)
    problem = CpuTuningProblem(kernel_spec.source.read_text(), str(kernel_spec.source), kernel_spec, workdir)
    actions = [a for a in problem.actions(()) if a.name == pass_name]
    assert actions, f"the tuner offers no {pass_name} step"
    text = problem.render(Config((Step(actions[0].name, actions[0].target),), problem.binding_defaults))
    assert text is not None
    return problem, text


def build_shared(text: str, workdir: Path) -> Path:
    """Build a CPU translation (C++) into a shared library for tests that call it directly."""
    result = build_library(text, Dialect.C, workdir, display_name="t.cpp", cplusplus_c=True)
    assert result.ok and result.library is not None, result.log
    return Path(result.library)


def loop_recovered(text: str) -> tuple[Any, Any]:
    """CUDA ``text`` after loop recovery (no wrapper), and the pass context a CPU pass continues with."""
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.passes import get_pass
    from xpiler_core.passes.base import PassContext

    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    recovery = get_pass("loop_recovery")
    return recovery.apply(module, {**recovery.INFO.defaults(), "wrapper": False}, ctx), ctx
