"""FP8 (cuda_fp8.h) on the runtime against NVIDIA's own implementation: the same program's conversions, built by
nvcc and run on this machine's CPU (cuda_fp8.h's conversions are host functions too, so no GPU is needed), and
run on the runtime (in a kernel and on the host), line for line. The inputs sweep ordinary values, ties,
subnormals, the largest finite values and past them, infinities and NaN, in both saturation modes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core.api import run_program

PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <cmath>
#include <cuda_fp8.h>
#include <cuda_fp16.h>
__host__ __device__ float sample(int i) {
  if (i < 3000) return (i - 1500) * (i % 7 == 0 ? 0.37f : 0.0113f) * (i % 11 == 0 ? 97.0f : 1.0f);
  if (i < 3500) return ldexpf(1.0f + (i % 64) / 64.0f, (i % 40) - 22) * ((i & 1) ? -1.f : 1.f);
  const float special[] = {448.f, 464.f, 464.0001f, 479.f, 480.f, 57344.f, 61440.f, 61441.f, 65536.f, 1e30f,
                           -1e30f, INFINITY, -INFINITY, NAN, 0.f, -0.f, 1.953125e-3f, 9.765625e-4f, 1.5258789e-5f,
                           7.6293945e-6f};
  return special[i % 20] * ((i / 20) % 2 ? 1.0f : (1.0f + (i % 13) * 1e-3f));
}
// every conversion of one input: the C functions in both modes and kinds, from half, and the classes
__host__ __device__ void convert(int i, unsigned* out) {
  float x = sample(i);
  out[0] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
  out[1] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  out[2] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
  out[3] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  __half h = __float2half(x);
  __half_raw hr; memcpy(&hr, &h, 2);
  out[4] = __nv_cvt_halfraw_to_fp8(hr, __NV_SATFINITE, __NV_E4M3);
  out[5] = __nv_cvt_double_to_fp8((double)x * 1.0000001, __NV_NOSAT, __NV_E5M2);
  __nv_fp8_e4m3 a(x);
  __nv_fp8_e5m2 b(x);
  float back = static_cast<float>(a) + static_cast<float>(b);
  unsigned bits; memcpy(&bits, &back, 4);
  out[6] = std::isnan(back) ? 0x7fc00000u : bits;
  out[7] = (unsigned)(int)a;
  __nv_fp8x2_e4m3 pair(make_float2(x, -0.5f * x));
  float2 twice = static_cast<float2>(pair);
  out[8] = pair.__x;
  out[9] = std::isnan(twice.y) ? 1u : (twice.y == -0.5f * static_cast<float>(__nv_fp8_e4m3(x)) ? 2u : 3u);
}
__global__ void on_device(unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) convert(i, out + 10 * i);
}
int main(int argc, char**) {
  const int n = 4000;
  static unsigned host[10 * n];
  for (int i = 0; i < n; ++i) convert(i, host + 10 * i);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 10; ++k) printf("%u ", host[10 * i + k]);
    printf("\n");
  }
  for (int v = 0; v < 256; ++v)
    printf("D %d %u %u\n", v, __nv_cvt_fp8_to_halfraw(v, __NV_E4M3).x, __nv_cvt_fp8_to_halfraw(v, __NV_E5M2).x);
  if (argc > 1) return 0;  // the nvcc build has no GPU to launch on: its run passes an argument
  unsigned* d; cudaMalloc(&d, sizeof host);
  on_device<<<(n + 127) / 128, 128>>>(d, n);
  static unsigned device[10 * n];
  cudaMemcpy(device, d, sizeof device, cudaMemcpyDeviceToHost);
  printf("device agrees: %d\n", memcmp(host, device, sizeof host) == 0);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (the reference's compiler) is not installed")
def test_fp8_conversions_agree_with_nvidias_host_implementation(tmp_path: Path) -> None:
    source = tmp_path / "fp8.cu"
    source.write_text(PROGRAM)
    built = subprocess.run(["nvcc", "-o", str(tmp_path / "reference"), str(source)], capture_output=True, text=True,
                           timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    reference = subprocess.run([str(tmp_path / "reference"), "host-only"], capture_output=True, text=True, timeout=60)
    assert reference.returncode == 0, reference.stderr[-2000:]
    outcome = run_program(PROGRAM, str(source))
    assert outcome.exit_code == 0, outcome.stderr
    lines = outcome.stdout.strip().splitlines()
    assert lines[-1] == "device agrees: 1"
    expected = reference.stdout.strip().splitlines()
    mismatches = [(i, a, b) for i, (a, b) in enumerate(zip(lines[:-1], expected, strict=True)) if a != b]
    assert not mismatches, mismatches[:5]
