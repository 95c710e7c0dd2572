"""Strided per-thread accumulations on NRAM lanes (bang_reduce): results against numpy."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpiler_core.plans.cuda_to_bang import intrinsics_used, translate_to_bang
from xpiler_core.runtime.bang.call import run_bang_kernel
from xpiler_core.verify.spec import load_spec

GRID, BLOCK = 4, 128

BODIES = {
    # accumulation statement, expected intrinsics, numpy per-element value and combination
    "m += x[i] * 2.0f": ({"__bang_add", "__bang_mul_scalar"}, lambda x: 2 * x.astype(np.float64), "sum"),
    "m = fmaxf(m, fabsf(x[i]))": ({"__bang_maxequal", "__bang_active_abs"}, lambda x: np.abs(x), "max"),
}


def _kernel(body: str) -> str:
    return textwrap.dedent(f"""
        __global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {{
          __shared__ float part[{BLOCK}];
          float m = 0.0f;
          for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {body};
          part[threadIdx.x] = m;
          __syncthreads();
          if (threadIdx.x == 0) {{
            float s = part[0];
            for (int t = 1; t < blockDim.x; ++t) s = {"s + part[t]" if "+=" in body else "fmaxf(s, part[t])"};
            out[blockIdx.x] = s;
          }}
        }}
    """)


def _translate(src: str) -> str:
    spec_text = textwrap.dedent(f"""
        name = "k"
        source = "k.cu"
        entry = "k"
        kind = "kernel"
        grid = ["{GRID}"]
        block = [{BLOCK}]
        reference = "ref.py:ref"
        [[args]]
        name = "x"
        dtype = "float32"
        shape = ["n"]
        role = "in"
        [[args]]
        name = "out"
        dtype = "float32"
        shape = ["{GRID}"]
        role = "out"
        [[args]]
        name = "n"
        dtype = "int32"
        role = "scalar"
        value = "n"
        [[cases]]
        n = 1
    """)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "spec.toml").write_text(spec_text)
        (Path(tmp) / "k.cu").write_text(src)
        (Path(tmp) / "ref.py").write_text("def ref(**kw):\n    raise NotImplementedError\n")
        candidate, _, ctx = translate_to_bang(src, "k.cu", load_spec(str(Path(tmp) / "spec.toml")))
    assert candidate is not None, ctx.unresolved
    return candidate


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.sampled_from(sorted(BODIES)), n=st.integers(1, 3000))
def test_block_partial_reductions_match_numpy(body: str, n: int) -> None:
    expected_intrinsics, element, combine = BODIES[body]
    candidate = _translate(_kernel(body))
    assert expected_intrinsics <= set(intrinsics_used(candidate))
    x = np.random.default_rng(n).normal(size=n).astype(np.float32)
    out = np.zeros(GRID, np.float32)
    run = run_bang_kernel(candidate, "k", [x, out, np.int32(n)], dim=(8, 1, 1), task_type="union1")
    assert run.ok, run.error
    got = run.arrays[1]
    assert got is not None
    block_of = (np.arange(n) % (GRID * BLOCK)) // BLOCK
    values = element(x)
    if combine == "sum":
        want = np.bincount(block_of, weights=values, minlength=GRID)
    else:
        want = np.array([values[block_of == b].max(initial=0.0) for b in range(GRID)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_accumulation_over_shared_memory_is_not_copied_as_gdram() -> None:
    # the pointer into (recovered) dynamic shared memory is on-chip: a GDRAM2NRAM copy from it would be
    # wrong (the model reports it); the pass must leave this loop scalar
    src = textwrap.dedent("""
        __global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {
          extern __shared__ float buf[];
          buf[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x];
          __syncthreads();
          float m = 0.0f;
          for (int j = threadIdx.x; j < 128; j += blockDim.x) m += buf[j];
          out[blockIdx.x * 128 + threadIdx.x] = m;
        }
    """)
    spec_text = textwrap.dedent("""
        name = "k"
        source = "k.cu"
        entry = "k"
        kind = "kernel"
        grid = ["n // 128"]
        block = [128]
        shared_bytes = 512
        reference = "ref.py:ref"
        [[args]]
        name = "x"
        dtype = "float32"
        shape = ["n"]
        role = "in"
        [[args]]
        name = "out"
        dtype = "float32"
        shape = ["n"]
        role = "out"
        [[args]]
        name = "n"
        dtype = "int32"
        role = "scalar"
        value = "n"
        [[cases]]
        n = 512
    """)
    from xpiler_core.plans.cuda_to_bang import verify_bang

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "spec.toml").write_text(spec_text)
        (Path(tmp) / "k.cu").write_text(src)
        (Path(tmp) / "ref.py").write_text("def ref(x, n):\n    return x.copy()\n")
        spec = load_spec(str(Path(tmp) / "spec.toml"))
        candidate, records, _ = translate_to_bang(src, "k.cu", spec)
        assert candidate is not None
        assert "buf + xp_k0" not in candidate
        report, _ = verify_bang(candidate, spec, records)
    assert report.passed, report.summary()
