"""The block-reduce pass: row-per-block/warp reductions (strided fold, block combine, broadcast) → sequential
SIMD loops per row that one thread runs.

Semantics are checked against numpy on hand-written kernels in spellings the suite does not have (a
block-per-row softmax whose max and sum go through a shared-memory tree helper with a ternary max, a
warp-per-row layernorm with butterfly shuffles and a ``% 32`` lane), built with gcc. Kernels whose combine is
not a broadcast fold of the partials, or whose partial is used other than as that fold, must be refused.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.plans.cuda_to_cpu import translate_to_cpu

KERNELS = r"""
__device__ float tree_max(float v, float* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      float o = buf[threadIdx.x + s];
      buf[threadIdx.x] = o > buf[threadIdx.x] ? o : buf[threadIdx.x];
    }
    __syncthreads();
  }
  float r = buf[0];
  __syncthreads();
  return r;
}

__device__ float tree_sum(float v, float* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = buf[threadIdx.x] + buf[threadIdx.x + s];
    __syncthreads();
  }
  float r = buf[0];
  __syncthreads();
  return r;
}

__global__ void softmax_block(const float* in, float* out, int rows, int cols) {
  __shared__ float buf[64];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* src = in + row * cols;
    float* dst = out + row * cols;
    float best = -FLT_MAX;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) best = fmaxf(best, src[j]);
    const float top = tree_max(best, buf);
    float total = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) total = total + expf(src[j] - top);
    total = tree_sum(total, buf);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) dst[j] = expf(src[j] - top) / total;
  }
}

__device__ float butterfly(float v) {
  for (int o = 16; o >= 1; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o, 32);
  return v;
}

__global__ void layernorm_warp(const float* x, float* y, const float* g, int rows, int n) {
  int lane = threadIdx.x % 32;
  int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  if (r >= rows) return;
  float s = 0.0f;
  for (int k = lane; k < n; k += 32) s += x[r * n + k];
  float mu = butterfly(s) / n;
  float q = 0.0f;
  for (int k = lane; k < n; k += 32) {
    float d = x[r * n + k] - mu;
    q += d * d;
  }
  q = butterfly(q);
  float inv = 1.0f / sqrtf(q / n + 1e-5f);
  for (int k = lane; k < n; k += 32) y[r * n + k] = (x[r * n + k] - mu) * inv * g[k];
}

__global__ void row_norm(const float* x, float* out, int rows, int n) {
  const unsigned lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row < rows) {
    float acc = 0.0f;
    for (unsigned k = lane; k < n; k += warpSize) acc += x[row * n + k] * x[row * n + k];
    const float total = butterfly(acc);
    if (lane == 0) out[row] = sqrtf(total);
  }
}

__device__ float down_max_bcast(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
  return __shfl_sync(0xffffffff, v, 0);
}

__global__ void center_rows(const float* x, float* c, float* sums, int rows, int n) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * 2 + threadIdx.x / 32;
  const bool valid = row < rows;
  float m = -INFINITY;
  if (valid)
    for (int k = lane; k < n; k += 32) m = fmaxf(m, x[row * n + k]);
  m = down_max_bcast(m);
  float s = 0.0f;
  if (valid) {
    for (int k = lane; k < n; k += 32) s = x[row * n + k] + s;
  }
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffff, s, off);
  if (valid) {
    for (int k = lane; k < n; k += 32) c[row * n + k] = x[row * n + k] - m;
    if (lane == 0) sums[row] = s;
  }
}

