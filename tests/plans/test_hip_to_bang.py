"""HIP → BANG C: 64-lane wavefront semantics survive (numpy reference written for 64 lanes, run on the MLU
model); the same kernel translated at warp 32 is caught by that reference."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from xpiler_core.cli import main
from xpiler_core.dialect import Dialect

KERNEL = r"""
#include <hip/hip_runtime.h>
__global__ void lane0(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  float first = __shfl(v, 0);  // lane 0 of this thread's wavefront
  if (i < n) y[i] = v - first;
}
"""

SPEC = """
name = "lane0"
source = "lane0.hip"
entry = "lane0"
kind = "kernel"
grid = ["ceil_div(n, 128)"]
block = [128]
reference = "ref.py:ref"
tolerance = { atol = 1e-6, rtol = 1e-6 }
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"
[[args]]
name = "y"
dtype = "float32"
shape = ["n"]
role = "out"
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 300
"""

REF = """
import numpy as np

def ref(x, n):
    i = np.arange(n)
    return {"y": x - x[(i // 64) * 64]}  # 64-lane wavefronts
"""


def _translate(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    (tmp_path / "lane0.hip").write_text(KERNEL)
    (tmp_path / "spec.toml").write_text(SPEC)
    (tmp_path / "ref.py").write_text(textwrap.dedent(REF))
    code = main(["translate", str(tmp_path / "lane0.hip"), "--to", "bang", "--spec", str(tmp_path / "spec.toml"),
                 *extra])
    manifest = json.loads((tmp_path / ".xpiler" / "lane0.mlu.json").read_text())
    return code, manifest


def test_wavefront_broadcast_verifies_on_the_mlu_model(tmp_path: Path) -> None:
    code, manifest = _translate(tmp_path)
    assert code == 0, manifest["outcome"]
    assert manifest["outcome"]["status"] == "verified"
    assert "__mlu_global__" in (tmp_path / "lane0.mlu").read_text()


def test_warp_32_translation_fails_the_64_lane_reference(tmp_path: Path) -> None:
    code, manifest = _translate(tmp_path, "--warp-size", "32")
    assert code != 0 and manifest["outcome"]["status"] != "verified"


def test_hip_offers_bang() -> None:
    from xpiler_core import api as core_api

    assert Dialect.BANG in core_api.available_targets(Dialect.HIP)
