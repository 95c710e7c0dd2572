"""A user's spec naming a host function with C++ linkage (no ``extern "C"``, no ``entry_shim``) is tested
through a forwarder the harness adds, for the source, a HIP translation and a CPU translation; the judge is a
numpy reference, not the source."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.verify.entry_shim import add_entry_shim
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

# 5-point stencil over a shared-memory tile with a halo, launched by a C++ host function on device pointers
STENCIL = r"""
#include <cuda_runtime.h>
#define TILE 16
__global__ void stencil2d(const float* in, float* out, int w, int h) {
    __shared__ float tile[TILE + 2][TILE + 2];
    int gx = blockIdx.x * TILE + threadIdx.x, gy = blockIdx.y * TILE + threadIdx.y;
    int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
    tile[ly][lx] = (gx < w && gy < h) ? in[gy * w + gx] : 0.0f;
    if (threadIdx.x < 1) {
        tile[ly][lx - 1] = (gx - 1 >= 0 && gy < h) ? in[gy * w + gx - 1] : 0.0f;
        tile[ly][lx + TILE] = (gx + TILE < w && gy < h) ? in[gy * w + gx + TILE] : 0.0f;
    }
    if (threadIdx.y < 1) {
        tile[ly - 1][lx] = (gy - 1 >= 0 && gx < w) ? in[(gy - 1) * w + gx] : 0.0f;
        tile[ly + TILE][lx] = (gy + TILE < h && gx < w) ? in[(gy + TILE) * w + gx] : 0.0f;
    }
    __syncthreads();
    if (gx < w && gy < h)
        out[gy * w + gx] = 0.2f * (tile[ly][lx] + tile[ly][lx - 1] + tile[ly][lx + 1] + tile[ly - 1][lx] + tile[ly + 1][lx]);
}

void run_stencil(const float* d_in, float* d_out, int w, int h) {
    dim3 block(TILE, TILE), grid((w + TILE - 1) / TILE, (h + TILE - 1) / TILE);
    stencil2d<<<grid, block>>>(d_in, d_out, w, h);
}
"""

REF = '''
import numpy as np

def stencil(d_in, w, h):
    p = np.pad(d_in.astype(np.float64), 1)
    s = p[1:-1, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1]
    return (0.2 * s).astype(np.float32)
'''

SPEC = """
name = "stencil"
source = "stencil.cu"
entry = "run_stencil"
kind = "host"
reference = "ref.py:stencil"
tolerance = { atol = 1e-5, rtol = 1e-5 }
[[args]]
name = "d_in"
dtype = "float32"
shape = ["h", "w"]
init = "normal"
[[args]]
name = "d_out"
dtype = "float32"
shape = ["h", "w"]
role = "out"
[[args]]
name = "w"
dtype = "int32"
role = "scalar"
value = "w"
[[args]]
name = "h"
dtype = "int32"
role = "scalar"
value = "h"
[[cases]]
w = 33
h = 17
[[cases]]
w = 40
h = 50
"""


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cxx_entry")
    (d / "stencil.cu").write_text(STENCIL)
    (d / "ref.py").write_text(REF)
    (d / "spec.toml").write_text(SPEC)
    return d


def test_the_source_runs_through_a_forwarder_and_matches_numpy(spec_dir: Path) -> None:
    report = run_spec(load_spec(spec_dir / "spec.toml"))
    assert report.passed, report.summary()


def test_a_wrong_source_still_fails(spec_dir: Path) -> None:
    wrong = STENCIL.replace("0.2f *", "0.25f *")
    report = run_spec(load_spec(spec_dir / "spec.toml"), candidate_text=wrong, candidate_dialect=Dialect.CUDA)
    assert not report.passed and report.cases and report.cases[0].mismatches > 0


@pytest.mark.parametrize("target", [Dialect.HIP, Dialect.C])
def test_translations_verify_against_numpy(spec_dir: Path, target: Dialect) -> None:
    result = translate(STENCIL, str(spec_dir / "stencil.cu"),
                       TranslateOptions(target=target, spec_path=str(spec_dir / "spec.toml")))
    assert result.status == "verified", result.summary


def test_no_forwarder_where_none_is_needed() -> None:
    assert add_entry_shim('extern "C" void f(float* x, int n) {}', Dialect.CUDA, "f") is None
    assert add_entry_shim("void f(float* x, int n) {}", Dialect.C, "f", built_as_cplusplus=False) is None
    assert add_entry_shim("template <int N> void f(float* x) {}", Dialect.CUDA, "f") is None
    assert add_entry_shim("void f(float* x) {}\nvoid f(double* x) {}", Dialect.CUDA, "f") is None
    shimmed = add_entry_shim("void f(float* x, int n) {}", Dialect.CUDA, "f")
    assert shimmed is not None and shimmed[1] == "xp_entry_f" and 'extern "C" void xp_entry_f(' in shimmed[0]


def test_a_missing_entry_is_named_in_the_translation_status(spec_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "stencil.cu").write_text(STENCIL)
    (tmp_path / "ref.py").write_text(REF)
    (tmp_path / "spec.toml").write_text(SPEC.replace('"run_stencil"', '"no_such_entry"'))
    result = translate(STENCIL, str(tmp_path / "stencil.cu"),
                       TranslateOptions(target=Dialect.HIP, spec_path=str(tmp_path / "spec.toml")))
    assert result.status != "verified"
    assert "no_such_entry" in result.summary
