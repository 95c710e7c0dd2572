"""CPU GEMM tensorization of tiled kernels in the spellings of hand-optimized SGEMMs.

A block of ``T * T`` threads in one dimension, the thread's row and column within the tile taken as
``threadIdx.x / T`` and ``threadIdx.x % T``; the tile's position added to the operand pointers up front (``A +=
blockIdx.x * T * K``) and the pointers advanced tile by tile inside the loop (``A += T``); a tile loop that walks
two offsets at once (``for (a = aBegin, b = bBegin; a <= aEnd; a += T, b += T * N)``). Each kernel is translated
by the CPU plan, built with g++ and run against numpy in float64; a counter in the micro-kernel tells whether
the tensorized path ran or the launch fell back to the recovered loops (a block of another shape fails the
run-time checks). Spellings the recognizer must not take (a staged value that reads the storing thread's raw
index, an output set only under a condition) still compute the source's result on the loops.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import build_shared
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

# the product kept only in the first columns (a value set under a condition): the soundness set's kernel
KEPT = Path(__file__).resolve().parents[2] / "benchmarks" / "soundness" / "kept_under_condition" / \
    "kept_under_condition.cu"

# register blocking: each thread of a 16 x 16 block computes RB x RB outputs of a 64 x 64 tile from register copies
# of a tile column and row; each thread stages RB elements of each tile (a loop of constant trip count). `row`, `col`:
# where element (i, j) of a thread's outputs goes (transposed within the thread's block: not a product)
REGISTER_BLOCKED = r"""
__global__ void {name}(const float *A, const float *B, float *C, int M, int N, int K) {{
  __shared__ float As[T * RB][T];
  __shared__ float Bs[T][T * RB];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * T * RB, col0 = blockIdx.x * T * RB;
  float acc[RB * RB];
  float a_reg[RB], b_reg[RB];
  for (int e = 0; e < RB * RB; ++e) acc[e] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {{
    for (int l = 0; l < RB; ++l) {{
      As[ty + T * l][tx] = A[(row0 + ty + T * l) * K + k0 + tx];
      Bs[ty][tx + T * l] = B[(k0 + ty) * N + col0 + tx + T * l];
    }}
    __syncthreads();
    for (int k = 0; k < T; ++k) {{
      for (int i = 0; i < RB; ++i) a_reg[i] = As[ty * RB + i][k];
      for (int j = 0; j < RB; ++j) b_reg[j] = Bs[k][tx * RB + j];
      for (int i = 0; i < RB; ++i)
        for (int j = 0; j < RB; ++j) acc[i * RB + j] += a_reg[i] * b_reg[j];
    }}
    __syncthreads();
  }}
  for (int i = 0; i < RB; ++i)
    for (int j = 0; j < RB; ++j)
      C[(row0 + ty * RB + {row}) * N + col0 + tx * RB + {col}] = acc[i * RB + j];
}}
"""

KERNELS = r"""
#define T 16

// rows of the output along blockIdx.x, columns along blockIdx.y; C = alpha * A @ B + beta * C
__global__ void split_rows_x(int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                             float *C) {
  __shared__ float As[T * T];
  __shared__ float Bs[T * T];
  const unsigned r = threadIdx.x / T, c = threadIdx.x % T;
  A += blockIdx.x * T * K;
  B += blockIdx.y * T;
  C += blockIdx.x * T * N + blockIdx.y * T;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[r * T + c] = A[r * K + c];
    Bs[r * T + c] = B[r * N + c];
    __syncthreads();
    A += T;
    B += T * N;
    for (int k = 0; k < T; ++k) acc += As[r * T + k] * Bs[k * T + c];
    __syncthreads();
  }
  C[r * N + c] = alpha * acc + beta * C[r * N + c];
}

