"""libcu++'s atomics (``cuda::atomic_ref``, ``cuda::atomic``, ``cuda::std::atomic``), ``cuda::std`` as the standard
library, and CUDA 12's extensible launch (``cudaLaunchKernelEx`` with its attributes) on the runtime; outputs
computed independently in Python (nvcc compiles the program: tests/runtime, checked by hand with CUDA 13)."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.api import run_program

PROGRAM = r"""
#include <cstdio>
#include <cuda/atomic>
#include <cuda/std/limits>
#include <cuda/std/atomic>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ cuda::atomic<int, cuda::thread_scope_device> total_seen;
// a histogram through atomic_ref, the largest value through fetch_max, a count through cuda::atomic; then a grid
// barrier (the launch's cooperative attribute) before block 0 reads every block's count
__global__ void histogram(const int* x, int* bins, int* largest, int* counts, int* seen_after_sync, int n) {
  __shared__ cuda::atomic<int, cuda::thread_scope_block> in_block;
  if (threadIdx.x == 0) in_block.store(0);
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    cuda::atomic_ref<int, cuda::thread_scope_device> bin(bins[x[i] % 8]);
    bin.fetch_add(1, cuda::std::memory_order_relaxed);
    cuda::atomic_ref<int, cuda::thread_scope_device>(*largest).fetch_max(x[i]);
    ++in_block;
    total_seen += 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) counts[blockIdx.x] = in_block.load();
  cg::this_grid().sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int s = 0;
    for (int b = 0; b < gridDim.x; ++b) s += counts[b];
    *seen_after_sync = s == total_seen.load() ? s : -1;
  }
}
int main() {
  const int n = 5000, blocks = 4;
  static int h[n];
  for (int i = 0; i < n; ++i) h[i] = (i * 7919) % 1000;
  int *x, *bins, *largest, *counts, *seen;
  cudaMalloc(&x, sizeof h); cudaMalloc(&bins, 8 * sizeof(int)); cudaMalloc(&largest, sizeof(int));
  cudaMalloc(&counts, blocks * sizeof(int)); cudaMalloc(&seen, sizeof(int));
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
  cudaMemset(bins, 0, 8 * sizeof(int));
  int lowest = cuda::std::numeric_limits<int>::min();
  cudaMemcpy(largest, &lowest, sizeof(int), cudaMemcpyHostToDevice);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(128);
  cudaLaunchAttribute attributes[2];
  attributes[0].id = cudaLaunchAttributeCooperative;
  attributes[0].val.cooperative = 1;
  attributes[1].id = cudaLaunchAttributePriority;
  attributes[1].val.priority = 0;
  config.attrs = attributes;
  config.numAttrs = 2;
  cudaError_t status = cudaLaunchKernelEx(&config, histogram, (const int*)x, bins, largest, counts, seen, n);
  int hb[8], hl = 0, hs = 0;
  cudaMemcpy(hb, bins, sizeof hb, cudaMemcpyDeviceToHost);
  cudaMemcpy(&hl, largest, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(&hs, seen, sizeof(int), cudaMemcpyDeviceToHost);
  cuda::std::atomic<long long> host_counter(0);
  for (int b = 0; b < 8; ++b) host_counter.fetch_add(hb[b] * (b + 1));
  printf("%d %lld %d %d\n", (int)status, host_counter.load(), hl, hs);
  return 0;
}
"""


def test_libcu_atomics_and_a_cooperative_extensible_launch_compute_what_python_does(tmp_path: Path) -> None:
    outcome = run_program(PROGRAM, str(tmp_path / "histogram.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    x = [(i * 7919) % 1000 for i in range(5000)]
    bins = [sum(1 for v in x if v % 8 == b) for b in range(8)]
    weighted = sum(count * (b + 1) for b, count in enumerate(bins))
    assert outcome.stdout.split() == ["0", str(weighted), str(max(x)), "5000"]


def test_a_launch_in_clusters_of_blocks_stops_with_a_message(tmp_path: Path) -> None:
    program = PROGRAM.replace("attributes[1].id = cudaLaunchAttributePriority;\n  attributes[1].val.priority = 0;",
                              "attributes[1].id = cudaLaunchAttributeClusterDimension;\n"
                              "  attributes[1].val.clusterDim.x = 2; attributes[1].val.clusterDim.y = 1;"
                              " attributes[1].val.clusterDim.z = 1;")
    outcome = run_program(program, str(tmp_path / "clusters.cu"))
    assert outcome.exit_code != 0
    assert "clusters" in outcome.stderr
