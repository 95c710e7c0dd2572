"""CUDA → CPU on constructs real programs use, judged by independent references: the count a Python model of
the program computes, and g++ building the output by itself as its header says.

- a device function with a warp-aggregated atomic (cooperative groups) the structural tier cannot lower:
  the portable tier must take it, for a whole program and for a kernel file tested automatically;
- a header shared with an OpenMP port that defines ``float2`` only ``#if defined(_OPENMP)``: the output is
  built with -fopenmp, the source was not, so the condition must keep the source's value;
- a device function declared before it is defined (a prototype), and a ``__host__ __device__`` function
  a header declares: the translation must still build;
- host code naming its launch shapes ``gridDim`` and ``blockDim`` (legal CUDA).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from xpiler_core.cli import main
from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

N = 5000


def _lcg_values(n: int) -> list[int]:
    """The program's inputs, generated the way its main() does: x = x * 1103515245 + 12345 (mod 2^32)."""
    x, out = 1, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2**32
        out.append((x >> 8) % 1000 - 500)
    return out


AGGREGATED_KERNELS = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ int aggregated_increment(int* counter) {
  cg::coalesced_group active = cg::coalesced_threads();
  int base = 0;
  if (active.thread_rank() == 0) base = atomicAdd(counter, active.size());
  return active.shfl(base, 0) + active.thread_rank();
}
__global__ void keep_positive(const int* in, int* out, int* count, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > 0) out[aggregated_increment(count)] = in[i];
}
"""

AGGREGATED_PROGRAM = AGGREGATED_KERNELS + """#include <cstdio>
#include <cstdlib>
int main() {
  const int n = @N@;
  int* h = (int*)malloc(n * sizeof(int));
  unsigned x = 1;
  for (int i = 0; i < n; ++i) { x = x * 1103515245u + 12345u; h[i] = (int)((x >> 8) % 1000) - 500; }
  int *din, *dout, *dcount, count = 0;
  cudaMalloc(&din, n * sizeof(int)); cudaMalloc(&dout, n * sizeof(int)); cudaMalloc(&dcount, sizeof(int));
  cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(dcount, 0, sizeof(int));
  dim3 blockDim(128), gridDim((n + 127) / 128);
  keep_positive<<<gridDim, blockDim>>>(din, dout, dcount, n);
  cudaMemcpy(&count, dcount, sizeof(int), cudaMemcpyDeviceToHost);
  int* kept = (int*)malloc(n * sizeof(int));
  cudaMemcpy(kept, dout, count * sizeof(int), cudaMemcpyDeviceToHost);
  long long sum = 0;
  for (int i = 0; i < count; ++i) sum += kept[i];
  printf("kept %d sum %lld\\n", count, sum);
  return 0;
}
""".replace("@N@", str(N))


def _expected_line() -> str:
    kept = [v for v in _lcg_values(N) if v > 0]
    return f"kept {len(kept)} sum {sum(kept)}"


def _translate_to_file(source: Path, output: Path) -> dict[str, Any]:
    """``xpiler translate SOURCE --to cpu -o OUTPUT`` as a user runs it; the manifest (exit 0: verified)."""
    code = main(["translate", str(source), "--to", "cpu", "-o", str(output)])
    manifest = json.loads((output.parent / ".xpiler" / f"{output.name}.json").read_text())
    assert code == 0, manifest.get("summary")
    return manifest


def _build_and_run(output: Path, tmp_path: Path) -> str:
    exe = tmp_path / "translated"
    built = subprocess.run(["g++", "-std=c++17", "-O1", "-pthread", "-fopenmp", str(output), "-o", str(exe)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout.strip()


def test_warp_aggregated_program_takes_the_portable_tier_and_computes_what_python_does(tmp_path: Path) -> None:
    source = tmp_path / "filter.cu"
    source.write_text(AGGREGATED_PROGRAM)
    output = tmp_path / "filter.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "portable"
    assert _build_and_run(output, tmp_path) == _expected_line()


def test_warp_aggregated_kernel_file_verifies_against_the_source_on_the_portable_tier(tmp_path: Path) -> None:
    # where each element lands depends on the order threads run (any order is right): count and mark instead
    kernel = AGGREGATED_KERNELS.replace("out[aggregated_increment(count)] = in[i];",
                                        "{ aggregated_increment(count); out[i] = in[i]; }")
    source = tmp_path / "filter_kernel.cu"
    source.write_text(kernel)
    result = translate(kernel, str(source), TranslateOptions(target=Dialect.C))
    assert result.status == "verified", result.summary
    assert result.manifest["facts"]["tier"] == "portable"


SHARED_HEADER = """#pragma once
// shared by the CUDA and the OpenMP versions of the program: CUDA has float2 already
#if defined(_OPENMP)
typedef struct { float x, y; } float2;
#endif
float squared_distance(const float2 a, const float2 b);
"""

SHARED_HEADER_PROGRAM = """#include <cstdio>
#include "points.h"
__device__ float twice(float v);
__host__ __device__ float squared_distance(const float2 a, const float2 b) {
  return (a.x - b.x) * (a.x - b.x) + (a.y - b.y) * (a.y - b.y);
}
__global__ void distances(const float2* p, float* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = twice(squared_distance(p[i], make_float2(0.5f, 0.5f)));
}
__device__ float twice(float v) { return 2.0f * v; }
int main() {
  const int n = 100;
  float2 h[n];
  for (int i = 0; i < n; ++i) h[i] = make_float2(i * 0.25f, 1.0f - i * 0.5f);
  float2* dp; float* dd; float out[n];
  cudaMalloc(&dp, sizeof(h)); cudaMalloc(&dd, sizeof(out));
  cudaMemcpy(dp, h, sizeof(h), cudaMemcpyHostToDevice);
  distances<<<(n + 31) / 32, 32>>>(dp, dd, n);
  cudaMemcpy(out, dd, sizeof(out), cudaMemcpyDeviceToHost);
  double total = 0;
  for (int i = 0; i < n; ++i) total += out[i];
  printf("total %.3f\\n", total);
  return 0;
}
"""


def test_shared_openmp_header_prototypes_and_host_device_functions_stay_on_the_structural_tier(
        tmp_path: Path) -> None:
    (tmp_path / "points.h").write_text(SHARED_HEADER)
    source = tmp_path / "points.cu"
    source.write_text(SHARED_HEADER_PROGRAM)
    output = tmp_path / "points.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "structural"
    expected = sum(2 * ((i * 0.25 - 0.5) ** 2 + (1.0 - i * 0.5 - 0.5) ** 2) for i in range(100))
    printed = float(_build_and_run(output, tmp_path).split()[1])
    assert abs(printed - expected) < 1e-3 * expected


GRAPH_PROGRAM = """#include <cstdio>
#include <cuda_runtime.h>
__global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
__global__ void shift(float* x, float b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += b; }
__global__ void add(float* x, const float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += y[i]; }
int main() {
  const int n = 1000;
  float h[n], hy[n];
  for (int i = 0; i < n; ++i) { h[i] = i * 0.5f; hy[i] = 1.0f - i * 0.25f; }
  float *d, *y; cudaMalloc(&d, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(y, 0, n * sizeof(float));
  cudaStream_t s, t; cudaStreamCreate(&s); cudaStreamCreate(&t);
  cudaEvent_t fork, join; cudaEventCreate(&fork); cudaEventCreate(&join);
  cudaGraph_t g; cudaGraphExec_t ge;
  float a = 2.0f;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  scale<<<(n + 255) / 256, 256, 0, s>>>(d, a, n);
  cudaEventRecord(fork, s);
  cudaStreamWaitEvent(t, fork, 0);
  cudaMemcpyAsync(y, hy, n * sizeof(float), cudaMemcpyHostToDevice, t);
  cudaEventRecord(join, t);
  cudaStreamWaitEvent(s, join, 0);
  add<<<(n + 255) / 256, 256, 0, s>>>(d, y, n);
  shift<<<(n + 255) / 256, 256, 0, s>>>(d, 1.0f, n);
  cudaStreamEndCapture(s, &g);
  float before = 0; cudaMemcpy(&before, d + 10, sizeof(float), cudaMemcpyDeviceToHost);
  size_t nodes = 0; cudaGraphGetNodes(g, NULL, &nodes);
  a = 100.0f;  // the graph keeps the value it captured
  cudaGraphInstantiate(&ge, g, 0);
  for (int k = 0; k < 3; ++k) cudaGraphLaunch(ge, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0; for (int i = 0; i < n; ++i) sum += h[i];
  printf("before %.2f nodes %d sum %.3f\\n", before, nodes > 0 ? 1 : 0, sum);
  cudaGraphExecDestroy(ge); cudaGraphDestroy(g); cudaFree(d); cudaFree(y);
  return 0;
}
"""


def _graph_expected_line() -> str:
    """What the program prints, computed here: nothing runs during the capture; each graph launch is
    x = (2x + y) + 1 with y copied in by the graph."""
    xs = [i * 0.5 for i in range(1000)]
    ys = [1.0 - i * 0.25 for i in range(1000)]
    for _ in range(3):
        xs = [2.0 * x + y + 1.0 for x, y in zip(xs, ys, strict=True)]
    return f"before {10 * 0.5:.2f} nodes 1 sum {sum(xs):.3f}"


def test_a_stream_captured_graph_stays_on_the_structural_tier_and_replays_what_it_captured(tmp_path: Path) -> None:
    """Launches, an async copy and a second stream joined by events, captured into a graph and launched three
    times: the CPU output records the stream work while it is captured (nothing runs then), keeps the values the
    launches captured, and replays it per launch — on the structural tier, against the count computed here."""
    source = tmp_path / "graph.cu"
    source.write_text(GRAPH_PROGRAM)
    output = tmp_path / "graph.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "structural"
    assert _build_and_run(output, tmp_path) == _graph_expected_line()


# a graph built node by node (copies, a memset, kernel nodes whose arguments are read when the node is made, a
# dependency added after both nodes exist that the order of adding contradicts, a host node), its kernel node
# given new arguments in the instantiated graph, and a launch through cudaLaunchKernel's argument array
NODE_GRAPH_PROGRAM = """#include <cstdio>
#include <cuda_runtime.h>
__global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
__global__ void add(float* x, const float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += y[i]; }
__global__ void total(const float* x, double* out, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) { double s = 0; for (int i = 0; i < n; ++i) s += x[i]; *out = s; }
}
static void CUDART_CB report(void* p) { printf("host node %.3f\\n", *(double*)p); }
int main() {
  const int n = 1000;
  static float h[n], hy[n];
  for (int i = 0; i < n; ++i) { h[i] = i * 0.5f; hy[i] = 1.0f - i * 0.25f; }
  float *d, *y; double* dsum; double hsum = 0;
  cudaMalloc(&d, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float)); cudaMalloc(&dsum, sizeof(double));
  cudaGraph_t g; cudaGraphCreate(&g, 0);
  cudaGraphNode_t copyNode, setNode, yNode, scaleNode, addNode, sumNode, backNode, hostNode;
  cudaMemcpy3DParms cp = {0};
  cp.srcPtr = make_cudaPitchedPtr(h, n * sizeof(float), n, 1);
  cp.dstPtr = make_cudaPitchedPtr(d, n * sizeof(float), n, 1);
  cp.extent = make_cudaExtent(n * sizeof(float), 1, 1);
  cp.kind = cudaMemcpyHostToDevice;
  cudaGraphAddMemcpyNode(&copyNode, g, NULL, 0, &cp);
  cudaMemsetParams ms = {0};
  ms.dst = y; ms.value = 0; ms.elementSize = sizeof(float); ms.width = n; ms.height = 1;
  cudaGraphAddMemsetNode(&setNode, g, NULL, 0, &ms);
  cudaGraphAddMemcpyNode1D(&yNode, g, &setNode, 1, y, hy, n * sizeof(float), cudaMemcpyHostToDevice);
  float a = 2.0f; int nn = n;
  void* scaleArgs[] = {&d, &a, &nn};
  cudaKernelNodeParams kp = {0};
  kp.func = (void*)scale; kp.gridDim = dim3((n + 255) / 256); kp.blockDim = dim3(256); kp.kernelParams = scaleArgs;
  cudaGraphAddKernelNode(&scaleNode, g, &copyNode, 1, &kp);
  a = 100.0f;  // the node copied the value it was made with
  void* sumArgs[] = {&d, &dsum, &nn};
  cudaKernelNodeParams sp = {0};
  sp.func = (void*)total; sp.gridDim = dim3(1); sp.blockDim = dim3(32); sp.kernelParams = sumArgs;
  cudaGraphAddKernelNode(&sumNode, g, NULL, 0, &sp);
  void* addArgs[] = {&d, &y, &nn};
  cudaKernelNodeParams ap = {0};
  ap.func = (void*)add; ap.gridDim = dim3((n + 255) / 256); ap.blockDim = dim3(256); ap.kernelParams = addArgs;
  cudaGraphNode_t addDeps[] = {scaleNode, yNode};
  cudaGraphAddKernelNode(&addNode, g, addDeps, 2, &ap);
  cudaGraphAddDependencies(g, &addNode, &sumNode, NULL, 1);  // the sum, added first, runs after the addition
  cudaGraphAddMemcpyNode1D(&backNode, g, &sumNode, 1, &hsum, dsum, sizeof(double), cudaMemcpyDeviceToHost);
  cudaHostNodeParams hp = {0};
  hp.fn = report; hp.userData = &hsum;
  cudaGraphAddHostNode(&hostNode, g, &backNode, 1, &hp);
  size_t count = 0; cudaGraphGetNodes(g, NULL, &count);
  printf("nodes %d\\n", (int)count);
  cudaGraphExec_t ge; cudaGraphInstantiate(&ge, g, NULL, NULL, 0);
  cudaStream_t s; cudaStreamCreate(&s);
  cudaGraphLaunch(ge, s); cudaGraphLaunch(ge, s);
  a = 3.0f;
  cudaGraphExecKernelNodeSetParams(ge, scaleNode, &kp);
  cudaGraphLaunch(ge, s);
  cudaGraph_t copy; cudaGraphClone(&copy, g);  // the graph's own node kept its first arguments
  cudaGraphExec_t ce; cudaGraphInstantiate(&ce, copy, NULL, NULL, 0);
  cudaGraphLaunch(ce, s);
  cudaGraphExecUpdateResult res; cudaGraphNode_t bad;
  cudaGraphExecUpdate(ge, copy, &bad, &res);  // the instantiation takes the clone's arguments
  printf("update %d\\n", (int)res);
  cudaGraphLaunch(ge, s);
  cudaStreamSynchronize(s);
  float half = 0.5f;
  void* halfArgs[] = {&d, &half, &nn};
  cudaLaunchKernel((void*)scale, dim3((n + 127) / 128), dim3(128), halfArgs, 0, s);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  double last = 0; for (int i = 0; i < n; ++i) last += h[i];
  printf("after launch %.3f\\n", last);
  cudaGraphExecDestroy(ce); cudaGraphDestroy(copy); cudaGraphExecDestroy(ge); cudaGraphDestroy(g); cudaFree(d); cudaFree(y); cudaFree(dsum);
  return 0;
}
"""


def _node_graph_expected() -> str:
    """What the program prints, computed here: each graph launch is d = a * h + hy, summed (a = 2, 2, then 3:
    the instantiated node's new arguments, then 2: a clone of the graph, whose node kept them, then 2: the
    instantiation updated from the clone); then d scaled by 0.5 through cudaLaunchKernel."""
    h = [i * 0.5 for i in range(1000)]
    hy = [1.0 - i * 0.25 for i in range(1000)]
    sums = [sum(a * x + y for x, y in zip(h, hy, strict=True)) for a in (2.0, 2.0, 3.0, 2.0)]
    last = sum(0.5 * (2.0 * x + y) for x, y in zip(h, hy, strict=True))
    lines = ["nodes 8", *(f"host node {v:.3f}" for v in sums), "update 0", f"host node {sums[0]:.3f}"]
    return "\n".join([*lines, f"after launch {last:.3f}"])


def test_a_graph_built_node_by_node_stays_on_the_structural_tier(tmp_path: Path) -> None:
    """Explicit graph nodes and cudaLaunchKernel: the CPU output builds the graph as CUDA does (arguments copied
    when a node is made, dependencies before order of adding, new arguments for an instantiated node) — on the
    structural tier, verified against the source, printing what Python computes."""
    source = tmp_path / "nodes.cu"
    source.write_text(NODE_GRAPH_PROGRAM)
    output = tmp_path / "nodes.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "structural"
    assert _build_and_run(output, tmp_path) == _node_graph_expected()


# a tile whose size is a macro, declared under a condition (cuda-samples' jacobi kernel)
MACRO_TILE_PROGRAM = """#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define ROWS 8
__global__ void segment_sums(const float* x, float* out, int n) {
  cg::thread_block cta = cg::this_thread_block();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  cg::sync(cta);
  if (threadIdx.x < 64) {
    cg::thread_block_tile<ROWS> tile = cg::tiled_partition<ROWS>(cta);
    for (int o = tile.size() / 2; o > 0; o /= 2) v += tile.shfl_down(v, o);
    if (tile.thread_rank() == 0) out[i / ROWS] = v;
  }
}
int main() {
  const int n = 512;
  float h[n], o[n / ROWS];
  for (int i = 0; i < n; ++i) h[i] = (i % 13) * 0.25f;
  float *x, *out;
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&out, n / ROWS * sizeof(float));
  cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(out, 0, n / ROWS * sizeof(float));
  segment_sums<<<n / 128, 128>>>(x, out, n);
  cudaMemcpy(o, out, n / ROWS * sizeof(float), cudaMemcpyDeviceToHost);
  double total = 0; for (int k = 0; k < n / ROWS; ++k) total += o[k];
  printf("%.2f %.2f %.2f\\n", o[1], o[17], total);
  return 0;
}
"""


def test_a_tile_sized_by_a_macro_under_a_condition_stays_on_the_structural_tier(tmp_path: Path) -> None:
    """``thread_block_tile<ROWS> t = tiled_partition<ROWS>(cta)`` inside an ``if``: the tile is an 8-lane segment
    of the warp on the CPU too; the sums printed are what Python computes (the first 64 threads of each block)."""
    source = tmp_path / "tiles.cu"
    source.write_text(MACRO_TILE_PROGRAM)
    output = tmp_path / "tiles.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "structural"
    x = [(i % 13) * 0.25 for i in range(512)]
    sums = [sum(x[k * 8:(k + 1) * 8]) if (k * 8) % 128 < 64 else 0.0 for k in range(64)]
    assert _build_and_run(output, tmp_path) == f"{sums[1]:.2f} {sums[17]:.2f} {sum(sums):.2f}"


GRID_SYNC_PROGRAM = """#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void normalize_by_first_block(const float* x, float* partial, float* out, int n) {
  cg::grid_group grid = cg::this_grid();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __shared__ float s[128];
  s[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k]; __syncthreads(); }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
  grid.sync();  // every block's partial is written before any block reads block 0's
  if (i < n) out[i] = x[i] / partial[0];
}
int main() {
  int n = 1000; int blocks = (n + 127) / 128;
  float *x, *p, *o;
  cudaMallocManaged(&x, n * sizeof(float)); cudaMallocManaged(&p, blocks * sizeof(float));
  cudaMallocManaged(&o, n * sizeof(float));
  for (int i = 0; i < n; ++i) x[i] = 1.0f + i % 7;
  void* args[] = {&x, &p, &o, &n};
  cudaLaunchCooperativeKernel((void*)normalize_by_first_block, blocks, 128, args);
  cudaDeviceSynchronize();
  double s = 0; for (int i = 0; i < n; ++i) s += o[i];
  printf("sum %.4f\\n", s);
  return 0;
}
"""


def test_grid_sync_is_never_lowered_to_a_loop_over_threads_even_unverified(tmp_path: Path) -> None:
    """A thread loop would run ``grid.sync()`` once per thread, before other blocks wrote their partials: with
    no test to catch it, the structural tier must refuse and the exact portable tier be written."""
    source = tmp_path / "normalize.cu"
    source.write_text(GRID_SYNC_PROGRAM)
    output = tmp_path / "normalize.cpp"
    code = main(["translate", str(source), "--to", "cpu", "-o", str(output), "--no-verify"])
    manifest = json.loads((output.parent / ".xpiler" / f"{output.name}.json").read_text())
    assert code != 0  # unverified is never reported as verified
    assert manifest["facts"]["tier"] == "portable"
    assert "grid-wide synchronization" in manifest["facts"]["structural_refusal"]
    assert "normalize.cu:5:" in manifest["facts"]["structural_refusal"]
    x = [1.0 + i % 7 for i in range(1000)]
    expected = sum(v / sum(x[:128]) for v in x)
    printed = float(_build_and_run(output, tmp_path).split()[1])
    assert abs(printed - expected) < 1e-4 * expected


AUTO_GROUPS_PROGRAM = """#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void warp_sums(const float* x, float* out, int n) {
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  for (int o = warp.size() / 2; o > 0; o /= 2) v += warp.shfl_down(v, o);
  block.sync();
  if (warp.thread_rank() == 0) out[i / 32] = v;
}
int main() {
  const int n = 1000; float h[n], r[32];
  for (int i = 0; i < n; ++i) h[i] = (i % 13) * 0.25f;
  float *d, *o; cudaMalloc(&d, sizeof(h)); cudaMalloc(&o, sizeof(r));
  cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
  warp_sums<<<4, 256>>>(d, o, n);
  cudaMemcpy(r, o, sizeof(r), cudaMemcpyDeviceToHost);
  for (int k = 0; k < 32; ++k) printf("%.2f ", r[k]);
  printf("\\n");
  return 0;
}
"""


def test_groups_declared_with_auto_stay_on_the_structural_tier(tmp_path: Path) -> None:
    source = tmp_path / "warp_sums.cu"
    source.write_text(AUTO_GROUPS_PROGRAM)
    output = tmp_path / "warp_sums.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "structural"
    x = [(i % 13) * 0.25 for i in range(1000)]
    expected = [sum(x[32 * w:min(32 * w + 32, 1000)]) for w in range(32)]
    printed = [float(v) for v in _build_and_run(output, tmp_path).split()]
    assert printed == [float(f"{v:.2f}") for v in expected]


BARRIER_PROGRAM = """#include <cstdio>
#include <cuda/barrier>
__global__ void neighbours(const float* in, float* out, int n) {
  __shared__ float tile[256];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.f;
  bar.arrive_and_wait();
  if (i < n) out[i] = tile[(threadIdx.x + 1) % blockDim.x] * 2.0f;
}
int main() {
  const int n = 1000;
  float h[n], r[n];
  for (int i = 0; i < n; ++i) h[i] = i * 0.5f;
  float *d, *o; cudaMalloc(&d, sizeof(h)); cudaMalloc(&o, sizeof(h));
  cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
  neighbours<<<(n + 255) / 256, 256>>>(d, o, n);
  cudaMemcpy(r, o, sizeof(r), cudaMemcpyDeviceToHost);
  double s = 0; for (int i = 0; i < n; ++i) s += r[i] * (1 + i % 3);
  printf("sum %.2f\\n", s);
  return 0;
}
"""


def test_a_libcu_barrier_is_never_lowered_to_a_loop_over_threads_even_unverified(tmp_path: Path) -> None:
    source = tmp_path / "neighbours.cu"
    source.write_text(BARRIER_PROGRAM)
    output = tmp_path / "neighbours.cpp"
    assert main(["translate", str(source), "--to", "cpu", "-o", str(output), "--no-verify"]) != 0
    manifest = json.loads((output.parent / ".xpiler" / f"{output.name}.json").read_text())
    assert manifest["facts"]["tier"] == "portable"
    assert "cuda::barrier (libcu++ synchronization)" in manifest["facts"]["structural_refusal"]
    x = [i * 0.5 for i in range(1000)]
    out = []
    for i in range(1000):
        base, t = i - i % 256, i % 256
        j = base + (t + 1) % 256
        out.append((x[j] if j < 1000 else 0.0) * 2.0)
    expected = sum(v * (1 + i % 3) for i, v in enumerate(out))
    assert _build_and_run(output, tmp_path) == f"sum {expected:.2f}"


def test_a_kernel_body_under_a_cuda_arch_test_stays_on_the_structural_tier_and_computes(tmp_path: Path) -> None:
    source = tmp_path / "twice.cu"
    source.write_text("""#include <cstdio>
