"""Host APIs of the runtime that programs call around their kernels: stream callbacks and host functions (run
once the stream's earlier work is done, in order; a callback is told the stream's status), stream-ordered
allocations, mapped host memory
(its device pointer reaches the host data) and pitched allocations (rows at least as wide as asked, the pitch
a multiple of 256 bytes); cache and bank preferences accepted, the defaults reported. The same program through the CPU translation's prelude prints the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.api import run_program
from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

PROGRAM = r"""
#include <cstdio>
__global__ void triple(int* a) {
  long long started = clock64();  // a cycle counter never runs backwards
  a[threadIdx.x] = threadIdx.x * 3 + (clock64() >= started ? 0 : 1000);
}
__global__ void fill(float* p, size_t pitch) {
  float* row = (float*)((char*)p + blockIdx.x * pitch);
  row[threadIdx.x] = blockIdx.x * 100 + threadIdx.x;
}
static int seen[32];
void CUDART_CB done(cudaStream_t, cudaError_t status, void* data) {
  printf("callback %d %s, a[5] = %d\n", *(int*)data, status == cudaSuccess ? "ok" : "failed", seen[5]);
}
void CUDART_CB host_fn(void* data) { printf("host function %d\n", *(int*)data + 1); }
int main() {
  int* d; int tag = 41;
  cudaStream_t s; cudaStreamCreate(&s);
  cudaMallocAsync(&d, sizeof seen, s);
  triple<<<1, 32, 0, s>>>(d);
  cudaMemcpyAsync(seen, d, sizeof seen, cudaMemcpyDeviceToHost, s);
  cudaStreamAddCallback(s, done, &tag, 0);
  cudaLaunchHostFunc(s, host_fn, &tag);
  cudaStreamSynchronize(s);
  cudaFreeAsync(d, s);
  float *mapped, *through;
  cudaHostAlloc((void**)&mapped, 8 * sizeof(float), cudaHostAllocMapped);
  cudaHostGetDevicePointer(&through, mapped, 0);
  through[3] = 2.5f;
  printf("mapped %g\n", mapped[3]);
  float* rows; size_t pitch;
  cudaMallocPitch(&rows, &pitch, 10 * sizeof(float), 3);
  fill<<<3, 10, 0, cudaStreamPerThread>>>(rows, pitch);
  cudaStreamSynchronize(cudaStreamPerThread);
  float back[3][10];
  for (int r = 0; r < 3; ++r) cudaMemcpy(back[r], (char*)rows + r * pitch, sizeof back[r], cudaMemcpyDeviceToHost);
  printf("pitch ok %d, %g %g\n", pitch >= 10 * sizeof(float) && pitch % 256 == 0, back[1][2], back[2][9]);
  cudaSetDeviceFlags(cudaDeviceMapHost | cudaDeviceScheduleBlockingSync);
  int least, greatest; cudaDeviceGetStreamPriorityRange(&least, &greatest);
  cudaStream_t urgent; cudaStreamCreateWithPriority(&urgent, cudaStreamNonBlocking, greatest);
  printf("priorities %d\n", least >= greatest);
  cudaFuncSetCacheConfig(fill, cudaFuncCachePreferShared);
  cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte);
  cudaSharedMemConfig bank; cudaFuncCache cache;
  cudaDeviceGetSharedMemConfig(&bank); cudaDeviceGetCacheConfig(&cache);
  printf("defaults %d %d\n", bank == cudaSharedMemBankSizeFourByte, cache == cudaFuncCachePreferNone);
  return 0;
}
"""
EXPECTED = "callback 41 ok, a[5] = 15\nhost function 42\nmapped 2.5\npitch ok 1, 102 209\npriorities 1\ndefaults 1 1\n"


@pytest.mark.parametrize("dialect", [Dialect.CUDA, Dialect.HIP])
def test_callbacks_mapped_memory_and_pitches_on_the_runtime(tmp_path: Path, dialect: Dialect) -> None:
    text = PROGRAM
    if dialect is Dialect.HIP:  # the same program as HIP spells it (HIP has no CUDART_CB)
        text = (text.replace("CUDART_CB ", "").replace("cuda", "hip").replace("(&through, mapped",
                                                                           "((void**)&through, mapped")
                .replace("(&rows, &pitch", "((void**)&rows, &pitch").replace("hipHostAlloc", "hipHostMalloc"))
    outcome = run_program(text, str(tmp_path / ("p" + dialect.suffix)), source_dialect=dialect)
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    assert outcome.stdout == EXPECTED


def test_the_cpu_translation_runs_them_alike(tmp_path: Path) -> None:
    result = translate(PROGRAM, str(tmp_path / "p.cu"), TranslateOptions(Dialect.C))
    assert result.status == "verified", result.summary
