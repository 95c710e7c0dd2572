"""Small multi-file CUDA projects of our own, translated as a user runs ``xpiler translate``: a kernel in a
``.cuh`` and a ``main()`` that checks itself; include paths and defines from ``compile_commands.json`` (and
nothing found without it); a header changed between two runs (the cache must not answer the second); a
program of two units; project settings from ``xpiler.toml``. The judges are the program's own check (PASS),
hipcc and g++ building the written files, and the compilers' own errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from xpiler_core.cli import main
from xpiler_core.translation import EXIT_CODES

HIP = shutil.which("hipcc") is not None

SCALE_HEADER = """#pragma once
#include <cuda_runtime.h>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""
MAIN = """#include <cstdio>
#include "kernels/scale.cuh"
int main() {
  const int n = 1000;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = (float)i;
  float* d; cudaMalloc(&d, n * sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<(n + 127) / 128, 128>>>(d, FACTOR, n);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += h[i] != FACTOR * i;
  printf(bad ? "FAIL\\n" : "PASS\\n");
  return bad != 0;
}
"""


def _translate(source: Path, target: str, output: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code = main(["translate", str(source), "--to", target, "-o", str(output), *extra])
    manifest_path = output.parent / ".xpiler" / f"{output.name}.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    return code, manifest


def _hipcc(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["hipcc", "--offload-arch=gfx90a", "-c", str(path), "-o", str(path.with_suffix(".o")),
                           *flags], env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True,
                          timeout=300)


def _project(root: Path, factor_define: bool = True) -> Path:
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "scale.cuh").write_text(SCALE_HEADER)
    text = MAIN if not factor_define else MAIN
    (root / "main.cu").write_text(("#define FACTOR 2.0f\n" if factor_define else "") + text)
    return root / "main.cu"


@pytest.mark.skipif(not HIP, reason="hipcc not installed")
def test_kernel_in_a_cuh_with_a_self_checking_main_to_hip(tmp_path: Path) -> None:
    source = _project(tmp_path)
    code, manifest = _translate(source, "hip", tmp_path / "out" / "main.hip")
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    assert manifest["outcome"]["program"]["verdict"] == "PASS"
    header = tmp_path / "out" / "kernels" / "scale.hip.h"
    assert header.is_file(), "the header with the kernel is translated beside the output"
    assert '#include "kernels/scale.hip.h"' in (tmp_path / "out" / "main.hip").read_text()
    assert "hip" in header.read_text()
    built = _hipcc(tmp_path / "out" / "main.hip")
    assert built.returncode == 0, built.stderr[-2000:]


