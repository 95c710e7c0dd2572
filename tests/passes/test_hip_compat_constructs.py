"""CUDA spellings hipcc reads otherwise. C++17 removed the ``register`` storage class: nvcc accepts it with a warning, hipcc's clang rejects it. A
CUDA program that still spells it (old course code does, in headers and kernels) translates to HIP that hipcc
compiles and that prints what the source prints on the runtime."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.test_multi_warp_tiles import PROGRAM as MULTI_WARP_TILES
from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

PROGRAM = r"""
#include <cstdio>
__global__ void sums(const int* x, int* out, int n) {
  register int acc = 0;
  for (register int i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
  out[threadIdx.x] = acc;
}
static int total(const int* v, int n) {
  register int t = 0;
  for (int i = 0; i < n; ++i) t += v[i];
  return t;
}
int main() {
  const int n = 100;
  int host[n], parts[8];
  for (int i = 0; i < n; ++i) host[i] = i * 3 % 17;
  int *dx, *dout;
  cudaMalloc(&dx, sizeof host); cudaMalloc(&dout, sizeof parts);
  cudaMemcpy(dx, host, sizeof host, cudaMemcpyHostToDevice);
  sums<<<1, 8>>>(dx, dout, n);
  cudaMemcpy(parts, dout, sizeof parts, cudaMemcpyDeviceToHost);
  printf("%d %d\n", total(parts, 8), total(host, n));
  return 0;
}
"""


def test_register_is_dropped_for_hipcc(tmp_path: Path) -> None:
    result = translate(PROGRAM, str(tmp_path / "sums.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "verified", result.summary  # before: hipcc rejected 'register'
    assert "register" not in result.output_text


# CUDA spellings HIP 5.x reads otherwise: min/max of mixed signed and unsigned integers (HIP: a double template,
# not an integer subscript), umin/ullmax (not declared), block-scope atomics (none), and __CUDA_ARCH__ compared
# as a number (HIP's device flag is 1: `__CUDA_ARCH__ < 600` would hold and #error)
MIXED = r"""
#include <cstdio>
__global__ void clamp(const float* in, float* out, int* hist, int n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  __shared__ int local[4];
  if (threadIdx.x < 4) local[threadIdx.x] = 0;
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600
#error block-scope atomics need sm_60
#endif
  if (i < n) {
    out[i] = in[min(i + blockDim.x, n - 1)] + umin(i, 3u) + (float)(min(i, n) / 2);
    atomicAdd_block(&local[i % 4], 1);
  }
  __syncthreads();
  if (threadIdx.x < 4) atomicAdd(&hist[threadIdx.x], local[threadIdx.x]);
}
int main() {
  const int n = 37;
  float in[n], out[n]; int hist[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) in[i] = i * 0.5f;
  float *din, *dout; int* dh;
  cudaMalloc(&din, sizeof in); cudaMalloc(&dout, sizeof out); cudaMalloc(&dh, sizeof hist);
  cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice);
  cudaMemcpy(dh, hist, sizeof hist, cudaMemcpyHostToDevice);
  clamp<<<3, 16>>>(din, dout, dh, n);
  cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
  cudaMemcpy(hist, dh, sizeof hist, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) printf("%g ", out[i]);
  printf("\n%d %d %d %d\n", hist[0], hist[1], hist[2], hist[3]);
  return 0;
}
"""


def test_cuda_spellings_hip_reads_otherwise_compile_and_agree(tmp_path: Path) -> None:
    result = translate(MIXED, str(tmp_path / "clamp.cu"), TranslateOptions(Dialect.HIP))
    # before: hipcc rejected the subscript (min(unsigned, int) is a double in HIP 5.x), umin, atomicAdd_block,
    # and stopped at the #error (the device flag, 1, compared as an architecture)
    assert result.status == "verified", result.summary


# CUDA's dim3 converts from uint3, HIP's does not: launch shapes set from make_uint3 (course code changes them
# per pass of a loop) no longer compiled ("no viable overloaded '='"); a uint3 of the same name elsewhere stays
RESHAPED = r"""
#include <cstdio>
__global__ void scale(float* x, int n, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}
int main() {
  const int n = 96;
  float host[n];
  for (int i = 0; i < n; ++i) host[i] = i * 0.5f;
  float* dx;
  cudaMalloc(&dx, sizeof host);
  cudaMemcpy(dx, host, sizeof host, cudaMemcpyHostToDevice);
  dim3 block(32, 1, 1);
  dim3 grid = make_uint3(n / 32, 1, 1);
  for (int pass = 1; pass <= 3; ++pass) {
    block = make_uint3(32 / pass, 1, 1);
    grid = make_uint3((n + block.x - 1) / block.x, 1, 1);
    scale<<<grid, block>>>(dx, n, 1.0f + pass);
  }
  uint3 shape = make_uint3(n, 1, 1);
  cudaMemcpy(host, dx, sizeof host, cudaMemcpyDeviceToHost);
  printf("%u %.2f %.2f\n", shape.x, host[1], host[n - 1]);
  return 0;
}
"""


def test_a_dim3_set_from_make_uint3_compiles_with_hipcc_and_agrees(tmp_path: Path) -> None:
    result = translate(RESHAPED, str(tmp_path / "reshaped.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "verified", result.summary  # before: hipcc rejected the assignments
    assert "uint3 shape = make_uint3(n, 1, 1)" in result.output_text  # not a dim3: left as it was


# CUDA 13's graph dependency call carries edge data (null: the default edges); HIP 5.x's has no such argument. A
# node-built graph whose dependency contradicts the order its nodes were added, and a launch through an argument
# array: hipcc rejected the call ("no matching function for call to 'hipGraphAddDependencies'")
EDGES = r"""
#include <cstdio>
__global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
__global__ void shift(float* x, float b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += b; }
int main() {
  const int n = 256;
  float host[n];
  for (int i = 0; i < n; ++i) host[i] = i * 0.5f;
  float* d;
  cudaMalloc(&d, sizeof host);
  cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
  float a = 3.0f, b = 1.0f; int nn = n;
  void* shiftArgs[] = {&d, &b, &nn};
  void* scaleArgs[] = {&d, &a, &nn};
  cudaGraph_t g; cudaGraphCreate(&g, 0);
  cudaKernelNodeParams p = {0};
  p.func = (void*)shift; p.gridDim = dim3(n / 64); p.blockDim = dim3(64); p.kernelParams = shiftArgs;
  cudaGraphNode_t shiftNode, scaleNode;
  cudaGraphAddKernelNode(&shiftNode, g, NULL, 0, &p);
  p.func = (void*)scale; p.kernelParams = scaleArgs;
  cudaGraphAddKernelNode(&scaleNode, g, NULL, 0, &p);
  cudaGraphAddDependencies(g, &scaleNode, &shiftNode, NULL, 1);  // scale first, then shift
  cudaGraphExec_t e; cudaGraphInstantiate(&e, g, NULL, NULL, 0);
  cudaGraphLaunch(e, 0);
  cudaLaunchKernel((void*)shift, dim3(n / 64), dim3(64), shiftArgs, 0, 0);
  cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost);
  printf("%.2f %.2f\n", host[1], host[n - 1]);
  return 0;
}
"""


def test_a_graph_dependency_with_null_edge_data_compiles_with_hipcc_and_agrees(tmp_path: Path) -> None:
    result = translate(EDGES, str(tmp_path / "edges.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "verified", result.summary
    assert "hipGraphAddDependencies(g, &scaleNode, &shiftNode, 1)" in result.output_text


# CUDA's pipeline primitives (sm_80 asynchronous copies): HIP has none. The copies, done at once (CUDA lets them
# complete at any point before their wait), give what the source prints; HIP -> CUDA restores the primitives.
PIPELINE = r"""
#include <cstdio>
#include <cuda_pipeline.h>
__global__ void neighbours(const float* in, float* out, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) __pipeline_memcpy_async(&tile[threadIdx.x], &in[i], sizeof(float));
  else tile[threadIdx.x] = 0.f;
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  if (i < n) out[i] = tile[threadIdx.x] + tile[(threadIdx.x + 1) % blockDim.x];
}
int main() {
  const int n = 1000;
  static float h[n], r[n];
  for (int i = 0; i < n; ++i) h[i] = i * 0.5f;
  float *d, *o; cudaMalloc(&d, sizeof h); cudaMalloc(&o, sizeof r);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  neighbours<<<(n + 255) / 256, 256>>>(d, o, n);
  cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
  double s = 0; for (int i = 0; i < n; ++i) s += r[i] * (1 + i % 3);
  printf("%.2f\n", s);
  return 0;
}
"""


def test_pipeline_primitives_compile_with_hipcc_agree_and_come_back_for_nvcc(tmp_path: Path) -> None:
    hip = translate(PIPELINE, str(tmp_path / "neighbours.cu"), TranslateOptions(Dialect.HIP))
    assert hip.status == "verified", hip.summary  # before: hipcc found no cuda_pipeline.h
    assert "__pipeline_" not in hip.output_text.replace("CUDA's __pipeline_", "")
    back = translate(hip.output_text, str(tmp_path / "neighbours.hip"), TranslateOptions(Dialect.CUDA))
    assert back.status == "verified", back.summary  # nvcc's verdict on the restored primitives
    assert "__pipeline_memcpy_async(" in back.output_text and "xpiler_pipeline" not in back.output_text
    cpu = translate(PIPELINE, str(tmp_path / "cpu.cu"), TranslateOptions(Dialect.C))
    assert cpu.status == "verified", cpu.summary
    assert cpu.manifest["facts"]["tier"] == "structural"


def test_libcu_headers_hip_lacks_are_unresolved_at_their_include_line(tmp_path: Path) -> None:
    source = r"""#include <cstdio>