extern "C" void run(const float* x, float* sm, float* ln, const float* g, float* nrm, float* cen, float* sums,
                    int rows, int cols) {
  center_rows<<<(rows + 1) / 2, 64>>>(x, cen, sums, rows, cols);
  softmax_block<<<rows < 4 ? rows : 4, 64>>>(x, sm, rows, cols);
  layernorm_warp<<<(rows * 32 + 127) / 128, 128>>>(x, ln, g, rows, cols);
  row_norm<<<(rows + 3) / 4, 128>>>(x, nrm, rows, cols);
}
"""


def test_row_reductions_match_numpy(cbuild) -> None:  # noqa: ANN001
    text, records, _ctx = translate_to_cpu(KERNELS, "k.cu")
    assert text is not None
    assert next(r for r in records if r["name"] == "block_reduce")["changed"]
    assert "block reduce: softmax_block, layernorm_warp, row_norm, center_rows" in " ".join(_ctx.notes)
    assert "reduction(max:" in text and "reduction(+:" in text and "__shfl" not in text.split("softmax_block")[-1]
    lib = cbuild(text, True)
    rng = np.random.default_rng(3)
    for rows, cols in ((1, 1), (3, 31), (7, 100), (5, 515)):
        x = rng.normal(size=(rows, cols)).astype(np.float32)
        g = rng.uniform(0.5, 1.5, cols).astype(np.float32)
        sm = np.zeros_like(x)
        ln = np.zeros_like(x)
        nrm = np.zeros(rows, np.float32)
        cen = np.zeros_like(x)
        sums = np.zeros(rows, np.float32)
        lib.run(*(ctypes.c_void_p(a.ctypes.data) for a in (x, sm, ln, g, nrm, cen, sums)), ctypes.c_int(rows),
                ctypes.c_int(cols))
        xd = x.astype(np.float64)
        e = np.exp(xd - xd.max(axis=1, keepdims=True))
        np.testing.assert_allclose(sm, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)
        mu = xd.mean(axis=1, keepdims=True)
        ref = (xd - mu) / np.sqrt(((xd - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5) * g
        np.testing.assert_allclose(ln, ref, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(nrm, np.sqrt((xd**2).sum(axis=1)), rtol=1e-4)
        np.testing.assert_allclose(cen, xd - xd.max(axis=1, keepdims=True), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(sums, xd.sum(axis=1), rtol=1e-4, atol=1e-4)


HELPERS = r"""
__device__ float xsum(float v) { for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffff, v, m); return v; }
__device__ float dsum(float v) { for (int m = 16; m > 0; m >>= 1) v += __shfl_down_sync(0xffffffff, v, m); return v; }
__device__ float own(float v, float* b) { b[threadIdx.x] = v; __syncthreads(); return b[threadIdx.x]; }
__device__ float smsum(float v, float* b) {
  b[threadIdx.x] = v; __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (threadIdx.x < s) b[threadIdx.x] += b[threadIdx.x + s]; __syncthreads(); }
  return b[0];
}
"""
WARP = "int l = threadIdx.x & 31; const float* xr = x + blockIdx.x * n; float v = 0.0f; "
WFOLD = "for (int j = l; j < n; j += 32) v += xr[j]; "
BLOCK = "__shared__ float b[128]; const float* xr = x + blockIdx.x * n; float v = 0.0f; "
BFOLD = "for (int j = threadIdx.x; j < n; j += blockDim.x) v += xr[j]; "
WRITE = "for (int j = l; j < n; j += 32) y[blockIdx.x * n + j] = xr[j] / t;"


@pytest.mark.parametrize("body", [
    # the total is left on lane 0 only (down shuffles), then used by every lane
    WARP + WFOLD + "float t = dsum(v); " + WRITE,
    # the combine scales the partials
    WARP + WFOLD + "v = 2.0f * xsum(v); float t = v; " + WRITE,
    # the partial itself is read after a combine that went elsewhere
    WARP + WFOLD + "float t = xsum(v); " + WRITE.replace("/ t", "/ (t + v)"),
    # the partial starts from a nonzero value
    WARP.replace("v = 0.0f", "v = 1.0f") + WFOLD + "float t = xsum(v); " + WRITE,
    # the helper returns each thread's own slot, not a broadcast
    BLOCK + BFOLD + "float t = own(v, b); for (int j = threadIdx.x; j < n; j += blockDim.x) y[j] = t;",
    # a block owns the row but only a warp's partials are combined
    BLOCK + BFOLD + "float t = xsum(v); for (int j = threadIdx.x; j < n; j += blockDim.x) y[j] = t;",
    # a row loop writes a scalar that is not a fold
    BLOCK + "float last = 0.0f; for (int j = threadIdx.x; j < n; j += blockDim.x) last = xr[j]; y[0] = last;",
    # a partial declared outside a loop over rows keeps its per-thread value from one row to the next
    "float v = 0.0f; for (int r = 0; r < 2; ++r) { int l = threadIdx.x & 31; const float* xr = x + r * n; "
    + WFOLD + "v = xsum(v); y[r] = v; }",
    # an inline down tree from offset 8 combines half a warp
    WARP + WFOLD + "for (int o = 8; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o); if (l == 0) y[0] = v;",
    # only the first lane runs the strided loop: it covers a slice of the row
    WARP + "if (l == 0) { " + WFOLD + "} float t = xsum(v); " + WRITE,
    # the first lane leaves early while the others write the row
    WARP + WFOLD + "float t = xsum(v); if (l == 0) return; " + WRITE,
    # a row loop with atomics
    WARP + "for (int j = l; j < n; j += 32) atomicAdd(y, xr[j]);",
    # a statement outside the row loops depends on the thread
    BLOCK + BFOLD + "float t = smsum(v, b); y[threadIdx.x] = t;",
    # the partial steers control flow before its combine
    BLOCK + BFOLD + "if (v > 0.0f) return; float t = smsum(v, b); y[0] = t;",
])
def test_non_broadcast_folds_are_refused(body: str) -> None:
    text = HELPERS + f"__global__ void k(const float* x, float* y, int n) {{ {body} }}"
    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    reduce = get_pass("block_reduce")
    with pytest.raises(PassRefused):
        reduce.apply(module, reduce.INFO.defaults(), ctx)


def test_accepted_spelling_is_rewritten() -> None:
    """The refusal cases' accepted counterpart (so the refusals are not refusals of everything)."""
    text = HELPERS + "__global__ void k(const float* x, float* y, int n) { " + WARP + WFOLD + "float t = xsum(v); " \
        + WRITE + " }"
    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    reduce = get_pass("block_reduce")
    out = reduce.apply(module, reduce.INFO.defaults(), ctx)
    assert out != module


