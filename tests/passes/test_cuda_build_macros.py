"""Conditions on the CUDA version and on _OPENMP keep the branch nvcc took (nvcc's preprocessor is the
reference), in the HIP and CPU builds that define neither."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core.passes.support.build_macros import as_source_build_saw

CONDITIONS = """
#if CUDART_VERSION >= 2020
MARK(runtime_new)
#else
MARK(runtime_old)
#endif
#ifdef CUDART_VERSION
MARK(runtime_defined)
#endif
#ifndef CUDART_VERSION
MARK(runtime_missing)
#endif
#if defined(CUDART_VERSION) && CUDART_VERSION < 9000
MARK(runtime_ancient)
#elif defined __CUDACC_VER_MAJOR__ && __CUDACC_VER_MAJOR__ >= 11
MARK(compiler_11)
#endif
#if defined(_OPENMP)
MARK(openmp)
#else
MARK(no_openmp)
#endif
"""
WITH_DRIVER = '#include <cuda.h>\n#if CUDA_VERSION >= 11000\nMARK(driver_new)\n#else\nMARK(driver_old)\n#endif\n'


def _marks(cmd: list[str], text: str, tmp: Path, name: str) -> list[str]:
    path = tmp / name
    path.write_text(text)
    out = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=120, check=True).stdout
    return re.findall(r"MARK\((\w+)\)", out)


@pytest.mark.parametrize("text", [CONDITIONS, WITH_DRIVER + CONDITIONS], ids=["runtime", "driver"])
def test_conditions_take_nvccs_branch_under_gpp(text: str, tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    reference = _marks(["nvcc", "-E", "-x", "cu"], text, tmp_path, "src.cu")
    assert "runtime_new" in reference and "no_openmp" in reference  # the reference itself is as expected
    # g++ -fopenmp defines _OPENMP and no CUDA version; the driver header is stubbed for g++
    (tmp_path / "cuda.h").write_text("")
    translated = _marks(["g++", "-E", "-fopenmp", "-x", "c++", f"-I{tmp_path}"], as_source_build_saw(text),
                        tmp_path, "out.cpp")
    assert translated == reference
    untranslated = _marks(["g++", "-E", "-fopenmp", "-x", "c++", f"-I{tmp_path}"], text, tmp_path, "raw.cpp")
    assert untranslated != reference  # the fix is needed: g++ alone takes other branches


def test_other_conditions_are_untouched() -> None:
    text = "#if FOO_VERSION >= 2\nint a;\n#endif\n#ifdef MY_CUDART_VERSION_X\nint b;\n#endif\n"
    assert as_source_build_saw(text) == text


def test_the_runtime_says_the_same_cuda_version() -> None:
    # the source runs on the runtime and the translation reads its gates with build_macros: one version for both
    from xpiler_core.passes.support.build_macros import SOURCE_CUDA_VERSION

    include = Path(__file__).resolve().parents[2] / "xpiler_core" / "runtime" / "include"
    runtime = (include / "cuda_runtime.h").read_text()
    driver = (include / "cuda.h").read_text()
    assert f"#define CUDART_VERSION {SOURCE_CUDA_VERSION}\n" in runtime
    assert f"#define __CUDACC_VER_MAJOR__ {SOURCE_CUDA_VERSION // 1000}\n" in runtime
    assert f"#define CUDA_VERSION {SOURCE_CUDA_VERSION}\n" in driver


def test_a_condition_continued_over_lines_stays_one_directive(tmp_path: Path) -> None:
    """`#if A \\` + `|| B`: the value goes where the macro is and the note after the last line (a comment after
    the backslash would end the directive there); g++'s preprocessor takes the branches the CUDA build took."""
    text = ("#include <cuda.h>\n#if ((defined(CUDA_VERSION) && (CUDA_VERSION < 10000)) \\\n"
            "     || (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 700)))\nint old_path;\n#else\nint new_path;\n#endif\n")
    fixed = as_source_build_saw(text).replace("#include <cuda.h>\n", "")
    (tmp_path / "t.cpp").write_text(fixed)
    done = subprocess.run(["g++", "-E", "-P", str(tmp_path / "t.cpp")], capture_output=True, text=True, check=True)
    assert "new_path" in done.stdout and "old_path" not in done.stdout
