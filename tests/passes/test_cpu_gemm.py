"""CPU GEMM tensorization (``cpu_gemm``): threads that compute a matrix product become the packed micro-kernel.

Hand-written kernels in several spellings (early-exit guard, a batched product through a device helper and
pointer offsets, a transposed right operand with a scaled ReLU epilogue, two products sharing the left operand
with a SiLU gate) are translated by the CPU plan, built with g++ and run on ragged shapes (no size a multiple of
the 6 x 16 register tile or of a cache block) against numpy in float64. Kernels the recognizer must not take
(shared-memory staging with a tile stride that is not the tile, an output also read) are refused and still computed right by the
scalar plan.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.conftest import build_shared, loop_recovered
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu, translate_unit

KERNELS = r"""
__global__ void gemm_nn(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
  C[row * N + col] = sum;
}

__device__ float dot(const float* a, const float* b, int K, int ldb) {
  float s = 0.0f;
  for (int k = 0; k < K; k++) s += a[k] * b[(size_t)k * ldb];
  return s;
}

__global__ void bmm(const float* A, const float* B, float* C, int M, int N, int K) {
  const int b = blockIdx.z;
  const int i = blockIdx.y * 8 + threadIdx.y, j = blockIdx.x * 32 + threadIdx.x;
  if (i < M && j < N) {
    const float* a = A + (size_t)b * M * K + (size_t)i * K;
    const float* bb = B + (size_t)b * K * N + j;
    C[(size_t)b * M * N + (size_t)i * N + j] = dot(a, bb, K, N);
  }
}

__global__ void linear_relu(const float* X, const float* W, float* Y, float alpha, int M, int N, int K) {
  int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m < M && n < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += X[m * K + k] * W[n * K + k];
    Y[m * N + n] = fmaxf(alpha * acc, 0.0f);
  }
}

__global__ void gated(const float* X, const float* Wg, const float* Wu, float* H, int M, int N, int K) {
  int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float g = 0.0f, u = 0.0f;
  for (int k = 0; k < K; ++k) {
    float x = X[m * K + k];
    g += x * Wg[k * N + n];
    u += x * Wu[k * N + n];
  }
  H[m * N + n] = g / (1.0f + expf(-g)) * u;
}

#define TILE 16
// shared-memory tiles with zero padding at the edges: the staged tiles are forwarded to the sum
__global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// no padding: the source assumes K is a multiple of the tile (the fast path checks it at run time)
__global__ void gemm_tiled_exact(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float sa[TILE][TILE], sb[TILE][TILE];
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < K / TILE; ++t) {
    sa[threadIdx.y][threadIdx.x] = A[row * K + t * TILE + threadIdx.x];
    sb[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * N + col];
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += sa[threadIdx.y][k] * sb[k][threadIdx.x];
    __syncthreads();
  }
  C[row * N + col] = acc;
}

// the loop counts tiles (ceil(K / TILE) of them) and zero-pads past K: the sum stops at K, not at the tiles' end
__global__ void gemm_tiled_count(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ak = t * TILE + threadIdx.x, bk = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// the whole body under the bounds check, barriers included (a common tutorial spelling): the tiles are staged
// by every thread only when the grid does not overhang the matrix (a run-time precondition)
__global__ void gemm_guarded_tiles(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int idx = threadIdx.x + blockDim.x * blockIdx.x;
  int idy = threadIdx.y + blockDim.y * blockIdx.y;
  if ((idx < n) && (idy < n)) {
    float temp = 0;
    for (int i = 0; i < n / TILE; i++) {
      As[threadIdx.y][threadIdx.x] = A[idy * n + (i * TILE + threadIdx.x)];
      Bs[threadIdx.y][threadIdx.x] = B[(i * TILE + threadIdx.y) * n + idx];
      __syncthreads();
      for (int k = 0; k < TILE; k++) temp += As[threadIdx.y][k] * Bs[k][threadIdx.x];
      __syncthreads();
    }
    C[idy * n + idx] = temp;
  }
}

extern "C" void run_guarded_tiles(const float* A, const float* B, float* C, int n, int grid) {
  gemm_guarded_tiles<<<dim3(grid, grid), dim3(TILE, TILE)>>>(A, B, C, n);
}

extern "C" void run_tiled_count(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm_tiled_count<<<dim3((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), dim3(TILE, TILE)>>>(A, B, C, M, N, K);
}

extern "C" void run(const float* A, const float* B, const float* B2, float* C1, float* C2, float* C3, float* C4,
                    int batch, int M, int N, int K) {
  gemm_nn<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, C1, M, N, K);
  bmm<<<dim3((N + 31) / 32, (M + 7) / 8, batch), dim3(32, 8)>>>(A, B, C2, M, N, K);
  linear_relu<<<dim3((N + 15) / 16, (M + 7) / 8), dim3(16, 8)>>>(A, B, C3, 0.5f, M, N, K);
  gated<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, B2, C4, M, N, K);
}

