"""Reductions (per-128-byte blocks, max/min with index) and HWC pooling of the BANG model vs numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

if TYPE_CHECKING:  # fixtures come from conftest.py; the class is only needed for annotations
    from tests.runtime.conftest import BangLib


BLOCK = 32  # float32 elements in 128 bytes

BLOCK_REDUCE = [("__bang_reduce_sum", 0, np.sum), ("__bang_reduce_max", 1, np.max), ("__bang_reduce_min", 2, np.min)]


@pytest.mark.parametrize("name,op,ref", BLOCK_REDUCE, ids=[r[0] for r in BLOCK_REDUCE])
@pytest.mark.parametrize("blocks", [1, 2, 7, 64])
def test_block_reduce_result_at_start_of_each_128_byte_block(bang: BangLib, rng: np.random.Generator, name: str,
                                                             op: int, ref, blocks: int) -> None:
    n = blocks * BLOCK
    x = rng.normal(size=n).astype(np.float32)
    out = bang.ok("t_reduce", op, np.full(n, 5.0, np.float32), x, n, n).arrays[1].reshape(blocks, BLOCK)
    np.testing.assert_allclose(out[:, 0], ref(x.astype(np.float64).reshape(blocks, BLOCK), axis=1), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(out[:, 1:], 0.0)


@pytest.mark.parametrize("name,op", [(r[0], r[1]) for r in BLOCK_REDUCE], ids=[r[0] for r in BLOCK_REDUCE])
def test_block_reduce_rejects_partial_block(bang: BangLib, name: str, op: int) -> None:
    r = bang.call("t_reduce", op, np.zeros(40, np.float32), np.ones(40, np.float32), 40, 40)
    assert r.error is not None and name in r.error and "multiple of 32" in r.error


EXTREME = [("__bang_max", 3, np.argmax), ("__bang_min", 4, np.argmin), ("__bang_argmax", 5, np.argmax),
           ("__bang_argmin", 6, np.argmin)]


@pytest.mark.parametrize("name,op,arg", EXTREME, ids=[e[0] for e in EXTREME])
@pytest.mark.parametrize("n", [1, 3, 64, 1000, 32768])
def test_extreme_value_and_first_index(bang: BangLib, rng: np.random.Generator, name: str, op: int, arg,
                                       n: int) -> None:
    x = rng.normal(size=n).astype(np.float32)
    if n > 10:
        x[n // 2] = x[n // 3] = 9.0 if "max" in name else -9.0  # a tie: the first occurrence wins
    out = bang.ok("t_reduce", op, np.zeros(2, np.float32), x, n, 2).arrays[1]
    index = int(arg(x))  # numpy returns the first occurrence too
    assert out[0] == x[index]
    assert out[1:2].view(np.uint32)[0] == index


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 8192), seed=st.integers(0, 2**16), which=st.sampled_from(EXTREME))
def test_extreme_any_length(bang: BangLib, n: int, seed: int, which) -> None:
    x = np.random.default_rng(seed).normal(size=n).astype(np.float32)
    out = bang.ok("t_reduce", which[1], np.zeros(2, np.float32), x, n, 2).arrays[1]
    index = int(which[2](x))
    assert out[0] == x[index] and out[1:2].view(np.uint32)[0] == index


POOLS = [
    ("__bang_sumpool", 0, lambda w: w.sum(axis=(-2, -1))),
    ("__bang_maxpool", 1, lambda w: w.max(axis=(-2, -1))),
    ("__bang_minpool", 2, lambda w: w.min(axis=(-2, -1))),
    ("__bang_avgpool", 3, lambda w: w.mean(axis=(-2, -1))),
]


def pool_reference(x: np.ndarray, kh: int, kw: int, sw: int, sh: int, reduce) -> np.ndarray:
    """x [H][W][C] -> [OH][OW][C], windows kh x kw, strides (sh, sw), no padding."""
    windows = sliding_window_view(x, (kh, kw), axis=(0, 1))[::sh, ::sw]  # [OH][OW][C][kh][kw]
    return reduce(windows)


@pytest.mark.parametrize("name,op,reduce", POOLS, ids=[p[0] for p in POOLS])
@pytest.mark.parametrize(
    "c,h,w,kh,kw,sw,sh",
    [(1, 1, 128, 1, 128, 1, 1), (32, 1, 9, 1, 9, 1, 1), (16, 5, 5, 2, 2, 1, 1), (8, 7, 11, 3, 2, 2, 3),
     (128, 7, 10, 5, 5, 2, 2), (3, 6, 4, 2, 3, 1, 2)],
)
def test_pool_hwc(bang: BangLib, rng: np.random.Generator, name: str, op: int, reduce, c: int, h: int, w: int,
                  kh: int, kw: int, sw: int, sh: int) -> None:
    x = rng.normal(size=(h, w, c)).astype(np.float32)
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = bang.ok("t_pool", op, np.zeros(oh * ow * c, np.float32), x, c, h, w, kh, kw, sw, sh).arrays[1]
    expected = pool_reference(x.astype(np.float64), kh, kw, sw, sh, reduce)
    np.testing.assert_allclose(out.reshape(oh, ow, c), expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(c=st.integers(1, 16), h=st.integers(1, 12), w=st.integers(1, 12), kh=st.integers(1, 4), kw=st.integers(1, 4),
       sw=st.integers(1, 3), sh=st.integers(1, 3), which=st.sampled_from(POOLS), seed=st.integers(0, 2**16))
def test_pool_any_shape(bang: BangLib, c: int, h: int, w: int, kh: int, kw: int, sw: int, sh: int, which,
                        seed: int) -> None:
    kh, kw = min(kh, h), min(kw, w)
    x = np.random.default_rng(seed).normal(size=(h, w, c)).astype(np.float32)
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = bang.ok("t_pool", which[1], np.zeros(oh * ow * c, np.float32), x, c, h, w, kh, kw, sw, sh).arrays[1]
    expected = pool_reference(x.astype(np.float64), kh, kw, sw, sh, which[2])
    np.testing.assert_allclose(out.reshape(oh, ow, c), expected, rtol=1e-5, atol=1e-5)


def test_pool_stride_order_is_width_then_height(bang: BangLib) -> None:
    """With sw=1, sh=2 the output has every row pair but every column: tells the two strides apart."""
    h, w, c = 4, 4, 1
    x = np.arange(h * w, dtype=np.float32).reshape(h, w, c)
    out = bang.ok("t_pool", 0, np.zeros(2 * 4, np.float32), x, c, h, w, 1, 1, 1, 2).arrays[1]
    np.testing.assert_array_equal(out.reshape(2, 4), x[::2, :, 0])


def test_pool_window_larger_than_tile_is_reported(bang: BangLib) -> None:
    r = bang.call("t_pool", 0, np.zeros(4, np.float32), np.ones(4, np.float32), 1, 2, 2, 3, 1, 1, 1)
    assert r.error is not None and "__bang_sumpool" in r.error and "window" in r.error


@pytest.mark.parametrize("n", [1, 64, 1000])
def test_count_nonzero(bang: BangLib, rng: np.random.Generator, n: int) -> None:
    x = rng.normal(size=n).astype(np.float32)
    x[rng.random(n) < 0.4] = 0.0
    out = bang.ok("t_reduce", 7, np.zeros(2, np.float32), x, n, 2).arrays[1]
    assert out[0] == np.count_nonzero(x)
