"""inline_ptx: known PTX becomes C++ with the same meaning; the rest is unresolved at its location."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.passes.gpu.inline_ptx import LOP3_HELPER
from xpiler_core.pipeline import TranslateOptions, run_pass, translate
from xpiler_core.verify.spec import load_spec

_LOP3_DRIVER = """
#define __device__
#include <cstdio>
{helper}
int main() {{
    unsigned a, b, c, lut;
    while (std::scanf("%u %u %u %u", &a, &b, &c, &lut) == 4) std::printf("%u\\n", xpiler_lop3(a, b, c, lut));
    return 0;
}}
"""


def _lop3_reference(a: int, b: int, c: int, lut: int) -> int:
    """PTX ISA: bit i of the result is bit ((a_i << 2) | (b_i << 1) | c_i) of the immediate."""
    out = 0
    for i in range(32):
        index = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1)
        out |= ((lut >> index) & 1) << i
    return out


@settings(max_examples=1, deadline=None)
@given(st.lists(st.tuples(*(st.integers(0, 2**32 - 1),) * 3, st.integers(0, 255)), min_size=200, max_size=200))
def test_lop3_helper_matches_the_ptx_truth_table(inputs: list[tuple[int, int, int, int]]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="xpiler-lop3-"))
    (tmp / "lop3.cpp").write_text(_LOP3_DRIVER.format(helper=LOP3_HELPER))
    subprocess.run(["g++", "-O1", "-o", str(tmp / "lop3"), str(tmp / "lop3.cpp")], check=True)
    stdin = "\n".join(" ".join(map(str, t)) for t in inputs)
    got = subprocess.run([str(tmp / "lop3")], input=stdin, capture_output=True, text=True, check=True).stdout.split()
    assert [int(g) for g in got] == [_lop3_reference(*t) for t in inputs]


PTX_KERNEL = """
// warp sums of x through PTX: read-only loads, a shuffle tree, lane id from %laneid
__global__ void ptx_warp_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = 0.0f;
  if (i < n) asm("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(x + i));
  for (int o = 16; o > 0; o >>= 1) {
    float w;
    asm volatile("shfl.sync.down.b32 %0, %1, %2, %3, %4;" : "=f"(w) : "f"(v), "r"(o), "r"(0x1f), "r"(0xffffffff));
    v += w;
  }
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (lane == 0 && i < n) out[i / 32] = v;
}
"""

PTX_SPEC = """
name = "ptx_warp_sum"
source = "ptx_warp_sum.cu"
entry = "ptx_warp_sum"
kind = "kernel"
grid = ["ceil_div(n, 128)"]
block = [128]
reference = "ref.py:warp_sums"
tolerance = { atol = 1e-4, rtol = 1e-4 }

[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"
init = "normal"

[[args]]
name = "out"
dtype = "float32"
shape = ["ceil_div(n, 32)"]
role = "out"

[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"

[[cases]]
n = 256

[[cases]]
n = 1024
"""

PTX_REF = """
import numpy as np
def warp_sums(x, n):
    return x.reshape(-1, 32).sum(axis=1).astype(np.float32)
"""


def test_ptx_kernel_translated_to_hip_matches_numpy_at_warp_64(tmp_path: Path) -> None:
    (tmp_path / "ptx_warp_sum.cu").write_text(PTX_KERNEL)
    (tmp_path / "spec.toml").write_text(PTX_SPEC)
    (tmp_path / "ref.py").write_text(PTX_REF)
    result = translate(PTX_KERNEL, str(tmp_path / "ptx_warp_sum.cu"),
                       TranslateOptions(Dialect.HIP, spec_path=str(tmp_path / "spec.toml")))
    assert "asm" not in result.output_text
    assert result.status == "verified", result.summary
    assert result.tests is not None and result.tests.warp_size == 64 and len(result.tests.cases) == 2


def test_ptx_source_fails_without_the_pass_proving_the_test_can_fail(tmp_path: Path) -> None:
    """Renaming alone leaves PTX that hipcc cannot assemble: the same check reports it unresolved."""
    (tmp_path / "spec.toml").write_text(PTX_SPEC)
    (tmp_path / "ref.py").write_text(PTX_REF)
    (tmp_path / "ptx_warp_sum.cu").write_text(PTX_KERNEL)
    spec = load_spec(str(tmp_path / "spec.toml"))
    expected = np.arange(64, dtype=np.float32).reshape(-1, 32).sum(1)
    assert expected.tolist() == [496.0, 1520.0]  # the reference's arithmetic, checked by hand
    result = translate(PTX_KERNEL, str(tmp_path / "ptx_warp_sum.cu"),
                       TranslateOptions(Dialect.HIP, spec_path=str(spec.path), passes=["api_map"]))
    assert result.status == "unresolved"
    assert result.compile is not None and not result.compile.ok


def test_unknown_ptx_is_unresolved_with_location_and_left_in_place() -> None:
    text = ("__global__ void k(unsigned* o) {\n  unsigned r;\n"
            "  asm volatile(\"prmt.b32 %0, %1, %2, 0x3210;\" : \"=r\"(r) : \"r\"(o[0]), \"r\"(o[1]));\n  o[1] = r;\n}\n")
    outcome = run_pass("inline_ptx", text, "k.cu", {}, Dialect.HIP)
    assert "prmt.b32" in outcome.text
    [item] = outcome.unresolved
    assert item.span.start_line == 2 and "prmt.b32" in item.reason
