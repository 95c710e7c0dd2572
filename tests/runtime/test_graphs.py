"""CUDA graphs on the runtime (graph.h): stream capture records a stream's work, and the work of the streams that
wait on its events, as a graph instead of running it; an explicit graph runs its nodes in dependency order, a
kernel node with the arguments it was given when it was made. The program's output is computed independently
with numpy (the captured fork/join, a second launch re-reading the host buffer, dependencies added after the
node); the runtime runs it, and its HIP translation (hipcc: CUDA 12's cudaGraphInstantiate as
hipGraphInstantiateWithFlags) is verified against that run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xpiler_core.api import run_program
from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

PROGRAM = r"""
#include <cstdio>
__global__ void axpb(float* y, const float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
__global__ void add(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}
static int host_calls = 0;
void CUDART_CB note(void* p) { host_calls += *(int*)p; }
int main() {
  const int n = 50;
  float hx[n], hy[n];
  for (int i = 0; i < n; ++i) { hx[i] = i * 0.5f; hy[i] = -1.0f; }
  float *x, *y, *z;
  cudaMalloc(&x, sizeof hx); cudaMalloc(&y, sizeof hx); cudaMalloc(&z, sizeof hx);
  cudaStream_t s1, s2;
  cudaStreamCreate(&s1); cudaStreamCreate(&s2);
  cudaEvent_t fork, join;
  cudaEventCreate(&fork); cudaEventCreate(&join);
  // captured: x in on s1; z = 2x + 1 on s2 and y = x - 3 on s1 side by side; then y += z, a host call, y out
  cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal);
  cudaMemcpyAsync(x, hx, sizeof hx, cudaMemcpyHostToDevice, s1);
  cudaEventRecord(fork, s1);
  cudaStreamWaitEvent(s2, fork, 0);
  axpb<<<2, 32, 0, s2>>>(z, x, 2.0f, 1.0f, n);
  axpb<<<2, 32, 0, s1>>>(y, x, 1.0f, -3.0f, n);
  cudaEventRecord(join, s2);
  cudaStreamWaitEvent(s1, join, 0);
  add<<<2, 32, 0, s1>>>(y, z, n);
  int one = 1;
  cudaLaunchHostFunc(s1, note, &one);
  cudaMemcpyAsync(hy, y, sizeof hy, cudaMemcpyDeviceToHost, s1);
  cudaGraph_t captured;
  cudaStreamEndCapture(s1, &captured);
  printf("before launch: %.2f %d\n", hy[5], host_calls);
  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, captured, 0);
  cudaGraphLaunch(exec, s1);
  cudaStreamSynchronize(s1);
  printf("captured: %.2f %.2f %d\n", hy[5], hy[n - 1], host_calls);
  for (int i = 0; i < n; ++i) hx[i] = i * 0.25f;
  cudaGraphLaunch(exec, s1);  // again: the host buffer is read again
  cudaStreamSynchronize(s1);
  printf("again: %.2f %.2f %d\n", hy[5], hy[n - 1], host_calls);
  // explicit: the sum node made first, its dependencies (a memset of z, y = 4x + 0.5) added after
  cudaGraph_t g;
  cudaGraphCreate(&g, 0);
  cudaGraphNode_t sum, zero, scale, out;
  float a = 4.0f, b = 0.5f;
  int count = n;
  void* sum_args[3] = {(void*)&y, (void*)&z, (void*)&count};
  cudaKernelNodeParams sum_params = {0};
  sum_params.func = (void*)add;
  sum_params.gridDim = dim3(2);
  sum_params.blockDim = dim3(32);
  sum_params.kernelParams = sum_args;
  cudaGraphAddKernelNode(&sum, g, NULL, 0, &sum_params);
  cudaMemsetParams zero_params = {0};
  zero_params.dst = z;
  zero_params.value = 0;
  zero_params.elementSize = sizeof(float);
  zero_params.width = n;
  zero_params.height = 1;
  cudaGraphAddMemsetNode(&zero, g, NULL, 0, &zero_params);
  void* scale_args[5] = {(void*)&y, (void*)&x, (void*)&a, (void*)&b, (void*)&count};
  cudaKernelNodeParams scale_params = {0};
  scale_params.func = (void*)axpb;
  scale_params.gridDim = dim3(2);
  scale_params.blockDim = dim3(32);
  scale_params.kernelParams = scale_args;
  cudaGraphAddKernelNode(&scale, g, NULL, 0, &scale_params);
  a = 100.0f;  // the node copied its arguments when it was made
  cudaGraphNode_t from[2] = {zero, scale}, to[2] = {sum, sum};
