"""The affine-index pass: subscripts that divide block/thread indices but are affine over the launch.

Checked against independent references: the translated reshape-like kernel against numpy (a copy through
TVM's div/mod index arithmetic), the point-by-point evaluator against gcc's own arithmetic on random index
expressions with ``/ % >> &`` (negative operands included), and the kernels it must leave alone (not affine,
no constant launch).
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import loop_recovered
from xpiler_core.dialect import Dialect
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassRefused
from xpiler_core.passes.support.ast_support import parse_expr
from xpiler_core.passes.support.launch_points import evaluate as _evaluate
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

RESHAPE = r"""
__global__ void reshape(const float* __restrict__ a, float* __restrict__ out) {
  out[blockIdx.x * 1024 + threadIdx.x] =
      a[((blockIdx.x * 16 + (threadIdx.x >> 6)) / 5) * 320 + (((blockIdx.x * 32 + (threadIdx.x >> 1)) % 160) / 5) * 10
        + ((blockIdx.x * 4 + threadIdx.x) % 10)];
}
__global__ void transpose(const float* __restrict__ a, float* __restrict__ out) {
  out[blockIdx.x * 64 + threadIdx.x] = a[(threadIdx.x % 8) * 40 + blockIdx.x * 8 + threadIdx.x / 8];
}
extern "C" void run(const float* a, float* out, float* t) {
  reshape<<<40, 1024>>>(a, out);
  transpose<<<5, 64>>>(a, t);
}
"""


def test_reshape_index_becomes_affine_and_copies(cbuild) -> None:  # noqa: ANN001 - fixture
    import ctypes

    text, records, _ctx = translate_to_cpu(RESHAPE, "r.cu", None, {"loop_recovery": {"wrapper": False}},
                                           ["detensorization", "loop_recovery", "affine_index", "loop_binding"])
    assert text is not None
    record = next(r for r in records if r["name"] == "affine_index")
    assert record["changed"], record
    assert "xp_bx * 1024 + xp_tx" in text and "xp_gdx <= 40" in text
    lib = cbuild(text)
    a = np.random.default_rng(0).standard_normal(40960).astype(np.float32)
    out = np.zeros(40960, dtype=np.float32)
    t = np.zeros(320, dtype=np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.run(a.ctypes.data_as(ptr), out.ctypes.data_as(ptr), t.ctypes.data_as(ptr))
    np.testing.assert_array_equal(out, a)  # the reshape is a copy
    expected_t = np.array([a[(x % 8) * 40 + b * 8 + x // 8] for b in range(5) for x in range(64)], dtype=np.float32)
    np.testing.assert_array_equal(t, expected_t)  # the transpose kept its own index


def test_not_affine_is_left_alone() -> None:
    source = RESHAPE.replace("reshape<<<40, 1024>>>(a, out);", "")
    module, ctx = loop_recovered(source)
    with pytest.raises(PassRefused, match="transpose: no division/remainder subscript is affine"):
        get_pass("affine_index").apply(module, {}, ctx)


def test_runtime_launch_is_left_alone() -> None:
    source = RESHAPE.replace("extern \"C\" void run(const float* a, float* out, float* t)",
                             "extern \"C\" void run(const float* a, float* out, float* t, int g)").replace(
        "reshape<<<40, 1024>>>", "reshape<<<g, 1024>>>").replace("transpose<<<5, 64>>>(a, t);", "")
    module, ctx = loop_recovered(source)
    with pytest.raises(PassRefused, match="no single constant launch"):
        get_pass("affine_index").apply(module, {}, ctx)


def test_a_kernel_known_by_its_launch_bounds_is_checked_over_them(cbuild) -> None:  # noqa: ANN001 - fixture
    """A file of device code alone (TVM's): no launch in the module, but ``__launch_bounds__(1024)``. The
    reshape is checked over 1024 threads and 2^20 / 1024 blocks, and the copy runs for launches within that;
    a launch beyond it runs the original index (both compute the source's result)."""
    import ctypes

    kernel = RESHAPE[:RESHAPE.index("__global__ void transpose")].replace(
        "__global__ void reshape", "extern \"C\" __global__ void __launch_bounds__(1024) reshape")
    text, records, _ctx = translate_to_cpu(kernel, "r.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "affine_index")
    assert record["changed"], record
    assert "xp_bx * 1024 + xp_tx" in text and "xp_gdx <= 1024" in text
    lib = cbuild(text + """
extern "C" void run_at(const float* a, float* out, unsigned blocks) {
  reshape(dim3(blocks), dim3(1024), 0, a, out);
}
""")
    ptr = ctypes.POINTER(ctypes.c_float)
    for blocks in (40, 1030):  # within the checked launch, and beyond it
        a = np.random.default_rng(blocks).standard_normal(blocks * 1024).astype(np.float32)
        out = np.zeros_like(a)
        lib.run_at(a.ctypes.data_as(ptr), out.ctypes.data_as(ptr), ctypes.c_uint(blocks))
        np.testing.assert_array_equal(out, a)  # TVM's reshape index is the identity at every block


def _random_expr(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["bx", "tx", str(rng.randint(-9, 40))])
    op = rng.choice(["+", "-", "*", "/", "%", ">>", "&", "<", "=="])
    left = _random_expr(rng, depth - 1)
    if op in ("/", "%"):
        right = str(rng.choice([1, 2, 3, 5, 7, 10, -3, 16]))
    elif op == ">>":
        right = str(rng.randint(0, 5))
    else:
        right = _random_expr(rng, depth - 1)
    return f"({left} {op} {right})"


def test_evaluator_matches_gcc_integer_arithmetic(tmp_path: Path) -> None:
    rng = random.Random(7)
    exprs = [_random_expr(rng, 4) for _ in range(40)]
    bx, tx = np.meshgrid(np.arange(-3, 9), np.arange(-4, 20), indexing="ij")
    env = {"bx": bx.reshape(-1).astype(np.int64), "tx": tx.reshape(-1).astype(np.int64)}
    body = "\n".join(f'  for (int bx = -3; bx < 9; ++bx) for (int tx = -4; tx < 20; ++tx) '
                     f'printf("%d\\n", (int)({e}));' for e in exprs)
    src = tmp_path / "e.c"
    src.write_text(f"#include <stdio.h>\nint main(void) {{\n{body}\n  return 0;\n}}\n")
    exe = tmp_path / "e"
    subprocess.run(["gcc", "-O0", "-fwrapv", str(src), "-o", str(exe)], check=True, capture_output=True, timeout=120)
    printed = np.array(subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                                      timeout=60).stdout.split(), dtype=np.int64).reshape(len(exprs), -1)
    checked = 0
    for k, text in enumerate(exprs):
        values = _evaluate(parse_expr(text.replace("bx", "xp_bx").replace("tx", "xp_tx"), Dialect.CUDA),
                           {"xp_bx": env["bx"], "xp_tx": env["tx"]})
        if values is None:
            continue  # left int range, or a shift of a negative: the pass declines those
        np.testing.assert_array_equal(np.broadcast_to(values, printed[k].shape), printed[k], err_msg=text)
        checked += 1
    assert checked >= 20


def test_evaluator_declines_unsigned_wraparound(tmp_path: Path) -> None:
    """``(unsigned)(tx - 5) / 2`` wraps for tx < 5 in C: the signed model would be wrong there, so it declines;
    where every intermediate is non-negative it agrees with gcc's unsigned arithmetic."""
    tx = np.arange(0, 20, dtype=np.int64)
    wraps = parse_expr("(unsigned int)(xp_tx - 5) / 2u", Dialect.CUDA)
    assert _evaluate(wraps, {"xp_tx": tx}) is None
    safe = parse_expr("(unsigned int)(xp_tx + 5) / 2u", Dialect.CUDA)
    got = _evaluate(safe, {"xp_tx": tx})
    src = tmp_path / "u.c"
    src.write_text('#include <stdio.h>\nint main(void) { for (int t = 0; t < 20; ++t) '
                   'printf("%u\\n", (unsigned int)(t + 5) / 2u); return 0; }\n')
    exe = tmp_path / "u"
    subprocess.run(["gcc", str(src), "-o", str(exe)], check=True, capture_output=True, timeout=120)
    printed = np.array(subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                                      timeout=60).stdout.split(), dtype=np.int64)
    assert got is not None
    np.testing.assert_array_equal(np.broadcast_to(got, printed.shape), printed)
