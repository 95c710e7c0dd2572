"""__bang_matmul / __bang_mlp (filter layout in WRAM), __bang_conv (NHWC) and __bang_transpose vs numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

if TYPE_CHECKING:  # fixtures come from conftest.py; the class is only needed for annotations
    from tests.runtime.conftest import BangLib



def _matmul(bang: BangLib, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    wram_b = np.ascontiguousarray(b.T)  # filter layout: element (k, n) at n*K + k
    return bang.ok("t_matmul", np.zeros(m * n, np.float32), a, wram_b, m, k, n).arrays[0].reshape(m, n)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (8, 128, 128), (3, 5, 7), (16, 64, 64), (33, 17, 65)])
def test_matmul_filter_layout(bang: BangLib, rng: np.random.Generator, m: int, k: int, n: int) -> None:
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    np.testing.assert_allclose(_matmul(bang, a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(m=st.integers(1, 24), k=st.integers(1, 48), n=st.integers(1, 48), seed=st.integers(0, 2**16))
def test_matmul_any_shape(bang: BangLib, m: int, k: int, n: int, seed: int) -> None:
    r = np.random.default_rng(seed)
    a = r.normal(size=(m, k)).astype(np.float32)
    b = r.normal(size=(k, n)).astype(np.float32)
    np.testing.assert_allclose(_matmul(bang, a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,k,n", [(4, 32, 16), (2, 3, 5)])
def test_matmul_row_major_b_via_transpose_and_reshape_filter(bang: BangLib, rng: np.random.Generator, m: int,
                                                             k: int, n: int) -> None:
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    out = bang.ok("t_matmul_rowmajor_b", np.zeros(m * n, np.float32), a, b, m, k, n).arrays[0].reshape(m, n)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("height,width", [(1, 1), (128, 128), (10, 37)])
def test_mlp_is_filter_times_vector(bang: BangLib, rng: np.random.Generator, height: int, width: int) -> None:
    v = rng.normal(size=width).astype(np.float32)
    f = rng.normal(size=(height, width)).astype(np.float32)
    out = bang.ok("t_mlp", np.zeros(height, np.float32), v, f, height, width).arrays[0]
    np.testing.assert_allclose(out, f.astype(np.float64) @ v, rtol=1e-5, atol=1e-5)


def conv_reference(x: np.ndarray, kernel: np.ndarray, sw: int, sh: int) -> np.ndarray:
    """x [H][W][Ci], kernel [Co][Kh][Kw][Ci] -> [OH][OW][Co]."""
    kh, kw = kernel.shape[1], kernel.shape[2]
    windows = sliding_window_view(x, (kh, kw), axis=(0, 1))[::sh, ::sw]  # [OH][OW][Ci][Kh][Kw]
    return np.einsum("yxcij,oijc->yxo", windows, kernel)


@pytest.mark.parametrize(
    "ci,h,w,kh,kw,sw,sh,co",
    [(64, 8, 8, 2, 2, 2, 2, 64), (3, 5, 5, 3, 3, 1, 1, 4), (2, 6, 7, 2, 3, 2, 1, 5), (8, 4, 4, 1, 1, 1, 1, 8)],
)
def test_conv_nhwc(bang: BangLib, rng: np.random.Generator, ci: int, h: int, w: int, kh: int, kw: int, sw: int,
                   sh: int, co: int) -> None:
    x = rng.normal(size=(h, w, ci)).astype(np.float32)
    kernel = rng.normal(size=(co, kh, kw, ci)).astype(np.float32)
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = bang.ok("t_conv", np.zeros(oh * ow * co, np.float32), x, kernel, ci, h, w, kh, kw, sw, sh, co).arrays[0]
    expected = conv_reference(x.astype(np.float64), kernel.astype(np.float64), sw, sh)
    np.testing.assert_allclose(out.reshape(oh, ow, co), expected, rtol=1e-4, atol=1e-4)


@settings(max_examples=20, deadline=None)
@given(ci=st.integers(1, 6), h=st.integers(1, 8), w=st.integers(1, 8), kh=st.integers(1, 3), kw=st.integers(1, 3),
       sw=st.integers(1, 3), sh=st.integers(1, 3), co=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_conv_any_shape(bang: BangLib, ci: int, h: int, w: int, kh: int, kw: int, sw: int, sh: int, co: int,
                        seed: int) -> None:
    kh, kw = min(kh, h), min(kw, w)
    r = np.random.default_rng(seed)
    x = r.normal(size=(h, w, ci)).astype(np.float32)
    kernel = r.normal(size=(co, kh, kw, ci)).astype(np.float32)
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = bang.ok("t_conv", np.zeros(oh * ow * co, np.float32), x, kernel, ci, h, w, kh, kw, sw, sh, co).arrays[0]
    expected = conv_reference(x.astype(np.float64), kernel.astype(np.float64), sw, sh)
    np.testing.assert_allclose(out.reshape(oh, ow, co), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("h,w", [(1, 1), (16, 16), (3, 70), (128, 2)])
def test_transpose(bang: BangLib, rng: np.random.Generator, h: int, w: int) -> None:
    x = rng.normal(size=(h, w)).astype(np.float32)
    out = bang.ok("t_transpose", np.zeros(h * w, np.float32), x, h, w).arrays[0]
    np.testing.assert_array_equal(out.reshape(w, h), x.T)


@settings(max_examples=20, deadline=None)
@given(h=st.integers(1, 100), w=st.integers(1, 100), seed=st.integers(0, 2**16))
def test_transpose_any_shape(bang: BangLib, h: int, w: int, seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=(h, w)).astype(np.float32)
    out = bang.ok("t_transpose", np.zeros(h * w, np.float32), x, h, w).arrays[0]
    np.testing.assert_array_equal(out.reshape(w, h), x.T)
