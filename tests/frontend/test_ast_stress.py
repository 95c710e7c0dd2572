"""Stress sources for the round trip: one file per dialect packed with constructs the AST models and
constructs it keeps as Opaque (templates, lambdas, switch, goto, #ifdef in bodies, wmma, cooperative groups,
designated initializers, pointers to arrays, function pointers, `a[static 1]`...).

Oracles: the real compilers (nvcc, hipcc, gcc), the original C program's output, and tree-sitter's own
tokens — every token of the source except comments and grouping punctuation must survive printing.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from test_ast_roundtrip import _run_c, compile_ok  # same directory (pytest prepends it to sys.path)

from xpiler_core.frontend.lower import lower_text
from xpiler_core.frontend.source import parse_text
from xpiler_core.printer import print_module

ROOT = Path(__file__).resolve().parents[2]

STRESS_CUDA = r"""
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
using namespace nvcuda;
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) return; } while (0)
#define BLOCK 128
typedef float real_t;
enum Mode { kAdd = 1, kMul = 2 };
struct __align__(16) Vec4 { float x, y, z, w; __host__ __device__ float sum() const { return x + y + z + w; } };
union Bits { float f; unsigned int u; };
__constant__ float coeffs[16];
__device__ int global_counter = 0;
static __device__ __managed__ int managed_value;
template <typename T> struct Traits { static constexpr int width = sizeof(T); };
template <> struct Traits<half> { static constexpr int width = 2; };
__host__ __device__ inline float add3(float a, float b = 1.0f, float c = 2.0f) { return a + b + c; }
__device__ float apply(float (*fn)(float), float v) { return fn(v); }
__device__ float neg(float v) { return -v; }
__device__ __noinline__ void by_ref(float& out, const float& in) { out = in * 2; }
template <typename T, int N, typename... Rest>
__global__ void variadic(T* p, Rest... rest) { p[0] = static_cast<T>(N); }
__device__ Vec4 operator+(const Vec4& a, const Vec4& b) { return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w}; }
template <int BS>
__global__ void __launch_bounds__(BS, 2) kitchen(const float* __restrict__ in, float* __restrict__ out, const int* const idx, int n, Mode mode) {
    __shared__ __align__(16) float tile[BS];
    __shared__ float mat[4][BS + 1];
    extern __shared__ unsigned char smem_raw[];
    float* dyn = reinterpret_cast<float*>(smem_raw);
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(block);
    tile32.sync();
    const unsigned int tid = threadIdx.x, gid = blockIdx.x * blockDim.x + tid;
    float *a_ptrs[2] = {nullptr, nullptr};
    int (*row_ptr)[4] = nullptr;
    char label[] = "abc";
    float local[3] = {};
    auto lam = [&](float v) { return v * 2.0f; };
    if (gid >= n) return;
    tile[tid] = in[gid];
    block.sync();
    #pragma unroll 4
    for (int k = 0; k < 4; ++k) mat[k][tid] = tile[(tid + k) % BS] * coeffs[k];
    _Pragma("unroll")
    for (int k = 0; k < 2; k++) { local[k] = mat[k][tid]; }
    __syncthreads();
    float v = mode == kAdd ? tile[tid] + 1.0f : tile[tid] * 2.0f;
    switch (mode) {
        case kAdd: v += 1; break;
        case kMul: { v *= 2; break; }
        default: break;
    }
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    unsigned mask = __ballot_sync(0xffffffff, v > 0.0f);
    int lane = tid & 31, warp = tid >> 5;
    if (lane == 0) atomicAdd(&global_counter, __popc(mask));
    half h = __float2half(v);
    half2 h2 = __halves2half2(h, h);
    v += __half2float(__hadd(h, __low2half(h2)));
#ifdef USE_FAST
    v = __expf(v);
#else
    v = expf(v);
#endif
    Bits bits; bits.f = v; bits.u ^= 0x80000000u;
    v = apply(neg, bits.f);
    by_ref(v, v);
    int i = 0;
    while (true) { if (++i > 3) break; else continue; }
    do i--; while (i > 0);
    goto done;
done:
    asm volatile("membar.gl;" ::: "memory");
    { int scoped = lane; (void)scoped; }
    for (;;) { break; }
    for (float x : local) { v += x; }
    if constexpr (BS > 64) { v += 1; }
    v += Traits<float>::width + add3(v) + lam(v) + (float)warp + (idx ? idx[0] : 0);
    dyn[tid] = v;
    out[gid] = dyn[tid] + (Vec4{1, 2, 3, 4} + Vec4{0, 0, 0, 0}).sum();
    static_assert(sizeof(Vec4) == 16, "vec4 size");
    (void)a_ptrs; (void)row_ptr; (void)label;
}
__global__ void wmma_gemm(const half* a, const half* b, float* c) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
extern "C" {
void c_linkage_block(float* p) { if (p) p[0] = 0; }
}
extern "C" void host_entry(const float* in, float* out, int n, cudaStream_t stream) {
    float *d_in = nullptr, *d_out = nullptr;
    size_t bytes = sizeof(float) * static_cast<size_t>(n);
    CHECK(cudaMalloc(&d_in, bytes));
    CHECK(cudaMalloc((void**)&d_out, bytes));
    cudaMemcpyAsync(d_in, in, bytes, cudaMemcpyHostToDevice, stream);
    dim3 grid((n + BLOCK - 1) / BLOCK), block(BLOCK);
    kitchen<BLOCK><<<grid, block, BLOCK * sizeof(float), stream>>>(d_in, d_out, nullptr, n, kAdd);
    void* args[] = {&d_in, &d_out};
    (void)args;
    variadic<float, 3><<<1, 1>>>(d_out, 1, 2.0);
    cudaMemcpyAsync(out, d_out, bytes, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    cudaFree(d_in); cudaFree(d_out);
}
"""

STRESS_HIP = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#define WAVE 64
template <typename T>
__device__ __forceinline__ T wave_sum(T v) {
    for (int off = WAVE / 2; off > 0; off >>= 1) v += __shfl_down(v, off);
    return v;
}
__global__ void __launch_bounds__(256) reduce(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float partial[256 / WAVE];
    const int tid = threadIdx.x, lane = tid % WAVE, wid = tid / WAVE;
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) acc += x[i];
    acc = wave_sum(acc);
    if (lane == 0) partial[wid] = acc;
    __syncthreads();
    if (wid == 0) {
        acc = lane < (int)(blockDim.x / WAVE) ? partial[lane] : 0.0f;
        acc = wave_sum(acc);
        if (lane == 0) atomicAdd(out, acc);
    }
    unsigned long long ballot = __ballot(acc > 0.0f);
    (void)ballot;
}
extern "C" hipError_t reduce_host(const float* x, float* out, int n, hipStream_t stream) {
    dim3 block(256), grid((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024);
    hipLaunchKernelGGL(reduce, grid, block, 0, stream, x, out, n);
    reduce<<<grid, block, 0, stream>>>(x, out, n);
    return hipGetLastError();
}
"""

STRESS_C = r"""
/* C99/C11 stress for the round trip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#define SQR(x) ((x) * (x))
#define N 8
typedef struct { int a; float b[2]; } rec_t;
typedef int (*binop_fn)(int, int);
struct node { struct node *next; int v; };
enum color { RED, GREEN = 5, BLUE };
static const int table[] = {1, 2, 3, [5] = 9};
static int add(int a, int b) { return a + b; }
static int mul(int a, int b) { return a * b; }
int old_style();
static inline double poly(double x) { return 1.0 + x * (0.5 + x * (1.0 / 6)); }
static void fill(int n, float out[static 1], float v) { for (int i = 0; i < n; i++) out[i] = v; }
static void matmul(int n, const float (*a)[N], const float (*b)[N], float (*c)[N]) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            float acc = 0.f;
            for (int k = 0; k < n; ++k) acc += a[i][k] * b[k][j];
            c[i][j] = acc;
        }
}
static unsigned long hash(const char *s) {
    unsigned long h = 5381u;
    int c;
    while ((c = *s++)) h = ((h << 5) + h) + (unsigned long)c;
    return h;
}
int main(int argc, char **argv) {
    (void)argv;
    float a[N][N], b[N][N], c[N][N];
    for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) { a[i][j] = (float)(i + j); b[i][j] = (float)(i - j); }
    matmul(N, (const float (*)[N])a, (const float (*)[N])b, c);
    binop_fn ops[2] = {add, mul};
    rec_t r = {.a = 3, .b = {1.5f, 2.5f}};
    rec_t *rp = &r;
    struct node n2 = {NULL, 2}, n1 = {&n2, 1};
    int total = 0;
    for (struct node *p = &n1; p; p = p->next) total += p->v;
    enum color col = BLUE;
    float buf[4];
    fill(4, buf, 0.25f);
    int *heap = (int *)malloc(sizeof *heap * 4);
    memset(heap, 0, 4 * sizeof(int));
    heap[argc - 1] = SQR(3);
    uint32_t bits = 0xDEADBEEFu;
    bits = (bits >> 16) | (bits << 16);
    int x = 10;
    x = x > 5 ? x < 20 ? 1 : 2 : 3;
    x += ops[0](2, 3) * ops[1](4, 5);
    x -= -x++ + - --x;
    long big = (long)x << 33 >> 30;
    double d = poly(0.5) + sqrt(2.0) + (double)rp->b[1];
    char msg[32];
    snprintf(msg, sizeof msg, "%s-%d", "k", col);
    int k = 0;
    do { k += 3; if (k % 2) continue; k++; } while (k < 20);
    switch (k) { case 21: k = 1; break; default: k = 2; }
    int arr2[] = {table[0], table[5], (int)c[1][2]};
label:
    if (k-- > 0) goto label;
    printf("%.1f %d %d %d %u %d %ld %.6f %s %d %d %lu %d %.2f\n", c[2][3], r.a, total, heap[0], bits, x, big, d, msg,
           k, arr2[1] + arr2[2], hash("abc") % 1000, (int)col, buf[3]);
    free(heap);
    return 0;
}
"""

STRESS = {"stress.cu": STRESS_CUDA, "stress.hip": STRESS_HIP, "stress.c": STRESS_C}
_GROUPING = frozenset({"(", ")", "{", "}"})


def significant_tokens(text: str, path: str) -> Counter[str]:
    """Leaf tokens of tree-sitter's parse, without comments and grouping punctuation (which printing may
    add or drop without changing meaning), as a multiset (printing may reorder `float const` → `const float`)."""
    parsed = parse_text(text, path)
    tokens: Counter[str] = Counter()
    stack = [parsed.root]
    while stack:
        node = stack.pop()
        if node.type == "comment":
            continue
        if node.child_count == 0:
            token = parsed.node_text(node).strip()
            if token and token not in _GROUPING:
                tokens[token] += 1
        else:
            stack.extend(node.children)
    return tokens


def _needs(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed")


@pytest.mark.parametrize("name", sorted(STRESS))
def test_stress_round_trip_compiles(name: str) -> None:
    suffix = Path(name).suffix
    _needs({".cu": "nvcc", ".hip": "hipcc", ".c": "gcc"}[suffix])
    source = STRESS[name]
    module = lower_text(source, name)
    assert not [d for d in module.diagnostics if d.code == "ast.internal"]
    assert compile_ok(source, suffix)[0], "the stress source itself must compile"
    printed = print_module(module)
    ok, err = compile_ok(printed, suffix)
    assert ok, err + printed


def test_stress_c_runs_the_same(tmp_path: Path) -> None:
    printed = print_module(lower_text(STRESS_C, "stress.c"))
    assert _run_c(printed, tmp_path, "printed") == _run_c(STRESS_C, tmp_path, "original")


def _token_corpus() -> list[tuple[str, str]]:
    items = sorted(STRESS.items())
    for pattern in ("examples/*.cu", "examples/*.hip", "examples/*.c", "examples/*.mlu", "benchmarks/suite/**/*.cu"):
        items.extend((str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in sorted(ROOT.glob(pattern)))
    return items


@pytest.mark.parametrize("name, text", _token_corpus(), ids=[n for n, _ in _token_corpus()])
def test_printing_preserves_every_token(name: str, text: str) -> None:
    printed = print_module(lower_text(text, name))
    before, after = significant_tokens(text, name), significant_tokens(printed, name)
    assert before == after, f"lost: {before - after}, added: {after - before}"
