"""libcu++'s block-scope barrier, asynchronous copies and the pipeline primitives on the runtime
(``<cuda/barrier>``, ``<cooperative_groups/memcpy_async.h>``, ``<cuda_pipeline.h>``). Each program's output is
computed independently in Python; a barrier whose phase can never complete is a hang on a GPU and a reported
deadlock here."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.api import run_program

BARRIER_PROGRAM = r"""
#include <cstdio>
#include <cuda/barrier>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
struct CountPhases {
  int* phases;
  __device__ void operator()() noexcept { ++*phases; }
};
using counted_barrier = cuda::barrier<cuda::thread_scope_block, CountPhases>;
// each chunk copied by the whole block through the barrier; independent work between arrive and wait; a
// second phase before the tile is overwritten; the completion function counts the phases
__global__ void chunks(const float* in, float* out, int* phases_out, int n) {
  __shared__ float tile[128];
  __shared__ counted_barrier bar;
  __shared__ int phases;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) { phases = 0; init(&bar, block.size(), CountPhases{&phases}); }
  block.sync();
  for (int base = blockIdx.x * 128; base < n; base += gridDim.x * 128) {
    int count = min(128, n - base);
    cuda::memcpy_async(block, tile, in + base, sizeof(float) * count, bar);
    counted_barrier::arrival_token token = bar.arrive();
    float bias = threadIdx.x * 0.5f;
    bar.wait(std::move(token));
    if (threadIdx.x < count) out[base + threadIdx.x] = tile[(threadIdx.x + 1) % count] * 2.0f + bias;
    bar.arrive_and_wait();
  }
  if (threadIdx.x == 0) phases_out[blockIdx.x] = phases;
}
int main() {
  const int n = 1000, blocks = 3;
  static float h[n], r[n];
  for (int i = 0; i < n; ++i) h[i] = (i % 11) * 0.25f;
  float *in, *out; int* ph;
  cudaMalloc(&in, sizeof h); cudaMalloc(&out, sizeof r); cudaMalloc(&ph, blocks * sizeof(int));
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  chunks<<<blocks, 128>>>(in, out, ph, n);
  int hp[blocks];
  cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
  cudaMemcpy(hp, ph, sizeof hp, cudaMemcpyDeviceToHost);
  double s = 0; for (int i = 0; i < n; ++i) s += r[i] * (1 + i % 3);
  printf("%.3f %d %d %d\n", s, hp[0], hp[1], hp[2]);
  return 0;
}
"""


def test_barrier_phases_and_block_copies_compute_what_python_does(tmp_path: Path) -> None:
    outcome = run_program(BARRIER_PROGRAM, str(tmp_path / "chunks.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    n, blocks = 1000, 3
    h = [(i % 11) * 0.25 for i in range(n)]
    r = [0.0] * n
    phases = [0] * blocks
    for b in range(blocks):
        for base in range(b * 128, n, blocks * 128):
            count = min(128, n - base)
            for t in range(count):
                r[base + t] = h[base + (t + 1) % count] * 2.0 + t * 0.5
            phases[b] += 2
    total = sum(v * (1 + i % 3) for i, v in enumerate(r))
    assert outcome.stdout.split() == [f"{total:.3f}", *map(str, phases)]


PIPELINE_PROGRAM = r"""
#include <cstdio>
#include <cuda_pipeline.h>
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;
// 16-byte copies of four floats, the tail zero-filled; then a block copy of a second array with cg::wait
__global__ void staged(const float* a, const float* b, float* out, int n) {
  __shared__ float tile[4 * 64];
  __shared__ float other[64 * 4];
  int t = threadIdx.x, quad = blockIdx.x * blockDim.x + t;
  int valid = min(4, max(0, n - quad * 4));
  if (valid > 0) __pipeline_memcpy_async(&tile[4 * t], &a[4 * quad], 16, 16 - 4 * valid);
  else for (int k = 0; k < 4; ++k) tile[4 * t + k] = -1.0f;
  __pipeline_commit();
  __pipeline_wait_prior(0);
  auto block = cg::this_thread_block();
  int base = blockIdx.x * blockDim.x * 4, count = min(256, n - base);
  cg::memcpy_async(block, other, 256, b + base, count);
  cg::wait(block);
  for (int k = 0; k < 4; ++k) {
    int i = base + 4 * t + k;
    if (i < n) out[i] = tile[(4 * t + k + 4) % 256] + other[(4 * t + k + 1) % count];
  }
}
int main() {
  const int n = 1000;
  static float ha[n + 4], hb[n], r[n];  // a's last copy reads past n: the zero-filled bytes stand in for it
  for (int i = 0; i < n + 4; ++i) ha[i] = i < n ? 1.0f + (i % 5) : 1000.0f;
  for (int i = 0; i < n; ++i) hb[i] = (i % 9) * 0.5f;
  float *a, *b, *o;
  cudaMalloc(&a, sizeof ha); cudaMalloc(&b, sizeof hb); cudaMalloc(&o, sizeof r);
  cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice); cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice);
  staged<<<(n + 255) / 256, 64>>>(a, b, o, n);
  cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
  double s = 0; for (int i = 0; i < n; ++i) s += r[i] * (1 + i % 4);
  printf("%.2f\n", s);
  return 0;
}
"""


def _pipeline_expected(n: int) -> float:
    a = [1.0 + (i % 5) for i in range(n)]
    b = [(i % 9) * 0.5 for i in range(n)]
    r = [0.0] * n
    for block in range((n + 255) // 256):
        base = block * 256
        count = min(256, n - base)
        tile = []
        for t in range(64):
            quad = block * 64 + t
            valid = min(4, max(0, n - quad * 4))
            tile += [a[4 * quad + k] if k < valid else 0.0 for k in range(4)] if valid else [-1.0] * 4
        for j in range(256):
            if base + j < n:
                r[base + j] = tile[(j + 4) % 256] + b[base + (j + 1) % count]
    return sum(v * (1 + i % 4) for i, v in enumerate(r))


def test_pipeline_primitives_zero_fill_and_group_copies_compute_what_python_does(tmp_path: Path) -> None:
    outcome = run_program(PIPELINE_PROGRAM, str(tmp_path / "staged.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.strip() == f"{_pipeline_expected(1000):.2f}"


def test_a_barrier_expecting_more_arrivals_than_threads_is_a_deadlock(tmp_path: Path) -> None:
    program = BARRIER_PROGRAM.replace("init(&bar, block.size(), CountPhases{&phases})",
                                      "init(&bar, block.size() + 1, CountPhases{&phases})")
    outcome = run_program(program, str(tmp_path / "hang.cu"))
    assert outcome.exit_code != 0
    assert "deadlock" in outcome.stderr and "barrier phase that cannot complete" in outcome.stderr
