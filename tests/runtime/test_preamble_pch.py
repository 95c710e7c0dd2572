"""A C/C++ file's opening standard headers read from a precompiled copy (``runtime/pch.py``): the compiler sees the
same program. Judged by g++ itself: the preprocessed text with the opening pre-included equals the plain one, the
object code of a real CPU translation is the same instruction for instruction, and g++ says it used the copy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xpiler_core.runtime.pch import leading_headers, precompiled_preamble

pytestmark = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("objdump") is None,
                                reason="needs g++ and objdump")

FLAGS = ["-O2", "-fopenmp", "-std=c++17", "-fno-strict-aliasing"]
OPENING_LINES = [
    "#include <stdio.h>", "#include <math.h>", "#include <cmath>", "#include <algorithm>", "#include <assert.h>",
    "#include <vector>", "#define XP_WIDTH 8", "#define NDEBUG", "#undef NDEBUG", "// a comment",
    "/* a block comment */", "", "#ifdef _OPENMP\n#include <omp.h>\n#endif",
    "#if XP_WIDTH > 4\n#define XP_WIDE 1\n#else\n#define XP_WIDE 0\n#endif", '#line 1 "kernel.cu"',
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
def test_reading_the_opening_first_changes_nothing_the_compiler_sees(tmp_path: Path, lines: list[str]) -> None:
    text = "\n".join(lines) + "\n" + BODY
    opening = leading_headers(text)
    if opening is None:  # no standard header before the first line that ends the opening: nothing to precompile
        return
    assert text.replace('#line 1 "kernel.cu"\n', "").startswith(opening.rstrip("\n"))
    stub = tmp_path / "opening.h"
    stub.write_text(opening)
    assert preprocessed(tmp_path, text, str(stub)) == preprocessed(tmp_path, text, None)


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
    version = subprocess.run(["g++", "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
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


def test_one_copy_serves_every_project_folder_unless_a_folder_holds_a_header_of_that_name(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    monkeypatch.setenv("XPILER_CACHE_DIR", str(tmp_path / "cache"))
    version = subprocess.run(["g++", "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    text = "#include <stdio.h>\n#include <math.h>\nint main() { printf(\"%.1f\\n\", sqrt(4.0)); }\n"
    plain, shadowing = tmp_path / "plain", tmp_path / "shadowing"
    plain.mkdir()
    shadowing.mkdir()
    (shadowing / "math.h").write_text("#include_next <math.h>\n#define XP_PROJECT_MATH 1\n")
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
