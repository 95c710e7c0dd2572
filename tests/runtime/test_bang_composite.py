"""Whole kernels composed from several intrinsics, over several tasks, against numpy: the patterns a
CUDA -> BANG translation produces (row softmax, cluster reduction through SRAM, tiled matmul with the
filter layout built by strided copies)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if TYPE_CHECKING:  # fixtures come from conftest.py; the class is only needed for annotations
    from tests.runtime.conftest import BangLib

SOURCE = r"""
#include <bang.h>

// Softmax of each row of [rows][cols] (cols a multiple of 32, at most 4096); rows spread over tasks.
__mlu_global__ void softmax_rows(float* out, const float* in, int rows, int cols) {
  __nram__ float x[4096];
  __nram__ float part[4096];
  __nram__ float tmp[64];
  for (int r = taskId; r < rows; r += taskDim) {
    __memcpy(x, in + r * cols, cols * sizeof(float), GDRAM2NRAM);
    __bang_argmax(tmp, x, cols);
    __bang_sub_scalar(x, x, tmp[0], cols);
    __bang_active_exp(x, x, cols);
    __bang_sumpool(part, x, 32, 1, cols / 32, 1, cols / 32, 1, 1);
    __bang_reduce_sum(tmp, part, 32);
    __bang_mul_scalar(x, x, 1.0f / tmp[0], cols);
    __memcpy(out + r * cols, x, cols * sizeof(float), NRAM2GDRAM);
  }
}

// Sum of n floats per cluster: each core sums its quarter, the partial sums meet in SRAM.
__mlu_global__ void cluster_sum(float* out, const float* in, int n) {
  __nram__ float x[8192];
  __nram__ float acc[64];
  __mlu_shared__ float partial[4];
  int quarter = n / 4;
  const float* base = in + clusterId * n + coreId * quarter;
  __memcpy(x, base, quarter * sizeof(float), GDRAM2NRAM);
  float s = 0.0f;
  for (int i = 0; i < quarter; ++i) s += x[i];
  acc[0] = s;
  __memcpy(partial + coreId, acc, sizeof(float), NRAM2SRAM);
  __sync_cluster();
  if (coreId == 0) {
    __memcpy(acc, partial, 4 * sizeof(float), SRAM2NRAM);
    acc[0] = acc[0] + acc[1] + acc[2] + acc[3];
    __memcpy(out + clusterId, acc, sizeof(float), NRAM2GDRAM);
  }
}

// C[M][N] = A[M][K] * B[K][N]: each task takes a block of rows; B's columns are gathered into the
// WRAM filter layout ([N][K]) by strided copies (K segments of one element, source stride one row).
__mlu_global__ void gemm(float* c, const float* a, const float* b, int m, int k, int n) {
  __nram__ float a_tile[8192];
  __nram__ float c_tile[8192];
  __wram__ float b_filter[16384];
  for (int col = 0; col < n; ++col)
    __memcpy(b_filter + col * k, b + col, sizeof(float), GDRAM2WRAM, sizeof(float), n * sizeof(float), k - 1);
  int rows = (m + taskDim - 1) / taskDim;
  int first = taskId * rows;
  if (first >= m) return;
  if (first + rows > m) rows = m - first;
  __memcpy(a_tile, a + first * k, rows * k * sizeof(float), GDRAM2NRAM);
  __bang_matmul(c_tile, a_tile, b_filter, rows, k, n);
  __memcpy(c + first * n, c_tile, rows * n * sizeof(float), NRAM2GDRAM);
}

