"""The legacy warp-synchronous idiom: the last 64 partial sums of a block reduced by one warp through a volatile
pointer to shared memory, with no __syncwarp between the steps (CUDA's reduction samples before Volta, and
much code since). A GPU's warp executes each statement in step, so every step reads its partner's sum of the
previous step; the runtime runs the warp's lanes in step at each such statement. Sums judged by numpy, in a
device function taking the volatile pointer and inline, for CUDA and for HIP at wave64."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.api import run_program
from xpiler_core.dialect import Dialect
from xpiler_core.project import ProjectConfig

PROGRAM = r"""
#include <cstdio>
template <unsigned B> __device__ void warp_reduce(volatile int* s, unsigned tid) {
  if (B >= 64) s[tid] += s[tid + 32];
  if (B >= 32) s[tid] += s[tid + 16];
  s[tid] += s[tid + 8];
  s[tid] += s[tid + 4];
  s[tid] += s[tid + 2];
  s[tid] += s[tid + 1];
}
template <unsigned B> __global__ void reduce_helper(const int* in, int* out, int n) {
  __shared__ int s[B];
  unsigned tid = threadIdx.x, i = blockIdx.x * B + tid;
  s[tid] = i < n ? in[i] : 0;
  __syncthreads();
  for (unsigned k = B / 2; k > 32; k >>= 1) { if (tid < k) s[tid] += s[tid + k]; __syncthreads(); }
  if (tid < 32) warp_reduce<B>(s, tid);
  if (tid == 0) out[blockIdx.x] = s[0];
}
__global__ void reduce_inline(const int* in, int* out, int n) {
  __shared__ int s[128];
  unsigned tid = threadIdx.x, i = blockIdx.x * 128 + tid;
  s[tid] = i < n ? in[i] : 0;
  __syncthreads();
  if (tid < 64) s[tid] += s[tid + 64];
  __syncthreads();
  if (tid < 32) {
    volatile int* v = s;
    for (int k = 32; k > 0; k >>= 1) v[tid] += v[tid + k];
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
int main(int argc, char** argv) {
  int n = atoi(argv[1]), blocks = (n + 127) / 128;
  int* h = new int[n]; int* part = new int[blocks];
  for (int i = 0; i < n; ++i) h[i] = (i * 7919 + 13) % 1000 - 500;
  int *in, *out;
  cudaMalloc(&in, n * sizeof(int)); cudaMalloc(&out, blocks * sizeof(int));
  cudaMemcpy(in, h, n * sizeof(int), cudaMemcpyHostToDevice);
  long long a = 0, b = 0;
  reduce_helper<128><<<blocks, 128>>>(in, out, n);
  cudaMemcpy(part, out, blocks * sizeof(int), cudaMemcpyDeviceToHost);
  for (int k = 0; k < blocks; ++k) a += part[k];
  reduce_inline<<<blocks, 128>>>(in, out, n);
  cudaMemcpy(part, out, blocks * sizeof(int), cudaMemcpyDeviceToHost);
  for (int k = 0; k < blocks; ++k) b += part[k];
  printf("%lld %lld\n", a, b);
  return 0;
}
"""


@pytest.mark.parametrize("dialect", [Dialect.CUDA, Dialect.HIP])
@settings(max_examples=3, deadline=None)
@given(n=st.integers(min_value=1, max_value=3000))
def test_a_warp_reduces_through_a_volatile_pointer_in_step(tmp_path_factory: pytest.TempPathFactory,
                                                          dialect: Dialect, n: int) -> None:
    text = PROGRAM.replace("cuda", "hip") if dialect is Dialect.HIP else PROGRAM
    folder: Path = tmp_path_factory.mktemp("warpsync")
    outcome = run_program(text, str(folder / ("p" + dialect.suffix)), source_dialect=dialect,
                          project=ProjectConfig(program_args=(str(n),)))
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    total = int(((np.arange(n, dtype=np.int64) * 7919 + 13) % 1000 - 500).sum())
    assert outcome.stdout.split() == [str(total), str(total)]


def test_the_cpu_translation_does_not_run_the_idiom_thread_after_thread(tmp_path: Path) -> None:
    """A loop over a block's threads runs one thread's steps after another's and would read partners' sums a
    step early: the structural tier refuses the volatile pointer — in the kernel, and in a device function the
    kernel calls without inlining it (no barrier in it) — and the portable tier runs the warps in step."""
    from xpiler_core.pipeline import TranslateOptions, translate

    source = tmp_path / "warpsync.cu"
    source.write_text(PROGRAM)
    result = translate(PROGRAM, str(source), TranslateOptions(Dialect.C, project=ProjectConfig(program_args=("1000",))))
    assert result.status == "verified", result.summary
    assert "volatile pointer" in str(result.summary)
    # the helper alone: its kernel has no volatile name of its own
    helper_only = PROGRAM[:PROGRAM.index("__global__ void reduce_inline")] + PROGRAM[PROGRAM.index("int main"):]
    helper_only = helper_only.replace("  reduce_inline<<<blocks, 128>>>(in, out, n);\n", "")
    result = translate(helper_only, str(source), TranslateOptions(Dialect.C, verify=False))
    assert "xpiler portable tier" in result.output_text and "'s' reaches memory through a volatile" in result.output_text


def test_an_unverified_cpu_translation_of_the_program_is_the_portable_tier(tmp_path: Path) -> None:
    """With verification off nothing would notice a loop over threads taking the steps one thread after
    another: the program is written on the portable tier, built as its header says, and prints numpy's sums."""
    import subprocess

    from xpiler_core.pipeline import TranslateOptions, translate

    source = tmp_path / "warpsync.cu"
    source.write_text(PROGRAM)
    result = translate(PROGRAM, str(source), TranslateOptions(Dialect.C, verify=False))
    assert result.output_text and "xpiler portable tier" in result.output_text
    out = tmp_path / "out"
    out.mkdir()
    (out / "p.cpp").write_text(result.output_text)
    for name, text in result.companions.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    subprocess.run(["g++", "-std=c++17", "-O2", "-fno-strict-aliasing", "-pthread", "p.cpp", "-o", "p"], cwd=out,
                   check=True, capture_output=True, timeout=600)
    printed = subprocess.run(["./p", "2000"], cwd=out, capture_output=True, text=True, timeout=60).stdout
    total = int(((np.arange(2000, dtype=np.int64) * 7919 + 13) % 1000 - 500).sum())
    assert printed.split() == [str(total), str(total)]


def test_a_host_device_function_with_a_volatile_pointer_runs_on_the_host_too(tmp_path: Path) -> None:
    # the warp's meeting after each volatile statement is no meeting when host code calls the function
    text = (
        "#include <cstdio>\n__host__ __device__ void bump(volatile int* v, int i) { v[i] += 1; }\n"
        "__global__ void k(int* a) { bump(a, threadIdx.x); }\n"
        "int main() { int h[4] = {1, 2, 3, 4}; bump(h, 2); int* d; cudaMalloc(&d, sizeof h);\n"
        "  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice); k<<<1, 4>>>(d);\n"
        "  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost); printf(\"%d %d %d %d\\n\", h[0], h[1], h[2], h[3]);\n"
        "  return 0; }\n")
    outcome = run_program(text, str(tmp_path / "hd.cu"))
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    assert outcome.stdout.split() == ["2", "3", "5", "5"]


LOOKBACK = r"""
#include <hip/hip_runtime.h>
#include <cstdio>
// Lanes below `readers` read a flag through a volatile pointer (a look-back's window), the others take the
// other branch; after the branch every lane of the half-wave votes with HIP's maskless __ballot and sums with
// __shfl_xor: a wavefront runs both after it has left the branch, so the vote counts every lane.
__global__ void look_back(volatile int* flags, int readers, unsigned long long* votes, int* sums) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int flag;
    if (lane < readers) flag = flags[lane];
    else flag = 1;
    const unsigned long long vote = __ballot(flag == 1);
    int sum = flag;
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor(sum, off, 32);
    if (lane == 0) { votes[blockIdx.x] = vote & 0xffffffffull; sums[blockIdx.x] = sum; }
  }
  __syncthreads();
}
int main(int argc, char** argv) {
  const int readers = atoi(argv[1]);
  int h[32]; for (int i = 0; i < 32; ++i) h[i] = 1;
  int *flags, *sums; unsigned long long* votes;
  hipMalloc(&flags, sizeof h); hipMalloc(&votes, 2 * sizeof(unsigned long long)); hipMalloc(&sums, 2 * sizeof(int));
  hipMemcpy(flags, h, sizeof h, hipMemcpyHostToDevice);
  hipLaunchKernelGGL(look_back, dim3(2), dim3(128), 0, 0, flags, readers, votes, sums);
  unsigned long long v[2]; int s[2];
  hipMemcpy(v, votes, sizeof v, hipMemcpyDeviceToHost);
  hipMemcpy(s, sums, sizeof s, hipMemcpyDeviceToHost);
  printf("%llx %d %llx %d\n", v[0], s[0], v[1], s[1]);
  return 0;
}
"""


@pytest.mark.parametrize("readers", [1, 5, 31])
def test_a_maskless_vote_after_a_branch_of_volatile_reads_counts_every_lane(tmp_path: Path, readers: int) -> None:
    """The lanes that read through the volatile pointer meet in step inside the branch; the vote after it must
    not run without them (it did: lane 0 voted alone, a step behind, and the look-back summed 8 times)."""
    outcome = run_program(LOOKBACK, str(tmp_path / "lookback.hip"), source_dialect=Dialect.HIP,
                          project=ProjectConfig(program_args=(str(readers),)))
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    assert outcome.stdout.split() == ["ffffffff", "32", "ffffffff", "32"]


DIVERGENT_VOTES = r"""
#include <cstdio>
__device__ int vote_all(int p) { return __all(p); }   // one call site for every caller
__device__ int vote_any(int p) { return __any(p); }
__global__ void votes(int* out, int skipped) {
  const int lane = threadIdx.x;
  int inside = -1;
  if (lane >= skipped) inside = __all(lane);          // lanes below `skipped` do not vote here
  const int after = __any(lane < skipped);            // every lane of the wavefront votes
  int helper_inside = -1;
  if (lane >= skipped) helper_inside = vote_all(lane);
  const int helper_after = vote_any(lane < skipped);
  const int wrapped_inside = lane >= skipped ? (int)xpiler_ballot32(1) : -1;
  const int wrapped_after = (int)xpiler_ballot32(1);
  if (lane == 63) { out[0] = inside; out[1] = after; out[2] = helper_inside; out[3] = helper_after;
                    out[4] = wrapped_inside; out[5] = wrapped_after; }
}
int main(int argc, char** argv) {
  const int skipped = atoi(argv[1]);
  int* d; hipMalloc(&d, 6 * sizeof(int));
  hipLaunchKernelGGL(votes, dim3(1), dim3(64), 0, 0, d, skipped);
  int h[6]; hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost);
  printf("%d %d %d %d %x %x\n", h[0], h[1], h[2], h[3], h[4], h[5]);
  return 0;
}
"""


@pytest.mark.parametrize("skipped", [1, 3, 40])
def test_maskless_votes_after_a_branch_some_lanes_skip_see_every_lane(tmp_path: Path, skipped: int) -> None:
    """HIP (wave64): lanes that skip a branch reach the next maskless vote first; on the GPU the wavefront
    finishes the branch (its vote over the lanes in it) and then votes with every lane. Also through a helper
    that all callers share (one call site) and through the warp_size pass's 32-lane helper (its block as the
    translation holds it), whose vote takes its caller's line on the runtime. Expected values from the vote semantics: `__all(lane)` over lanes >= skipped is 1 (no
    lane 0 among them when skipped >= 1); `__any(lane < skipped)` over all 64 lanes is 1; lane 63's 32-lane half
    inside the branch holds lanes max(skipped, 32)..63."""
    from xpiler_core.passes.gpu.warp_size import HELPERS  # as the translation holds them

    source = "#include <hip/hip_runtime.h>\n#include <cstdlib>\n" + HELPERS + DIVERGENT_VOTES
    outcome = run_program(source, str(tmp_path / "votes.hip"), source_dialect=Dialect.HIP,
                          project=ProjectConfig(program_args=(str(skipped),)))
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    half_inside = sum(1 << (lane - 32) for lane in range(max(skipped, 32), 64))
    assert outcome.stdout.split() == ["1", "1", "1", "1", f"{half_inside:x}", "ffffffff"]
