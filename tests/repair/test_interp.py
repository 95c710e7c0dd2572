"""The repair interpreter runs suite kernels like the hardware would: its outputs match the numpy references
(written independently from the math), and its C integer semantics match C's truncating division."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.frontend.lower import lower_text
from xpiler_core.repair import examples as EX
from xpiler_core.repair.interp import LaunchShape, Program, Unsupported, run_kernel
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"
OPS = [
    "elementwise/add", "activation/relu", "elementwise/sign", "activation/gelu", "pooling/avgpool2d",
    "pooling/maxpool2d", "normalization/batchnorm", "matrix/gemm", "layout/transpose", "layout/gather",
    "layout/scatter_add", "llm/rotary_embedding", "convolution/conv2d_nhwc",
]


@pytest.mark.parametrize("op", OPS)
def test_interpreter_matches_numpy_reference_on_small_cases(op: str) -> None:
    spec = load_spec(SUITE / op / "spec.toml")
    prog = Program.of(lower_text(spec.source_text(), str(spec.source)))
    cases = EX.tiny_cases(spec, 1024)
    assert cases, "the spec yields small cases"
    for i, case in enumerate(cases[:1]):
        ex = EX.make_example(spec, case, i, seed=3)
        buffers = run_kernel(prog, spec.entry, EX.stored_args(spec, ex.inputs), ex.shape, spec.kind)
        for name, expected in ex.expected.items():
            got = np.array([float(v) for v in buffers[name].data])
            atol, rtol = EX.tolerance(spec, name)
            np.testing.assert_allclose(got, np.asarray(expected, dtype=np.float64).reshape(-1), atol=atol + 1e-6, rtol=rtol + 1e-6)


def _run_scalar_kernel(body: str, a: int, b: int) -> list[int]:
    src = f"__global__ void k(int* out, int a, int b) {{ {body} }}"
    prog = Program.of(lower_text(src, "k.cu"))
    bufs = run_kernel(prog, "k", {"out": np.zeros(4, dtype=np.int32), "a": a, "b": b}, LaunchShape((1, 1, 1), (1, 1, 1)))
    return [int(v) for v in bufs["out"].data]


@settings(max_examples=60, deadline=None)
@given(st.integers(-10_000, 10_000), st.integers(-50, 50).filter(lambda b: b != 0))
def test_integer_division_and_remainder_truncate_like_c(a: int, b: int) -> None:
    q, r, s, m = _run_scalar_kernel("out[0] = a / b; out[1] = a % b; out[2] = a >> 2; out[3] = a & 7;", a, b)
    expected_q = math.trunc(Fraction(a, b))
    assert q == expected_q and r == a - b * expected_q
    assert s == a // 4 and m == a % 8  # arithmetic shift floors; & 7 is the two's-complement low bits


def test_unmodeled_constructs_are_refused_not_guessed() -> None:
    src = "__global__ void k(float* out) { out[threadIdx.x] = __shfl_down_sync(0xffffffff, 1.0f, 1); }"
    prog = Program.of(lower_text(src, "k.cu"))
    with pytest.raises(Unsupported):
        run_kernel(prog, "k", {"out": np.zeros(32, dtype=np.float32)}, LaunchShape((1, 1, 1), (32, 1, 1)))