extern "C" int run_softmax(float* out, const float* in, int rows, int cols, int tasks) {
  cnrtQueue_t q;
  cnrtQueueCreate(&q);
  cnrtDim3_t dim = {static_cast<unsigned>(tasks), 1, 1};
  softmax_rows<<<dim, CNRT_FUNC_TYPE_UNION1, q>>>(out, in, rows, cols);
  return static_cast<int>(cnrtQueueSync(q));
}
extern "C" int run_cluster_sum(float* out, const float* in, int n, int clusters) {
  cnrtDim3_t dim = {static_cast<unsigned>(4 * clusters), 1, 1};
  cluster_sum<<<dim, CNRT_FUNC_TYPE_UNION1, nullptr>>>(out, in, n);
  return static_cast<int>(cnrtSyncDevice());
}
extern "C" int run_gemm(float* c, const float* a, const float* b, int m, int k, int n, int tasks) {
  cnrtDim3_t dim = {static_cast<unsigned>(tasks), 1, 1};
  gemm<<<dim, CNRT_FUNC_TYPE_BLOCK, nullptr>>>(c, a, b, m, k, n);
  return static_cast<int>(cnrtSyncDevice());
}
"""


@pytest.fixture(scope="module")
def composite(build_lib: Callable[[str, str], BangLib]) -> BangLib:
    return build_lib(SOURCE, "tests/bang/composite.mlu")  # a stable display name keeps the build cache warm


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 24), blocks=st.integers(1, 32), tasks=st.sampled_from([4, 8, 16]),
       seed=st.integers(0, 2**16))
def test_row_softmax(composite: BangLib, rows: int, blocks: int, tasks: int, seed: int) -> None:
    cols = 32 * blocks
    x = (np.random.default_rng(seed).normal(size=(rows, cols)) * 4).astype(np.float32)
    out = composite.ok("run_softmax", np.zeros(rows * cols, np.float32), x, rows, cols, tasks).arrays[0]
    np.testing.assert_allclose(out.reshape(rows, cols), softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("clusters,n", [(1, 4), (2, 64), (4, 8192)])
def test_cluster_sum_through_sram(composite: BangLib, rng: np.random.Generator, clusters: int, n: int) -> None:
    x = rng.normal(size=clusters * n).astype(np.float32)
    out = composite.ok("run_cluster_sum", np.zeros(clusters, np.float32), x, n, clusters).arrays[0]
    np.testing.assert_allclose(out, x.reshape(clusters, n).astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 64), n=st.integers(1, 64), tasks=st.integers(1, 8),
       seed=st.integers(0, 2**16))
def test_tiled_gemm_with_strided_filter_gather(composite: BangLib, m: int, k: int, n: int, tasks: int,
                                                seed: int) -> None:
    r = np.random.default_rng(seed)
    a = r.normal(size=(m, k)).astype(np.float32)
    b = r.normal(size=(k, n)).astype(np.float32)
    out = composite.ok("run_gemm", np.zeros(m * n, np.float32), a, b, m, k, n, tasks).arrays[0]
    np.testing.assert_allclose(out.reshape(m, n), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)



def test_union1_launch_with_six_tasks_is_refused(composite: BangLib) -> None:
    r = composite.call("run_softmax", np.zeros(32, np.float32), np.ones(32, np.float32), 1, 32, 6)
    assert r.error is not None and "softmax_rows" in r.error and "multiple of 4" in r.error


HELPER_SOURCE = r"""
// A helper with its own NRAM scratch, called by two kernels; its buffer must be per core and survive
// a barrier, and sit next to inline helpers' statics without section conflicts.
__mlu_func__ float* scratch() {
  __nram__ float keep[64];
  return keep;
}
__mlu_global__ void remember(float* out) {
  __nram__ float mine[64];
  float* s = scratch();
  __bang_write_value(s, 64, static_cast<float>(taskId));
  __sync_cluster();
  __bang_add_scalar(mine, s, 100.0f, 64);
  __memcpy(out + taskId * 64, mine, 64 * sizeof(float), NRAM2GDRAM);
}
__mlu_global__ void other(float* out) {
  __nram__ float big[4096];
  __bang_write_value(big, 4096, 1.0f);
  __memcpy(out, scratch(), 4, NRAM2GDRAM);
}
extern "C" int run_remember(float* out, int tasks) {
  cnrtDim3_t dim = {static_cast<unsigned>(tasks), 1, 1};
  remember<<<dim, CNRT_FUNC_TYPE_UNION1, nullptr>>>(out);
  return static_cast<int>(cnrtSyncDevice());
}
"""


@pytest.mark.parametrize("tasks", [4, 16])
def test_helper_owned_nram_is_per_core(build_lib: Callable[[str, str], BangLib], tasks: int) -> None:
    lib = build_lib(HELPER_SOURCE, "tests/bang/helper.mlu")
    out = lib.ok("run_remember", np.zeros(tasks * 64, np.float32), tasks).arrays[0].reshape(tasks, 64)
    np.testing.assert_array_equal(out, np.arange(tasks, dtype=np.float32)[:, None] + 100.0 + np.zeros((1, 64)))


def test_onchip_array_in_template_kernel_is_a_build_error() -> None:
    from xpiler_core.runtime.bang.build import build_bang

    source = "template <typename T>\n__mlu_global__ void k(T* out) {\n  __nram__ T tile[64];\n  out[0] = tile[0];\n}\n" \
             "extern \"C\" int run(float* o) { cnrtDim3_t d = {1, 1, 1}; k<float><<<d, CNRT_FUNC_TYPE_BLOCK, nullptr>>>(o); return 0; }\n"
    build = build_bang(source, path="tmpl.mlu")
    assert not build.ok
    (diag,) = [d for d in build.diagnostics if d.code == "bang-onchip-template"]
    assert diag.span.start_line == 2 and "'tile' is declared __nram__ inside 'k<float>'" in diag.message