def test_plan_drops_a_failing_block_reduce(monkeypatch: pytest.MonkeyPatch) -> None:
    # a deliberately wrong max fold (a min) must fail verification, and the plan must keep a verified
    # candidate without the pass instead of reporting the wrong one
    from pathlib import Path

    from xpiler_core import ast as A
    from xpiler_core.passes.cpu import block_reduce
    from xpiler_core.pipeline import TranslateOptions, translate

    def wrong(self, body: A.Stmt, partial: str, op: str, elem: A.Expr, var_type: A.Type) -> A.Stmt:  # noqa: ANN001
        v = A.Name(partial)
        return A.ExprStmt(A.assign(v, A.Ternary(A.binop("<", elem, v), elem, v)))

    monkeypatch.setattr(block_reduce._Rewriter, "select_fold", wrong)
    spec_dir = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "normalization" / "softmax"
    source = spec_dir / "softmax.cu"
    result = translate(source.read_text(), str(source),
                       TranslateOptions(target=Dialect.C, spec_path=str(spec_dir / "spec.toml")))
    assert result.status == "verified"
    assert "reduction(max:" not in result.output_text
    assert any("block_reduce" in note for note in result.manifest["notes"])


def test_warp_rows_are_refused_at_warp_64() -> None:
    # a 64-lane wavefront runs two 32-lane "warps" of the source in one: the 32-lane reading is not the source's
    text = HELPERS + "__global__ void k(const float* x, float* y, int n) { " + WARP + WFOLD + "float t = xsum(v); " \
        + WRITE + " }"
    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    with pytest.raises(PassRefused, match="32-lane"):
        get_pass("block_reduce").apply(module, {"warp_size": 64}, ctx)
