"""`xpiler inspect` on the examples: what a reader of each example expects to see, and real compilers'
verdicts on the examples themselves (so the model is checked against code that is known to be valid)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from xpiler_core.cli import main
from xpiler_core.frontend.model import load_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["inspect", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_inspect_softmax_shows_template_shared_shuffle_and_launch(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_inspect(capsys, str(EXAMPLES / "softmax_warp.cu"))
    assert code == 0 and err == ""
    assert "CUDA source, 1 kernel(s), 2 device function(s)" in out
    assert "kernel softmax_warp  @27:1" in out
    assert "template <typename T, int BLOCK = 256> __global__ void softmax_warp(" in out
    assert "launch bounds: max threads BLOCK" in out
    assert "param x: const T* __restrict__  [pointer, const, restrict]" in out
    assert "shared buffer (static): float warp_partial[BLOCK / 32]  @30:5" in out
    assert "warp ops: __shfl_xor_sync (shuffle) @12:30" in out
    assert "barriers: __syncthreads (block) x5" in out
    assert "softmax_warp<float, kBlock><<<grid=rows, block=kBlock, smem=0, stream=stream>>>(x, y, rows, cols)" in out
    assert "in softmax_forward" in out
    assert "diagnostics (0):" in out


def test_inspect_json_matches_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_inspect(capsys, str(EXAMPLES / "softmax_warp.cu"), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["dialect"] == "cuda"
    kinds = {f["name"]: f["kind"] for f in data["functions"]}
    assert kinds == {
        "warp_reduce_max": "device",
        "warp_reduce_sum": "device",
        "softmax_warp": "kernel",
        "softmax_forward": "host_entry",
    }
    kernel = next(f for f in data["functions"] if f["name"] == "softmax_warp")
    assert [p["name"] for p in kernel["params"]] == ["x", "y", "rows", "cols"]
    assert [b["name"] for b in kernel["buffers"]] == ["warp_partial", "row_stat"]
    assert kernel["calls"] == ["warp_reduce_max", "warp_reduce_sum"]
    assert "warp-shuffle" in kernel["reachable_features"] and "shared" in kernel["features"]
    (launch,) = data["launches"]
    assert [c["role"] for c in launch["config"]] == ["grid", "block", "smem", "stream"]
    assert launch["span"]["start_line"] == 85  # 0-based: line 86 of the file


def test_inspect_other_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_inspect(capsys, str(EXAMPLES / "relu.hip"))
    assert code == 0 and "HIP source" in out and "hipLaunchKernelGGL(relu_kernel;" in out
    code, out, _ = run_inspect(capsys, str(EXAMPLES / "saxpy.c"))
    assert code == 0 and "CPU kernel saxpy" in out and "#pragma omp parallel for simd schedule(static)" in out
    code, out, _ = run_inspect(capsys, str(EXAMPLES / "vector_add.mlu"))
    assert code == 0 and "BANG source" in out
    assert "nram buffer (static): float a_nram[CHUNK]  @8:5" in out
    assert "vector_add<<<dim=dim, ktype=ktype, queue=queue>>>(a, b, c, n)" in out
    assert "builtins: taskDim, taskId" in out


def test_dialect_override(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "k.txt"
    path.write_text("__mlu_global__ void k(float* x) { __nram__ float b[4]; }\n")
    code, out, _ = run_inspect(capsys, str(path), "--dialect", "bang")
    assert code == 0 and "nram buffer" in out


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in {".cu", ".hip", ".c", ".mlu"}))
def test_every_example_models_without_diagnostics(name: str) -> None:
    model = load_model(EXAMPLES / name)
    assert model.diagnostics == []
    assert model.kernels, f"{name} has no kernel"


def _compile(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_softmax_example_compiles_with_nvcc(tmp_path: Path) -> None:
    result = _compile(["nvcc", "-arch=sm_80", "-c", str(EXAMPLES / "softmax_warp.cu"), "-o", str(tmp_path / "s.o")])
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
def test_relu_example_compiles_with_hipcc(tmp_path: Path) -> None:
    env = dict(os.environ, HIP_PLATFORM="amd")
    command = ["hipcc", "--offload-arch=gfx90a", "-c", str(EXAMPLES / "relu.hip"), "-o", str(tmp_path / "r.o")]
    result = _compile(command, env)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_saxpy_example_compiles_with_gcc(tmp_path: Path) -> None:
    command = ["gcc", "-std=c11", "-O2", "-fopenmp", "-Wall", "-Werror", "-c", str(EXAMPLES / "saxpy.c")]
    result = _compile([*command, "-o", str(tmp_path / "s.o")])
    assert result.returncode == 0, result.stderr
