"""Tests built from the code: what is derived, and an honest refusal when it cannot be."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.frontend.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.verify.autospec import CASE_SIZES, build_spec
from xpiler_core.verify.spec import load_spec

REPO = Path(__file__).resolve().parents[2]


def test_host_entry_buffer_lengths_come_from_memcpy_byte_counts(tmp_path: Path) -> None:
    text = (REPO / "examples" / "vector_add.cu").read_text()
    built = build_spec(text, "vector_add.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.kind == "host" and spec.entry == "vector_add_host"
    roles = {a.name: a.role for a in spec.args}
    assert roles == {"a": "in", "b": "in", "c": "out", "n": "scalar"}
    assert [c["n"] for c in spec.cases] == list(CASE_SIZES)
    assert any(n % 256 for n in CASE_SIZES)  # sizes that are not multiples of the block


def test_one_size_kernel_gets_a_1d_launch_from_launch_bounds(tmp_path: Path, suite: Path) -> None:
    text = (suite / "activation" / "relu" / "relu.cu").read_text()
    built = build_spec(text, "relu.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.block == [1024] and spec.kind == "kernel"
    assert {a.name: a.role for a in spec.args} == {"compute": "inout", "data": "in", "n": "scalar"}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("__global__ void k(float* a, int m, int n) { a[threadIdx.x] = m + n; }", "integer parameters (m, n)"),
        ("__global__ void k(float* a, int n) { extern __shared__ float s[]; a[threadIdx.x] = s[0]; }", "dynamic shared"),
        ("template <int B> __global__ void k(float* a, int n) { a[threadIdx.x] = B; }", "no extern"),
    ],
)
def test_refuses_with_a_reason(tmp_path: Path, source: str, reason: str) -> None:
    built = build_spec(source, "k.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is None and reason in built.reason


@pytest.mark.slow
def test_auto_tests_catch_a_wrong_translation(suite: Path) -> None:
    """Differential tests built from the code fail when the translation drops the warp_size pass."""
    source = suite / "warp64" / "ballot_count" / "ballot_count.cu"
    text = source.read_text()
    wrong = translate(text, str(source), TranslateOptions(Dialect.HIP, passes=["api_map"]))
    assert wrong.status == "unresolved" and wrong.tests is not None and not wrong.tests.passed
    right = translate(text, str(source), TranslateOptions(Dialect.HIP))
    assert right.status == "verified", right.summary
    assert right.manifest["spec"]["auto"] is True
