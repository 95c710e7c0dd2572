"""Each structural pass keeps the program's meaning (checked by running the compiled output against numpy)
and refuses where its preconditions fail."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import all_passes, get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.printer import print_module

F32P = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")

KERNELS = r"""
void axpy(float* y, const float* x, float a, int n) {
    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}
void vadd(float* y, const float* a, const float* b, int n) {
    for (int i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void two(float* y, float* z, const float* x, int n) {
    for (int i = 0; i < n; ++i) y[i] = x[i] * 2.0f;
    for (int j = 0; j < n; ++j) z[j] = y[j] + 1.0f;
}
void mm(float* c, const float* a, const float* b, int n) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < n; ++k) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
void scale2d(float* c, const float* a, int n) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) c[i * n + j] = a[i * n + j] * 3.0f;
}
void shift2d(float* a, int n) {
    for (int i = 1; i < n; ++i)
        for (int j = 0; j < n - 1; ++j) a[i * n + j] = a[(i - 1) * n + j + 1] + 1.0f;
}
void sq(float* y, const float* x, int n) {
    for (int i = 0; i < n; ++i) {
        float t = x[i] * x[i];
        y[i] = t + 1.0f;
    }
}
void tmp_array(float* y, const float* x) {
    float t[64];
    for (int i = 0; i < 64; ++i) {
        t[i] = x[i] * 0.5f;
        y[i] = t[i] + t[i];
    }
}
void window(float* y, const float* x, int base) {
    for (int i = 0; i < 64; ++i) y[i] = x[base + i] * 2.0f;
}
float dot(const float* a, const float* b, int n) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += a[i] * b[i];
    return acc;
}
"""


def run_pass(name: str, params: dict, text: str = KERNELS) -> str:
    module = lower_text(text, "k.c", Dialect.C)
    mod = get_pass(name)
    ctx = PassContext(source_dialect=Dialect.C, target=Dialect.C)
    out = mod.apply(module, {**mod.INFO.defaults(), **params}, ctx)
    return print_module(out, Dialect.C)


def call(lib: ctypes.CDLL, name: str, argtypes: list, *args: object, restype: object = None) -> object:
    fn = getattr(lib, name)
    fn.argtypes = argtypes
    fn.restype = restype
    return fn(*args)


def test_every_pass_is_registered_with_documented_params() -> None:
    passes = all_passes()
    for name in ("loop_recovery", "loop_binding", "split", "fuse", "reorder", "expansion", "contraction", "cache",
                 "pipeline", "tensorization", "detensorization"):
        assert name in passes, name
        assert all(p.doc for p in passes[name].INFO.params)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(0, 70), factor=st.sampled_from([2, 3, 8, 16]))
def test_split_matches_numpy(tmp_path_factory: pytest.TempPathFactory, n: int, factor: int) -> None:
    from tests.conftest import build_c

    lib = build_c(run_pass("split", {"function": "axpy", "factor": factor, "unroll": True}),
                  tmp_path_factory.mktemp("split"))
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    expected = (np.float32(1.5) * x + y).astype(np.float32)
    call(lib, "axpy", [F32P, F32P, ctypes.c_float, ctypes.c_int], y, x, 1.5, n)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_fuse_matches_numpy(cbuild) -> None:  # noqa: ANN001
    text = run_pass("fuse", {"function": "two"})
    assert text.count("for (") < KERNELS.count("for (")
    lib = cbuild(text)
    x = np.arange(37, dtype=np.float32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    call(lib, "two", [F32P, F32P, F32P, ctypes.c_int], y, z, x, 37)
    np.testing.assert_array_equal(z, x * 2 + 1)


def test_reorder_matches_numpy_and_refuses_carried_dependence(cbuild) -> None:  # noqa: ANN001
    lib = cbuild(run_pass("reorder", {"function": "scale2d", "loop": "i"}))
    a = np.random.default_rng(0).standard_normal((9, 9)).astype(np.float32)
    c = np.zeros_like(a)
    call(lib, "scale2d", [F32P, F32P, ctypes.c_int], c, a, 9)
    np.testing.assert_allclose(c, a * 3, rtol=1e-6)
    with pytest.raises(PassRefused, match="dependence|different index"):
        run_pass("reorder", {"function": "shift2d", "loop": "i"})
    with pytest.raises(PassRefused, match="inner loop"):
        run_pass("reorder", {"function": "mm", "loop": "j"})  # j's body is not a perfect nest


def test_expansion_and_contraction_match_numpy(cbuild) -> None:  # noqa: ANN001
    expanded = run_pass("expansion", {"function": "sq", "var": "t"})
    assert "t_x[" in expanded
    contracted = run_pass("contraction", {"function": "tmp_array", "var": "t"})
    assert "t[" not in contracted.split("tmp_array")[1].split("window")[0]
    lib_e, lib_c = cbuild(expanded), cbuild(contracted)
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    y = np.zeros_like(x)
    call(lib_e, "sq", [F32P, F32P, ctypes.c_int], y, x, 64)
    np.testing.assert_allclose(y, x * x + 1, rtol=1e-6)
    call(lib_c, "tmp_array", [F32P, F32P], y, x)
    np.testing.assert_allclose(y, x, rtol=1e-6)
    with pytest.raises(PassRefused):
        run_pass("contraction", {"function": "sq", "var": "t"})  # t is a scalar, not an array


def test_cache_and_pipeline_match_numpy(cbuild) -> None:  # noqa: ANN001
    cached = run_pass("cache", {"function": "window", "array": "x"})
    assert "xp_cache_x" in cached
    piped = run_pass("pipeline", {"function": "vadd", "distance": 8})
    assert "__builtin_prefetch" in piped
    x = np.random.default_rng(2).standard_normal(100).astype(np.float32)
    y = np.zeros(64, np.float32)
    call(cbuild(cached), "window", [F32P, F32P, ctypes.c_int], y, x, 7)
    np.testing.assert_allclose(y, x[7:71] * 2, rtol=1e-6)
    a, b, out = x[:50].copy(), x[50:].copy(), np.zeros(50, np.float32)
    call(cbuild(piped), "vadd", [F32P, F32P, F32P, ctypes.c_int], out, a, b, 50)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    with pytest.raises(PassRefused, match="written"):
        run_pass("cache", {"function": "axpy", "array": "y"})


def test_tensorization_avx2_matches_numpy(cbuild) -> None:  # noqa: ANN001
    lib = cbuild(run_pass("tensorization", {"function": "dot"}) + "\n")
    lib2 = cbuild(run_pass("tensorization", {"function": "vadd"}))
    rng = np.random.default_rng(3)
    for n in (0, 5, 8, 100):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        got = call(lib, "dot", [F32P, F32P, ctypes.c_int], a, b, n, restype=ctypes.c_float)
        assert abs(got - float(np.dot(a.astype(np.float64), b))) < 1e-4 * max(1, n)
        out = np.zeros(n, np.float32)
        call(lib2, "vadd", [F32P, F32P, F32P, ctypes.c_int], out, a, b, n)
        np.testing.assert_array_equal(out, a + b)
    with pytest.raises(PassRefused):
        run_pass("tensorization", {"function": "mm"})


def test_vnni_output_compiles_with_gcc() -> None:
    from xpiler_core.verify.toolchains import compile_check

    text = "#include <stdint.h>\nint dot8(const int8_t* a, const int8_t* b, int n) {\n  int acc = 0;\n" \
           "  for (int i = 0; i < n; ++i) acc += (int)a[i] * (int)b[i];\n  return acc;\n}\n"
    out = run_pass("tensorization", {"function": "dot8", "target": "avx512vnni"}, text)
    assert "_mm512_dpbusd_epi32" in out
    verdict = compile_check(out, Dialect.C, flags=("-mavx512vnni", "-mavx512bw", "-mavx512f"))
    assert verdict.ok, verdict.stderr


def test_split_refuses_non_unit_stride() -> None:
    text = "void f(float* y, int n) { for (int i = 0; i < n; i += 2) y[i] = 0.0f; }"
    with pytest.raises(PassRefused, match="unit stride"):
        run_pass("split", {"function": "f", "loop": "i"}, text)


def test_fuse_refuses_shifted_dependence() -> None:
    text = ("void f(float* y, float* z, int n) { for (int i = 0; i < n; ++i) y[i] = 1.0f;"
            " for (int j = 0; j < n; ++j) z[j] = y[j + 1]; }")
    with pytest.raises(PassRefused, match="different elements"):
        run_pass("fuse", {"function": "f"}, text)


def test_loop_binding_refuses_carried_scalar() -> None:
    text = "float f(const float* x, int n) { float s = 0.0f; for (int i = 0; i < n; ++i) s += x[i]; return s; }"
    module = lower_text(text, "k.c", Dialect.C)
    mod = get_pass("loop_binding")
    with pytest.raises(PassRefused, match="carried"):
        mod.apply(module, {**mod.INFO.defaults(), "loop": "i"}, PassContext(Dialect.C, Dialect.C))


def test_detensorization_expands_dp4a_exactly(cbuild) -> None:  # noqa: ANN001
    text = "int f(int a, int b, int c) { return __dp4a(a, b, c); }"
    out = run_pass("detensorization", {}, text)
    assert "__dp4a" not in out
    lib = cbuild(out)
    rng = np.random.default_rng(4)
    for _ in range(20):
        a, b, c = (int(v) for v in rng.integers(-2**31, 2**31 - 1, 3))
        ab = np.array([a], np.int32).view(np.int8).astype(np.int64)
        bb = np.array([b], np.int32).view(np.int8).astype(np.int64)
        expected = np.int32(np.int64(c) + int((ab * bb).sum()))
        got = call(lib, "f", [ctypes.c_int] * 3, a, b, c, restype=ctypes.c_int)
        assert got == int(expected)
    assert isinstance(A.lit(1), A.Literal)


def _cpu_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            return flag in fh.read().split()
    except OSError:
        return False


@pytest.mark.skipif(not _cpu_has("avx512_vnni"), reason="this CPU cannot execute AVX-512 VNNI")
def test_vnni_output_runs_and_matches_numpy(cbuild) -> None:  # noqa: ANN001
    text = "#include <stdint.h>\nint dot8(const int8_t* a, const int8_t* b, int n) {\n  int acc = 0;\n" \
           "  for (int i = 0; i < n; ++i) acc += (int)a[i] * (int)b[i];\n  return acc;\n}\n"
    lib = cbuild(run_pass("tensorization", {"function": "dot8", "target": "avx512vnni"}, text))
    i8p = np.ctypeslib.ndpointer(dtype=np.int8, flags="C_CONTIGUOUS")
    rng = np.random.default_rng(5)
    for n in (0, 63, 64, 200, 1000):
        a, b = rng.integers(-128, 128, n, dtype=np.int8), rng.integers(-128, 128, n, dtype=np.int8)
        got = call(lib, "dot8", [i8p, i8p, ctypes.c_int], a, b, n, restype=ctypes.c_int)
        assert got == int(a.astype(np.int64) @ b.astype(np.int64))
