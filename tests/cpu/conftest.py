"""Shared helpers for the CPU-direction tests: build C text with gcc (cached) and call it with ctypes."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest

from xpiler_core.frontend.dialect import Dialect
from xpiler_core.runtime.build import build_library


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
