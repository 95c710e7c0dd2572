"""The grid-flatten pass: per-thread grid-stride loops / guarded elements → one flat loop over the elements.

Semantics are checked against numpy on hand-written kernels (a grid-stride loop through a device function,
a template block size behind an early exit, a 2-D launch that must keep the recovered nest), built with gcc.
Kernels whose iterations are not independent (neighbour reads of a written buffer, atomics, per-thread
indices in the body, carried scalars) must be refused.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNELS = r"""
__device__ float cube_plus(float v, float a) { float t = v * v * v; return t + a * v; }

__global__ void stride_kernel(const float* x, float* y, float a, int n) {
  const int stride = gridDim.x * blockDim.x;
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += stride) y[i] = cube_plus(x[i], a) + expf(-x[i]);
}

template <int BLOCK>
__global__ void exit_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < 3; ++k) acc = acc * x[i] + (float)(k + 1);
  y[i] = acc;
}

__global__ void plain_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}

__global__ void spelled_kernel(const float* x, float* y, int n) {  // generated style: the index spelled out
  if ((int)blockIdx.x * 128 + (int)threadIdx.x < n) {
    y[(int)blockIdx.x * 128 + (int)threadIdx.x] = x[(int)blockIdx.x * 128 + (int)threadIdx.x] - 1.0f;
  }
}

extern "C" void run(const float* x, float* y1, float* y2, float* y3, float* y4, float a, int n) {
  int grid = (n + 127) / 128;
  if (grid > 4) grid = 4;
  stride_kernel<<<grid, 128>>>(x, y1, a, n);
  exit_kernel<64><<<(n + 63) / 64, 64>>>(x, y2, n);
  plain_kernel<<<(n + 31) / 32, dim3(32, 4)>>>(x, y3, n);  // 2-D block (rows repeat): keeps the recovered nest
  spelled_kernel<<<(n + 127) / 128, 128>>>(x, y4, n);
}
"""


def _recovered(text: str) -> tuple[object, PassContext]:
    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    recovery = get_pass("loop_recovery")
    return recovery.apply(module, {**recovery.INFO.defaults(), "wrapper": False}, ctx), ctx


def test_flattened_kernels_match_numpy(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_flatten")["changed"]
    assert text.count("xp_flat_n = ") == 4  # every kernel; the 2-D launch takes the nest at run time
    lib = cbuild(text, True)
    rng = np.random.default_rng(3)
    for n in (1, 127, 1000, 20000):
        x = rng.uniform(-2, 2, n).astype(np.float32)
        ys = [np.full(n, np.nan, np.float32) for _ in range(4)]
        ptr = [ctypes.c_void_p(a.ctypes.data) for a in (x, *ys)]
        lib.run(*ptr, ctypes.c_float(0.5), ctypes.c_int(n))
        xd = x.astype(np.float64)
        np.testing.assert_allclose(ys[0], xd**3 + 0.5 * xd + np.exp(-xd), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ys[1], (xd + 2) * xd + 3, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ys[2], 2 * xd, rtol=1e-6)
        np.testing.assert_allclose(ys[3], xd - 1, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("body", [
    "y[i] = x[i] + y[i + 1];",                       # neighbour read of a written buffer
    "atomicAdd(y, x[i]);",                           # an effect shared by all iterations
    "y[i] = x[i] + (float)threadIdx.x;",             # the thread index, not only through i
    "acc += x[i]; y[i] = acc;",                      # a scalar carried across iterations
    "y[i / 2] = x[i];",                              # two iterations write one element
    "float* p = y + i + 1; *p = x[i];",              # a local pointer into the next element
    "const float* q = y + 1; y[i] = q[i];",          # reading a written buffer through an alias
])
def test_dependent_iterations_are_refused(body: str) -> None:
    text = f"""
__global__ void k(const float* x, float* y, int n) {{
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {{ {body} }}
}}
"""
    module, ctx = _recovered(text)
    flatten = get_pass("grid_flatten")
    with pytest.raises(PassRefused):
        flatten.apply(module, flatten.INFO.defaults(), ctx)


def test_stride_other_than_the_grid_is_refused() -> None:
    text = """