// the usual orientation (columns along blockIdx.x), the B tile stored transposed, the pointers advanced by
// one tile per iteration through local copies
__global__ void split_transposed_tile(const float *A, const float *B, float *C, int M, int N, int K) {
  __shared__ float As[T][T];
  __shared__ float Bt[T][T];
  const int tr = threadIdx.x / T, tc = threadIdx.x % T;
  const float *a = A + (blockIdx.y * T + tr) * K + tc;
  const float *b = B + tr * N + blockIdx.x * T + tc;
  float acc = 0.0f;
  for (int t = 0; t < K / T; ++t) {
    As[tr][tc] = a[0];
    Bt[tc][tr] = b[0];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[tr][k] * Bt[tc][k];
    __syncthreads();
    a += T;
    b += T * N;
  }
  C[(blockIdx.y * T + tr) * N + blockIdx.x * T + tc] = acc;
}

// the staged value reads threadIdx.x itself, not the row and column it was split into: forwarding a tile
// element to another thread must not keep the reader's threadIdx.x
__global__ void split_reads_raw_index(const float *A, const float *B, float *C, int M, int N, int K) {
  __shared__ float As[T * T];
  __shared__ float Bs[T * T];
  const int r = threadIdx.x / T, c = threadIdx.x % T;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[r * T + c] = A[(blockIdx.y * T + r) * K + k0 + threadIdx.x - r * T];  // threadIdx.x - r * T is c
    Bs[r * T + c] = B[(k0 + r) * N + blockIdx.x * T + c];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[r * T + k] * Bs[k * T + c];
    __syncthreads();
  }
  C[(blockIdx.y * T + r) * N + blockIdx.x * T + c] = acc;
}

// the CUDA samples' spelling: the tile loop walks the offsets of both operands at once
__global__ void two_offsets(float *C, const float *A, const float *B, int K, int N) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int aBegin = K * T * blockIdx.y, aEnd = aBegin + K - 1, bBegin = T * blockIdx.x;
  float acc = 0;
  for (int a = aBegin, b = bBegin; a <= aEnd; a += T, b += T * N) {
    As[ty][tx] = A[a + K * ty + tx];
    Bs[ty][tx] = B[b + N * ty + tx];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  const int c = N * T * blockIdx.y + T * blockIdx.x;
  C[c + N * ty + tx] = acc;
}

// column-major operands, the tiles indexed through shifts of the loop counter and the block indices
// (`As[(k << 4) + tx]`, `A += M << 4`): a left shift is a product, whatever the sign of what it shifts
__global__ void shifted_tiles(int M, int N, int K, const float *A, const float *B, float *C) {
  __shared__ float As[16 * 16];
  __shared__ float Bs[16 * 16];
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  A += blockIdx.x << 4;
  B += (blockIdx.y << 4) * K;
  C += (blockIdx.x << 4) + (blockIdx.y << 4) * M;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    As[(ty << 4) + tx] = A[tx + ty * M];
    Bs[(ty << 4) + tx] = B[tx + ty * K];
    A += M << 4;
    B += 16;
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += As[(k << 4) + tx] * Bs[(ty << 4) + k];
    __syncthreads();
  }
  C[tx + ty * M] = acc;
}

extern "C" void run_shifted_tiles(const float *A, const float *B, float *C, int M, int N, int K) {
  shifted_tiles<<<dim3(M / 16, N / 16), dim3(256)>>>(M, N, K, A, B, C);
}

// a 16 x 16 block that numbers its threads `tid = ty * blockDim.x + tx`: each loads one float4 of each tile by
// its tid (through the file's own macros) and computes a 4 x 4 register tile at (ty, tx), stored as float4s
#define IDX(r, c, ld) ((r) * (ld) + (c))
#define VEC4(p) (reinterpret_cast<float4*>(&(p))[0])
__global__ void flat_thread_ids(float* A, float* B, float* C, int M, int N, int K) {
  const int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * blockDim.x + tx;
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  float acc[TM][TN] = {0.0f};
  for (int k0 = 0; k0 < K; k0 += BK) {
    VEC4(As[tid >> 2][(tid & 3) << 2]) = VEC4(A[IDX(blockIdx.y * BM + (tid >> 2), k0 + ((tid & 3) << 2), K)]);
    VEC4(Bs[tid >> 4][(tid & 15) << 2]) = VEC4(B[IDX(k0 + (tid >> 4), blockIdx.x * BN + ((tid & 15) << 2), N)]);
    __syncthreads();
    for (int k = 0; k < BK; ++k)
      for (int m = 0; m < TM; ++m)
        for (int n = 0; n < TN; ++n) acc[m][n] += As[ty * TM + m][k] * Bs[k][tx * TN + n];
    __syncthreads();
  }
  for (int m = 0; m < TM; ++m)
    for (int n = 0; n < TN; n += 4)
      VEC4(C[IDX(blockIdx.y * BM + ty * TM + m, blockIdx.x * BN + tx * TN + n, N)]) = VEC4(acc[m][n]);
}

