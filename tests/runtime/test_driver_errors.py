"""The driver API's CUresult codes (programs name them in their error helpers, as the CUDA Handbook's
chError.h does in a switch over every code): each name the runtime's cuda.h declares has the value CUDA 13's
cuda.h gives it, judged by nvcc on a program printing all of them, and a switch over every code compiles."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from xpiler_core.api import run_program

NAMES = re.findall(r"X\((\w+), \d+\)", (resources.files("xpiler_core.runtime") / "include" / "xpiler" /
                                        "cuda_enums.h").read_text().split("XPILER_CUDA_DRIVER_ERRORS(X)")[1])


def program() -> str:
    cases = "".join(f"    case CUDA_{n}: return \"{n}\";\n" for n in NAMES)
    prints = "".join(f'  printf("%s %d\\n", name(CUDA_{n}), (int)CUDA_{n});\n' for n in NAMES)
    return ("#include <cstdio>\n#include <cuda.h>\nconst char* name(CUresult r) {\n  switch (r) {\n" + cases
            + '    default: return "?";\n  }\n}\nint main() {\n' + prints + "  return 0;\n}\n")


def test_every_code_is_distinct_and_named_on_the_runtime(tmp_path: Path) -> None:
    assert len(NAMES) > 90 and "SUCCESS" in NAMES and "ERROR_UNKNOWN" in NAMES
    outcome = run_program(program(), str(tmp_path / "codes.cu"))
    assert outcome.built and outcome.exit_code == 0, outcome.build_log
    lines = outcome.stdout.splitlines()
    assert [line.split()[0] for line in lines] == NAMES


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_values_are_cuda_13s(tmp_path: Path) -> None:
    (tmp_path / "codes.cu").write_text(program())
    subprocess.run(["nvcc", "-o", str(tmp_path / "codes"), str(tmp_path / "codes.cu")], check=True,
                   capture_output=True, timeout=300)
    on_host = subprocess.run([str(tmp_path / "codes")], capture_output=True, text=True, timeout=60).stdout
    outcome = run_program(program(), str(tmp_path / "codes.cu"))
    assert outcome.stdout == on_host
