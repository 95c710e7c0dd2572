"""x86 SIMD intrinsics as portable code (``x86_simd``, C → CUDA): the rewritten C++ (built here with g++, the
device qualifiers empty) computes what Intel's Intrinsics Guide says the instructions compute, checked against
numpy on random bytes and on the saturation edges; an intrinsic the table lacks is refused by name; the
C → CUDA plan's output compiles with nvcc."""

from __future__ import annotations

import ctypes
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import build_c
from xpiler_core.dialect import Dialect
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused, SourceUnit
from xpiler_core.plans.c_to_cuda import translate_to_cuda
from xpiler_core.verify.toolchains import compile_check

SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>
extern "C" void dots(const uint8_t* a8, const int8_t* b8, const int16_t* a16, const int16_t* b16,
                     const int32_t* src, int32_t* out) {
  __m512i s = _mm512_loadu_si512((const __m512i*)src);
  __m512i a = _mm512_loadu_si512((const __m512i*)a8);
  __m512i b = _mm512_loadu_si512((const __m512i*)b8);
  _mm512_storeu_si512((__m512i*)out, _mm512_dpbusd_epi32(s, a, b));
  __m128i s4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  __m128i a4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a8));
  __m128i b4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b8));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm_dpbusds_epi32(s4, a4, b4));
  __m512i w = _mm512_loadu_si512(a16), v = _mm512_loadu_si512(b16);
  _mm512_store_si512((__m512i*)(out + 20), _mm512_dpwssds_epi32(s, w, v));
  __m512i z = _mm512_setzero_si512();
  _mm512_storeu_si512(out + 36, _mm512_dpwssd_epi32(z, w, v));
}
"""


def _rewritten(text: str) -> str:
    simd = get_pass("x86_simd")
    ctx = PassContext(source_dialect=Dialect.C, target=Dialect.CUDA, file="k.cpp")
    out = simd.apply(SourceUnit(text, Dialect.C, "k.cpp"), simd.INFO.defaults(), ctx)
    assert isinstance(out, SourceUnit)
    return out.text


@pytest.fixture(scope="module")
def dots(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text = _rewritten(SOURCE)
    assert "_mm512_dpbusd_epi32(" not in text.replace("xp_mm512", "") and "immintrin" not in text
    host = "#define __host__\n#define __device__\n" + text
    return build_c(host, tmp_path_factory.mktemp("x86"), True)


def _reference(a8: np.ndarray, b8: np.ndarray, a16: np.ndarray, b16: np.ndarray, src: np.ndarray) -> np.ndarray:
    s = src.astype(np.int64)
    busd = s + (a8.astype(np.int64) * b8.astype(np.int64)).reshape(16, 4).sum(axis=1)
    wrap = ((busd + 2**31) % 2**32 - 2**31).astype(np.int64)
    busds = np.clip(busd[:4], -(2**31), 2**31 - 1)
    wssd = s + (a16.astype(np.int64) * b16.astype(np.int64)).reshape(16, 2).sum(axis=1)
    wssds = np.clip(wssd, -(2**31), 2**31 - 1)
    plain = (a16.astype(np.int64) * b16.astype(np.int64)).reshape(16, 2).sum(axis=1)
    plain = (plain + 2**31) % 2**32 - 2**31
    return np.concatenate([wrap, busds, wssds, plain]).astype(np.int32)


def _run(lib: ctypes.CDLL, a8: np.ndarray, b8: np.ndarray, a16: np.ndarray, b16: np.ndarray,
         src: np.ndarray) -> np.ndarray:
    out = np.zeros(52, np.int32)
    lib.dots(*(ctypes.c_void_p(x.ctypes.data) for x in (a8, b8, a16, b16, src, out)))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_dot_products_follow_the_intrinsics_guide(dots: ctypes.CDLL, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a8 = rng.integers(0, 256, 64).astype(np.uint8)
    b8 = rng.integers(-128, 128, 64).astype(np.int8)
    a16 = rng.integers(-(2**15), 2**15, 32).astype(np.int16)
    b16 = rng.integers(-(2**15), 2**15, 32).astype(np.int16)
    src = rng.integers(-(2**31), 2**31, 16, dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(_run(dots, a8, b8, a16, b16, src), _reference(a8, b8, a16, b16, src))


def test_saturation_and_wrapping_edges(dots: ctypes.CDLL) -> None:
    a8, b8 = np.full(64, 255, np.uint8), np.full(64, 127, np.int8)
    a16, b16 = np.full(32, -(2**15), np.int16), np.full(32, -(2**15), np.int16)
    src = np.full(16, 2**31 - 10, np.int32)  # every sum overflows: wraps (dpbusd) or saturates (…s)
    got = _run(dots, a8, b8, a16, b16, src)
    np.testing.assert_array_equal(got, _reference(a8, b8, a16, b16, src))
    assert got[16] == 2**31 - 1 and got[20] == 2**31 - 1 and got[0] < 0


def test_an_intrinsic_without_a_device_form_is_refused_by_name() -> None:
    text = "#include <immintrin.h>\nvoid f(float* p) { __m512 v = _mm512_loadu_ps(p); _mm512_storeu_ps(p, v); }\n"
    with pytest.raises(PassRefused, match="_mm512_loadu_ps"):
        _rewritten(text)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is the toolchain this check needs")
def test_translated_vnni_kernel_compiles_with_nvcc() -> None:
    text = r"""
#include <immintrin.h>
#include <stdint.h>
extern "C" void rows_dot(const uint8_t* a, const int8_t* x, int32_t* y, int rows) {
  for (int r = 0; r < rows; ++r) {
    __m128i acc = _mm_setzero_si128();
    for (int s = 0; s < 4; ++s)
      acc = _mm_dpbusds_epi32(acc, _mm_loadu_si128((const __m128i*)(a + r * 64 + s * 16)),
                              _mm_loadu_si128((const __m128i*)(x + s * 16)));
    int32_t lanes[4];
    _mm_storeu_si128((__m128i*)lanes, acc);
    y[r] = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  }
}
"""
    out, ctx = translate_to_cuda(text, "k.cpp")
    assert out is not None, ctx.unresolved
    verdict = compile_check(out, Dialect.CUDA)
    assert verdict.ok, verdict