#if CUDART_VERSION >= 13000
  cudaGraphAddDependencies(g, from, to, NULL, 2);  // CUDA 13: edge data
#else
  cudaGraphAddDependencies(g, from, to, 2);
#endif
  cudaGraphAddMemcpyNode1D(&out, g, &sum, 1, hy, y, sizeof hy, cudaMemcpyDeviceToHost);
  cudaGraphExec_t explicit_exec;
  cudaGraphInstantiate(&explicit_exec, g, NULL, NULL, 0);
  cudaGraphDestroy(g);  // the instantiation stays valid
  cudaGraphLaunch(explicit_exec, 0);
  cudaDeviceSynchronize();
  printf("explicit: %.2f %.2f\n", hy[5], hy[n - 1]);
  cudaGraphExecDestroy(exec); cudaGraphExecDestroy(explicit_exec); cudaGraphDestroy(captured);
  cudaFree(x); cudaFree(y); cudaFree(z);
  return 0;
}
"""


def expected() -> list[str]:
    n = 50
    i = np.arange(n, dtype=np.float32)
    lines = ["before launch: -1.00 0"]
    for label, x, calls in (("captured", i * np.float32(0.5), 1), ("again", i * np.float32(0.25), 2)):
        z = np.float32(2) * x + np.float32(1)
        y = (x - np.float32(3)) + z
        lines.append(f"{label}: {y[5]:.2f} {y[n - 1]:.2f} {calls}")
    x = i * np.float32(0.25)  # the device copy the second launch left
    y = np.float32(4) * x + np.float32(0.5) + np.zeros(n, np.float32)  # a = 4 as made, z zeroed first
    lines.append(f"explicit: {y[5]:.2f} {y[n - 1]:.2f}")
    return lines


def test_captured_and_explicit_graphs_run_as_numpy_says(tmp_path: Path) -> None:
    outcome = run_program(PROGRAM, str(tmp_path / "graphs.cu"))
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.splitlines() == expected()


def test_the_hip_translation_compiles_and_agrees(tmp_path: Path) -> None:
    result = translate(PROGRAM, str(tmp_path / "graphs.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "verified", result.summary
    assert "hipGraphInstantiateWithFlags" in result.output_text


# node parameters given by positional brace initializers: api_map reorders them into HIP's member order, which the
# runtime's HIP structs must share (the runtime declared HIP's in CUDA's order: the translation did not build)
POSITIONAL = r"""
#include <cstdio>
__global__ void fill(float* y, float v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += v; }
int main() {
  const int n = 64;
  float* y; cudaMalloc(&y, n * sizeof(float));
  float v = 2.5f; int nn = n;
  void* args[] = {&y, &v, &nn};
  cudaGraph_t g; cudaGraphCreate(&g, 0);
  cudaGraphNode_t set, add;
  cudaMemsetParams m = {y, 0, 0, sizeof(float), (size_t)n, 1};
  cudaGraphAddMemsetNode(&set, g, NULL, 0, &m);
  cudaKernelNodeParams k = {reinterpret_cast<void*>(fill), dim3(2), dim3(32), 0, args, nullptr};
  cudaGraphAddKernelNode(&add, g, &set, 1, &k);
  cudaGraphExec_t e; cudaGraphInstantiate(&e, g, NULL, NULL, 0);
  cudaGraphLaunch(e, 0); cudaGraphLaunch(e, 0);
  float h[n]; cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
  printf("%.2f %.2f\n", h[0], h[n - 1]);
  return 0;
}
"""


def test_positional_node_parameters_run_in_each_apis_member_order(tmp_path: Path) -> None:
    """The kernel named through reinterpret_cast<void*> too; the CPU translation stays structural."""
    outcome = run_program(POSITIONAL, str(tmp_path / "positional.cu"))
    assert outcome.stdout.strip() == "2.50 2.50"  # each launch: zeroed, then one addition
    result = translate(POSITIONAL, str(tmp_path / "positional.cu"), TranslateOptions(Dialect.HIP))
    assert result.status == "verified", result.summary
    on_cpu = translate(POSITIONAL, str(tmp_path / "positional.cu"), TranslateOptions(Dialect.C))
    assert on_cpu.status == "verified" and on_cpu.evidence is not None, on_cpu.summary
    assert on_cpu.evidence.facts.get("tier") == "structural"
