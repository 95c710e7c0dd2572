"""3-D pitched memory as CUDA defines it: ``cudaMalloc3D`` (rows of ``extent.width`` bytes, ``pitch`` apart, a
multiple of 256 bytes here as on GPUs), ``cudaMemcpy3D`` between pitched pointers with byte/row/slice positions
(``x`` of a position in bytes), ``cudaMemset3D`` on a sub-extent, the ``make_cuda*`` constructors. The
program's output is computed independently with numpy; the runtime runs it, and its HIP and CPU translations
are verified against that run (hipcc compiles the HIP one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xpiler_core.api import run_program
from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

NX, NY, NZ = 5, 3, 4

PROGRAM = r"""
#include <cstdio>
__global__ void scale(cudaPitchedPtr p, int nx) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
  if (x >= nx) return;
  float* row = (float*)((char*)p.ptr + (z * p.ysize + y) * p.pitch);
  row[x] = row[x] * (z + 1) + y;
}
int main() {
  const int nx = 5, ny = 3, nz = 4;
  static float host[nz][ny][nx], back[nz][ny][nx];
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) { host[z][y][x] = z * 100 + y * 10 + x; back[z][y][x] = -1; }
  cudaExtent whole = make_cudaExtent(nx * sizeof(float), ny, nz);
  cudaPitchedPtr d;
  cudaMalloc3D(&d, whole);
  cudaMemcpy3DParms in = {0};
  in.srcPtr = make_cudaPitchedPtr(host, nx * sizeof(float), nx, ny);
  in.dstPtr = d;
  in.extent = whole;
  in.kind = cudaMemcpyHostToDevice;
  cudaMemcpy3D(&in);
  scale<<<dim3(1, ny, nz), 8>>>(d, nx);
  cudaMemset3D(d, 0, make_cudaExtent(nx * sizeof(float), ny, 1));  // the first slice zeroed
  cudaMemcpy3DParms out = {0};
  out.srcPtr = d;
  out.srcPos = make_cudaPos(sizeof(float), 1, 1);  // from element (1, 1, 1): x in bytes
  out.dstPtr = make_cudaPitchedPtr(back, nx * sizeof(float), nx, ny);
  out.dstPos = make_cudaPos(0, 0, 0);
  out.extent = make_cudaExtent((nx - 1) * sizeof(float), ny - 1, nz - 1);
  out.kind = cudaMemcpyDeviceToHost;
  cudaMemcpy3D(&out);
  printf("pitch ok %d\n", d.pitch >= nx * sizeof(float) && d.pitch % 256 == 0);
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y) {
      for (int x = 0; x < nx; ++x) printf("%g ", back[z][y][x]);
      printf("\n");
    }
  cudaFree(d.ptr);
  return 0;
}
"""


def expected_output() -> str:
    z, y, x = np.meshgrid(np.arange(NZ), np.arange(NY), np.arange(NX), indexing="ij")
    volume = (z * 100 + y * 10 + x) * (z + 1) + y
    volume[0] = 0
    back = np.full((NZ, NY, NX), -1)
    back[: NZ - 1, : NY - 1, : NX - 1] = volume[1:, 1:, 1:]
    rows = ["".join(f"{v:g} " for v in row) for row in back.reshape(NZ * NY, NX)]
    return "pitch ok 1\n" + "\n".join(rows) + "\n"


def test_the_runtime_runs_3d_copies_as_cuda_defines_them(tmp_path: Path) -> None:
    outcome = run_program(PROGRAM, str(tmp_path / "p.cu"), source_dialect=Dialect.CUDA)
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    assert outcome.stdout == expected_output()


@pytest.mark.parametrize("target", [Dialect.HIP, Dialect.C])
def test_translations_run_them_alike(tmp_path: Path, target: Dialect) -> None:
    result = translate(PROGRAM, str(tmp_path / "p.cu"), TranslateOptions(target))
    assert result.status == "verified", result.summary
