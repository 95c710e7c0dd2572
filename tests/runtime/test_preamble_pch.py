"""A C/C++ file's opening standard headers read from a precompiled copy (``runtime/pch.py``): the compiler sees the
same program. Judged by g++ itself: the preprocessed text with the opening pre-included equals the plain one, the
object code of a real CPU translation is the same instruction for instruction, and g++ says it used the copy."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xpiler_core.runtime.pch import leading_headers, precompiled_offload_preamble, precompiled_preamble

pytestmark = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("objdump") is None,
                                reason="needs g++ and objdump")

FLAGS = ["-O2", "-fopenmp", "-std=c++17", "-fno-strict-aliasing"]
OPENING_LINES = [
    "#include <stdio.h>", "#include <math.h>", "#include <cmath>", "#include <algorithm>", "#include <assert.h>",
    "#include <vector>", "#define XP_WIDTH 8", "#define NDEBUG", "#undef NDEBUG", "// a comment",
    "/* a block comment */", "", "#ifdef _OPENMP\n#include <omp.h>\n#endif",
    "#if XP_WIDTH > 4\n#define XP_WIDE 1\n#else\n#define XP_WIDE 0\n#endif", '#line 1 "kernel.cu"',
    # a header's text in front under its include guard (the verifier's copy-back recorder is put so)
    "#ifndef XP_FRONT_H\n#define XP_FRONT_H\n#include <vector>\n#ifndef XP_STEP\n#define XP_STEP 1\n#endif\n"
    "static inline int xp_front(int v) { return v + XP_STEP; } // #endif in a comment\n#endif",
]
BODY = ("int xp_use(float* x, int n) {\n  assert(n >= 0);\n#ifdef XP_WIDE\n  int wide = XP_WIDE;\n#else\n"
        "  int wide = -1;\n#endif\n  for (int i = 0; i < n; ++i) x[i] = sqrtf(x[i]) + wide;\n  return n;\n}\n")


def preprocessed(folder: Path, text: str, include: str | None) -> str:
    source = folder / "unit.cpp"
    source.write_text(text)
    extra = ["-include", include] if include else []
    run = subprocess.run(["g++", *FLAGS, *extra, "-E", "-P", str(source)], capture_output=True, text=True,
                         timeout=120, check=True)
    return "\n".join(line for line in run.stdout.splitlines() if line.strip())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(OPENING_LINES), min_size=1, max_size=8))
# <assert.h> is read again by design: read first with NDEBUG unset, then after it is defined, assert changes
@example(["#include <stdio.h>", "#include <assert.h>", "#define NDEBUG"])
@example([OPENING_LINES[-1], "#include <cmath>", "#define XP_WIDTH 8"])
# a conditional on a macro the opening defines later takes the other branch when read again: no copy
@example(["#include <stdio.h>", "#if XP_WIDTH > 4\n#define XP_WIDE 1\n#else\n#define XP_WIDE 0\n#endif",
          "#define XP_WIDTH 8"])
def test_reading_the_opening_first_changes_nothing_the_compiler_sees(tmp_path: Path, lines: list[str]) -> None:
    text = "\n".join(lines) + "\n" + BODY
    opening = leading_headers(text)
    if opening is None:  # no standard header before the first line that ends the opening: nothing to precompile
        return
    assert text.replace('#line 1 "kernel.cu"\n', "").startswith(opening.rstrip("\n"))
    stub = tmp_path / "opening.h"
    stub.write_text(opening)
    same = preprocessed(tmp_path, text, str(stub)) == preprocessed(tmp_path, text, None)
    # the tool precompiles the opening exactly when reading it first changes nothing
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XPILER_CACHE_DIR", str(tmp_path / f"cache-{abs(hash(text))}"))
        copied = precompiled_preamble(text, "g++", "test", FLAGS)
    assert bool(copied) == same


def test_a_project_header_named_with_angle_brackets_ends_the_opening(tmp_path: Path) -> None:
    # an unguarded project header read twice would define its struct twice
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "types.h").write_text("struct xp_pair { int a, b; };\n")
    text = "#include <stdio.h>\n#include <proj/types.h>\nint main() { xp_pair p{1, 2}; printf(\"%d\\n\", p.a); }\n"
    assert leading_headers(text) == "#include <stdio.h>\n"


def test_a_cpu_translation_compiles_to_the_same_code_from_the_precompiled_opening(tmp_path: Path) -> None:
    from xpiler_core.api import translate
    from xpiler_core.dialect import Dialect
    from xpiler_core.progress import CancelToken

    example = Path(__file__).resolve().parents[2] / "examples" / "vector_add.cu"
    result = translate(example.read_text(), str(example), Dialect.C, warp_size=None, spec_path=None, verify=False,
                       proposer="rules", progress=lambda *a, **k: None, cancel=CancelToken())
    source = tmp_path / "vector_add.cpp"
    source.write_text(result.output_text)
    version = gxx_version()
    include = precompiled_preamble(result.output_text, "g++", version, [*FLAGS, "-c"])
    assert include and Path(include[1] + ".gch").is_file()

    def disassembly(extra: list[str], name: str) -> list[str]:
        obj = tmp_path / name
        subprocess.run(["g++", *FLAGS, *extra, "-c", str(source), "-o", str(obj)], check=True, timeout=300)
        dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                              check=True).stdout
        return [line for line in dump.splitlines() if name not in line]

    assert disassembly(include, "with.o") == disassembly([], "plain.o")
    # and g++ reads the precompiled copy (-H marks a used one with '!')
    used = subprocess.run(["g++", *FLAGS, *include, "-H", "-fsyntax-only", str(source)], capture_output=True,
                          text=True, check=True, timeout=300).stderr
    assert any(line.startswith("!") and line.endswith(".gch") for line in used.splitlines())


PORTABLE_KERNEL = """#include <cuda_runtime.h>
__global__ void scale(float* y, const float* x, float a, int n) {
  __shared__ float tile[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = a * tile[(threadIdx.x + 1) % blockDim.x];
}
"""


def test_a_portable_tier_file_compiles_to_the_same_code_from_a_copy_of_its_simt_set(tmp_path: Path) -> None:
    # the portable tier's opening includes the SIMT set it carries beside it ("xpiler_simt/..."): the copy is
    # built from a set of its own; g++ is the reference (the same object code, and it reads the copy)
    from xpiler_core.dialect import Dialect
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.plans._portable import launcher, portable_candidate
    from xpiler_core.runtime.simt_set import SIMT_DIR, simt_headers

    kernel = lower_text(PORTABLE_KERNEL, "k.cu").kernels()[0]
    text = portable_candidate(PORTABLE_KERNEL, Dialect.CUDA, 32, "a test",
                              launcher(kernel, "scale_host", "(n + 63) / 64", "64", "0"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "k.cpp").write_text(text)
    for name, header in simt_headers().items():  # as the plans write it beside the output
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(header)
    version = gxx_version()
    include = precompiled_preamble(text, "g++", version, [*FLAGS, "-c", f"-I{out}"], out)
    assert include and Path(include[1] + ".gch").is_file()

    def disassembly(extra: list[str], name: str) -> list[str]:
        obj = tmp_path / name
        subprocess.run(["g++", *FLAGS, *extra, "-c", str(out / "k.cpp"), "-o", str(obj)], check=True, timeout=300)
        dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                              check=True).stdout
        return [line for line in dump.splitlines() if name not in line]

    assert disassembly(include, "with.o") == disassembly([], "plain.o")
    used = subprocess.run(["g++", *FLAGS, *include, "-H", "-fsyntax-only", str(out / "k.cpp")], capture_output=True,
                          text=True, check=True, timeout=300).stderr
    assert any(line.startswith("!") and line.endswith(".gch") for line in used.splitlines())
    assert not any(f"{out}/{SIMT_DIR}" in line for line in used.splitlines())  # its own set: known, not read
    # a folder whose set differs (an edited header): the compile would read those bytes, so no copy
    edited = out / SIMT_DIR / "xpiler" / "simt.h"
    edited.write_text(edited.read_text() + "\n#define XP_EDITED 1\n")
    assert precompiled_preamble(text, "g++", version, [*FLAGS, "-c"], out) == []


def project_folders(root: Path, shadowing_header: str) -> tuple[Path, Path]:
    """Two project folders under ``root``: one holding only an unrelated header, one holding ``shadowing_header``
    (which includes the system's own and adds a macro)."""
    plain, shadowing = root / "plain", root / "shadowing"
    plain.mkdir()
    shadowing.mkdir()
    (plain / "notes.h").write_text("#define XP_NOTES 1\n")
    (shadowing / shadowing_header).write_text(f"#include_next <{shadowing_header}>\n#define XP_PROJECT 1\n")
    return plain, shadowing


def gxx_version() -> str:
    return subprocess.run(["g++", "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]


def test_one_copy_serves_every_project_folder_unless_a_folder_holds_a_header_of_that_name(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    monkeypatch.setenv("XPILER_CACHE_DIR", str(tmp_path / "cache"))
    version = gxx_version()
    text = "#include <stdio.h>\n#include <math.h>\nint main() { printf(\"%.1f\\n\", sqrt(4.0)); }\n"
    plain, shadowing = project_folders(tmp_path, "math.h")
    first = precompiled_preamble(text, "g++", version, [*FLAGS, f"-I{plain}", "-DXP_A=1"])
    again = precompiled_preamble(text, "g++", version, [*FLAGS, "-I", str(tmp_path), "-DXP_A=2"])
    assert first and first == again
    # the project's math.h is what <math.h> means there: compiled as written, without the copy
    assert precompiled_preamble(text, "g++", version, [*FLAGS, f"-I{shadowing}"]) == []


def test_a_macro_of_the_project_that_changes_a_header_makes_gcc_read_the_plain_text(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    # the copy is built without the project's -D; strict C11's <stdio.h> declares fileno only under a POSIX macro
    monkeypatch.setenv("XPILER_CACHE_DIR", str(tmp_path / "cache"))
    version = subprocess.run(["gcc", "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    text = "#include <stdio.h>\nint main(void) { return fileno(stdin) < 0; }\n"
    source = tmp_path / "posix.c"
    source.write_text(text)
    flags = ["-std=c11", "-O2", "-Werror=implicit-function-declaration", "-D_POSIX_C_SOURCE=200809L"]
    include = precompiled_preamble(text, "gcc", version, flags)
    assert include
    build = subprocess.run(["gcc", *flags, "-Winvalid-pch", *include, "-c", str(source), "-o", str(tmp_path / "p.o")],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    assert "not used because" in build.stderr


needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs hipcc")
HIP_OPENING = "#include <hip/hip_runtime.h>\n#include <math.h>\n#if XP_MODE\n#define XP_SCALE 2.0f\n#endif\n"
HIP_BODY = ("__global__ void xp_scale(float* x, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) x[i] = sqrtf(x[i]) * XP_SCALE;\n}\n")


def hipcc(folder: Path, text: str, extra: list[str], name: str) -> subprocess.CompletedProcess[str]:
    source = folder / "unit.hip"  # one name: clang writes the file's name into the object
    source.write_text(text)
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    return subprocess.run(["hipcc", "--offload-arch=gfx90a", "-std=c++17", *extra, "-c", str(source), "-o",
                           str(folder / f"{name}.o")], capture_output=True, text=True, timeout=300, env=env)


@needs_hipcc
def test_a_hip_file_compiles_to_the_same_object_from_the_precompiled_copies(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XPILER_CACHE_DIR", str(tmp_path / "cache"))
    text = HIP_OPENING + HIP_BODY
    flags = ["--offload-arch=gfx90a", "-std=c++17", "-DXP_MODE=1"]
    copies = precompiled_offload_preamble(text, "hipcc", "test", flags)
    assert copies[0] == "-Xarch_device" and copies[2] == "-Xarch_host"
    with_copies = hipcc(tmp_path, text, ["-DXP_MODE=1", *copies, "-H"], "with")
    plain = hipcc(tmp_path, text, ["-DXP_MODE=1", "-H"], "plain")
    assert with_copies.returncode == 0 and plain.returncode == 0, with_copies.stderr + plain.stderr
    # the device code object and the host object, bundled: byte for byte the same
    assert (tmp_path / "with.o").read_bytes() == (tmp_path / "plain.o").read_bytes()
    # clang -H lists every header it reads as text: hip_runtime.h only on the plain side (the copy holds it)
    assert "hip/hip_runtime.h" in plain.stderr and "hip/hip_runtime.h" not in with_copies.stderr


@needs_hipcc
def test_a_macro_of_the_project_gets_its_own_hip_copy_and_failures_are_the_plain_compilers(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    # clang uses a precompiled header whatever the macros of the compile using it, so a copy built under
    # -DXP_MODE=1 would define XP_SCALE for a compile without it: the verdicts must be hipcc's on the plain text
    from xpiler_core.dialect import Dialect
    from xpiler_core.verify.toolchains import compile_check

    monkeypatch.setenv("XPILER_CACHE_DIR", str(tmp_path / "cache"))
    text = HIP_OPENING + HIP_BODY
    assert compile_check(text, Dialect.HIP, flags=("-DXP_MODE=1",)).ok
    without = compile_check(text, Dialect.HIP)
    assert not without.ok and hipcc(tmp_path, text, [], "plain").returncode != 0
    assert any("XP_SCALE" in d.message for d in without.diagnostics)
    monkeypatch.setenv("XPILER_NO_PCH", "1")
    monkeypatch.setenv("XPILER_CACHE_DIR", str(tmp_path / "cache-plain"))
    assert compile_check(text, Dialect.HIP).stderr == without.stderr


def test_a_project_file_named_like_a_header_a_standard_header_includes_means_no_copy(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    # <stdio.h> reaches <features.h> through glibc's own headers: a project folder holding a features.h is where
    # g++ finds it then, so a copy built without that folder is another program
    monkeypatch.setenv("XPILER_CACHE_DIR", str(tmp_path / "cache"))
    text = "#include <stdio.h>\nint main() { printf(\"%d\\n\", 1); }\n"
    other, project = project_folders(tmp_path, "features.h")
    source = tmp_path / "unit.cpp"
    source.write_text(text)
    listing = subprocess.run(["g++", *FLAGS, f"-I{project}", "-H", "-fsyntax-only", str(source)],
                             capture_output=True, text=True, check=True, timeout=120).stderr
    assert str(project / "features.h") in listing  # g++ itself reads the project's file
    assert precompiled_preamble(text, "g++", gxx_version(), [*FLAGS, f"-I{other}"])
    assert precompiled_preamble(text, "g++", gxx_version(), [*FLAGS, f"-I{project}"]) == []