extern "C" void run_flat_thread_ids(float *A, float *B, float *C, int M, int N, int K) {
  flat_thread_ids<<<dim3(N / 64, M / 64), dim3(16, 16)>>>(A, B, C, M, N, K);
}

// the tile loop walks the operand pointers themselves (`for (const float *a = ..., *b = ...; a < end; ...)`)
__global__ void walked_pointers(const float *A, const float *B, float *C, int M, int N, int K) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float *end = A + blockIdx.y * T * K + K;
  float acc = 0.0f;
  for (const float *a = A + blockIdx.y * T * K, *b = B + blockIdx.x * T; a < end; a += T, b += T * N) {
    As[ty][tx] = a[ty * K + tx];
    Bs[ty][tx] = b[ty * N + tx];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[(blockIdx.y * T + ty) * N + blockIdx.x * T + tx] = acc;
}

extern "C" void run_walked_pointers(const float *A, const float *B, float *C, int M, int N, int K) {
  walked_pointers<<<dim3(N / T, M / T), dim3(T, T)>>>(A, B, C, M, N, K);
}

#define RB 4
extern "C" void run_register_blocked(const float *A, const float *B, float *C, int M, int N, int K) {
  register_blocked<<<dim3(N / (T * RB), M / (T * RB)), dim3(T, T)>>>(A, B, C, M, N, K);
}

extern "C" void run_register_blocked_swapped(const float *A, const float *B, float *C, int M, int N, int K) {
  register_blocked_swapped<<<dim3(N / (T * RB), M / (T * RB)), dim3(T, T)>>>(A, B, C, M, N, K);
}

extern "C" void run_two_offsets(const float *A, const float *B, float *C, int M, int N, int K) {
  two_offsets<<<dim3(N / T, M / T), dim3(T, T)>>>(C, A, B, K, N);
}

extern "C" void run_split_rows_x(int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                                 float *C, int threads) {
  split_rows_x<<<dim3(M / T, N / T), dim3(threads)>>>(M, N, K, alpha, A, B, beta, C);
}

extern "C" void run_split_transposed_tile(const float *A, const float *B, float *C, int M, int N, int K) {
  split_transposed_tile<<<dim3(N / T, M / T), dim3(T * T)>>>(A, B, C, M, N, K);
}