__global__ void k(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x) y[i] = x[i];
}
"""
    module, ctx = _recovered(text)
    flatten = get_pass("grid_flatten")
    with pytest.raises(PassRefused, match="grid size"):
        flatten.apply(module, flatten.INFO.defaults(), ctx)



# TVM's spelling of a nearest-neighbour 2x upsample of (3, 5, 3, 5) → (3, 5, 6, 10) (900 outputs) on 4 blocks of
# 256: w = i % 10, h = i / 10 % 6, nc = i / 60, each written in the block and thread indices separately.
TVM_UPSAMPLE = r"""
extern "C" __global__ void __launch_bounds__(256) upsample(float* __restrict__ in, float* __restrict__ out) {
  if (((int)blockIdx.x) * 64 + (((int)threadIdx.x) >> 2) < 225) {
    out[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] =
        in[((((int)blockIdx.x) * 64 + (((int)threadIdx.x) >> 2)) / 15) * 15
           + (((((int)blockIdx.x) * 128 + (((int)threadIdx.x) >> 1)) / 5) % 6) / 2 * 5
           + ((((int)blockIdx.x) * 6 + ((int)threadIdx.x)) % 10) / 2];
  }
}
extern "C" __global__ void __launch_bounds__(64) transpose(float* __restrict__ a, float* __restrict__ t) {
  t[((int)blockIdx.x) * 64 + ((int)threadIdx.x)] =
      a[(((int)threadIdx.x) & 15) * 20 + (((int)blockIdx.x) % 5) * 4 + (((int)threadIdx.x) >> 4)];
}
extern "C" void run(float* in, float* out, float* a, float* t) {
  upsample<<<4, 256>>>(in, out);
  transpose<<<5, 64>>>(a, t);
}
"""


def test_tvm_split_index_arithmetic_is_flattened_and_matches_numpy(cbuild) -> None:  # noqa: ANN001 - fixture
    text, records, _ctx = translate_to_cpu(TVM_UPSAMPLE, "u.cu", None, {"loop_recovery": {"wrapper": False}},
                                           ["detensorization", "loop_recovery", "grid_flatten", "loop_binding",
                                            "delinearize"])
    assert text is not None
    record = next(r for r in records if r["name"] == "grid_flatten")
    assert record["changed"], record
    assert "xp_gdx <= 4" in text  # the flat forms hold within the checked launch
    # the transpose's terms are of the block index alone or the thread index alone: its block nest stays
    assert "xp_gdx <= 5" not in text
    delinearized = next(r for r in records if r["name"] == "delinearize")
    assert delinearized["changed"], delinearized  # split by the axis sizes the flat forms revealed
    lib = cbuild(text)
    rng = np.random.default_rng(3)
    src = rng.standard_normal((3, 5, 3, 5)).astype(np.float32)
    out = np.full(900 + 124, -7.0, dtype=np.float32)  # the launch covers 1024 threads: the rest stays untouched
    a = rng.standard_normal(320).astype(np.float32)
    t = np.zeros(320, dtype=np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.run(src.ctypes.data_as(ptr), out.ctypes.data_as(ptr), a.ctypes.data_as(ptr), t.ctypes.data_as(ptr))
    np.testing.assert_array_equal(out[:900], src.repeat(2, axis=2).repeat(2, axis=3).reshape(-1))
    assert np.all(out[900:] == -7.0)
    i = np.arange(320)
    np.testing.assert_array_equal(t, a[(i & 15) * 20 + (i // 64 % 5) * 4 + ((i % 64) >> 4)])


def test_flat_forms_need_a_one_dimensional_launch() -> None:
    from xpiler_core.passes.support.flat_forms import over_flat_index

    module = lower_text(TVM_UPSAMPLE, "u.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="u.cu")
    recovery = get_pass("loop_recovery")
    recovered = recovery.apply(module, {**recovery.INFO.defaults(), "wrapper": False}, ctx)
    nest = next(s for s in recovered.function("upsample").body.stmts if isinstance(s, A.For))
    assert over_flat_index(nest, ((2, 2, 1), (256, 1, 1)), 1 << 22) == "the launch is not one-dimensional"
    assert not isinstance(over_flat_index(nest, ((4, 1, 1), (256, 1, 1)), 1 << 22), str)


def test_a_run_time_grid_is_checked_over_the_launch_bounds(cbuild) -> None:  # noqa: ANN001 - fixture
    """``upsample<<<g, 256>>>``: no constant launch, but ``__launch_bounds__(256)`` bounds the block; the flat
    forms are checked over 256 threads and 2^20 / 256 blocks and the flat loop runs within that. Every grid
    computes the source's upsample (numpy), the elements past the 900 outputs untouched."""
    source = TVM_UPSAMPLE.replace("upsample<<<4, 256>>>(in, out);", "upsample<<<g, 256>>>(in, out);").replace(
        "transpose<<<5, 64>>>(a, t);", "").replace("float* t)", "float* t, int g)")
    text, records, _ctx = translate_to_cpu(source, "u.cu", None, {"loop_recovery": {"wrapper": False}},
                                           ["detensorization", "loop_recovery", "grid_flatten", "loop_binding",
                                            "delinearize"])
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_flatten")["changed"]
    assert "xp_gdx <= 4096" in text
    lib = cbuild(text)
    rng = np.random.default_rng(4)
    src = rng.standard_normal((3, 5, 3, 5)).astype(np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    for grid in (4, 5, 4097):
        out = np.full(grid * 256, -7.0, dtype=np.float32)
        lib.run(src.ctypes.data_as(ptr), out.ctypes.data_as(ptr), None, None, ctypes.c_int(grid))
        np.testing.assert_array_equal(out[:900], src.repeat(2, axis=2).repeat(2, axis=3).reshape(-1))
        assert np.all(out[900:] == -7.0)


@settings(max_examples=200, deadline=None)
@given(a=st.integers(1, 40), period=st.one_of(st.none(), st.integers(2, 12)), step=st.integers(-4, 4),
       offset=st.integers(-9, 9), total=st.integers(2, 3000), noise=st.integers(-1, 2999))
def test_flat_form_fit_reproduces_the_values_it_claims(a: int, period: int | None, step: int, offset: int,
                                                       total: int, noise: int) -> None:
    """Every form the fit returns evaluates (C semantics) to the values it was fitted to; values of the family
    always get one; a disturbed sequence gets a form only if that form is exact."""
    from xpiler_core.passes.support.flat_forms import _fit
    from xpiler_core.passes.support.launch_points import evaluate

    i = np.arange(total, dtype=np.int64)
    q = i // a if period is None else (i // a) % period
    values = offset + step * q
    if noise >= 0:
        values = values.copy()
        values[noise % total] += 1
    form = _fit(values, False, A.Name("xp_i"))
    if noise < 0:
        assert form is not None
    if form is not None:
        got = evaluate(form, {"xp_i": i})
        assert got is not None
        np.testing.assert_array_equal(np.broadcast_to(got, (total,)), values)
    prefix = (i < noise).astype(np.int64)
    guard = _fit(prefix, True, A.Name("xp_i"))
    assert guard is not None and np.array_equal(np.broadcast_to(evaluate(guard, {"xp_i": i}), (total,)), prefix)


# TVM's adaptive max pool (21 channels of 5×16 → 8×8) on blocks of 48: each element runs window loops whose row
# bound depends on the output row, spelled in the block and thread indices separately.
TVM_ADAPTIVE_POOL = r"""
extern "C" __global__ void __launch_bounds__(48) apool(float* __restrict__ out, float* __restrict__ data) {
  out[((int)blockIdx.x) * 48 + ((int)threadIdx.x)] = -3.402823e+38f;
  for (int rv0 = 0; rv0 < ((((((((int)blockIdx.x) * 6 + (((int)threadIdx.x) >> 3)) & 7) * 5) + 5) % 8 == 0)
                            ? (((((((int)blockIdx.x) * 6 + (((int)threadIdx.x) >> 3)) & 7) * 5) + 5) >> 3)
                            : ((((((((int)blockIdx.x) * 6 + (((int)threadIdx.x) >> 3)) & 7) * 5) + 5) >> 3) + 1))
                           - ((((((int)blockIdx.x) * 6 + (((int)threadIdx.x) >> 3)) & 7) * 5) >> 3); ++rv0) {
    for (int rv1 = 0; rv1 < 2; ++rv1) {
      out[((int)blockIdx.x) * 48 + ((int)threadIdx.x)] = max(out[((int)blockIdx.x) * 48 + ((int)threadIdx.x)],
          data[((((int)blockIdx.x) * 3 + (((int)threadIdx.x) >> 4)) >> 2) * 80
               + ((((((int)blockIdx.x) * 6 + (((int)threadIdx.x) >> 3)) & 7) * 5) >> 3) * 16 + rv0 * 16
               + (((int)threadIdx.x) & 7) * 2 + rv1]);
    }
  }
}
"""


def test_window_loops_flatten_and_split_with_their_bounds_hoisted(cbuild) -> None:  # noqa: ANN001 - fixture
    """Element bodies with inner loops flatten too: the split by the output row's divisor moves the window's
    row bound out of the element loop. Checked against numpy's adaptive max pool."""
    text, records, _ctx = translate_to_cpu(TVM_ADAPTIVE_POOL, "p.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "grid_flatten")["changed"]
    assert next(r for r in records if r["name"] == "delinearize")["changed"]
    assert re.search(r"rv0 < xp_h\d+;", text), "the window's row bound is hoisted per output row"
    lib = cbuild(text + """
extern "C" void run(float* out, float* data, int blocks) { apool(dim3(blocks), dim3(48), 0, out, data); }
""")
    data = np.random.default_rng(5).standard_normal((21, 5, 16)).astype(np.float32)
    expected = np.empty((21, 8, 8), dtype=np.float32)
    for oh in range(8):
        lo, hi = oh * 5 // 8, -(-(oh + 1) * 5 // 8)
        for ow in range(8):
            expected[:, oh, ow] = data[:, lo:hi, ow * 2:ow * 2 + 2].max(axis=(1, 2))
    ptr = ctypes.POINTER(ctypes.c_float)
    out = np.zeros(21 * 64, dtype=np.float32)
    lib.run(out.ctypes.data_as(ptr), data.ctypes.data_as(ptr), 28)
    np.testing.assert_array_equal(out.reshape(21, 8, 8), expected)

