"""__memcpy in every direction (plain and strided), __memcpy_async + __sync_io, NRAM stack locals,
and the model's refusal of vector intrinsics on the wrong memory space."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if TYPE_CHECKING:  # fixtures come from conftest.py; the class is only needed for annotations
    from tests.runtime.conftest import BangLib


DIRECTIONS_IN_CHAIN = ["GDRAM2SRAM", "SRAM2SRAM", "SRAM2NRAM", "NRAM2WRAM", "WRAM2NRAM", "NRAM2LDRAM", "LDRAM2NRAM",
                       "NRAM2NRAM", "NRAM2SRAM", "SRAM2GDRAM", "GDRAM2WRAM", "WRAM2GDRAM", "GDRAM2GDRAM"]


@pytest.mark.parametrize("n", [1, 3, 64, 32768])
def test_memcpy_every_direction_round_trips(bang: BangLib, rng: np.random.Generator, n: int) -> None:
    """A chain through all of DIRECTIONS_IN_CHAIN returns the input bit for bit."""
    src = rng.normal(size=n).astype(np.float32)
    res = bang.ok("t_memcpy_chain", np.zeros(3 * n, np.float32), np.zeros(n, np.float32), src, n)
    out = res.arrays[0].reshape(3, n)
    for row in out:
        np.testing.assert_array_equal(row, src)


def strided_reference(src: np.ndarray, size: int, dst_stride: int, src_stride: int, segnum: int,
                      out_stride: int, out_bytes: int) -> np.ndarray:
    """segnum + 1 segments of `size` bytes: gather with src_stride into dst_stride, then scatter with
    out_stride; bytes never written stay zero."""
    raw = src.view(np.uint8)
    staged = np.zeros(dst_stride * segnum + size, np.uint8)
    for i in range(segnum + 1):
        staged[i * dst_stride : i * dst_stride + size] = raw[i * src_stride : i * src_stride + size]
    out = np.zeros(out_bytes, np.uint8)
    for i in range(segnum + 1):
        out[i * out_stride : i * out_stride + size] = staged[i * dst_stride : i * dst_stride + size]
    return out


def _run_strided(bang: BangLib, src: np.ndarray, size: int, dst_stride: int, src_stride: int, segnum: int,
                 out_stride: int) -> tuple[np.ndarray, np.ndarray]:
    out_bytes = out_stride * segnum + size
    out = np.zeros((out_bytes + 3) // 4, np.float32)
    res = bang.ok("t_memcpy_strided", out, src, size, dst_stride, src_stride, segnum, out_stride)
    got = res.arrays[0].view(np.uint8)[:out_bytes]
    return got, strided_reference(src, size, dst_stride, src_stride, segnum, out_stride, out_bytes)


@pytest.mark.parametrize(
    "size,dst_stride,src_stride,segnum,out_stride",
    [(28160, 28160, 28672, 6, 28160),  # rows of a 55x128 float tile out of a 56-wide image (7 rows)
     (16, 16, 64, 3, 32), (4, 8, 4, 9, 4), (100, 128, 100, 0, 100), (12, 12, 0, 4, 12)],
)
def test_memcpy_strided_copies_segnum_plus_one_segments(bang: BangLib, rng: np.random.Generator, size: int,
                                                        dst_stride: int, src_stride: int, segnum: int,
                                                        out_stride: int) -> None:
    src_bytes = src_stride * segnum + size
    src = rng.normal(size=(src_bytes + 3) // 4 + 1).astype(np.float32)
    got, expected = _run_strided(bang, src, size, dst_stride, src_stride, segnum, out_stride)
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 256), gap_dst=st.integers(0, 64), src_stride=st.integers(0, 512),
       segnum=st.integers(0, 20), gap_out=st.integers(0, 64), seed=st.integers(0, 2**16))
def test_memcpy_strided_any_geometry(bang: BangLib, size: int, gap_dst: int, src_stride: int, segnum: int,
                                     gap_out: int, seed: int) -> None:
    src_bytes = src_stride * segnum + size
    src = np.random.default_rng(seed).normal(size=(src_bytes + 3) // 4 + 1).astype(np.float32)
    got, expected = _run_strided(bang, src, size, size + gap_dst, src_stride, segnum, size + gap_out)
    np.testing.assert_array_equal(got, expected)


def test_memcpy_strided_rejects_overlapping_destination_segments(bang: BangLib) -> None:
    r = bang.call("t_memcpy_strided", np.zeros(64, np.float32), np.zeros(64, np.float32), 16, 8, 16, 2, 16)
    assert r.error is not None and "__memcpy(GDRAM2NRAM)" in r.error and "dst_stride" in r.error


SYNCS = ["__sync_io", "__sync_compute", "__sync", "__sync_cluster", "__sync_all", "__sync_io_move_compute"]


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("n", [1, 100, 4096])
def test_memcpy_async_completes_at_sync(bang: BangLib, rng: np.random.Generator, sync: str, n: int) -> None:
    src = rng.normal(size=n).astype(np.float32)
    synced = bang.ok("t_async", np.zeros(n, np.float32), src, n, SYNCS.index(sync) + 1).arrays[0]
    np.testing.assert_array_equal(synced, src)
    # Without a sync, reading the tile races with the copy: reported, naming the copy's line.
    unsynced = bang.call("t_async", np.zeros(n, np.float32), src, n, 0)
    assert unsynced.error is not None
    assert "__memcpy(NRAM2GDRAM): src overlaps the destination of a __memcpy_async issued at" in unsynced.error


@pytest.mark.parametrize(
    "which,message",
    [(0, "__bang_mul_scalar: src overlaps the destination of a __memcpy_async"),
     (1, "__bang_write_zero: dst overlaps the destination of a __memcpy_async"),
     (2, "__bang_write_zero: dst overwrites the source of a __memcpy_async")],
)
def test_pipeline_races_are_reported(bang: BangLib, which: int, message: str) -> None:
    r = bang.call("t_pipeline_race", np.zeros(64, np.float32), np.ones(128, np.float32), 64, which)
    assert r.error is not None and message in r.error and "has not completed" in r.error


@pytest.mark.parametrize("tiles,tile_n", [(1, 64), (5, 256), (16, 4096)])
def test_double_buffered_pipeline(bang: BangLib, rng: np.random.Generator, tiles: int, tile_n: int) -> None:
    src = rng.normal(size=tiles * tile_n).astype(np.float32)
    out = bang.ok("t_pipeline", np.zeros(tiles * tile_n, np.float32), src, tiles, tile_n).arrays[0]
    np.testing.assert_array_equal(out, src * 2)


def test_unqualified_locals_are_nram(bang: BangLib, rng: np.random.Generator) -> None:
    src = rng.normal(size=200).astype(np.float32)
    out = bang.ok("t_stack_local", np.zeros(200, np.float32), src, 200).arrays[0]
    np.testing.assert_allclose(out, src.astype(np.float64) * 3, rtol=1e-6)


MISUSE = [
    (0, "__bang_add", "src1 points to GDRAM"),
    (1, "__bang_active_relu", "src points to GDRAM"),
    (2, "__bang_sumpool", "dst points to GDRAM"),
    (3, "__bang_matmul", "src0 points to GDRAM"),
    (4, "__bang_matmul", "src1 is in NRAM, expected WRAM"),
    (5, "__bang_transpose", "src points to GDRAM"),
    (6, "__bang_reduce_sum", "src points to GDRAM"),
    (7, "__memcpy(NRAM2GDRAM)", "dst is in NRAM, expected GDRAM"),
    (8, "__bang_mul_scalar", "dst points to GDRAM"),
    (9, "__bang_write_zero", "dst points to GDRAM"),
    (10, "__bang_conv", "kernel is in NRAM, expected WRAM"),
    (11, "__bang_add", "src1 is in WRAM, expected NRAM"),
    (12, "__bang_max", "src points to GDRAM"),
    (13, "__bang_cycle_add", "seg points to GDRAM"),
    (14, "__memcpy(GDRAM2NRAM)", "dst runs past the end of NRAM buffer 'x in k_misuse' (4096 bytes) by 4 bytes"),
    (15, "__bang_add", "dst runs past the end of NRAM buffer 'y in k_misuse' (4096 bytes) by 160 bytes"),
]


@pytest.mark.parametrize("which,intrinsic,reason", MISUSE, ids=[f"{m[1]}-{m[0]}" for m in MISUSE])
def test_wrong_memory_space_is_reported(bang: BangLib, which: int, intrinsic: str, reason: str) -> None:
    gdram = np.zeros(1100, np.float32)
    r = bang.call("t_misuse", which, gdram, 64)
    assert r.error is not None, "the model accepted an operand in the wrong memory space"
    assert f"{intrinsic}: {reason}" in r.error
    assert "bang_kernels.mlu:" in r.error  # names the user's source line
    assert r.returned != 0  # cnrtQueueSync reports the failed kernel


def test_error_names_the_calling_line(bang: BangLib) -> None:
    r = bang.call("t_misuse", 0, np.zeros(1024, np.float32), 64)
    assert r.error is not None
    text = (Path(__file__).parent / "bang_kernels.mlu").read_text(encoding="utf-8").splitlines()
    line = int(r.error.split("bang_kernels.mlu:")[1].split(":")[0])
    assert "case 0: __bang_add(x, x, gdram, n)" in text[line - 1]


@pytest.mark.parametrize("n", [5, 31, 33, 100])
def test_strict_generation_rejects_unaligned_counts(bang_strict: BangLib, n: int) -> None:
    r = bang_strict.call("t_align", np.zeros(n, np.float32), np.ones(n, np.float32), n)
    assert r.error is not None and "__bang_active_relu" in r.error and "multiple of 128 bytes" in r.error


@pytest.mark.parametrize("n", [32, 64, 1024])
def test_strict_generation_accepts_aligned_counts(bang_strict: BangLib, rng: np.random.Generator, n: int) -> None:
    x = rng.normal(size=n).astype(np.float32)
    out = bang_strict.ok("t_align", np.zeros(n, np.float32), x, n).arrays[0]
    np.testing.assert_array_equal(out, np.maximum(x, 0))


@pytest.mark.parametrize("n", [5, 31, 33, 100])
def test_relaxed_generation_accepts_any_count(bang: BangLib, rng: np.random.Generator, n: int) -> None:
    x = rng.normal(size=n).astype(np.float32)
    out = bang.ok("t_align", np.zeros(n, np.float32), x, n).arrays[0]
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_strict_generation_checks_pool_channels(bang_strict: BangLib) -> None:
    r = bang_strict.call("t_pool", 0, np.zeros(128, np.float32), np.ones(128, np.float32), 1, 1, 128, 1, 128, 1, 1)
    assert r.error is not None and "__bang_sumpool" in r.error and "multiple of 64" in r.error


def test_abort_on_error_mode_exits_with_status_86(bang: BangLib) -> None:
    """With XPILER_BANG_ABORT_ON_ERROR=1 a model error ends the process (for one-call sandboxes)."""
    from xpiler_core.runtime.bang.run import BangWorker

    with BangWorker(env={"XPILER_BANG_ABORT_ON_ERROR": "1"}) as worker:
        r = worker.call(bang.path, "t_misuse", [("int", 0), np.zeros(1100, np.float32), ("int", 64)])
    assert r.error == "the worker exited with status 86 in t_misuse"


def test_uninitialised_nram_reads_as_poison_unless_switched_off(bang: BangLib) -> None:
    from xpiler_core.runtime.bang.run import BangWorker

    poisoned = bang.ok("t_uninit", np.zeros(64, np.float32), 64).arrays[0]
    assert np.all(poisoned.view(np.uint32) == 0xFFFFFFFF)  # NaN pattern
    with BangWorker(env={"XPILER_BANG_POISON": "0"}) as worker:  # fresh process: the section is still zero
        r = worker.call(bang.path, "t_uninit", [np.ones(64, np.float32), ("int", 64)])
    assert r.error is None and np.all(r.arrays[0] == 0.0)