#include <cuda/barrier>
__global__ void k(float* x) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  x[threadIdx.x] += 1.0f;
  bar.arrive_and_wait();
}
"""
    result = translate(source, str(tmp_path / "k.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "unresolved"
    assert "<cuda/barrier>" in result.summary and "line 2:1" in result.summary


def test_any_other_libcu_header_is_unresolved_for_hip_at_its_line(tmp_path: Path) -> None:
    source = ("#include <cstdio>\n#include <cuda/atomic>\n__global__ void k(int* x) {\n"
              "  cuda::atomic_ref<int, cuda::thread_scope_device> r(*x);\n  r.fetch_add(1);\n}\n")
    result = translate(source, str(tmp_path / "k.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "unresolved"
    assert "<cuda/atomic>" in result.summary and "line 2:1" in result.summary


# A tile's shuffle of a vector or a struct (CUDA's groups take any trivially copyable value; HIP 5.x's only
# integers and floats; NVIDIA's shfl_scan sample shuffles uint4)
GROUP_SHUFFLES = r"""
#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
struct pair_t { float weight; int index; };
__device__ uint4 swap_neighbours(const cg::thread_block_tile<32>& tile, uint4 v) { return tile.shfl_xor(v, 1); }
__global__ void shuffles(unsigned* out, float* weights, int* indices) {
  auto tile = cg::tiled_partition<32>(cg::this_thread_block());
  unsigned lane = tile.thread_rank();
  uint4 v = swap_neighbours(tile, make_uint4(lane, 2 * lane, 3 * lane, 4 * lane + threadIdx.x));
  pair_t p = {0.5f * threadIdx.x, (int)threadIdx.x * 7};
  p = tile.shfl_down(p, 3);
  out[4 * threadIdx.x] = v.x; out[4 * threadIdx.x + 1] = v.y; out[4 * threadIdx.x + 2] = v.z;
  out[4 * threadIdx.x + 3] = v.w;
  weights[threadIdx.x] = p.weight;
  indices[threadIdx.x] = tile.shfl(p.index, 5);
}
int main() {
  unsigned* o; float* w; int* ix;
  cudaMalloc(&o, 4 * 64 * sizeof(unsigned)); cudaMalloc(&w, 64 * sizeof(float)); cudaMalloc(&ix, 64 * sizeof(int));
  shuffles<<<1, 64>>>(o, w, ix);
  unsigned ho[4 * 64]; float hw[64]; int hi[64];
  cudaMemcpy(ho, o, sizeof ho, cudaMemcpyDeviceToHost);
  cudaMemcpy(hw, w, sizeof hw, cudaMemcpyDeviceToHost);
  cudaMemcpy(hi, ix, sizeof hi, cudaMemcpyDeviceToHost);
  long long s = 0; double t = 0; long long u = 0;
  for (int i = 0; i < 4 * 64; ++i) s += (long long)ho[i] * (1 + i % 5);
  for (int i = 0; i < 64; ++i) { t += hw[i] * (1 + i % 3); u += (long long)hi[i] * (1 + i % 7); }
  printf("%lld %.1f %lld\n", s, t, u);
  return 0;
}
"""


def _group_shuffles_expected() -> list[str]:
    out, weights, indices = [], [], []
    for t in range(64):
        lane = t % 32
        partner = t ^ 1
        out += [partner % 32, 2 * (partner % 32), 3 * (partner % 32), 4 * (partner % 32) + partner]
        source = t + 3 if lane + 3 < 32 else t
        weights.append(0.5 * source)
        holder = (t - lane) + 5  # lane 5 of the tile, after its shfl_down
        indices.append(7 * (holder + 3 if 5 + 3 < 32 else holder))
    s = sum(v * (1 + i % 5) for i, v in enumerate(out))
    t_sum = sum(v * (1 + i % 3) for i, v in enumerate(weights))
    u = sum(v * (1 + i % 7) for i, v in enumerate(indices))
    return [str(s), f"{t_sum:.1f}", str(u)]


def test_group_shuffles_of_vectors_and_structs_run_and_compile_with_hipcc(tmp_path: Path) -> None:
    from xpiler_core.api import run_program

    ran = run_program(GROUP_SHUFFLES, str(tmp_path / "shuffles.cu"))
    assert ran.exit_code == 0, ran.stderr  # before: the runtime's shuffle took 64 bits at most
    assert ran.stdout.split() == _group_shuffles_expected()
    hip = translate(GROUP_SHUFFLES, str(tmp_path / "shuffles.cu"), TranslateOptions(Dialect.HIP))
    assert hip.status == "verified", hip.summary  # before: HIP's tile shuffle rejected uint4 (static assertion)
    assert "xpiler_cg_shfl(tile, p, 3, 2)" in hip.output_text


# CUDA 11's tiles wider than a warp take block_tile_memory scratch; HIP 5.x has none, and its tiles reach the
# 64-lane wavefront without it (NVIDIA's reduction sample: hipcc found no 'block_tile_memory'): the runtime
# test's program with 64-wide tiles only (HIP 5.x's tiles end at the wavefront)
WIDE_TILES = MULTI_WARP_TILES.replace("tile_sums<128><<<4, 256>>>", "tile_sums<64><<<4, 256>>>")


def test_block_tile_memory_is_dropped_for_hip_and_64_wide_tiles_agree(tmp_path: Path) -> None:
    result = translate(WIDE_TILES, str(tmp_path / "tiles.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "verified", result.summary
    assert "block_tile_memory" not in result.output_text and "this_thread_block()" in result.output_text
