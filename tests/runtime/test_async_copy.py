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


PIPELINE_OBJECT_PROGRAM = r"""
#include <cstdio>
#include <cuda/pipeline>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
constexpr int kStages = 2, kThreads = 64;
// a two-stage pipeline shared by the block: every thread copies its element of a batch, consumers read a
// neighbour's element (so the stage must be full), and the next batch is prefetched after the release
__global__ void unified(const int* in, int* out, int batches) {
  __shared__ int buffer[kStages][kThreads];
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, kStages> state;
  auto block = cg::this_thread_block();
  auto pipe = cuda::make_pipeline(block, &state);
  int t = threadIdx.x;
  for (int s = 0; s < kStages && s < batches; ++s) {
    pipe.producer_acquire();
    cuda::memcpy_async(&buffer[s][t], &in[(blockIdx.x * batches + s) * kThreads + t], sizeof(int), pipe);
    pipe.producer_commit();
  }
  for (int b = 0; b < batches; ++b) {
    int s = b % kStages;
    pipe.consumer_wait();
    out[(blockIdx.x * batches + b) * kThreads + t] = buffer[s][(t + 1) % kThreads] * 3 + buffer[s][t];
    pipe.consumer_release();
    if (b + kStages < batches) {
      pipe.producer_acquire();
      cuda::memcpy_async(&buffer[s][t], &in[(blockIdx.x * batches + b + kStages) * kThreads + t], sizeof(int), pipe);
      pipe.producer_commit();
    }
  }
}
// the first warp produces whole batches (a group copy by the warp), the other threads consume them
__global__ void roles(const int* in, int* out, int batches) {
  __shared__ int buffer[kStages][kThreads];
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, kStages> state;
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  bool producer = threadIdx.x < 32;
  auto pipe = cuda::make_pipeline(block, &state, producer ? cuda::pipeline_role::producer : cuda::pipeline_role::consumer);
  for (int b = 0; b < batches; ++b) {
    int s = b % kStages;
    if (producer) {
      pipe.producer_acquire();
      cuda::memcpy_async(warp, buffer[s], &in[(blockIdx.x * batches + b) * kThreads], sizeof(int) * kThreads, pipe);
      pipe.producer_commit();
    } else {
      pipe.consumer_wait();
      int c = threadIdx.x - 32;
      out[(blockIdx.x * batches + b) * 32 + c] = buffer[s][2 * c] - buffer[s][2 * c + 1];
      pipe.consumer_release();
    }
  }
}
// one thread's own pipeline: its copies, then the block's barrier before reading the others'
__global__ void per_thread(const int* in, int* out) {
  __shared__ int tile[kThreads];
  auto pipe = cuda::make_pipeline();
  pipe.producer_acquire();
  cuda::memcpy_async(&tile[threadIdx.x], &in[blockIdx.x * kThreads + threadIdx.x], sizeof(int), pipe);
  pipe.producer_commit();
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncthreads();
  out[blockIdx.x * kThreads + threadIdx.x] = tile[kThreads - 1 - threadIdx.x];
  pipe.consumer_release();
}
int main() {
  const int blocks = 3, batches = 5, n = blocks * batches * kThreads;
  static int h[n], u[n], r[n / 2], p[blocks * kThreads];
  for (int i = 0; i < n; ++i) h[i] = (i * 37) % 101 - 50;
  int *in, *out, *half, *pt;
  cudaMalloc(&in, sizeof h); cudaMalloc(&out, sizeof u); cudaMalloc(&half, sizeof r); cudaMalloc(&pt, sizeof p);
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  unified<<<blocks, kThreads>>>(in, out, batches);
  roles<<<blocks, kThreads>>>(in, half, batches);
  per_thread<<<blocks, kThreads>>>(in, pt);
  cudaMemcpy(u, out, sizeof u, cudaMemcpyDeviceToHost);
  cudaMemcpy(r, half, sizeof r, cudaMemcpyDeviceToHost);
  cudaMemcpy(p, pt, sizeof p, cudaMemcpyDeviceToHost);
  long long a = 0, b = 0, c = 0;
  for (int i = 0; i < n; ++i) a += (long long)u[i] * (1 + i % 5);
  for (int i = 0; i < n / 2; ++i) b += (long long)r[i] * (1 + i % 3);
  for (int i = 0; i < blocks * kThreads; ++i) c += (long long)p[i] * (1 + i % 7);
  printf("%lld %lld %lld\n", a, b, c);
  return 0;
}
"""


def test_pipelines_shared_by_the_block_split_by_role_and_per_thread_compute_what_python_does(tmp_path: Path) -> None:
    outcome = run_program(PIPELINE_OBJECT_PROGRAM, str(tmp_path / "pipes.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    blocks, batches, threads = 3, 5, 64
    h = [(i * 37) % 101 - 50 for i in range(blocks * batches * threads)]
    unified = [0] * len(h)
    roles = [0] * (len(h) // 2)
    for blk in range(blocks):
        for b in range(batches):
            base = (blk * batches + b) * threads
            for t in range(threads):
                unified[base + t] = h[base + (t + 1) % threads] * 3 + h[base + t]
            for c in range(32):
                roles[(blk * batches + b) * 32 + c] = h[base + 2 * c] - h[base + 2 * c + 1]
    per_thread = [h[blk * threads + threads - 1 - t] for blk in range(blocks) for t in range(threads)]
    expected = [sum(v * (1 + i % 5) for i, v in enumerate(unified)), sum(v * (1 + i % 3) for i, v in enumerate(roles)),
                sum(v * (1 + i % 7) for i, v in enumerate(per_thread))]
    assert outcome.stdout.split() == [str(v) for v in expected]
