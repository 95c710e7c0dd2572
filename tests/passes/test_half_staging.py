"""Half staging: loops over half arrays on float tiles give the same bits as numpy's float16 (correctly rounded)
with the F16C vector conversions and with the portable scalar ones, and the pass refuses bodies where one
rounding at the store would not be the original's."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.passes.support.cpu_prelude import PRELUDE
from xpiler_core.printer import print_module

F16P = np.ctypeslib.ndpointer(dtype=np.float16, flags="C_CONTIGUOUS")
SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"

KERNELS = r"""
extern "C" void hsub(__half* out, const __half* a, const __half* b, int n) {
    for (int i = 0; i < n; ++i) out[i] = __hsub(a[i], b[i]);
}
extern "C" void hscale(__half* y, const __half* x, const __half* w, float s, int off, int n) {
    for (int i = 0; i < n; ++i) y[off + i] = __float2half(__half2float(x[off + i]) * s * __half2float(w[i]));
}
extern "C" float hsumsq(const __half* x, int n) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) {
        float v = __half2float(x[i]);
        acc += v * v;
    }
    return acc;
}
extern "C" void twice_rounded(__half* out, const __half* a, const __half* b, const __half* c, int n) {
    for (int i = 0; i < n; ++i) out[i] = __hadd(__hmul(a[i], b[i]), c[i]);
}
extern "C" void guarded(__half* out, const __half* a, int n, int m) {
    for (int i = 0; i < n; ++i) {
        if (i < m) out[i] = a[i];
    }
}
extern "C" void reread(__half* out, float* f, const __half* a, int n) {
    for (int i = 0; i < n; ++i) {
        out[i] = __float2half(__half2float(a[i]) * 3.0f);
        f[i] = __half2float(out[i]);
    }
}
"""
FUNCTIONS = ("hsub", "hscale", "hsumsq")


def run_pass(params: dict) -> str:
    module = lower_text(KERNELS, "k.cu", Dialect.CUDA)
    mod = get_pass("half_staging")
    out = mod.apply(module, {**mod.INFO.defaults(), **params}, PassContext(Dialect.CUDA, Dialect.C))
    return print_module(out, Dialect.C)


ISA_HEADERS = {
    "f16c": '#pragma GCC target("avx2,fma,f16c")\n#define XPILER_F16C 1\n',
    "avx512f": '#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")\n#define XPILER_F16C 1\n'
               '#define XPILER_AVX512F 1\n',
    "portable": "",
}


def staged_source(tile: int, isa: str) -> str:
    module = lower_text(KERNELS, "k.cu", Dialect.CUDA)
    mod = get_pass("half_staging")
    for fn in FUNCTIONS:
        module = mod.apply(module, {**mod.INFO.defaults(), "function": fn, "tile": tile},
                           PassContext(Dialect.CUDA, Dialect.C))
    text = print_module(module, Dialect.C)
    return ISA_HEADERS[isa] + PRELUDE + text


def cpu_has(flag: str) -> bool:
    try:
        return flag in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


@pytest.fixture(scope="module", params=[(64, "f16c"), (256, "avx512f"), (16, "portable")],
                ids=["f16c-tile64", "avx512-tile256", "portable-tile16"])
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    from tests.conftest import build_c

    tile, isa = request.param
    if isa != "portable" and not cpu_has(isa):
        pytest.skip(f"this CPU has no {isa}")
    return build_c(staged_source(tile, isa), tmp_path_factory.mktemp("half"), cplusplus=True)


def halves(rng: np.random.Generator, n: int) -> np.ndarray:
    return (rng.standard_normal(max(n, 1)) * 40).astype(np.float16)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 300), off=st.integers(0, 9), seed=st.integers(0, 1000))
def test_staged_loops_match_numpy_float16_bit_for_bit(lib: ctypes.CDLL, n: int, off: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = halves(rng, n), halves(rng, n)
    out = np.zeros(max(n, 1), dtype=np.float16)
    lib.hsub.argtypes = [F16P, F16P, F16P, ctypes.c_int]
    lib.hsub(out, a, b, n)
    np.testing.assert_array_equal(out[:n].view(np.uint16), (a[:n] - b[:n]).view(np.uint16))

    x, w = halves(rng, n + off), halves(rng, n)
    y = np.zeros(max(n + off, 1), dtype=np.float16)
    lib.hscale.argtypes = [F16P, F16P, F16P, ctypes.c_float, ctypes.c_int, ctypes.c_int]
    lib.hscale(y, x, w, 0.37, off, n)
    expected = (x[off:off + n].astype(np.float32) * np.float32(0.37) * w[:n].astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(y[off:off + n].view(np.uint16), expected.view(np.uint16))

    lib.hsumsq.argtypes = [F16P, ctypes.c_int]
    lib.hsumsq.restype = ctypes.c_float
    acc = np.float32(0)
    for v in a[:n].astype(np.float32):
        acc = np.float32(acc + v * v)
    assert lib.hsumsq(a, n) == acc


def test_overflow_rounds_to_infinity_like_float16(lib: ctypes.CDLL) -> None:
    a = np.array([65504, -65504, 60000, 1e-7, 0, 5.96e-8] * 3, dtype=np.float16)
    b = np.array([-65504, 65504, -10000, 0, -0.0, 0] * 3, dtype=np.float16)
    out = np.zeros_like(a)
    lib.hsub.argtypes = [F16P, F16P, F16P, ctypes.c_int]
    lib.hsub(out, a, b, len(a))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out.view(np.uint16), (a - b).view(np.uint16))


@pytest.mark.parametrize(("fn", "why"), [("twice_rounded", "half-valued"), ("guarded", "conditionally"),
                                         ("reread", "read after it is written")])
def test_refuses_bodies_that_round_or_read_differently(fn: str, why: str) -> None:
    with pytest.raises(PassRefused, match=why):
        run_pass({"function": fn})


def test_half_sub_tuner_action_verifies_against_the_reference(tmp_path: Path) -> None:
    from tests.conftest import tuner_candidate

    problem, text = tuner_candidate(SUITE / "elementwise" / "sub" / "spec.toml", "half_staging", tmp_path)
    assert "xp_h2f_n" in text
    report = problem._verify(text, ())
    assert report.passed, report.summary()