extern "C" void run_split_reads_raw_index(const float *A, const float *B, float *C, int M, int N, int K) {
  split_reads_raw_index<<<dim3(N / T, M / T), dim3(T * T)>>>(A, B, C, M, N, K);
}
"""
# a register tile unrolled by hand, indexed with shifts and masks (`t >> 4 << 1`, `t & 15`): each of 128 threads
# computes two consecutive rows of one column of a 16 x 16 tile; `first`, `second`: which sum each row gets
UNROLLED_PAIR = r"""
__global__ void {name}(const float *A, const float *B, float *C, int M, int N, int K) {{
  __shared__ float As[16][16];
  __shared__ float Bs[16][16];
  const int t = threadIdx.x;
  const int r0 = (t >> 4) << 1, c = t & 15;
  float acc[2] = {{0.0f, 0.0f}};
  for (int k0 = 0; k0 < K; k0 += 16) {{
    As[r0][c] = A[(blockIdx.y * 16 + r0) * K + k0 + c];
    As[r0 + 1][c] = A[(blockIdx.y * 16 + r0 + 1) * K + k0 + c];
    Bs[r0][c] = B[(k0 + r0) * N + blockIdx.x * 16 + c];
    Bs[r0 + 1][c] = B[(k0 + r0 + 1) * N + blockIdx.x * 16 + c];
    __syncthreads();
    for (int k = 0; k < 16; ++k) {{
      float b = Bs[k][c];
      acc[0] += As[r0][k] * b;
      acc[1] += As[r0 + 1][k] * b;
    }}
    __syncthreads();
  }}
  C[(blockIdx.y * 16 + r0) * N + blockIdx.x * 16 + c] = acc[{first}];
  C[(blockIdx.y * 16 + r0 + 1) * N + blockIdx.x * 16 + c] = acc[{second}];
}}
extern "C" void run_{name}(const float *A, const float *B, float *C, int M, int N, int K) {{
  {name}<<<dim3(N / 16, M / 16), dim3(128)>>>(A, B, C, M, N, K);
}}
"""
# the register tile's loops outside the K loop of a phase (`for i: for j: for k: acc[i][j] += ...`): each thread of an
# 8 x 8 block computes a contiguous 4 x 4 sub-tile of a 32 x 32 tile; `row`, `col`: where output (i, j) goes
K_INNERMOST = r"""
__global__ void {name}(const float *A, const float *B, float *C, int M, int N, int K) {{
  __shared__ float As[32][32];
  __shared__ float Bs[32][32];
  const int tx = threadIdx.x * 4, ty = threadIdx.y * 4;
  const int row0 = blockIdx.y * 32, col0 = blockIdx.x * 32;
  float acc[4][4] = {{0.f}};
  for (int k0 = 0; k0 < K; k0 += 32) {{
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {{
        As[ty + i][tx + j] = A[(row0 + ty + i) * K + k0 + tx + j];
        Bs[ty + i][tx + j] = B[(k0 + ty + i) * N + col0 + tx + j];
      }}
    __syncthreads();
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 32; ++k) acc[i][j] += As[ty + i][k] * Bs[k][tx + j];
    __syncthreads();
  }}
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) C[(row0 + ty + {row}) * N + col0 + tx + {col}] = acc[i][j];
}}
extern "C" void run_{name}(const float *A, const float *B, float *C, int M, int N, int K) {{
  {name}<<<dim3(N / 32, M / 32), dim3(8, 8)>>>(A, B, C, M, N, K);
}}
"""
# the grid's last blocks (`last`) load their tiles bounds-checked (`ok ? A[i] : 0`), the others without checks; 2 x 2
# outputs per thread of a 16 x 16 block numbered flat (`tid`); `edge_scale`: what the last blocks multiply their output by
LAST_BLOCKS = r"""
__global__ void {name}(const float *A, const float *B, float *C, int M, int N, int K) {{
  __shared__ float As[32][16];
  __shared__ float Bs[16][32];
  const int tid = threadIdx.y * 16 + threadIdx.x;
  float acc[2][2] = {{0.f}};
  for (int k0 = 0; k0 < K; k0 += 16) {{
    for (int i = 0; i < 32; i += 16) {{
      const int ar = blockIdx.y * 32 + i + tid / 16, ac = k0 + tid % 16;
      if ({last}) {{
        As[i + tid / 16][tid % 16] = ar < M && ac < K ? A[ar * K + ac] : 0;
      }} else {{
        As[i + tid / 16][tid % 16] = A[ar * K + ac];
      }}
    }}
    for (int i = 0; i < 16; i += 8) {{
      const int br = k0 + i + tid / 32, bc = blockIdx.x * 32 + tid % 32;
      if ({last}) {{
        Bs[i + tid / 32][tid % 32] = br < K && bc < N ? B[br * N + bc] : 0;
      }} else {{
        Bs[i + tid / 32][tid % 32] = B[br * N + bc];
      }}
    }}
    __syncthreads();
    for (int k = 0; k < 16; ++k)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) acc[i][j] += As[threadIdx.y + 16 * i][k] * Bs[k][threadIdx.x + 16 * j];
    __syncthreads();
  }}
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {{
      const int r = blockIdx.y * 32 + threadIdx.y + 16 * i, c = blockIdx.x * 32 + threadIdx.x + 16 * j;
      if ({last}) {{
        if (r < M && c < N) C[r * N + c] = {edge_scale}acc[i][j];
      }} else {{
        C[r * N + c] = acc[i][j];
      }}
    }}
}}
extern "C" void run_{name}(const float *A, const float *B, float *C, int M, int N, int K, int rows_of_blocks) {{
  {name}<<<dim3((N + 31) / 32, rows_of_blocks), dim3(16, 16)>>>(A, B, C, M, N, K);
}}
"""
# a block of 256 threads numbered `threadIdx.y * blockDim.x + threadIdx.x` (written for any block, launched 1-D), the
# tiles loaded by a device template in passes of 256 elements, brace-initialized locals and loop counters, the
# accumulators zeroed through `static_cast`; each thread a 4 x 4 sub-tile of a 64 x 64 tile
BRACED = r"""
template <typename V, size_t TILE, size_t TK, size_t THREADS>
__device__ void load_tiles(V const* A, V const* B, V As[TILE][TK], V Bs[TK][TILE], size_t t, size_t tid, size_t K,
                           size_t N) {
  for (size_t pass{0U}; pass < TILE * TK / THREADS; ++pass) {
    size_t const r{(tid + pass * THREADS) / TK};
    size_t const c{(tid + pass * THREADS) % TK};
    As[r][c] = A[(blockIdx.y * TILE + r) * K + t * TK + c];
    size_t const br{(tid + pass * THREADS) / TILE};
    size_t const bc{(tid + pass * THREADS) % TILE};
    Bs[br][bc] = B[(t * TK + br) * N + blockIdx.x * TILE + bc];
  }
}
__global__ void braced(float const* A, float const* B, float* C, size_t M, size_t N, size_t K) {
  __shared__ float As[64][16];
  __shared__ float Bs[16][64];
  size_t const tid{threadIdx.y * blockDim.x + threadIdx.x};
  size_t const tiles{K / 16};
  float acc[4][4] = {static_cast<float>(0)};
  for (size_t t{0U}; t < tiles; ++t) {
    load_tiles<float, 64, 16, 256>(A, B, As, Bs, t, tid, K, N);
    __syncthreads();
    for (size_t k{0U}; k < 16; ++k)
      for (size_t i{0U}; i < 4; ++i)
        for (size_t j{0U}; j < 4; ++j) acc[i][j] += As[tid / 16 * 4 + i][k] * Bs[k][tid % 16 * 4 + j];
    __syncthreads();
  }
  for (size_t i{0U}; i < 4; ++i)
    for (size_t j{0U}; j < 4; ++j)
      C[(blockIdx.y * 64 + tid / 16 * 4 + i) * N + blockIdx.x * 64 + tid % 16 * 4 + j] = acc[i][j];
}
extern "C" void run_braced(const float *A, const float *B, float *C, int M, int N, int K, int rows) {
  braced<<<dim3(N / 64, M / 64), dim3(256 / rows, rows)>>>(A, B, C, M, N, K);
}
"""
KERNELS += BRACED
BOTH_AXES = "blockIdx.x == gridDim.x - 1 || blockIdx.y == gridDim.y - 1"
KERNELS += "".join(LAST_BLOCKS.format(name=name, edge_scale=scale, last=last)
                   for name, scale, last in (("last_blocks", "", BOTH_AXES), ("last_blocks_scaled", "2.0f * ", BOTH_AXES),
                                             ("last_column_blocks", "", "blockIdx.x == gridDim.x - 1")))
KERNELS += "".join(K_INNERMOST.format(name=name, row=row, col=col)
                   for name, row, col in (("k_innermost", "i", "j"), ("k_innermost_swapped", "j", "i")))
KERNELS += "".join(UNROLLED_PAIR.format(name=name, first=first, second=second)
                   for name, first, second in (("unrolled_pair", 0, 1), ("unrolled_pair_swapped", 1, 0)))
KERNELS = KERNELS.replace("#define RB 4\n", "#define RB 4\n" + "".join(
    REGISTER_BLOCKED.format(name=name, row=row, col=col)
    for name, row, col in (("register_blocked", "i", "j"), ("register_blocked_swapped", "j", "i"))), 1)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    text, records, _ctx = translate_to_cpu(KERNELS + KEPT.read_text(encoding="utf-8"), "split.cu")
    assert text is not None
    record = next(r for r in records if r["name"] == "cpu_gemm")
    assert record["changed"], record
    marker = "  if (M <= 0 || N <= 0) return;"
    text = text.replace("static void xp_sgemm(", 'extern "C" { int xp_gemm_calls = 0; }\nstatic void xp_sgemm(', 1)
    text = text.replace(marker, "  __atomic_fetch_add(&xp_gemm_calls, 1, __ATOMIC_RELAXED);\n" + marker, 1)
    return ctypes.CDLL(str(build_shared(text, tmp_path_factory.mktemp("split"))))


def _calls(lib: ctypes.CDLL) -> ctypes.c_int:
    calls = ctypes.c_int.in_dll(lib, "xp_gemm_calls")
    calls.value = 0
    return calls


def _ptr(x: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.ctypes.data)


def _assert_product(lib: ctypes.CDLL, entry: str, M: int, N: int, K: int, seed: int) -> None:
    """``entry(A, B, C, M, N, K)`` computes numpy's ``A @ B`` through the micro-kernel (one call)."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    calls = _calls(lib)
    getattr(lib, entry)(_ptr(a), _ptr(b), _ptr(c), M, N, K)
    assert calls.value == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize(("M", "N", "K"), [(16, 16, 16), (48, 32, 80), (112, 64, 48)])
