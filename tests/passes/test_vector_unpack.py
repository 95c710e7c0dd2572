"""Vector unpack: float4/int4 component-wise code as component loops computes what numpy computes, and code
whose components differ (or whose vectors live on) is left alone."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.passes.support.cpu_prelude import PRELUDE
from xpiler_core.printer import print_module

F32P = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
I32P = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")
SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"

KERNELS = r"""
extern "C" void sin4(const float* x, float* y, int n4) {
    for (int i = 0; i < n4; ++i) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        float4 r;
        r.x = sinf(v.x);
        r.y = sinf(v.y);
        r.z = sinf(v.z);
        r.w = sinf(v.w);
        reinterpret_cast<float4*>(y)[i] = r;
    }
}
extern "C" void axpy4(const float* a, const float* b, float* out, float s, int n4) {
    for (int i = 0; i < n4; ++i) {
        float4 u = reinterpret_cast<const float4*>(a)[i];
        float4 v = reinterpret_cast<const float4*>(b)[i + 1];
        float4 r;
        r.x = s * u.x + v.x;
        r.y = s * u.y + v.y;
        r.z = s * u.z + v.z;
        r.w = s * u.w + v.w;
        reinterpret_cast<float4*>(out)[i] = r;
    }
}
extern "C" void iadd4(const int* a, int* out, int n4) {
    for (int i = 0; i < n4; ++i) {
        int4 u = reinterpret_cast<const int4*>(a)[i];
        int4 r;
        r.x = u.x + 1;
        r.y = u.y + 1;
        r.z = u.z + 1;
        r.w = u.w + 1;
        reinterpret_cast<int4*>(out)[i] = r;
    }
}
extern "C" void mixed(const float* x, float* y, int n4) {
    for (int i = 0; i < n4; ++i) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        float4 r;
        r.x = sinf(v.x);
        r.y = cosf(v.y);
        r.z = sinf(v.z);
        r.w = sinf(v.w);
        reinterpret_cast<float4*>(y)[i] = r;
    }
}
extern "C" void reused(const float* x, float* y, float* last, int n4) {
    for (int i = 0; i < n4; ++i) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        float4 r;
        r.x = v.x * 2.0f;
        r.y = v.y * 2.0f;
        r.z = v.z * 2.0f;
        r.w = v.w * 2.0f;
        reinterpret_cast<float4*>(y)[i] = r;
        last[0] = r.w;
    }
}
"""


def run_pass(fn: str) -> str:
    module = lower_text(KERNELS, "k.cu", Dialect.CUDA)
    mod = get_pass("vector_unpack")
    out = mod.apply(module, {**mod.INFO.defaults(), "function": fn}, PassContext(Dialect.CUDA, Dialect.C))
    return print_module(out, Dialect.C)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    from tests.conftest import build_c

    module = lower_text(KERNELS, "k.cu", Dialect.CUDA)
    mod = get_pass("vector_unpack")
    for fn in ("sin4", "axpy4", "iadd4"):
        module = mod.apply(module, {**mod.INFO.defaults(), "function": fn}, PassContext(Dialect.CUDA, Dialect.C))
    text = print_module(module, Dialect.C)
    assert "float4" not in text.split("mixed")[0] and "int4" not in text.split("mixed")[0]
    return build_c(PRELUDE + text, tmp_path_factory.mktemp("vec"), cplusplus=True)


@pytest.mark.parametrize("n4", [0, 1, 7, 64])
def test_component_loops_match_numpy(lib: ctypes.CDLL, n4: int) -> None:
    rng = np.random.default_rng(n4)
    x = rng.standard_normal(4 * n4 + 4).astype(np.float32)
    y = np.zeros_like(x)
    lib.sin4.argtypes = [F32P, F32P, ctypes.c_int]
    lib.sin4(x, y, n4)
    np.testing.assert_allclose(y[:4 * n4], np.sin(x[:4 * n4]), rtol=1e-6, atol=1e-6)
    assert not y[4 * n4:].any()

    a, b = x.copy(), rng.standard_normal(4 * n4 + 4).astype(np.float32)
    out = np.zeros_like(a)
    lib.axpy4.argtypes = [F32P, F32P, F32P, ctypes.c_float, ctypes.c_int]
    lib.axpy4(a, b, out, 1.5, n4)
    np.testing.assert_allclose(out[:4 * n4], np.float32(1.5) * a[:4 * n4] + b[4:4 * n4 + 4], rtol=1e-6)

    ints = rng.integers(-1000, 1000, 4 * n4 + 4).astype(np.int32)
    iout = np.zeros_like(ints)
    lib.iadd4.argtypes = [I32P, I32P, ctypes.c_int]
    lib.iadd4(ints, iout, n4)
    np.testing.assert_array_equal(iout[:4 * n4], ints[:4 * n4] + 1)


@pytest.mark.parametrize("fn", ["mixed", "reused"])
def test_code_whose_components_differ_or_live_on_is_left_alone(fn: str) -> None:
    with pytest.raises(PassRefused, match="no component-wise"):
        run_pass(fn)


def test_sin_vec4_suite_kernel_through_the_tuner_verifies(tmp_path: Path) -> None:
    from tests.conftest import tuner_candidate

    problem, text = tuner_candidate(SUITE / "elementwise" / "sin" / "spec.toml", "vector_unpack", tmp_path)
    kernel = text[text.index("static void sin_vec4_kernel_blocks"):]
    assert "float4" not in kernel and "sinf(x[4 * (size_t)i + xp_c])" in kernel
    report = problem._verify(text, ())
    assert report.passed, report.summary()