def test_kernel_in_a_cuh_with_a_self_checking_main_to_cpu(tmp_path: Path) -> None:
    source = _project(tmp_path)
    output = tmp_path / "out" / "main.cpp"
    code, manifest = _translate(source, "cpu", output)
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    exe = tmp_path / "main-cpu"
    built = subprocess.run(["g++", "-std=c++17", "-O1", "-fopenmp", str(output), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    assert subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout.strip() == "PASS"


def test_include_dirs_and_defines_come_from_compile_commands(tmp_path: Path) -> None:
    source = _project(tmp_path / "proj", factor_define=False)
    # the header moves to include/, found only through -I; FACTOR only through -D
    include = tmp_path / "proj" / "include"
    include.mkdir()
    shutil.move(str(tmp_path / "proj" / "kernels"), str(include / "kernels"))
    code, manifest = _translate(source, "cpu", tmp_path / "proj" / "out-none" / "main.cpp")
    assert code != EXIT_CODES["verified"], "without the project's flags the header cannot be found"
    database = [{"directory": str(tmp_path / "proj"), "file": str(source),
                 "command": f"nvcc -I{include} -DFACTOR=3.0f -std=c++17 -c main.cu -o main.o"}]
    (tmp_path / "proj" / "compile_commands.json").write_text(json.dumps(database))
    code, manifest = _translate(source, "cpu", tmp_path / "proj" / "out" / "main.cpp")
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    assert manifest["outcome"]["program"]["verdict"] == "PASS"
    assert str(include) in manifest["source"]["project"]["include_dirs"]
    assert "FACTOR=3.0f" in manifest["source"]["project"]["defines"]


def test_a_changed_header_is_not_answered_from_the_cache(tmp_path: Path) -> None:
    source = _project(tmp_path)
    code, manifest = _translate(source, "cpu", tmp_path / "out1" / "main.cpp")
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    # same main.cu, same flags; only the header changes, and no longer compiles (an undeclared name)
    (tmp_path / "kernels" / "scale.cuh").write_text(SCALE_HEADER.replace("x[i] *= a;", "x[i] *= a * undeclared;"))
    code, manifest = _translate(source, "cpu", tmp_path / "out2" / "main.cpp")
    assert code != EXIT_CODES["verified"], "a verdict about the old header was reused"
    assert "undeclared" in json.dumps(manifest)


TWO_UNIT_HEADER = """#pragma once
void launch_axpy(float a, const float* x, float* y, int n);
"""
TWO_UNIT_KERNELS = """#include "axpy.h"
__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
void launch_axpy(float a, const float* x, float* y, int n) { axpy<<<(n + 255) / 256, 256>>>(a, x, y, n); }
"""
TWO_UNIT_MAIN = """#include <cstdio>
#include <cuda_runtime.h>
#include "axpy.h"
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  float *x, *y;
  cudaMallocManaged(&x, n * sizeof(float)); cudaMallocManaged(&y, n * sizeof(float));
  for (int i = 0; i < n; ++i) { x[i] = 0.5f * i; y[i] = 1.0f; }
  launch_axpy(2.0f, x, y, n);
  cudaDeviceSynchronize();
  double s = 0;
  for (int i = 0; i < n; ++i) s += y[i];
  printf("n=%d sum=%.1f\\n", n, s);
  return 0;
}
"""


@pytest.mark.parametrize("target", ["hip", "cpu"])
def test_a_program_of_two_units_with_arguments_from_xpiler_toml(tmp_path: Path, target: str) -> None:
    if target == "hip" and not HIP:
        pytest.skip("hipcc not installed")
    (tmp_path / "axpy.h").write_text(TWO_UNIT_HEADER)
    (tmp_path / "axpy.cu").write_text(TWO_UNIT_KERNELS)
    (tmp_path / "main.cu").write_text(TWO_UNIT_MAIN.replace("#include <cstdio>", "#include <cstdio>\n#include <cstdlib>"))
    (tmp_path / "xpiler.toml").write_text('[build]\nsources = ["axpy.cu"]\n[run]\nargs = ["777"]\n')
    output = tmp_path / "out" / ("main.hip" if target == "hip" else "main.cpp")
    code, manifest = _translate(tmp_path / "main.cu", target, output)
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    program = manifest["outcome"]["program"]
    # the source's own output with the argument from xpiler.toml: sum of 1 + 2 * 0.5 * i over i < 777
    expected = f"n=777 sum={sum(1.0 + i for i in range(777)):.1f}"
    assert program["source"]["stdout"].strip() == expected
    assert program["candidate"]["stdout"].strip() == expected


@pytest.mark.parametrize("target", ["hip", "cpu"])
def test_units_with_static_functions_of_one_name_keep_their_own(tmp_path: Path, target: str) -> None:
    """Two units each define a file-scope ``static`` of the same name (each its own in the program's build),
    and both include a header with a ``static __device__`` function: built together for the runtime and the
    compile check, and merged into one CPU module, each unit still calls its own, and the header's once."""
    if target == "hip" and not HIP:
        pytest.skip("hipcc not installed")
    (tmp_path / "axpy.h").write_text(TWO_UNIT_HEADER)
    (tmp_path / "twice.h").write_text("#pragma once\n"
                                      "static __host__ __device__ float twice(float v) { return 2.0f * v; }\n")
    (tmp_path / "axpy.cu").write_text(TWO_UNIT_KERNELS.replace('#include "axpy.h"', '#include "axpy.h"\n#include "twice.h"').replace(
        "void launch_axpy(float a,", "static float scale(float a) { return 2.0f * a; }\nvoid launch_axpy(float a,")
        .replace("<<<(n + 255) / 256, 256>>>(a, x, y, n)", "<<<(n + 255) / 256, 256>>>(scale(a), x, y, n)")
        .replace("y[i] += a * x[i];", "y[i] += twice(a) * x[i];"))
    (tmp_path / "main.cu").write_text(TWO_UNIT_MAIN.replace("#include <cstdio>", "#include <cstdio>\n#include <cstdlib>\n"
                                                            "#include \"twice.h\"\n"
                                                            "static float scale(float a) { return a + 1.0f; }")
                                      .replace("launch_axpy(2.0f, x, y, n);",
                                               "launch_axpy(scale(2.0f) * twice(1.0f) / 2.0f, x, y, n);"))
    (tmp_path / "xpiler.toml").write_text('[build]\nsources = ["axpy.cu"]\n[run]\nargs = ["300"]\n')
    output = tmp_path / "out" / ("main.hip" if target == "hip" else "main.cpp")
    code, manifest = _translate(tmp_path / "main.cu", target, output)
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    # main's scale: 2 + 1 = 3; the unit's doubles it, the kernel twice more: y = 1 + 12 * 0.5 i
    expected = f"n=300 sum={sum(1.0 + 6.0 * i for i in range(300)):.1f}"
    assert manifest["outcome"]["program"]["source"]["stdout"].strip() == expected


C_UNIT = """#include <stdio.h>
/* valid C: a non-void function may end without return when no caller uses the value (C++ says undefined) */
int report(const float* v, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += v[i];
  printf("sum %.1f\\n", s);
}
"""
C_UNIT_MAIN = """#include <cuda_runtime.h>
extern "C" int report(const float* v, int n);
__global__ void fill(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 0.5f * i; }
int main() {
  const int n = 300;
  float* d; float h[n];
  cudaMalloc(&d, sizeof(h));
  fill<<<(n + 63) / 64, 64>>>(d, n);
  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  report(h, n);
  report(h, n / 2);
  return 0;
}
"""


@pytest.mark.parametrize("target", ["hip", "cpu"])
def test_a_c_unit_is_built_as_c_and_copied_beside_the_output(tmp_path: Path, target: str) -> None:
    if target == "hip" and not HIP:
        pytest.skip("hipcc not installed")
    (tmp_path / "report.c").write_text(C_UNIT)
    (tmp_path / "main.cu").write_text(C_UNIT_MAIN)
    output = tmp_path / "out" / ("main.hip" if target == "hip" else "main.cpp")
    code, manifest = _translate(tmp_path / "main.cu", target, output, "--unit", str(tmp_path / "report.c"))
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    expected = [f"sum {sum(0.5 * i for i in range(300)):.1f}", f"sum {sum(0.5 * i for i in range(150)):.1f}"]
    assert manifest["outcome"]["program"]["source"]["stdout"].split("\n")[:2] == expected
    assert (tmp_path / "out" / "report.c").read_text() == C_UNIT


@pytest.mark.parametrize("target", ["hip", "cpu"])
def test_a_header_only_another_unit_includes_is_translated_with_it(tmp_path: Path, target: str) -> None:
    """A C++ main calls a unit in another folder, and that unit includes a shared header with CUDA calls (an
    error-check macro over cudaError_t) that the main file never includes: the header is the project's too,
    translated beside the output (hipcc reads no cuda_runtime.h)."""
    if target == "hip" and not HIP:
        pytest.skip("hipcc not installed")
    (tmp_path / "common").mkdir()
    (tmp_path / "app").mkdir()
    (tmp_path / "common" / "check.cuh").write_text(
        "#pragma once\n#include <cstdio>\n#include <cuda_runtime.h>\n"
        "#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { "
        "printf(\"%s\\n\", cudaGetErrorString(e)); return; } } while (0)\n")
    (tmp_path / "app" / "axpy.h").write_text(TWO_UNIT_HEADER)
    (tmp_path / "app" / "axpy.cu").write_text(TWO_UNIT_KERNELS.replace(
        '#include "axpy.h"', '#include "axpy.h"\n#include "../common/check.cuh"').replace(
        "axpy<<<(n + 255) / 256, 256>>>(a, x, y, n); }",
        "axpy<<<(n + 255) / 256, 256>>>(a, x, y, n); CHECK(cudaGetLastError()); }"))
    main = TWO_UNIT_MAIN.replace("#include <cstdio>\n#include <cuda_runtime.h>", "#include <cstdio>\n#include <cstdlib>")
    (tmp_path / "app" / "main.cpp").write_text(main.replace("cudaMallocManaged", "xp_alloc").replace(
        "cudaDeviceSynchronize();", "").replace("#include \"axpy.h\"",
        "#include \"axpy.h\"\n#include <cuda_runtime.h>\n"
        "template <class T> void xp_alloc(T** p, size_t n) { cudaMallocManaged(p, n); }\n"
        "static void xp_sync() { cudaDeviceSynchronize(); }").replace("launch_axpy(2.0f, x, y, n);",
                                                                      "launch_axpy(2.0f, x, y, n); xp_sync();"))
    (tmp_path / "app" / "xpiler.toml").write_text('[build]\nsources = ["axpy.cu"]\n')
    output = tmp_path / "out" / ("main.hip" if target == "hip" else "main.cpp")
    code, manifest = _translate(tmp_path / "app" / "main.cpp", target, output)
    assert code == EXIT_CODES["verified"], manifest.get("summary")
    assert manifest["outcome"]["program"]["candidate"]["stdout"].strip().startswith("n=10 sum=")
    if target == "hip":
        header = (tmp_path / "out" / "check.hip.h").read_text()
        assert "hipError_t" in header and "cuda" not in header


def test_a_launching_header_reached_by_a_path_out_of_the_folder_runs(tmp_path: Path) -> None:
    """`#include "../shared/launch.h"` whose template launches the kernel it is given: the runtime's build
    rewrites the header's launch and finds it at that path (not the original, which g++ cannot read)."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "app").mkdir()
    (tmp_path / "shared" / "launch.h").write_text(
        "#pragma once\ntemplate <typename K> void run(const K& kernel, int* d, int n) {\n"
        "  kernel<<<(n + 63) / 64, 64>>>(d, n);\n  cudaDeviceSynchronize();\n}\n")
    (tmp_path / "app" / "main.cu").write_text(
        '#include <cstdio>\n#include "../shared/launch.h"\n'
        "__global__ void square(int* d, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] = i * i; }\n"
        "int main() {\n  int* d; int h[100];\n  cudaMalloc(&d, sizeof h);\n  run(square, d, 100);\n"
        "  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n  long s = 0; for (int v : h) s += v;\n"
        '  printf("sum %ld\\n", s);\n  return 0;\n}\n')
    from xpiler_core.api import run_program

    main = tmp_path / "app" / "main.cu"
    outcome = run_program(main.read_text(), str(main))
    assert outcome.built, outcome.build_log
    assert outcome.stdout.strip() == f"sum {sum(i * i for i in range(100))}"
