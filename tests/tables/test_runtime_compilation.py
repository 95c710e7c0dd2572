"""Runtime compilation (NVRTC ↔ hipRTC): the HIP names the tables produce are declared by HIP's hiprtc.h (hipcc's
verdict); a prelude that includes the runtime-compilation header without using it does not make the other
toolkit need that optional package (the include is dropped and the translation builds and verifies); a file that
uses the API gets the other vendor's names, which its compiler accepts."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.tables import load_mapping, raw_table

NVRTC_ROWS = {c: h for c, h in raw_table("libraries")["pairs"].items() if c.startswith(("nvrtc", "NVRTC_"))}
needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def hipcc_accepts(source: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "probe.hip"
    probe.write_text(source)
    return subprocess.run(["hipcc", "--offload-arch=gfx90a", "-fsyntax-only", str(probe)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HIP_PLATFORM": "amd"})


@needs_hipcc
def test_every_hiprtc_name_is_declared_by_hip(tmp_path: Path) -> None:
    assert len(NVRTC_ROWS) >= 20
    types = {"hiprtcResult", "hiprtcProgram"}
    uses = "\n".join(f"void probe_{i}({name}* p);" if name in types else f"void probe_{i}() {{ (void)({name}); }}"
                     for i, name in enumerate(sorted(set(NVRTC_ROWS.values()))))
    done = hipcc_accepts("#include <hip/hiprtc.h>\n" + uses + "\n", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]


def test_both_directions_pair_the_same_names() -> None:
    forward, backward = load_mapping("cuda->hip"), load_mapping("hip->cuda")
    for cuda, hip in NVRTC_ROWS.items():
        assert forward.names[cuda] == hip
        assert NVRTC_ROWS[backward.names[hip]] == hip  # hiprtcGetCode maps back to one of the getters
    assert forward.map_header("nvrtc.h") == "hip/hiprtc.h" and backward.map_header("hip/hiprtc.h") == "nvrtc.h"


# the benchmark-style prelude of a HIP file: every header it might need, hiprtc.h among them
PRELUDE = """#include <hip/hip_runtime.h>
#include <hip/hiprtc.h>
#include <stdio.h>
#include <math.h>
"""
KERNEL = """
__global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 3.0f * x[i];
}
extern "C" void scale_host(const float* x, float* y, int n) {
  float *dx, *dy;
  hipMalloc(&dx, n * sizeof(float));
  hipMalloc(&dy, n * sizeof(float));
  hipMemcpy(dx, x, n * sizeof(float), hipMemcpyHostToDevice);
  hipLaunchKernelGGL(scale, dim3((n + 127) / 128), dim3(128), 0, 0, dx, dy, n);
  hipMemcpy(y, dy, n * sizeof(float), hipMemcpyDeviceToHost);
  hipFree(dx);
  hipFree(dy);
}
"""


@needs_nvcc
def test_an_unused_runtime_compilation_header_is_dropped(tmp_path: Path) -> None:
    result = translate(PRELUDE + KERNEL, str(tmp_path / "scale.hip"), TranslateOptions(Dialect.CUDA))
    assert result.status == "verified", result.summary
    assert "rtc" not in result.output_text and "#include <stdio.h>" in result.output_text


NVRTC_USER = """#include <nvrtc.h>
#include <stdio.h>
const char* kernel_text = "extern \\"C\\" __global__ void k(float* p) { p[0] = 1.0f; }";
int compile_it(void) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, kernel_text, "k.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) { printf("%s\\n", nvrtcGetErrorString(r)); return 1; }
  r = nvrtcCompileProgram(prog, 0, NULL);
  size_t size = 0;
  nvrtcGetPTXSize(prog, &size);
  char* code = new char[size];
  nvrtcGetPTX(prog, code);
  if (r == NVRTC_ERROR_COMPILATION) { size_t n; nvrtcGetProgramLogSize(prog, &n); }
  delete[] code;
  nvrtcDestroyProgram(&prog);
  return r == NVRTC_SUCCESS ? 0 : 1;
}
"""


@needs_hipcc
def test_a_runtime_compilation_user_gets_hiprtc_that_hipcc_accepts(tmp_path: Path) -> None:
    result = translate(NVRTC_USER, str(tmp_path / "rtc.cu"), TranslateOptions(Dialect.HIP, verify=False))
    assert result.output_text is not None and "nvrtc" not in result.output_text.lower().replace("nvrtc.h", "")
    assert "#include <hip/hiprtc.h>" in result.output_text and "hiprtcGetCode(prog, code)" in result.output_text
    done = hipcc_accepts(result.output_text, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
