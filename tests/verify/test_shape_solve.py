"""Sizes for host entries whose kernels have their shape built in, and the index bounds they are solved with.

References are independent of the code under test: the elements a kernel touches enumerated thread by thread
in Python (for the interval bounds), the shape each test source is written for (stated by hand), and the
source's own run on the runtime at the sizes chosen (the harness runs it against itself)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.verify.autospec import build_spec
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.index_bounds import buffer_bounds, guard_limits, module_constants
from xpiler_core.verify.shape_solve import _fit_dimension
from xpiler_core.verify.spec import load_spec

STRIDED = """
#define STEP {step}
__global__ void strided(const float* src, float* dst) {{
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= {rows}) return;
  for (int c = {start}; c < {cols}; c += STEP) {{
    dst[idx * {cols} + c] = src[(idx * {cols} + c) % {modulus} + {offset}];
  }}
}}
"""


def _touched(rows: int, cols: int, start: int, step: int, modulus: int, offset: int,
             grid: int, block: int) -> tuple[set[int], set[int]]:
    """The elements of src read and of dst written, thread by thread, as the kernel above runs."""
    reads, writes = set(), set()
    for idx in range(grid * block):
        if idx >= rows:
            continue
        for c in range(start, cols, step):
            writes.add(idx * cols + c)
            reads.add((idx * cols + c) % modulus + offset)
    return reads, writes


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 24), start=st.integers(0, 3), step=st.integers(1, 5),
       modulus=st.integers(1, 50), offset=st.integers(0, 9), grid=st.integers(1, 6), block=st.integers(1, 16))
def test_bounds_contain_every_element_touched(rows: int, cols: int, start: int, step: int, modulus: int,
                                              offset: int, grid: int, block: int) -> None:
    text = STRIDED.format(rows=rows, cols=cols, start=start, step=step, modulus=modulus, offset=offset)
    module = lower_text(text, "strided.cu", Dialect.CUDA)
    bounds = buffer_bounds(module.kernels()[0], module_constants(module), (grid, 1, 1), (block, 1, 1))
    reads, writes = _touched(rows, cols, start, step, modulus, offset, grid, block)
    for name, touched, got in (("src", reads, bounds["src"].read), ("dst", writes, bounds["dst"].write)):
        assert bounds[name].known
        if not touched:
            continue
        assert got is not None
        assert got[0] <= min(touched) and max(touched) <= got[1], (name, got, min(touched), max(touched))
    if writes:
        # written with an affine index inside guarded counted loops: the bound is the exact highest element
        assert bounds["dst"].write is not None and bounds["dst"].write[1] == max(writes)


TILES = """
#include <mma.h>
using namespace nvcuda;
__global__ void tiles(half* a, half* b, float* c) {{
  wmma::fragment<wmma::matrix_a, {m}, {n}, {k}, half, wmma::{a_layout}> fa;
  wmma::fragment<wmma::matrix_b, {m}, {n}, {k}, half, wmma::{b_layout}> fb;
  wmma::fragment<wmma::accumulator, {m}, {n}, {k}, float> fc;
  int row = blockIdx.y * {m};
  int col = blockIdx.x * {n};
  if (row < {rows} && col < {cols}) {{
    wmma::fill_fragment(fc, 0.0f);
    for (int kk = 0; kk < {depth}; kk += {k}) {{
      wmma::load_matrix_sync(fa, a + row * {lda} + kk, {lda});
      wmma::load_matrix_sync(fb, b + kk * {ldb} + col, {ldb});
      wmma::mma_sync(fc, fa, fb, fc);
    }}
    wmma::store_matrix_sync(c + row * {ldc} + col, fc, {ldc}, wmma::mem_{c_layout});
  }}
}}
"""


def _tile_elements(base: int, rows: int, cols: int, ld: int, layout: str) -> set[int]:
    return {base + (r * ld + c if layout == "row_major" else c * ld + r) for r in range(rows) for c in range(cols)}


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from([(16, 16, 16), (32, 8, 16), (8, 32, 16)]), tiles_r=st.integers(1, 4),
       tiles_c=st.integers(1, 4), tiles_k=st.integers(1, 3), pad=st.integers(0, 5),
       layouts=st.tuples(*[st.sampled_from(["row_major", "col_major"])] * 3), grid=st.integers(1, 6))
def test_tensor_core_tiles_are_bounded_exactly(shape: tuple[int, int, int], tiles_r: int, tiles_c: int,
                                               tiles_k: int, pad: int, layouts: tuple[str, str, str],
                                               grid: int) -> None:
    """A tile loaded or stored with a leading dimension covers rows × cols elements of it (row- or column-major);
    a guard on a multiple of the tile size (``row = blockIdx.y * 16; row < 32``) leaves the multiples only. The
    reference: every element of every tile of every block the guard admits, enumerated."""
    m, n, k = shape
    rows, cols, depth = m * tiles_r, n * tiles_c, k * tiles_k
    lda, ldb, ldc = depth + pad, cols + pad, cols + 2 * pad
    a_layout, b_layout, c_layout = layouts
    text = TILES.format(m=m, n=n, k=k, rows=rows, cols=cols, depth=depth, lda=lda, ldb=ldb, ldc=ldc,
                        a_layout=a_layout, b_layout=b_layout, c_layout=c_layout)
    fn = lower_text(text, "tiles.cu", Dialect.CUDA).kernels()[0]
    reads_a, reads_b, writes_c = set(), set(), set()
    for by in range(grid + tiles_r):
        for bx in range(grid + tiles_c):
            row, col = by * m, bx * n
            if not (row < rows and col < cols):
                continue
            for kk in range(0, depth, k):
                reads_a |= _tile_elements(row * lda + kk, m, k, lda, a_layout)
                reads_b |= _tile_elements(kk * ldb + col, k, n, ldb, b_layout)
            writes_c |= _tile_elements(row * ldc + col, m, n, ldc, c_layout)
    bounds = buffer_bounds(fn, {})
    assert bounds["a"].read == (min(reads_a), max(reads_a))
    assert bounds["b"].read == (min(reads_b), max(reads_b))
    assert bounds["c"].write == (min(writes_c), max(writes_c)) and bounds["c"].launch_free


def test_a_pointer_passed_on_is_not_claimed() -> None:
    text = """
