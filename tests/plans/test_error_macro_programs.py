"""Programs in the style of the CUDA Handbook's chError.h: a project header that includes <cuda.h> inside nested
switches (``#ifndef NO_CUDA`` … ``#else`` stand-ins), an error-check macro that pastes the call onto the API
prefix (``cuda(HostAlloc(&p, …))`` → ``cuda##fn``), the driver API's CUresult codes, CUDA's per-architecture
header and the funnel-shift intrinsics. The source's output is judged against the intrinsics' documented
semantics (Python on the 64-bit concatenation); the HIP translation must build with hipcc (a typed pointer
through the pasted ``hipHostAlloc``) and both translations must reproduce the source's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.api import run_program, translate
from xpiler_core.dialect import Dialect
from xpiler_core.progress import CancelToken
from xpiler_core.project import ProjectConfig

HEADER = r"""#ifndef CH_ERROR_H
#define CH_ERROR_H
#ifndef NO_CUDA
#ifndef DYNLINK_GUARD
#include <cuda.h>
#endif
#else
#define __global__
#endif
#define cuda(fn) do { status = (cuda##fn); if (status != cudaSuccess) goto Error; } while (0)
inline const char* ch_name(CUresult r) { return r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "other"; }
#endif
"""

PROGRAM = r"""#include <cstdio>
#include "chError.h"
#include <sm_35_intrinsics.h>
__global__ void shifts(unsigned* out, const unsigned* lo, const unsigned* hi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned s = i % 40;
    out[4 * i + 0] = __funnelshift_l(lo[i], hi[i], s);
    out[4 * i + 1] = __funnelshift_lc(lo[i], hi[i], s);
    out[4 * i + 2] = __funnelshift_r(lo[i], hi[i], s);
    out[4 * i + 3] = __funnelshift_rc(lo[i], hi[i], s);
  }
}
int main() {
  cudaError_t status;
  const int n = 100;
  unsigned *hlo, *hhi, *dout, *dlo, *dhi;
  unsigned hout[4 * n];
  cuda(HostAlloc(&hlo, n * sizeof(unsigned), cudaHostAllocMapped));
  cuda(HostAlloc(&hhi, n * sizeof(unsigned), 0));
  for (int i = 0; i < n; ++i) { hlo[i] = i * 2654435761u; hhi[i] = ~(i * 40503u); }
  cuda(Malloc(&dout, sizeof hout));
  cuda(Malloc(&dlo, n * sizeof(unsigned)));
  cuda(Malloc(&dhi, n * sizeof(unsigned)));
  cuda(Memcpy(dlo, hlo, n * sizeof(unsigned), cudaMemcpyHostToDevice));
  cuda(Memcpy(dhi, hhi, n * sizeof(unsigned), cudaMemcpyHostToDevice));
  shifts<<<1, 128>>>(dout, dlo, dhi, n);
  cuda(Memcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 4 * n; ++i) printf("%u\n", hout[i]);
  printf("%s\n", ch_name(CUDA_SUCCESS));
  cudaFreeHost(hlo); cudaFreeHost(hhi);
  return 0;
Error:
  fprintf(stderr, "failed\n");
  return 1;
}
"""


def _expected() -> list[str]:
    out: list[str] = []
    for i in range(100):
        lo, hi, s = (i * 2654435761) & 0xFFFFFFFF, ~(i * 40503) & 0xFFFFFFFF, i % 40
        v = (hi << 32) | lo
        out += [str(((v << (s & 31)) >> 32) & 0xFFFFFFFF), str(((v << min(s, 32)) >> 32) & 0xFFFFFFFF),
                str((v >> (s & 31)) & 0xFFFFFFFF), str((v >> min(s, 32)) & 0xFFFFFFFF)]
    return [*out, "CUDA_SUCCESS"]


@pytest.fixture()
def project(tmp_path: Path) -> tuple[Path, ProjectConfig]:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "chError.h").write_text(HEADER)
    main = tmp_path / "shift.cu"
    main.write_text(PROGRAM)
    return main, ProjectConfig(include_dirs=(str(tmp_path / "lib"),))


def test_the_source_computes_the_documented_funnel_shifts_on_the_runtime(project: tuple[Path, ProjectConfig]) -> None:
    main, config = project
    outcome = run_program(PROGRAM, str(main), project=config)
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    assert outcome.stdout.split() == _expected()


@pytest.mark.parametrize("target", [Dialect.HIP, Dialect.C])
def test_translations_build_and_reproduce_the_source(project: tuple[Path, ProjectConfig], target: Dialect) -> None:
    main, config = project
    result = translate(PROGRAM, str(main), target, warp_size=None, spec_path=None, verify=True, proposer="rules",
                       progress=lambda *_: None, cancel=CancelToken(), project=config)
    assert result.status == "verified", result.reason
    if target is Dialect.HIP:
        assert "hip##fn" in "".join(result.companions.values()) + result.output_text