def test_split_block_with_advancing_pointers_is_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M * N + K)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    c = c0.copy()
    calls = _calls(lib)
    lib.run_split_rows_x(M, N, K, ctypes.c_float(1.5), _ptr(a), _ptr(b), ctypes.c_float(0.5), _ptr(c), 256)
    assert calls.value == 1  # the tensorized path ran
    expected = 1.5 * (a.astype(np.float64) @ b) + 0.5 * c0
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_split_block_of_another_size_runs_the_loops(lib: ctypes.CDLL) -> None:
    # 128 threads cover half of each 16 x 16 tile: the run-time checks fail and the recovered loops run (they
    # read the tile rows no thread wrote, as the source does, so only the path taken is checked)
    M = N = K = 32
    a, b, c = np.ones((M, K), np.float32), np.ones((K, N), np.float32), np.zeros((M, N), np.float32)
    calls = _calls(lib)
    lib.run_split_rows_x(M, N, K, ctypes.c_float(1.0), _ptr(a), _ptr(b), ctypes.c_float(0.0), _ptr(c), 128)
    assert calls.value == 0


@pytest.mark.parametrize(("M", "N", "K"), [(16, 32, 16), (64, 48, 96)])
def test_transposed_tile_through_local_pointers(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M + N * K)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    calls = _calls(lib)
    lib.run_split_transposed_tile(_ptr(a), _ptr(b), _ptr(c), M, N, K)
    assert calls.value == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_staged_value_of_the_raw_thread_index_stays_on_the_loops(lib: ctypes.CDLL) -> None:
    M, N, K = 32, 48, 64
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    calls = _calls(lib)
    lib.run_split_reads_raw_index(_ptr(a), _ptr(b), _ptr(c), M, N, K)
    # threadIdx.x is written in the digits it was split into (c + T * r), so the staged value is the storing
    # thread's column, forwarded as the reader's k: a matrix product (numpy's answer either way)
    assert calls.value == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize(("M", "N", "K"), [(16, 16, 16), (32, 80, 48)])
