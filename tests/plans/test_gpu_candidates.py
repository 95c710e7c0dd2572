"""Candidates: warp code written with warpSize is tried on the full wavefront first; verification decides."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, TranslationResult, translate

SPEC = """
name = "wave_total"
source = "k.cu"
entry = "total"
kind = "kernel"
grid = ["ceil_div(n, 256)"]
block = [256]
reference = "ref.py:total"
tolerance = { atol = 1e-3, rtol = 1e-4 }

[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"
init = "uniform(0.0, 1.0)"

[[args]]
name = "out"
dtype = "float32"
shape = [1]
role = "out"

[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"

[[cases]]
n = 1000

[[cases]]
n = 4096
"""
REF = "import numpy as np\ndef total(x, n):\n    return np.array([x.sum()], dtype=np.float32)\n"

# Right at any warp width: every warp's lane 0 adds its warp's sum.
AGNOSTIC = """__global__ void total(const float* __restrict__ x, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % warpSize == 0) atomicAdd(out, v);
}
"""
# Per-row sums of 32-wide rows, written as if a warp were a row: right only when warpSize is 32.
ROW_PER_WARP = """__global__ void total(const float* __restrict__ x, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % warpSize == 0 && i < n) out[i / warpSize] = v;
}
"""
ROW_SPEC = (SPEC.replace('shape = [1]', 'shape = ["ceil_div(n, 32)"]').replace("ref.py:total", "ref.py:rows")
            .replace("n = 1000", "n = 1024"))
ROW_REF = "import numpy as np\ndef rows(x, n):\n    return x.reshape(-1, 32).sum(axis=1).astype(np.float32)\n"


def _run(tmp_path: Path, source: str, spec: str = SPEC, ref: str = REF) -> TranslationResult:
    (tmp_path / "k.cu").write_text(source)
    (tmp_path / "spec.toml").write_text(spec)
    (tmp_path / "ref.py").write_text(ref)
    return translate(source, str(tmp_path / "k.cu"), TranslateOptions(Dialect.HIP, spec_path=str(tmp_path / "spec.toml")))


def test_warp_agnostic_code_keeps_the_full_wavefront(tmp_path: Path) -> None:
    result = _run(tmp_path, AGNOSTIC)
    assert result.status == "verified", result.summary
    assert [a["candidate"] for a in result.manifest["candidates"]] == ["native"]
    assert "warpSize / 2" in result.output_text and ", 32)" not in result.output_text


def test_plausible_but_wrong_native_candidate_falls_back_to_lanes32(tmp_path: Path) -> None:
    result = _run(tmp_path, ROW_PER_WARP, ROW_SPEC, ROW_REF)
    attempts = result.manifest["candidates"]
    assert [a["candidate"] for a in attempts] == ["native", "lanes32"]
    assert attempts[0]["status"] == "unresolved" and attempts[1]["status"] == "verified"
    assert result.status == "verified" and ", 32)" in result.output_text