extern "C" void run_tiled_exact(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm_tiled_exact<<<dim3(N / TILE, M / TILE), dim3(TILE, TILE)>>>(A, B, C, M, N, K);
}

extern "C" void run_tiled(const float* A, const float* B, float* C, int M, int N, int K, int block_y) {
  gemm_tiled<<<dim3((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), dim3(TILE, block_y)>>>(A, B, C, M, N, K);
}
"""


@pytest.fixture(scope="module")
def gemm_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, _ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "cpu_gemm")
    assert record["changed"], record
    # gemm_nn, bmm (a copy with its batches shared out over threads, one without), linear_relu, gated (2), both
    # tiled (one of them counting tiles, one staging its tiles under the bounds check)
    assert text.count("xp_sgemm(xp_gemm_m") == 10
    # count the micro-kernel's calls, so a test knows the tensorized path ran (not the scalar fallback)
    marker = "  if (M <= 0 || N <= 0) return;"
    assert marker in text
    text = text.replace("static void xp_sgemm(", 'extern "C" { int xp_gemm_calls = 0; }\nstatic void xp_sgemm(', 1)
    text = text.replace(marker, "  __atomic_fetch_add(&xp_gemm_calls, 1, __ATOMIC_RELAXED);\n" + marker, 1)
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("gemm"))))


def _micro_kernel_calls(lib: ctypes.CDLL, entry: str, arrays: tuple[np.ndarray, ...], ints: tuple[int, ...]) -> int:
    """Run ``entry`` on the arrays and integers; how many times the micro-kernel was called."""
    calls = ctypes.c_int.in_dll(lib, "xp_gemm_calls")
    calls.value = 0
    getattr(lib, entry)(*(ctypes.c_void_p(x.ctypes.data) for x in arrays), *(ctypes.c_int(v) for v in ints))
    return calls.value


@pytest.mark.parametrize(("batch", "M", "N", "K"), [(1, 1, 1, 1), (2, 7, 37, 5), (3, 37, 19, 131),
                                                    (1, 100, 130, 300), (2, 13, 200, 0), (6, 61, 70, 93),
                                                    # above the parallel threshold: fewer row blocks than threads
                                                    # (columns shared out), three blocks resized to four
                                                    (1, 7, 1100, 300), (1, 200, 90, 130)])
def test_tensorized_products_match_numpy(gemm_lib, batch: int, M: int, N: int, K: int) -> None:  # noqa: ANN001
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    a = rng.standard_normal((batch, M, K)).astype(np.float32)
    b = rng.standard_normal((batch, K, N)).astype(np.float32)
    b2 = rng.standard_normal((K, N)).astype(np.float32)
    outs = [np.full((batch, M, N), np.nan, np.float32) for _ in range(4)]
    calls = _micro_kernel_calls(gemm_lib, "run", (a, b, b2, *outs), (batch, M, N, K))
    assert calls == 1 + batch + 1 + 2  # every product went through the micro-kernel
    a0, b0 = a[0].astype(np.float64), b[0].astype(np.float64)
    tol = {"rtol": 1e-4, "atol": 1e-4 * max(1.0, np.sqrt(K))}
    np.testing.assert_allclose(outs[0][0], a0 @ b0, **tol)
    np.testing.assert_allclose(outs[1], a.astype(np.float64) @ b.astype(np.float64), **tol)
    # linear_relu reads W = B as [N][K]: the first N*K floats of B
    w = b.reshape(-1)[: N * K].reshape(N, K).astype(np.float64)
    np.testing.assert_allclose(outs[2][0], np.maximum(0.5 * (a0 @ w.T), 0.0), **tol)
    g, u = a0 @ b0, a0 @ b2.astype(np.float64)
    np.testing.assert_allclose(outs[3][0], g / (1.0 + np.exp(-g)) * u, **tol)


@pytest.mark.parametrize(("M", "N", "K"), [(1, 1, 1), (7, 37, 5), (37, 19, 131), (64, 48, 32), (5, 3, 0)])
def test_shared_memory_tiles_are_forwarded(gemm_lib, M: int, N: int, K: int) -> None:  # noqa: ANN001
    rng = np.random.default_rng(M + N + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    assert _micro_kernel_calls(gemm_lib, "run_tiled", (a, b, c), (M, N, K, 16)) == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(K)))


@pytest.mark.parametrize(("M", "N", "K"), [(1, 1, 1), (7, 37, 5), (37, 19, 131), (64, 48, 32), (30, 17, 16)])
def test_counted_tiles_stop_at_the_padding(gemm_lib, M: int, N: int, K: int) -> None:  # noqa: ANN001
    rng = np.random.default_rng(M * N + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    assert _micro_kernel_calls(gemm_lib, "run_tiled_count", (a, b, c), (M, N, K)) == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(K)))


@pytest.mark.parametrize("n", [16, 48, 80])
def test_tiles_staged_under_the_bounds_check(gemm_lib, n: int) -> None:  # noqa: ANN001
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    c = np.full((n, n), np.nan, np.float32)
    assert _micro_kernel_calls(gemm_lib, "run_guarded_tiles", (a, b, c), (n, n // 16)) == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_tiles_staged_under_an_overhanging_grid_take_the_scalar_path(gemm_lib) -> None:  # noqa: ANN001
    # one block more than the matrix needs: its threads fail the check and stage nothing, so the precondition
    # fails and the recovered loops run (the in-bounds outputs are still the product: they read no such tile)
    n = 32
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    c = np.full((n, n), np.nan, np.float32)
    assert _micro_kernel_calls(gemm_lib, "run_guarded_tiles", (a, b, c), (n, 3)) == 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_unpadded_tiles_sum_whole_tiles(gemm_lib) -> None:  # noqa: ANN001
    rng = np.random.default_rng(5)
    M, N, K = 48, 32, 64
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    assert _micro_kernel_calls(gemm_lib, "run_tiled_exact", (a, b, c), (M, N, K)) == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_tiles_not_covered_by_the_block_take_the_scalar_path(gemm_lib) -> None:  # noqa: ANN001
    # a 16 x 8 block leaves half of each 16 x 16 tile unwritten: the tiles' precondition fails at run time,
    # the recovered loops run and compute what the source computes (here: reads of unwritten tile rows, so
    # only the call count is checked)
    M = N = K = 32
    a, b = np.ones((M, K), np.float32), np.ones((K, N), np.float32)
    c = np.zeros((M, N), np.float32)
    assert _micro_kernel_calls(gemm_lib, "run_tiled", (a, b, c), (M, N, K, 8)) == 0




REFUSED = {
    "tile loop with a stride that is not the tile": r"""
#define T 16
__global__ void tiled(const float* A, const float* B, float* C, int n) {
  __shared__ float As[T][T], Bs[T][T];
  int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 2 * T) {
    As[threadIdx.y][threadIdx.x] = A[r * n + k0 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * n + c];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[r * n + c] = acc;
}""",
    "tile read without a barrier": r"""
__global__ void nobarrier(const float* A, const float* B, float* C, int n) {
  __shared__ float As[16][16];
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  As[threadIdx.y][threadIdx.x] = A[r * n + threadIdx.x];
  float acc = 0.0f;
  for (int k = 0; k < 16; ++k) acc += As[threadIdx.y][k] * B[k * n + c];
  C[r * n + c] = acc;
}""",
    "accumulation under a condition in a sum loop": r"""
__global__ void first_eight(const float* A, const float* B, float* C, int M, int N, int K) {
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    float a = A[r * K + k];
    if (k < 8) acc += a * B[k * N + c];
  }
  C[r * N + c] = acc;
}""",
    "output read at another thread's element": r"""
