"""Every name the mapping tables produce is declared by the real toolkit: a probe that uses each HIP name is
compiled by hipcc, and one that uses each CUDA name by nvcc; the compilers' "undeclared" errors are the
table's mistakes. Rows with an explicit status (needs a newer HIP, unsupported, library not installed) are
checked not to be declared by the installed headers instead, so the status stays true."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from xpiler_core.tables import TABLE_FILES, raw_table

CHECKED = tuple(t for t in TABLE_FILES if t not in ("libraries", "headers", "intrinsics"))
IDENT = re.compile(r"[A-Za-z_]\w*")
UNDECLARED = {
    "hipcc": re.compile(r"(?:use of undeclared identifier|unknown type name) '(\w+)'"),
    "nvcc": re.compile(r'(?:identifier|type name) "(\w+)" is undefined|error: "?(\w+)"? is not a type name'),
}
HEADERS = {
    "hipcc": ["hip/hip_runtime.h", "hip/hip_runtime_api.h", "hip/hip_fp16.h", "hip/hip_complex.h",
              "hip/hip_cooperative_groups.h"],
    "nvcc": ["cuda.h", "cuda_runtime.h", "cuda_fp16.h", "cuComplex.h", "cooperative_groups.h"],
}


def rows() -> list[tuple[str, str, str, str]]:
    """(table, CUDA name, HIP name, status) for every plain-identifier pair; CUDA names current CUDA headers
    dropped ([legacy_pairs], still found in old code) have the status "legacy"."""
    out = []
    for table in CHECKED:
        data = raw_table(table)
        status = data.get("status", {})
        for cuda, hip in data.get("legacy_pairs", {}).items():
            out.append((table, cuda, hip, "legacy"))
        for cuda, hip in data.get("pairs", {}).items():
            if IDENT.fullmatch(cuda) and IDENT.fullmatch(hip):
                out.append((table, cuda, hip, status.get(cuda, {}).get("status", "ok")))
    return out


@lru_cache(maxsize=2)
def undeclared(compiler: str, side: int) -> frozenset[str]:
    """The names of one side (1: CUDA, 2: HIP) the compiler says are not declared."""
    lines = [f"#include <{h}>" for h in HEADERS[compiler]]
    for i, row in enumerate(rows()):
        table, name = row[0], row[side]
        if table == "runtime_types":
            lines.append(f"void xp_probe_{i}({name}* p);")
        else:
            lines.append(f"void xp_probe_{i}() {{ (void)sizeof(&{name}); }}")
    probe = Path(f"/tmp/xpiler-table-probe-{os.getpid()}-{compiler}" + (".hip" if compiler == "hipcc" else ".cu"))
    probe.write_text("\n".join(lines) + "\n")
    command = ([compiler, "--offload-arch=gfx90a", "-fsyntax-only", "-ferror-limit=0", str(probe)] if compiler == "hipcc"
               else [compiler, "-arch=sm_80", "-std=c++17", "-c", str(probe), "-o", "/dev/null"])
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, "HIP_PLATFORM": "amd"})
    probe.unlink()
    found = set()
    for match in UNDECLARED[compiler].finditer(done.stderr + done.stdout):
        found.update(g for g in match.groups() if g)
    return frozenset(found)


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
def test_every_hip_name_is_declared_by_hip_or_carries_a_status() -> None:
    missing = undeclared("hipcc", 2)
    wrong = [(t, c, h) for t, c, h, s in rows() if s in ("ok", "legacy") and h in missing]
    assert not wrong, f"HIP names the installed HIP does not declare: {wrong}"
    stale = [(t, c, h, s) for t, c, h, s in rows() if s not in ("ok", "legacy") and h not in missing]
    assert not stale, f"rows with a status whose HIP name is declared after all: {stale}"
    assert len(rows()) > 600


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_every_cuda_name_is_declared_by_cuda() -> None:
    missing = undeclared("nvcc", 1)
    wrong = [(t, c) for t, c, _h, s in rows() if s != "legacy" and c in missing]
    assert not wrong, f"CUDA names nvcc does not declare: {wrong}"


def _compiles(compiler: str, source: str) -> bool:
    probe = Path(f"/tmp/xpiler-overload-probe-{os.getpid()}" + (".hip" if compiler == "hipcc" else ".cu"))
    probe.write_text(source)
    command = ([compiler, "--offload-arch=gfx90a", "-fsyntax-only", str(probe)] if compiler == "hipcc"
               else [compiler, "-arch=sm_90", "-std=c++17", "-c", str(probe), "-o", "/dev/null"])
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env).returncode == 0
    finally:
        probe.unlink(missing_ok=True)


@pytest.mark.skipif(shutil.which("hipcc") is None or shutil.which("nvcc") is None, reason="needs hipcc and nvcc")
@pytest.mark.parametrize("name", sorted(raw_table("hip_wider_overloads")["functions"]))
def test_wider_overloads_exist_in_hip_and_not_in_cuda(name: str) -> None:
    """Each row of hip_wider_overloads.toml: HIP accepts the call on every listed type, CUDA on none."""
    for element in raw_table("hip_wider_overloads")["functions"][name]["types"]:
        call = f"__global__ void probe({element}* p) {{ {name}(p, ({element})1); }}\n"
        assert _compiles("hipcc", "#include <hip/hip_runtime.h>\n" + call), (name, element, "hipcc")
        assert not _compiles("nvcc", call), (name, element, "nvcc")