__device__ void fill(float* p, int n) { for (int i = 0; i < n; ++i) p[i] = 0; }
__global__ void k(float* a, float* b) { if (threadIdx.x < 8) a[threadIdx.x] = 1; fill(b, 100); }
"""
    module = lower_text(text, "k.cu", Dialect.CUDA)
    bounds = buffer_bounds(module.kernels()[0], {})
    assert bounds["a"].known and bounds["a"].write == (0, 7)
    assert not bounds["b"].known


def test_a_launch_divisor_fitted_by_chance_is_refused() -> None:
    # grid.y = ceil(n / 16) at four probe runs; ceil(b / 17) also gives 3, 4, 7, 6 there
    cases = [{"b": 37, "m": 23, "k": 29, "n": 41}, {"b": 67, "m": 47, "k": 59, "n": 53},
             {"b": 113, "m": 83, "k": 101, "n": 97}, {"b": 97, "m": 89, "k": 7, "n": 83}]
    assert _fit_dimension(cases, [3, 4, 7, 6], set()) == "ceil_div(n, 16)"


# A generated-style row reduction over a 48 x 40 matrix: the kernel has its shape built in, the host entry takes
# the sizes and is right only at rows = 48, cols = 40.
FIXED_ROWS = r"""
#include <cuda_runtime.h>
#define ROWS 48
#define COLS 40
__global__ void rowdot(const float* x, const float* w, float* y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < ROWS) {
    float acc = 0.0f;
    for (int c = 0; c < COLS; c += 4) {
      acc += x[r * COLS + c] * w[c] + x[r * COLS + c + 1] * w[c + 1]
           + x[r * COLS + c + 2] * w[c + 2] + x[r * COLS + c + 3] * w[c + 3];
    }
    y[r] = acc;
  }
}
extern "C" void rowdot_kernel(float* x, float* w, float* y, int rows, int cols) {
  float *dx, *dw, *dy;
  cudaMalloc(&dx, rows * cols * sizeof(float));
  cudaMalloc(&dw, cols * sizeof(float));
  cudaMalloc(&dy, rows * sizeof(float));
  cudaMemcpy(dx, x, rows * cols * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w, cols * sizeof(float), cudaMemcpyHostToDevice);
  rowdot<<<(rows + 31) / 32, 32>>>(dx, dw, dy);
  cudaMemcpy(y, dy, rows * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dw); cudaFree(dy);
}
"""

# Batches along blockIdx.y with no guard: the width is built in (64), any batch count is right; the launch's
# shape decides what the kernel touches, so it is fitted from the probe runs.
UNGUARDED_BATCH = r"""
#include <cuda_runtime.h>
__global__ void twice(const float* in, float* out) {
  out[blockIdx.y * 64 + threadIdx.x] = 2.0f * in[blockIdx.y * 64 + threadIdx.x];
}
extern "C" void twice_kernel(float* in, float* out, int batch, int width) {
  float *din, *dout;
  cudaMalloc(&din, batch * width * sizeof(float));
  cudaMalloc(&dout, batch * width * sizeof(float));
  cudaMemcpy(din, in, batch * width * sizeof(float), cudaMemcpyHostToDevice);
  twice<<<dim3(1, batch), 64>>>(din, dout);
  cudaMemcpy(out, dout, batch * width * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(din); cudaFree(dout);
}
"""


def _solved_case(text: str, name: str, tmp_path: Path) -> dict[str, int]:
    built = build_spec(text, name, Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    assert "solved from the kernels' built-in shape" in built.reason, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.cases_are_alternatives and 1 <= len(spec.cases) <= 3
    # the source itself runs clean at the sizes chosen: in bounds, every output element written
    report = run_spec(spec, candidate_text=text, candidate_dialect=Dialect.CUDA)
    assert report.passed and len(report.tested) == 1, report.first_failure()
    tested = report.tested[0].sizes
    return {k: int(v) for k, v in tested.items() if not k.startswith("xp_len_")}


def test_sizes_of_a_kernel_with_its_shape_built_in(tmp_path: Path) -> None:
    assert _solved_case(FIXED_ROWS, "rowdot.cu", tmp_path) == {"rows": 48, "cols": 40}


def test_sizes_through_the_launch_shape(tmp_path: Path) -> None:
    case = _solved_case(UNGUARDED_BATCH, "twice.cu", tmp_path)
    assert case["width"] == 64 and case["batch"] >= 1


# One block's worth of threads, indexed by the thread alone (the block index unused), launched as
# ceil(size / 320) blocks of 320 by the host: bounded at any launch only through a block's largest size (0..1023),
# so what it touches must come from the launch the sizes give, and the block size (the host's constant, no power
# of two) is the size it is written for.
ONE_BLOCK = r"""
#include <cuda_runtime.h>
__global__ void __launch_bounds__(320) add(const float* a, const float* b, float* c) {
  c[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}
extern "C" void add_kernel(float* a, float* b, float* c, int size) {
  float *da, *db, *dc;
  cudaMalloc(&da, size * sizeof(float));
  cudaMalloc(&db, size * sizeof(float));
  cudaMalloc(&dc, size * sizeof(float));
  cudaMemcpy(da, a, size * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, size * sizeof(float), cudaMemcpyHostToDevice);
  dim3 threads(320);
  dim3 blocks((size + 320 - 1) / 320);
  add<<<blocks, threads>>>(da, db, dc);
  cudaMemcpy(c, dc, size * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(da); cudaFree(db); cudaFree(dc);
}
"""


def test_sizes_of_a_kernel_indexed_by_its_thread_alone(tmp_path: Path) -> None:
    assert _solved_case(ONE_BLOCK, "add.cu", tmp_path) == {"size": 320}


# A generated-style gather whose launch is ceil(batch * rows * cols / 128) blocks (a product of three sizes no
# launch formula is fitted to): the shape is assumed from the code's constants and confirmed by a run.
ASSUMED_LAUNCH = r"""
#include <cuda_runtime.h>
__global__ void unpad(const float* in, float* out) {
  int i = blockIdx.x * 128 + threadIdx.x;
  out[i] = in[(i / 16) * 20 + i % 16];
}
extern "C" void unpad_kernel(float* in, float* out, int batch, int rows, int cols) {
  int total = batch * rows * cols;
  float *din, *dout;
  cudaMalloc(&din, batch * rows * (cols + 4) * sizeof(float));
  cudaMalloc(&dout, total * sizeof(float));
  cudaMemcpy(din, in, batch * rows * (cols + 4) * sizeof(float), cudaMemcpyHostToDevice);
  unpad<<<(total + 127) / 128, 128>>>(din, dout);
  cudaMemcpy(out, dout, total * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(din); cudaFree(dout);
}
"""


def test_sizes_through_an_assumed_launch(tmp_path: Path) -> None:
    case = _solved_case(ASSUMED_LAUNCH, "unpad.cu", tmp_path)
    assert case["cols"] == 16 and (case["batch"] * case["rows"] * case["cols"]) % 128 == 0


# Rows guarded by a built-in count (600) over ceil(rows / 512) blocks, and a read indexed by the thread alone
# (bounded through the launch): the probe runs' sizes all give one block, so the grid looks fixed; it is not.
GRID_GROWS_PAST_PROBES = r"""
#include <cuda_runtime.h>
__global__ void __launch_bounds__(512) shift(const float* x, float* y) {
  int r = blockIdx.x * 512 + threadIdx.x;
  if (r < 600) {
    float first = x[threadIdx.x * 8];
    for (int c = 0; c < 8; ++c) y[r * 8 + c] = x[r * 8 + c] - first;
  }
}
extern "C" void shift_kernel(float* x, float* y, int rows, int cols) {
  float *dx, *dy;
  cudaMalloc(&dx, rows * cols * sizeof(float));
  cudaMalloc(&dy, rows * cols * sizeof(float));
  cudaMemcpy(dx, x, rows * cols * sizeof(float), cudaMemcpyHostToDevice);
  shift<<<(rows + 511) / 512, 512>>>(dx, dy);
  cudaMemcpy(y, dy, rows * cols * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx); cudaFree(dy);
}
"""


def test_sizes_where_the_grid_grows_past_the_probe_runs(tmp_path: Path) -> None:
    assert _solved_case(GRID_GROWS_PAST_PROBES, "shift.cu", tmp_path) == {"rows": 600, "cols": 8}


GUARDED_QUARTERS = """
__global__ void quarters(const float* src, float* dst) {
  if (blockIdx.x * 4 + (threadIdx.x >> 8) < 363) {
    dst[blockIdx.x * 1024 + threadIdx.x] = src[(blockIdx.x * 1024 + threadIdx.x) % 5000];
  }
}
"""


def test_a_guard_on_another_expression_of_the_same_threads() -> None:
    # the guard and the store index relate through the thread index; bounded in parts, the last block's
    # threads past the guard do not count (the reference: every thread of the launch, enumerated)
    module = lower_text(GUARDED_QUARTERS, "quarters.cu", Dialect.CUDA)
    fn = module.kernels()[0]
    grid, block = 91, 1024
    written = [b * 1024 + t for b in range(grid) for t in range(block) if b * 4 + (t >> 8) < 363]
    bounds = buffer_bounds(fn, {}, (grid, 1, 1), (block, 1, 1))
    assert bounds["dst"].write == (min(written), max(written))
    assert guard_limits(fn, {}) == {0: {91}}


def test_alternative_cases_stop_at_the_first_the_source_runs_clean_at(tmp_path: Path) -> None:
    (tmp_path / "rowdot.cu").write_text(FIXED_ROWS)
    (tmp_path / "spec.toml").write_text("""
name = "alternatives"
source = "rowdot.cu"
entry = "rowdot_kernel"
kind = "host"
reference_source = "rowdot.cu"
reference_entry = "rowdot_kernel"
cases_are_alternatives = true

[[args]]
name = "x"
dtype = "float32"
role = "in"
shape = ["rows * cols"]
init = "uniform(-1, 1)"

[[args]]
name = "w"
dtype = "float32"
role = "in"
shape = ["cols"]
init = "uniform(-1, 1)"

[[args]]
name = "y"
dtype = "float32"
role = "out"
shape = ["rows"]

[[args]]
name = "rows"
dtype = "int32"
role = "scalar"
value = "rows"

[[args]]
name = "cols"
dtype = "int32"
role = "scalar"
value = "cols"

[[cases]]
rows = 40
cols = 40

[[cases]]
rows = 48
cols = 40

[[cases]]
rows = 64
cols = 40
""")
    report = run_spec(load_spec(str(tmp_path / "spec.toml")), candidate_text=FIXED_ROWS,
                      candidate_dialect=Dialect.CUDA)
    # rows = 40: the kernel reads past x (its shape is 48 x 40); rows = 48 is the test; rows = 64 is not run
    assert [c.sizes["rows"] for c in report.cases] == [40, 48]
    assert report.cases[0].source_failed and "out-of-bounds" in (report.cases[0].error or "")
    assert report.passed and [c.sizes["rows"] for c in report.tested] == [48]


def test_the_summary_says_the_sizes_were_solved(tmp_path: Path) -> None:
    # a user reading "verified" must learn the test ran at the kernel's built-in shape, not at their own sizes
    from xpiler_core.pipeline import TranslateOptions, translate

    source = tmp_path / "rowdot.cu"
    source.write_text(FIXED_ROWS)
    result = translate(FIXED_ROWS, str(source), TranslateOptions(Dialect.C, repair=False))
    assert result.status.value == "verified", result.summary
    assert "note: tested at rows=48, cols=40: sizes solved from the kernels' built-in shape" in result.summary


BANG_COPIES = """
#include <bang.h>
extern "C" __mlu_global__ void rows(float* src, float* dst) {{
  __nram__ float t[{nram}];
  for (int r = 0; r < {reps}; ++r) {{
    __memcpy(t, src + (taskId * {reps} + r) * {row}, {seg} * sizeof(float), GDRAM2NRAM, {seg} * sizeof(float),
             {src_stride} * sizeof(float), {segnum});
    __memcpy(dst + clusterId * {cstride} + coreId * {seg} + r, t, {seg} * 4, NRAM2GDRAM);
  }}
}}
"""


@settings(max_examples=40, deadline=None)
@given(reps=st.integers(1, 3), row=st.integers(1, 40), seg=st.integers(1, 8), extra=st.integers(0, 6),
       segnum=st.integers(0, 3), tasks=st.sampled_from([4, 8, 16]), cstride=st.integers(0, 50))
def test_bang_copies_are_bounded_by_what_the_mlu_model_copies(reps: int, row: int, seg: int, extra: int, segnum: int,
                                                             tasks: int, cstride: int) -> None:
    """``__memcpy`` (4 arguments) and its strided form (``segnum + 1`` segments, each side's stride apart, as
    the MLU model runs it) bound the GDRAM side exactly, over every task of a Union1 job."""
    from xpiler_core.verify.index_bounds import bang_buffer_bounds

    src_stride = seg + extra
    text = BANG_COPIES.format(nram=seg * (segnum + 1), reps=reps, row=row, seg=seg, src_stride=src_stride,
                              segnum=segnum, cstride=cstride)
    module = lower_text(text, "rows.mlu", Dialect.BANG)
    bounds = bang_buffer_bounds(next(iter(module.functions())), module_constants(module), tasks, 4)
    reads: set[int] = set()
    writes: set[int] = set()
    for task in range(tasks):
        cluster, core = divmod(task, 4)
        for r in range(reps):
            base = (task * reps + r) * row
            reads.update(base + i * src_stride + e for i in range(segnum + 1) for e in range(seg))
            writes.update(cluster * cstride + core * seg + r + e for e in range(seg))
    assert bounds["src"].known and bounds["dst"].known
    assert bounds["src"].read == (min(reads), max(reads)) and bounds["src"].write is None
    assert bounds["dst"].write == (min(writes), max(writes)) and bounds["dst"].read is None


PADDED = """
__global__ void pad(const float* src, float* dst) {{
  int g = blockIdx.x * {block} + threadIdx.x;
  if (g < {n}) {{
    for (int r = 0; r < {reps}; ++r) {{
      dst[g * {reps} + r] = (({k} <= (g % {m}) * {s} + r) && ((g % {m}) * {s} + r < {lim}))
          ? src[(g / {m}) * {w} + (g % {m}) * {s} + r - {k}] : 0.0f;
    }}
  }}
}}
"""


@settings(max_examples=60, deadline=None)
@given(block=st.integers(1, 8), grid=st.integers(1, 6), n=st.integers(1, 40), reps=st.integers(1, 4),
       m=st.integers(1, 7), s=st.integers(1, 3), k=st.integers(0, 3), lim=st.integers(1, 20), w=st.integers(1, 30))
def test_a_small_launch_bounded_thread_by_thread_takes_only_the_branches_threads_take(
        block: int, grid: int, n: int, reps: int, m: int, s: int, k: int, lim: int, w: int) -> None:
    """A padded read ``c ? src[i - k] : 0`` (TVM's pools and pads): bounded thread by thread, each thread's
    condition narrows the loop counter in its branch, so the bounds contain every element read and start at
    the lowest one (no element below 0 is claimed where no thread reads one)."""
    text = PADDED.format(block=block, n=n, reps=reps, m=m, s=s, k=k, lim=lim, w=w)
    module = lower_text(text, "pad.cu", Dialect.CUDA)
    bounds = buffer_bounds(module.kernels()[0], module_constants(module), (grid, 1, 1), (block, 1, 1),
                           exact_points=1 << 12)
    reads = {(g // m) * w + (g % m) * s + r - k for g in range(min(n, grid * block)) for r in range(reps)
             if k <= (g % m) * s + r < lim}
    got = bounds["src"].read
    assert bounds["src"].known
    if not reads:
        assert got is None or got[0] >= 0
        return
    assert got is not None and got[0] == min(reads) and max(reads) <= got[1], (got, min(reads), max(reads))


UNFLATTEN = """
#define N {n}
__global__ void unflatten(const float* src, float* dst) {{
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < N; idx += gridDim.x * blockDim.x) {{
    int t = idx;
    int w = t % {w};
    t /= {w};
    int h = t % {h};
    t /= {h};
    int c = t;
    for (int k = 0, q = 0; k < {k}; ++k, q += 2) {{
      dst[((c * {h} + h) * {w} + w) * {k} + k] = src[((c * {h} + h) * {w} + w) * {s} + 2 * k] + q;
    }}
    int r = idx;
    if (idx % 3 == 1) r = {far};
    dst[r] = 0.0f;
  }}
}}
"""


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 60), w=st.integers(1, 5), h=st.integers(1, 4), k=st.integers(1, 4), s=st.integers(8, 12),
       far=st.integers(0, 400), grid=st.integers(1, 4), block=st.integers(1, 16))
def test_straight_line_updates_and_a_second_counter_are_followed_and_a_branch_assignment_is_not(
        n: int, w: int, h: int, k: int, s: int, far: int, grid: int, block: int) -> None:
    """``t /= W`` after ``int t = idx`` (a running index split into coordinates) is followed in order, a loop
    that also steps ``q`` (a value, not an index) is still counted by ``k``; a name a branch assigns (``r``) is
    not a straight-line one: the bounds contain every element touched, the 400-away store included."""
    text = UNFLATTEN.format(n=n, w=w, h=h, k=k, s=s, far=far)
    module = lower_text(text, "unflatten.cu", Dialect.CUDA)
    bounds = buffer_bounds(module.kernels()[0], module_constants(module), (grid, 1, 1), (block, 1, 1))
    reads: set[int] = set()
    writes: set[int] = set()
    for first in range(grid * block):
        for idx in range(first, n, grid * block):
            w_, rest = idx % w, idx // w
            h_, c = rest % h, rest // h
            for kk in range(k):
                writes.add(((c * h + h_) * w + w_) * k + kk)
                reads.add(((c * h + h_) * w + w_) * s + 2 * kk)
            writes.add(far if idx % 3 == 1 else idx)
    assert bounds["src"].known and bounds["src"].bounded  # followed: bounded
    for touched, got in ((reads, bounds["src"].read), (writes, bounds["dst"].write)):
        assert got is not None and got[0] <= min(touched) and max(touched) <= got[1], (got, touched)


def test_bang_bounds_per_task_decide_each_core_s_share_and_read_sizeof_of_a_typedef() -> None:
    """Rows split over a cluster's cores with a remainder (``start = core * per + (core < rem ? core : rem)``):
    bounded task by task, each core's rows are known (interval arithmetic over all cores loses that the row
    count is ``end - start``), and ``sizeof(half)`` (a name the grammar reads as an expression) is 2 bytes."""
    from xpiler_core.verify.index_bounds import bang_buffer_bounds

    text = """
extern "C" __mlu_global__ void rows(half *a, half *out) {
  const int M = 18, K = 8;
  int core = coreId;
  int per = M / 4, rem = M % 4;
  int start = core * per + (core < rem ? core : rem);
  int mine = per + (core < rem ? 1 : 0);
  __nram__ half t[64];
  __memcpy(t, a + (clusterId * M + start) * K, mine * K * sizeof(half), GDRAM2NRAM);
  __memcpy(out + (clusterId * M + start) * K, t, mine * K * sizeof(half), NRAM2GDRAM);
}
"""
    module = lower_text(text, "rows.mlu", Dialect.BANG)
    bounds = bang_buffer_bounds(next(iter(module.functions())), module_constants(module), 8, 4)
    assert bounds["a"].read == (0, 2 * 18 * 8 - 1)  # two clusters of 18 rows of 8
    assert bounds["out"].write == (0, 2 * 18 * 8 - 1)


def test_a_name_a_labeled_statement_assigns_is_not_taken_at_its_declared_value() -> None:
    """``again: t += 1; if (t < 5) goto again;`` is kept as text: ``t`` ends at 5, not at its declared 0."""
    text = "__global__ void k(float* x) { int t = 0; again: t += 1; if (t < 5) goto again; x[t] = 1.0f; }"
    module = lower_text(text, "k.cu", Dialect.CUDA)
    write = buffer_bounds(module.kernels()[0], module_constants(module), (1, 1, 1), (1, 1, 1))["x"].write
    assert write is not None and write[0] <= 5 <= write[1]


CONCAT = """
__global__ void concat(float* out, const float* a, const float* b) {{
  if (((int)blockIdx.x) * {bq} + (((int)threadIdx.x) >> {sh}) < {lim}) {{
    out[((int)blockIdx.x) * {block} + ((int)threadIdx.x)] = ({split} <= ((int)blockIdx.x) * {bq} + (((int)threadIdx.x) >> {sh}))
        ? a[((int)blockIdx.x) * {block} + ((int)threadIdx.x) - {split} * {d}] : b[((int)blockIdx.x) * {block} + ((int)threadIdx.x)];
  }}
}}
"""


@settings(max_examples=40, deadline=None)
@given(sh=st.integers(0, 3), bq=st.integers(1, 128), grid=st.integers(1, 20), lim_frac=st.floats(0, 1),
       split_frac=st.floats(0, 1))
def test_a_large_launch_is_split_where_a_condition_on_its_indices_goes_both_ways(
        sh: int, bq: int, grid: int, lim_frac: float, split_frac: float) -> None:
    """TVM's concatenation ``q >= split ? a[g - split * d] : b[g]`` with ``q = g >> sh`` over a launch too large to
    bound thread by thread: the parts in which the condition goes both ways are split until it is decided, so
    ``a``'s bounds start at its lowest element read (0), not at ``-split * d``, and contain every element read."""
    block, d = bq << sh, 1 << sh
    lim = max(1, int(lim_frac * grid * bq))
    split = int(split_frac * lim)
    text = CONCAT.format(bq=bq, sh=sh, lim=lim, block=block, split=split, d=d)
    module = lower_text(text, "concat.cu", Dialect.CUDA)
    bounds = buffer_bounds(module.kernels()[0], module_constants(module), (grid, 1, 1), (block, 1, 1))
    touched: dict[str, set[int]] = {"a": set(), "b": set(), "out": set()}
    for bx in range(grid):
        for tx in range(block):
            q, g = bx * bq + (tx >> sh), bx * block + tx
            if q < lim:
                touched["out"].add(g)
                touched["a" if split <= q else "b"].add(g - split * d if split <= q else g)
    for name, elements in touched.items():
        got = bounds[name].write if name == "out" else bounds[name].read
        if not elements:
            continue
        assert got is not None and got[0] <= min(elements) and max(elements) <= got[1], (name, got)
    if touched["a"]:
        assert bounds["a"].read is not None and bounds["a"].read[0] == min(touched["a"]) == 0


def test_bounds_remembered_per_launch_are_handed_out_as_copies() -> None:
    """buffer_bounds remembers a kernel's bounds per launch (the shape solver asks again at each size it tries):
    a caller changing its answer must not change the next caller's, and another launch is bounded anew. The
    elements each launch touches are enumerated by hand."""
    text = STRIDED.format(rows=30, cols=8, start=0, step=1, modulus=1000, offset=0)
    module = lower_text(text, "strided.cu", Dialect.CUDA)
    kernel, constants = module.kernels()[0], module_constants(module)
    first = buffer_bounds(kernel, constants, (2, 1, 1), (8, 1, 1))
    assert first["dst"].write == (0, 16 * 8 - 1)  # 16 threads, rows 0..15, 8 columns each
    first["dst"].write = (0, 0)
    first["dst"].known = False
    again = buffer_bounds(kernel, constants, (2, 1, 1), (8, 1, 1))
    assert again["dst"].known and again["dst"].write == (0, 16 * 8 - 1)
    wider = buffer_bounds(kernel, constants, (4, 1, 1), (8, 1, 1))
    assert wider["dst"].write == (0, 30 * 8 - 1)  # 32 threads, the guard keeps rows 0..29