__global__ void gemm_neighbour(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += A[row * K + k] * B[k * N + col];
    C[row * N + col] = C[row * N + col + 1] + s;
  }
}""",
}


TRANSPOSED_TILE_READ = r"""
__global__ void transposed_tile(const float* A, const float* B, float* C, int n) {
  __shared__ float As[16][16];
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  As[threadIdx.y][threadIdx.x] = A[r * n + threadIdx.x];
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < 16; ++k) acc += As[k][threadIdx.y] * B[k * n + c];
  C[r * n + c] = acc;
}
extern "C" void run_transposed_tile(const float* A, const float* B, float* C, int n) {
  transposed_tile<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, C, n);
}
"""


@pytest.mark.parametrize("n", [16, 48])
def test_a_tile_read_transposed_computes_what_the_kernel_does(tmp_path, n: int) -> None:  # noqa: ANN001
    # thread (ty, tx) stages A[16 by + ty][tx]; the reader takes As[k][ty], the element thread (k, ty) staged:
    # row r of C sums A[16 (r / 16) + k][r % 16] * B[k][c] over the tile (a gathered operand, not A's rows)
    text, records, _ctx = translate_to_cpu(TRANSPOSED_TILE_READ, "transposed_tile.cu")
    assert text is not None
    lib = ctypes.CDLL(str(build_shared(text, tmp_path)))
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    c = np.full((n, n), np.nan, np.float32)
    lib.run_transposed_tile(*(x.ctypes.data_as(ctypes.c_void_p) for x in (a, b, c)), n)
    rows = np.arange(n)
    gathered = a.astype(np.float64)[16 * (rows[:, None] // 16) + np.arange(16)[None, :], (rows % 16)[:, None]]
    np.testing.assert_allclose(c, gathered @ b[:16].astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_not_a_plain_product_is_refused(name: str) -> None:
    recovered, ctx = loop_recovered(REFUSED[name])
    gemm = get_pass("cpu_gemm")
    with pytest.raises(PassRefused):
        gemm.apply(recovered, gemm.INFO.defaults(), ctx)


# the classic SGEMM update: the stored element's old value scaled and added (each thread reads only its own)
ALPHA_BETA = r"""
__global__ void gemm_update(const float* A, const float* B, float* C, int M, int N, int K, float alpha, float beta) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * s + beta * C[row * N + col];
  }
}
extern "C" void run(const float* A, const float* B, float* C, int M, int N, int K, float alpha, float beta) {
  gemm_update<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, C, M, N, K, alpha, beta);
}"""


@pytest.mark.parametrize(("M", "N", "K"), [(23, 41, 17), (1, 1, 1), (70, 33, 130)])
def test_stored_element_read_back_goes_through_the_micro_kernel(cbuild, M: int, N: int, K: int) -> None:  # noqa: ANN001
    out, _records, _ctx = translate_to_cpu(ALPHA_BETA, "k.cu")
    assert out is not None and "xp_sgemm(xp_gemm_m" in out
    lib = cbuild(out, True)
    rng = np.random.default_rng(M + K)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    expected = 1.5 * (a.astype(np.float64) @ b) - 0.25 * c.astype(np.float64)
    lib.run(*(ctypes.c_void_p(x.ctypes.data) for x in (a, b, c)), ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(K),
            ctypes.c_float(1.5), ctypes.c_float(-0.25))
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(K)))


TRANSPOSED_OUTPUT = r"""
__global__ void gemm_tout(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += A[row * K + k] * B[k * N + col];
    C[col * M + row] = s;
  }
}
extern "C" void run(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm_tout<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, C, M, N, K);
}"""


def test_transposed_output_is_scattered(cbuild) -> None:  # noqa: ANN001
    # not the strided product the direct path takes: gathered as an implicit GEMM, scattered through C[col*M+row]
    out, _records, ctx = translate_to_cpu(TRANSPOSED_OUTPUT, "k.cu")
    assert out is not None and "xp_sgemm(xp_gemm_m" in out, ctx.notes
    lib = cbuild(out, True)
    rng = np.random.default_rng(0)
    M, N, K = 23, 41, 17
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((N, M), np.nan, np.float32)
    lib.run(*(ctypes.c_void_p(x.ctypes.data) for x in (a, b, c)), ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(K))
    np.testing.assert_allclose(c, (a.astype(np.float64) @ b).T, rtol=1e-4, atol=1e-4)


# the tile size comes from the build (-DTW=16), the tile count is a float ceil, the tile loads are if/else
CEIL_IF_ELSE = r"""
__global__ void mm_ceil(float* A, float* B, float* C, int N1, int N2, int N3) {
  int i = TW * blockIdx.y + threadIdx.y, j = TW * blockIdx.x + threadIdx.x;
  __shared__ float sa[TW][TW];
  __shared__ float sb[TW][TW];
  float value = 0;
  for (int phase = 0; phase < ceil((float)N2 / TW); phase++) {
    if ((i < N1) && ((phase * TW + threadIdx.x) < N2)) sa[threadIdx.y][threadIdx.x] = A[i * N2 + phase * TW + threadIdx.x];
    else sa[threadIdx.y][threadIdx.x] = 0.0f;
    if (((phase * TW + threadIdx.y) < N2) && (j < N3)) sb[threadIdx.y][threadIdx.x] = B[(phase * TW + threadIdx.y) * N3 + j];
    else sb[threadIdx.y][threadIdx.x] = 0.0f;
    __syncthreads();
    for (int k = 0; k < TW; k++) value += sa[threadIdx.y][k] * sb[k][threadIdx.x];
    __syncthreads();
  }
  if ((i < N1) && (j < N3)) C[i * N3 + j] = value;
}
extern "C" void run(float* A, float* B, float* C, int N1, int N2, int N3) {
  mm_ceil<<<dim3((N3 + TW - 1) / TW, (N1 + TW - 1) / TW), dim3(TW, TW)>>>(A, B, C, N1, N2, N3);
}
"""


@pytest.mark.parametrize(("M", "K", "N"), [(1, 1, 1), (37, 19, 53), (64, 48, 32)])
def test_build_macro_tiles_with_float_ceil_and_if_else_loads(tmp_path, M: int, K: int, N: int) -> None:  # noqa: ANN001
    text, records, _ctx = translate_unit(ParsedUnit(CEIL_IF_ELSE, "k.cu", Dialect.CUDA), defines={"TW": "16"})
    assert text is not None
    assert next(r for r in records if r["name"] == "cpu_gemm")["changed"]
    lib = ctypes.CDLL(str(build_shared("#define TW 16\n" + text, tmp_path)))
    rng = np.random.default_rng(M + N)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    lib.run(*(ctypes.c_void_p(x.ctypes.data) for x in (a, b, c)), ctypes.c_int(M), ctypes.c_int(K), ctypes.c_int(N))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(K)))