def test_tile_loop_walking_two_offsets(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M * 7 + N + K)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    calls = _calls(lib)
    lib.run_two_offsets(_ptr(a), _ptr(b), _ptr(c), M, N, K)
    assert calls.value == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_output_set_under_a_condition_is_not_taken_for_the_product(lib: ctypes.CDLL) -> None:
    M, N, K, keep = 19, 23, 31, 5
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    calls = _calls(lib)
    lib.run_kept_under_condition(_ptr(a), _ptr(b), _ptr(c), M, N, K, keep)
    assert calls.value == 0
    expected = a.astype(np.float64) @ b
    expected[:, keep:] = 0.0
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize(("M", "N", "K"), [(64, 64, 16), (128, 192, 80)])
def test_register_blocked_threads_are_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    # each thread's 4 x 4 outputs, its register copies and its 4 staged elements per tile: one matrix product
    _assert_product(lib, "run_register_blocked", M, N, K, M + 3 * N + K)


def _run(lib: ctypes.CDLL, entry: str, M: int, N: int, K: int, seed: int, *extra: int,
         rows: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``entry(A, B, C, M, N, K, *extra)`` on random operands (``rows``: the rows A and C hold, when not M):
    (A, B, C, how many times the micro-kernel ran)."""
    rng = np.random.default_rng(seed)
    a_rows, c_rows = rows or (M, M)
    a, b = rng.standard_normal((a_rows, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((c_rows, N), np.nan, np.float32)
    calls = _calls(lib)
    getattr(lib, entry)(_ptr(a), _ptr(b), _ptr(c), M, N, K, *extra)
    return a, b, c, calls.value


def _assert_transposed_sub_tiles(lib: ctypes.CDLL, entry: str, M: int, N: int, K: int, seed: int) -> None:
    """``entry`` runs on the loops and computes what it says: within each thread's 4 x 4 sub-tile, output (i, j)
    holds product element (j, i)."""
    a, b, c, calls = _run(lib, entry, M, N, K, seed)
    assert calls == 0
    product = a.astype(np.float64) @ b
    expected = product.reshape(M // 4, 4, N // 4, 4).transpose(0, 3, 2, 1).reshape(M, N)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_register_blocked_outputs_stored_transposed_stay_on_the_loops(lib: ctypes.CDLL) -> None:
    _assert_transposed_sub_tiles(lib, "run_register_blocked_swapped", 64, 128, 32, 5)


@pytest.mark.parametrize(("M", "N", "K"), [(16, 16, 16), (48, 80, 64)])
def test_a_register_tile_unrolled_by_hand_is_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    _assert_product(lib, "run_unrolled_pair", M, N, K, M * 7 + N + K)


def test_a_hand_unrolled_tile_with_its_rows_swapped_stays_on_the_loops(lib: ctypes.CDLL) -> None:
    M, N, K = 32, 48, 32
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    calls = _calls(lib)
    lib.run_unrolled_pair_swapped(_ptr(a), _ptr(b), _ptr(c), M, N, K)
    assert calls.value == 0
    product = a.astype(np.float64) @ b  # rows 2i and 2i + 1 hold each other's sums
    np.testing.assert_allclose(c, product.reshape(M // 2, 2, N)[:, ::-1].reshape(M, N), rtol=1e-4,
                               atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize(("M", "N", "K"), [(16, 16, 16), (48, 32, 80)])
def test_tiles_indexed_by_shifts_are_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M + 3 * N + K)
    a = np.asfortranarray(rng.standard_normal((M, K)).astype(np.float32))  # column-major, as the kernel reads
    b = np.asfortranarray(rng.standard_normal((K, N)).astype(np.float32))
    c = np.asfortranarray(np.full((M, N), np.nan, np.float32))
    calls = _calls(lib)
    lib.run_shifted_tiles(_ptr(a), _ptr(b), _ptr(c), M, N, K)
    assert calls.value == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize(("M", "N", "K"), [(64, 64, 16), (128, 192, 48)])
def test_a_block_numbering_its_threads_flat_is_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    """The tile loads by ``tid`` (its digits), the outputs at ``(ty, tx)``: one 1-D block of 16-wide rows."""
    _assert_product(lib, "run_flat_thread_ids", M, N, K, M + 5 * N + K)


@pytest.mark.parametrize(("M", "N", "K"), [(16, 16, 16), (48, 32, 80)])
def test_a_tile_loop_walking_the_operand_pointers_is_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    _assert_product(lib, "run_walked_pointers", M, N, K, 3 * M + N + K)


@pytest.mark.parametrize(("M", "N", "K"), [(32, 32, 32), (96, 64, 160)])
def test_register_tile_loops_around_the_k_loop_are_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    """``for i: for j: for k: acc[i][j] += ...``: the outer loops pick the accumulator, the inner one sums."""
    _assert_product(lib, "run_k_innermost", M, N, K, M + 11 * N + K)


def test_register_tile_around_the_k_loop_stored_transposed_stays_on_the_loops(lib: ctypes.CDLL) -> None:
    _assert_transposed_sub_tiles(lib, "run_k_innermost_swapped", 64, 32, 64, 13)


@pytest.mark.parametrize(("M", "N", "K"), [(32, 32, 16), (70, 45, 48), (129, 100, 32)])
def test_last_blocks_loading_bounds_checked_tiles_are_a_product(lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    """Ragged M and N: the last blocks' checked loads and the others' plain ones are one product."""
    a, b, c, calls = _run(lib, "run_last_blocks", M, N, K, M + 17 * N + K, (M + 31) // 32)
    assert calls == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_interior_blocks_reaching_past_the_bounds_run_the_loops(lib: ctypes.CDLL) -> None:
    # three rows of blocks for M = 40: block (0, 1) is not on the last row or column, covers rows 32-63 past M
    # unchecked and writes them, as the source does (the buffers here hold 64 and 96 rows); the checked blocks of
    # the last column and row write rows below M only
    M, N, K = 40, 64, 16
    a, b, c, calls = _run(lib, "run_last_blocks", M, N, K, 3, 3, rows=(64, 96))
    assert calls == 0  # (3 - 1) * 32 rows > M: the interior blocks are not inside the bounds
    product = a.astype(np.float64) @ b
    expected = np.full((96, N), np.nan)
    expected[:M] = product[:M]
    expected[M:64, :32] = product[M:, :32]
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_last_blocks_computing_another_value_stay_on_the_loops(lib: ctypes.CDLL) -> None:
    M, N, K = 64, 96, 32
    a, b, c, calls = _run(lib, "run_last_blocks_scaled", M, N, K, 21, 2)
    assert calls == 0
    expected = a.astype(np.float64) @ b
    last = np.zeros((M, N), bool)
    last[32:, :] = last[:, 64:] = True  # the last row of blocks and the last column
    expected[last] *= 2
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize(("M", "N", "K"), [(64, 64, 16), (128, 192, 48)])
def test_braced_locals_and_a_template_tile_loader_on_one_row_of_threads_are_a_product(
        lib: ctypes.CDLL, M: int, N: int, K: int) -> None:
    a, b, c, calls = _run(lib, "run_braced", M, N, K, M + 7 * N + K, 1)
    assert calls == 1
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_the_same_threads_in_a_block_of_several_rows_run_the_loops(lib: ctypes.CDLL) -> None:
    # 16 x 16 threads number themselves as the 256 of one row do: the same product, on the recovered loops
    M, N, K = 64, 128, 32
    a, b, c, calls = _run(lib, "run_braced", M, N, K, 2, 16)
    assert calls == 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_a_last_column_test_does_not_keep_the_last_row_of_blocks_inside_the_rows(lib: ctypes.CDLL) -> None:
    # only blockIdx.x is tested: block (0, 1) checks nothing and writes rows 32-63 past M = 40 (the buffers hold
    # them), as the source does; the fast path would bound the rows by M
    M, N, K = 40, 64, 16
    a, b, c, calls = _run(lib, "run_last_column_blocks", M, N, K, 4, 2, rows=(64, 64))
    assert calls == 0
    product = a.astype(np.float64) @ b
    expected = np.full((64, N), np.nan)
    expected[:M] = product[:M]
    expected[M:, :32] = product[M:, :32]
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))
