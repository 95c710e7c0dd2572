"""The runtime against a real CUDA GPU, where one is present: one program of warp, block, cooperative-group,
atomic and float semantics that the hardware defines exactly, run by ``xpiler run`` on the runtime and on the
GPU (``--reference gpu``, built with nvcc); the two outputs must be the same text. Without a GPU the test is
skipped; the same constructs are checked against numpy in this room's other tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xpiler_core.verify.gpu_reference import gpu_unavailable

PROGRAM = Path(__file__).with_name("gpu_fidelity.cu")
needs_gpu = pytest.mark.skipif(gpu_unavailable() is not None, reason=f"no CUDA GPU here: {gpu_unavailable()}")


def run_program(where: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "xpiler_core", "run", str(PROGRAM), *(["--reference", "gpu"] if where == "gpu" else [])]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=workdir)


@needs_gpu
def test_the_runtime_prints_what_the_gpu_prints(tmp_path: Path) -> None:
    on_gpu = run_program("gpu", tmp_path)
    on_runtime = run_program("runtime", tmp_path)
    assert on_gpu.returncode == 0, on_gpu.stderr
    assert on_runtime.returncode == 0, on_runtime.stderr
    assert "no error" in on_gpu.stdout
    assert on_runtime.stdout == on_gpu.stdout