__global__ void twice(const float* in, float* out, int n) {
#if __CUDA_ARCH__ >= 700 && !(__CUDA_ARCH__ < 600)
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
#else
  out[0] = -1.0f;
#endif
}
int main() {
  const int n = 1000; static float h[n], r[n];
  for (int i = 0; i < n; ++i) h[i] = i * 0.5f;
  float *d, *o; cudaMalloc(&d, sizeof h); cudaMalloc(&o, sizeof r);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  twice<<<(n + 255) / 256, 256>>>(d, o, n);
  cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
  double s = 0; for (int i = 0; i < n; ++i) s += r[i];
  printf("%.1f\\n", s);
  return 0;
}
""")
    output = tmp_path / "twice.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "structural"
    assert _build_and_run(output, tmp_path) == f"{sum(2 * i * 0.5 for i in range(1000)):.1f}"


def test_a_refusal_names_the_line_in_the_users_file_after_a_local_header_is_inlined(tmp_path: Path) -> None:
    (tmp_path / "scale.cuh").write_text("#pragma once\n// a device helper the CPU plan inlines\n"
                                        "__device__ inline float scaled(float v, float s) {\n  return v * s;\n}\n")
    source = tmp_path / "normalize.cu"
    source.write_text('#include "scale.cuh"  // the helper\n' + GRID_SYNC_PROGRAM)
    output = tmp_path / "normalize.cpp"
    main(["translate", str(source), "--to", "cpu", "-o", str(output), "--no-verify"])
    manifest = json.loads((output.parent / ".xpiler" / f"{output.name}.json").read_text())
    # `cg::grid_group grid = cg::this_grid();` is line 6 of normalize.cu (the header's five lines are not)
    assert "normalize.cu:6:" in manifest["facts"]["structural_refusal"]


BLOCK_INDEX_PROGRAM = """#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void transpose_tile(const float* in, float* out, int n) {
  cg::thread_block cta = cg::this_thread_block();
  __shared__ float tile[16][17];
  int x = cta.group_index().x * 16 + cta.thread_index().x;
  int y = cta.group_index().y * 16 + cta.thread_index().y;
  if (x < n && y < n) tile[cta.thread_index().y][cta.thread_index().x] = in[y * n + x];
  cta.sync();
  int tx = cta.group_index().y * 16 + cta.thread_index().x;
  int ty = cta.group_index().x * 16 + cta.thread_index().y;
  if (tx < n && ty < n) out[ty * n + tx] = tile[cta.thread_index().x][cta.thread_index().y] * cta.group_dim().x;
}
int main() {
  const int n = 50; static float h[n * n], o[n * n];
  for (int i = 0; i < n * n; ++i) h[i] = i * 0.5f;
  float *d, *e; cudaMalloc(&d, sizeof h); cudaMalloc(&e, sizeof o);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  transpose_tile<<<dim3(4, 4), dim3(16, 16)>>>(d, e, n);
  cudaMemcpy(o, e, sizeof o, cudaMemcpyDeviceToHost);
  double s = 0; for (int i = 0; i < n * n; ++i) s += o[i] * (1 + i % 7);
  printf("%.1f\\n", s);
  return 0;
}
"""


def test_block_group_indices_stay_on_the_structural_tier_and_transpose(tmp_path: Path) -> None:
    """``cta.thread_index()``/``group_index()``/``group_dim()`` (NVIDIA's globalToShmemAsyncCopy indexes so) are
    threadIdx/blockIdx/blockDim: the structural tier takes the kernel (it refused before), judged by Python."""
    source = tmp_path / "transpose.cu"
    source.write_text(BLOCK_INDEX_PROGRAM)
    output = tmp_path / "transpose.cpp"
    assert _translate_to_file(source, output)["facts"]["tier"] == "structural"
    n = 50
    out = [0.0] * (n * n)
    for y in range(n):
        for x in range(n):
            out[x * n + y] = y * n * 0.5 + x * 0.5
    expected = sum(16 * v * (1 + i % 7) for i, v in enumerate(out))
    assert _build_and_run(output, tmp_path) == f"{expected:.1f}"
