"""Each structural pass applied to the CPU translation of suite kernels: either it refuses (with a reason)
or the result still matches the numpy reference on every case of the spec (run by the harness)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import _launch_params_used, spec_with_launch_args, translate_to_cpu
from xpiler_core.printer import print_module
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"
PASSES = {
    "split": {"factor": 4},
    "pipeline": {"distance": 8},
    "reorder": {},
    "fuse": {},
    "tensorization": {},
    "expansion": {"var": "acc"},
    "cache": {"array": "x"},
    "grid_flatten": {},
}
KERNELS = ["elementwise/sign", "matrix/gemm", "normalization/batchnorm", "convolution/conv2d_nchw",
           "pooling/maxpool2d", "matrix/gemv", "llm/rotary_embedding"]
DEFAULT = [("elementwise/sign", "split"), ("matrix/gemm", "pipeline"), ("convolution/conv2d_nchw", "reorder"),
           ("pooling/maxpool2d", "split"), ("elementwise/sign", "grid_flatten")]


def recovered_module(spec_path: Path) -> tuple[A.Module, list[dict], object]:
    spec = load_spec(str(spec_path))
    module = lower_text(spec.source.read_text(), str(spec.source))
    _text, records, _ctx = translate_to_cpu(spec.source.read_text(), str(spec.source), spec,
                                            passes=["detensorization", "loop_recovery"])
    ctx = PassContext(Dialect.CUDA, Dialect.C)
    params = {r["name"]: r["params"] for r in records}
    for name in ("detensorization", "loop_recovery", "loop_binding"):
        mod = get_pass(name)
        try:
            module = mod.apply(module, {**mod.INFO.defaults(), **params.get(name, {})}, ctx)
        except PassRefused:
            continue
    return module, records, spec


def check_pass_on_kernel(kernel: str, pass_name: str) -> str:
    module, records, spec = recovered_module(ROOT / kernel / "spec.toml")
    targets = [f for f in module.functions() if f.name.endswith("_blocks") or f.params[:1] and isinstance(
        f.params[0], A.Param) and f.params[0].name == "xp_grid"]
    mod = get_pass(pass_name)
    try:
        out = mod.apply(module, {**mod.INFO.defaults(), **PASSES[pass_name], "function": targets[0].name},
                        PassContext(Dialect.C, Dialect.C))
    except PassRefused as refusal:
        assert refusal.reason
        return "refused"
    text = print_module(out, Dialect.C)
    launch = _launch_params_used(records)
    with tempfile.TemporaryDirectory() as tmp:
        test_spec = spec_with_launch_args(spec, launch, Path(tmp)) if launch else spec
        report = run_spec(test_spec, candidate_text=text, candidate_dialect=Dialect.C, candidate_entry=spec.entry,
                          candidate_kind="host")
    assert report.passed, f"{pass_name} on {kernel}:\n{report.summary()}\n{text[-3000:]}"
    return "applied"


@pytest.mark.parametrize(("kernel", "pass_name"), DEFAULT)
def test_pass_on_suite_kernel(kernel: str, pass_name: str) -> None:
    check_pass_on_kernel(kernel, pass_name)


@pytest.mark.slow
@pytest.mark.parametrize("pass_name", sorted(PASSES))
@pytest.mark.parametrize("kernel", KERNELS)
def test_pass_matrix_on_suite(kernel: str, pass_name: str) -> None:
    check_pass_on_kernel(kernel, pass_name)
