"""Device memory on the runtime is bounds-checked (``include/xpiler/device_heap.h``): the source's own
out-of-bounds accesses are reported with the buffer and the file:line of its allocation, and a translation of
such a source is never called verified (issue 31: a benchmark kernel storing whole tiles past its output
verified on the cases left, then its CPU translation corrupted the heap). Correct programs see CUDA's
guarantees: 256-byte aligned blocks, cudaFree(nullptr) succeeds, a second free is an error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from xpiler_core.cli import main

PROGRAMS = {
    "slack": r"""
__global__ void store(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
int main() { float* d; cudaMalloc(&d, 1000 * sizeof(float)); store<<<4, 251>>>(d); cudaFree(d); return 0; }
""",
    "far": r"""
__global__ void store(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
int main() { float* d; cudaMalloc(&d, 1000 * sizeof(float)); store<<<16, 256>>>(d); cudaFree(d); return 0; }
""",
    "after_free": r"""
__global__ void load(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }
int main() { float *a, *b; cudaMalloc(&a, 4096); cudaMalloc(&b, 4096); cudaFree(a); load<<<1, 32>>>(a, b);
  return 0; }
""",
    "host_copy": r"""
#include <vector>
int main() { float* d; cudaMalloc(&d, 100 * sizeof(float)); std::vector<float> h(5000, 1.0f);
  cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice); return 0; }
""",
    "correct": r"""
#include <cstdio>
#include <cstdint>
__global__ void twice(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i]; }
int main() {
  const int n = 1001; float *x, *y; cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float) + 3);
  float h[n]; for (int i = 0; i < n; ++i) h[i] = i;
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice); twice<<<(n + 127) / 128, 128>>>(x, y, n);
  cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
  bool aligned = (reinterpret_cast<uintptr_t>(x) % 256 == 0) && (reinterpret_cast<uintptr_t>(y) % 256 == 0);
  int null_free = cudaFree(nullptr), first = cudaFree(x), second = cudaFree(x);
  printf("%s %d %d %d %.0f\n", aligned ? "aligned" : "misaligned", null_free, first, second != 0, h[1000]);
  return 0; }
""",
}


def run(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    source = tmp_path / f"{name}.cu"
    source.write_text(PROGRAMS[name])
    code = main(["run", str(source)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_store_into_the_slack_is_reported_with_the_allocation(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(tmp_path, "slack", capsys)
    assert code == 87
    assert "out-of-bounds write in kernel store: byte 4000 of a buffer of 4000 bytes (allocated at slack.cu:3)" in err


def test_a_store_past_the_granule_faults_in_the_guard_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(tmp_path, "far", capsys)
    assert code == 87
    assert "out-of-bounds access in kernel store (block (" in err and "buffer of 4000 bytes (allocated at far.cu:3)" in err


def test_a_read_after_free_faults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(tmp_path, "after_free", capsys)
    assert code == 87 and "segmentation fault in kernel load" in err


def test_host_code_copying_past_the_end_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(tmp_path, "host_copy", capsys)
    assert code == 87 and "out-of-bounds access in host code" in err and "buffer of 400 bytes" in err


def test_correct_programs_keep_cuda_guarantees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, "correct", capsys)
    assert code == 0, err
    assert out.split() == ["aligned", "0", "0", "1", "2000"]


DENSE = r"""
#include <cuda_runtime.h>
#define TILE 16
// whole tiles are launched past m; the store has no row guard (a GPU's allocation slack hides it)
__global__ void dense(const float* x, const float* w, float* y, int m, int n, int k) {
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  if (col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc += (row < m ? x[row * k + i] : 0.0f) * w[i * n + col];
  y[row * n + col] = acc;
}
extern "C" void dense_host(const float* x, const float* w, float* y, int m, int n, int k) {
  float *dx, *dw, *dy;
  cudaMalloc(&dx, m * k * sizeof(float));
  cudaMalloc(&dw, k * n * sizeof(float));
  cudaMalloc(&dy, m * n * sizeof(float));
  cudaMemcpy(dx, x, m * k * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w, k * n * sizeof(float), cudaMemcpyHostToDevice);
  dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE), block(TILE, TILE);
  dense<<<grid, block>>>(dx, dw, dy, m, n, k);
  cudaMemcpy(y, dy, m * n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dw); cudaFree(dy);
}
"""


@pytest.mark.parametrize("target", ["cpu", "hip"])
def test_a_source_writing_out_of_bounds_is_the_verdict(tmp_path: Path, target: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    if target == "hip" and shutil.which("hipcc") is None:
        pytest.skip("hipcc is not installed")
    source = tmp_path / "dense.cu"
    source.write_text(DENSE)
    out = tmp_path / ("dense.cpp" if target == "cpu" else "dense.hip")
    code = main(["translate", str(source), "--to", target, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 4, err
    manifest = json.loads((tmp_path / ".xpiler" / f"{out.name}.json").read_text())
    assert manifest["outcome"]["status"] == "compiled-not-executed"
    reason = manifest["outcome"]["reason"]
    assert "the source itself is defective" in reason and "allocated at dense.cu:17" in reason, reason
