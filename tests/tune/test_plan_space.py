"""What the tuner searches: the CPU plan's own pass list and parameters, compile flags carried by a
candidate into every build of it, the block size where we choose the launch, and the noise-aware rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from tune_cases import RELU_SOURCE, RELU_SPEC

from xpiler_core.dialect import Dialect
from xpiler_core.plans import cuda_to_cpu
from xpiler_core.runtime.build import build_library, candidate_flags
from xpiler_core.tune.cpu_problem import (
    BLOCK_KEY,
    FLAGS_MARK,
    WITHOUT_KEY,
    beats,
    open_problem,
    structural_passes,
)
from xpiler_core.tune.records import TrialRecord
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

# A kernel whose result does not depend on its block size, with no launch site and no __launch_bounds__.
DOUBLE = """
__global__ void double_kernel(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i];
}
"""
DOUBLE_SPEC = """
name = "double"
source = "double.cu"
entry = "double_kernel"
kind = "kernel"
grid = ["ceil_div(n, 128)"]
block = [128]
reference = "ref.py:double"
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"
init = "normal"
[[args]]
name = "y"
dtype = "float32"
shape = ["n"]
role = "out"
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 1
[[cases]]
n = 1000
[[cases]]
n = 4099
"""


@pytest.fixture()
def double_spec(tmp_path: Path):
    (tmp_path / "double.cu").write_text(DOUBLE)
    (tmp_path / "spec.toml").write_text(DOUBLE_SPEC)
    (tmp_path / "ref.py").write_text("def double(x, n):\n    return x + x\n")
    return load_spec(str(tmp_path / "spec.toml"))


def test_the_untuned_candidate_is_the_plans_own_translation() -> None:
    spec = load_spec(str(RELU_SPEC))
    problem, tmp = open_problem(RELU_SOURCE.read_text(), str(RELU_SOURCE), spec)
    try:
        plan_text, _, _ = cuda_to_cpu.translate_to_cpu(RELU_SOURCE.read_text(), str(RELU_SOURCE), spec)
        assert problem.baseline_text == plan_text
        assert [*problem.prefix_names, "loop_binding", *problem.suffix_names] == cuda_to_cpu.DEFAULT_PASSES
        assert BLOCK_KEY not in problem.plan_space()  # relu has __launch_bounds__: its block is not ours
        optional = [n for n in problem.prefix_names if n != "loop_recovery"]
        assert problem.plan_space()[WITHOUT_KEY] == ("", *optional)  # each optional plan step may be left out
    finally:
        tmp.cleanup()


def test_a_pass_added_to_the_plan_is_tuned_over_its_declared_space(monkeypatch) -> None:
    at = cuda_to_cpu.DEFAULT_PASSES.index("loop_binding")
    monkeypatch.setattr(cuda_to_cpu, "DEFAULT_PASSES",
                        [*cuda_to_cpu.DEFAULT_PASSES[:at], "pipeline", *cuda_to_cpu.DEFAULT_PASSES[at:]])
    assert "pipeline" not in structural_passes()  # the plan runs it: not inserted a second time
    problem, tmp = open_problem(RELU_SOURCE.read_text(), str(RELU_SOURCE), load_spec(str(RELU_SPEC)))
    try:
        assert "pipeline" in problem.prefix_names
        assert set(problem.plan_space()["pipeline.distance"]) == {4, 8, 16, 32, 64, 128}
    finally:
        tmp.cleanup()


def test_block_size_is_searched_where_we_choose_the_launch_and_stays_correct(double_spec) -> None:
    problem, tmp = open_problem(DOUBLE, str(double_spec.source), double_spec)
    try:
        assert BLOCK_KEY in problem.plan_space()
        defaults = problem.plan_defaults()
        for block in ("64", "1024"):
            text = problem.render(problem.config_for({**defaults, BLOCK_KEY: block}))
            assert text is not None and f"dim3({block})" in text
            report = run_spec(double_spec, candidate_text=text, candidate_dialect=Dialect.C,
                              candidate_entry="double_kernel", candidate_kind="host")
            assert report.passed, report.summary()  # against numpy, on sizes that are not multiples of it
    finally:
        tmp.cleanup()


def test_flags_are_part_of_the_candidate_text(double_spec) -> None:
    problem, tmp = open_problem(DOUBLE, str(double_spec.source), double_spec)
    try:
        defaults = problem.plan_defaults()
        config = problem.config_for({**defaults, "flags.errno": "-fno-math-errno", "flags.opt": "-O3"})
        text = problem.render(config)
        assert config.flags == ("-fno-math-errno", "-O3")
        assert text is not None and text.startswith(FLAGS_MARK) and text != problem.baseline_text
        assert "-fno-math-errno" in text.splitlines()[0]
    finally:
        tmp.cleanup()


NEEDS_FLAG = """
#ifndef __NO_MATH_ERRNO__
#error built without -fno-math-errno
#endif
void f(float *x) { x[0] = 1.0f; }
"""


def test_candidate_flags_reach_the_compiler_and_the_default_build_is_unchanged(tmp_path: Path) -> None:
    # GCC defines __NO_MATH_ERRNO__ exactly when -fno-math-errno is on: the compiler is the judge
    assert not build_library(NEEDS_FLAG, Dialect.C, tmp_path / "plain").ok
    assert build_library(NEEDS_FLAG, Dialect.C, tmp_path / "extra", extra_flags=("-fno-math-errno",)).ok
    with candidate_flags(("-fno-math-errno",)):  # what the harness builds while a candidate is verified
        assert build_library(NEEDS_FLAG, Dialect.C, tmp_path / "ctx").ok
    assert not build_library(NEEDS_FLAG, Dialect.C, tmp_path / "after").ok


def _record(sha: str, speedup: float, interval: tuple[float, float], **extra: object) -> TrialRecord:
    return TrialRecord({}, sha, True, latency_s=1e-6, speedup=speedup,
                       extra={"speedup_interval": list(interval), **extra})


def test_a_candidate_wins_only_when_its_interval_clears_the_incumbent() -> None:
    assert beats(_record("a", 1.3, (1.1, 1.5)), None)
    assert not beats(_record("a", 1.3, (0.95, 1.5)), None)  # interval reaches below 1: noise
    assert not beats(TrialRecord({}, "f", False, speedup=0.0), None)
    incumbent = _record("inc", 1.3, (1.2, 1.4))
    # timed in the same rounds as the incumbent: the direct interval decides
    assert beats(_record("b", 1.35, (1.1, 1.6), incumbent="inc", vs_incumbent=[1.05, 1.2]), incumbent)
    assert not beats(_record("b", 1.6, (1.5, 1.7), incumbent="inc", vs_incumbent=[0.98, 1.2]), incumbent)
    # timed against another incumbent (resumed): its whole interval must clear the incumbent's speedup
    assert beats(_record("c", 1.5, (1.4, 1.6), incumbent="old", vs_incumbent=[0.5, 0.7]), incumbent)
    assert not beats(_record("c", 1.5, (1.25, 1.6)), incumbent)
    assert not beats(incumbent, incumbent)
