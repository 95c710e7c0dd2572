"""``--reference gpu``: the CUDA source run on this machine's GPU as the reference.

What runs everywhere: the generated launch glue compiles with nvcc (kernels with pointer, scalar, half and
template-instance parameters), the worker hands the glue each buffer's byte count, a machine without a CUDA
device refuses the option at once (never a silent fallback to the runtime), and no workspace file or manifest
can turn it on. What runs where a GPU is present: a translation verified against the GPU's outputs, and a
wrong candidate failed by them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.project import ProjectConfig, build_settings, from_project_file
from xpiler_core.runtime.sandbox import CallArg, call_library
from xpiler_core.verify.gpu_reference import GPU_ENTRY_SYMBOL, gpu_kernel_glue, gpu_unavailable

ROOT = Path(__file__).resolve().parents[2]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gpu = pytest.mark.skipif(gpu_unavailable() is not None, reason=f"no CUDA GPU here: {gpu_unavailable()}")
without_gpu = pytest.mark.skipif(gpu_unavailable() is None, reason="this machine has a CUDA GPU")

KERNELS = """
#include <cuda_fp16.h>
__global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
__global__ void halve(__half* h, long long n) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) h[i] = __float2half(__half2float(h[i]) * 0.5f);
}
template <int T> __global__ void tile_sum(const int* in, int* out) {
  __shared__ int s[T];
  s[threadIdx.x] = in[blockIdx.x * T + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) { int t = 0; for (int k = 0; k < T; ++k) t += s[k]; out[blockIdx.x] = t; }
}
template __global__ void tile_sum<64>(const int*, int*);
"""


@needs_nvcc
@pytest.mark.parametrize("kernel, args", [
    ("axpy", [("float32", True), ("float32", True), ("float32", False), ("int32", False)]),
    ("halve", [("float16", True), ("int64", False)]),
    ("tile_sum<64>", [("int32", True), ("int32", True)]),
])
def test_the_launch_glue_compiles_with_nvcc(tmp_path: Path, kernel: str, args: list[tuple[str, bool]]) -> None:
    source = tmp_path / "k.cu"
    source.write_text(KERNELS + gpu_kernel_glue(kernel, args))
    done = subprocess.run(["nvcc", "-arch=sm_80", "-std=c++17", "-c", str(source), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    symbols = subprocess.run(["nm", str(tmp_path / "k.o")], capture_output=True, text=True).stdout
    assert f" T {GPU_ENTRY_SYMBOL}" in symbols


def test_the_worker_passes_each_buffers_byte_count(tmp_path: Path) -> None:
    # a stand-in for the GPU glue, built by g++: it records the byte counts it is given and scales each
    # buffer by its launch's grid size, so both halves of the protocol are checked without a device
    fake = tmp_path / "fake.cpp"
    fake.write_text(
        'extern "C" int xpiler_gpu_entry(void** args, const unsigned long long* bytes, const unsigned* cfg) {\n'
        "  float* y = static_cast<float*>(args[0]);\n"
        "  double* seen = static_cast<double*>(args[1]);\n"
        "  int n = *static_cast<int*>(args[2]);\n"
        "  for (int i = 0; i < n; ++i) y[i] *= cfg[0];\n"
        "  seen[0] = bytes[0]; seen[1] = bytes[1]; seen[2] = bytes[2];\n"
        "  return 0;\n"
        "}\n")
    library = tmp_path / "libfake.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(library), str(fake)], check=True)
    y = np.arange(10, dtype=np.float32)
    result = call_library(library, GPU_ENTRY_SYMBOL, "gpu-kernel",
                          [CallArg("y", "float32", array=y), CallArg("seen", "float64", array=np.zeros(3)),
                           CallArg("n", "int32", value=10)],
                          ["y", "seen"], tmp_path / "run", config=(3, 1, 1, 1, 1, 1, 0))
    assert result.ok, result.error
    np.testing.assert_array_equal(result.outputs["y"], y * 3)
    np.testing.assert_array_equal(result.outputs["seen"], [y.nbytes, 3 * 8, 0])


@without_gpu
def test_a_machine_without_a_gpu_refuses_the_option(tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / "vector_add.cu", tmp_path / "vector_add.cu")
    done = subprocess.run([sys.executable, "-m", "xpiler_core", "translate", str(tmp_path / "vector_add.cu"),
                           "--to", "cpu", "--reference", "gpu", "-o", str(tmp_path / "out.cpp")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode != 0
    assert "--reference gpu needs a CUDA GPU" in done.stderr + done.stdout
    assert not (tmp_path / "out.cpp").exists()  # refused before any translation, not after it


def test_no_workspace_file_or_manifest_turns_it_on(tmp_path: Path) -> None:
    project = tmp_path / "xpiler.toml"
    project.write_text('reference = "gpu"\nreference_device = "gpu"\n[build]\nreference_device = "gpu"\n'
                       '[run]\nreference = "gpu"\n')
    assert from_project_file(project).reference_device == "runtime"
    given = ProjectConfig(reference_device="gpu")
    assert "reference_device" not in given.to_dict()
    assert ProjectConfig.from_dict({**given.to_dict(), "reference_device": "gpu"}).reference_device == "runtime"
    # only the source's build carries it, and the command line's choice survives the workspace's settings
    assert ProjectConfig().merged(given).reference_device == "gpu"
    assert build_settings(given, None, "").device == "runtime"


AXPY_SPEC = """
name = "axpy"
source = "axpy.cu"
entry = "{entry}"
kind = "{kind}"
reference_source = "axpy.cu"
reference_entry = "{entry}"
{launch}
tolerance = {{ atol = 1e-5, rtol = 1e-5 }}
[[args]]
name = "y"
dtype = "float32"
shape = ["n"]
role = "inout"
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"
[[args]]
name = "a"
dtype = "float32"
role = "scalar"
value = "1.5"
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 1000
[[cases]]
n = 4099
"""
AXPY_KERNEL = """
__global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
"""
AXPY_HOST = """
extern "C" void axpy_host(float* y, const float* x, float a, int n) {
  float *dy, *dx;
  cudaMalloc(&dy, n * sizeof(float)); cudaMalloc(&dx, n * sizeof(float));
  cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  axpy<<<(n + 127) / 128, 128>>>(dy, dx, a, n);
  cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dy); cudaFree(dx);
}
"""


@needs_gpu
@pytest.mark.parametrize("kind", ["kernel", "host"])
def test_candidates_are_judged_by_the_source_run_on_the_gpu(tmp_path: Path, kind: str) -> None:
    source = AXPY_KERNEL + AXPY_HOST
    (tmp_path / "axpy.cu").write_text(source)
    entry = "axpy" if kind == "kernel" else "axpy_host"
    launch = 'grid = ["ceil_div(n, 128)"]\nblock = [128]' if kind == "kernel" else ""
    (tmp_path / "spec.toml").write_text(AXPY_SPEC.format(entry=entry, kind=kind, launch=launch))
    (tmp_path / "right.cu").write_text(source)
    (tmp_path / "wrong.cu").write_text(source.replace("y[i] += a * x[i]", "y[i] += a * x[i] + 1e-3f"))
    verdicts = {}
    for name in ("right", "wrong"):
        done = subprocess.run([sys.executable, "-m", "xpiler_core", "test", str(tmp_path / "spec.toml"), "--candidate",
                               str(tmp_path / f"{name}.cu"), "--reference", "gpu"],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
        verdicts[name] = (done.returncode, done.stdout + done.stderr)
    assert verdicts["right"][0] == 0, verdicts["right"][1]
    assert verdicts["wrong"][0] != 0 and "FAIL" in verdicts["wrong"][1], verdicts["wrong"][1]


@needs_nvcc
def test_the_glue_runs_the_kernel_on_a_gpu_or_names_the_cuda_error(tmp_path: Path) -> None:
    """Built and called as the harness does: on a machine with a CUDA device the buffers come back computed;
    without one the CUDA error is named (not a bare status number)."""
    import resource

    from xpiler_core.verify.gpu_reference import build_gpu_library, gpu_error

    glue = gpu_kernel_glue("axpy", [("float32", True), ("float32", True), ("float32", False), ("int32", False)])
    built = build_gpu_library(AXPY_KERNEL, tmp_path / "build", display_name="axpy.cu", extra=glue)
    assert built.ok and built.library is not None, built.log
    y, x = np.arange(1000, dtype=np.float32), np.ones(1000, dtype=np.float32)
    called = call_library(built.library, GPU_ENTRY_SYMBOL, "gpu-kernel",
                          [CallArg("y", "float32", array=y), CallArg("x", "float32", array=x),
                           CallArg("a", "float32", value=2.0), CallArg("n", "int32", value=1000)],
                          ["y"], tmp_path / "run", config=(8, 1, 1, 128, 1, 1, 0), memory_bytes=resource.RLIM_INFINITY)
    if gpu_unavailable() is None:
        assert called.ok, called.error
        np.testing.assert_array_equal(called.outputs["y"], y + 2 * x)
    else:
        assert not called.ok
        named = gpu_error(called.stderr)
        assert named is not None and "CUDA error" in named, called.stderr


@needs_gpu
def test_a_whole_program_is_judged_by_its_run_on_the_gpu(tmp_path: Path) -> None:
    """A program with ``main``: the source built by nvcc and run on the GPU is the reference of its CPU
    translation's run; the translation agrees with it (the program checks its own result and prints PASSED)."""
    import json

    shutil.copy(ROOT / "examples" / "vector_add_program.cu", tmp_path / "prog.cu")
    done = subprocess.run([sys.executable, "-m", "xpiler_core", "translate", str(tmp_path / "prog.cu"), "--to", "cpu",
                           "--reference", "gpu", "--json", "-o", str(tmp_path / "prog.cpp")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    result = json.loads(done.stdout)
    assert result["status"] == "verified", done.stdout + done.stderr
    program = result["manifest_data"]["outcome"]["program"]
    assert program["reference"] == "gpu" and program["matched"], program
    assert "Test PASSED" in program["source"]["stdout"]
