"""Managed-memory hints on the runtime: ``cudaMemPrefetchAsync`` (to a device or ``cudaCpuDeviceId``) and
``cudaMemAdvise`` succeed and change no data, as on a GPU (one address space here). Programs from public
tutorials call them around kernels on managed memory; they were missing from the runtime, so neither the source
nor its translations could run."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.cli import main

PROGRAM = r"""#include <cstdio>
#include <cuda_runtime.h>
__global__ void inc(int* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1; }
int main() {
  int n = 1000, *a, dev = 0;
  cudaMallocManaged(&a, n * sizeof(int));
  for (int i = 0; i < n; ++i) a[i] = i;
  cudaGetDevice(&dev);
  cudaError_t e1 = cudaMemAdvise(a, n * sizeof(int), cudaMemAdviseSetPreferredLocation, dev);
  cudaError_t e2 = cudaMemPrefetchAsync(a, n * sizeof(int), dev);
  inc<<<(n + 255) / 256, 256>>>(a, n);
  cudaError_t e3 = cudaMemPrefetchAsync(a, n * sizeof(int), cudaCpuDeviceId, 0);
  cudaDeviceSynchronize();
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += a[i] != i + 1;
  printf("errors %d %d %d wrong %d cpu %d\n", e1, e2, e3, wrong, cudaCpuDeviceId);
  cudaFree(a);
  return 0;
}
"""


def test_prefetch_and_advice_succeed_and_keep_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "prefetch.cu"
    source.write_text(PROGRAM)
    assert main(["run", str(source)]) == 0
    assert "errors 0 0 0 wrong 0 cpu -1" in capsys.readouterr().out
