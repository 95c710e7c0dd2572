"""BANG C → CUDA: detensorized outputs compile with nvcc and match numpy on the SIMT runtime at warp 32."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.plans.bang_to_cuda import translate_bang_to_cuda
from xpiler_core.plans.cuda_to_bang import translate_to_bang
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec
from xpiler_core.verify.toolchains import compile_check

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@needs_nvcc
@pytest.mark.parametrize("op", ["activation/relu", "normalization/softmax"])
def test_round_trip_of_a_bang_translation_compiles_and_matches_numpy(op: str) -> None:
    spec = load_spec(str(SUITE / op / "spec.toml"))
    bang, _, ctx = translate_to_bang(spec.source_text(), str(spec.path.parent / spec.source), spec)
    assert bang is not None, ctx.unresolved
    cuda, reason = translate_bang_to_cuda(bang, "k.mlu")
    assert cuda is not None, reason
    assert "__bang_" not in cuda and "__memcpy(" not in cuda
    verdict = compile_check(cuda, Dialect.CUDA)
    assert verdict.ok, verdict.stderr[-2000:]
    # the suite's two smaller cases (1000 and 2048 elements spread over the 16 tasks): the largest, 70001, takes
    # 40-60 s of emulation here (one thread runs each task), close to the run's time limit on a busy machine
    report = run_spec(spec, candidate_text=cuda, candidate_dialect=Dialect.CUDA, warp_size=32, cases=[0, 1])
    assert report.passed and len(report.cases) == 2, report.summary()


HANDWRITTEN = textwrap.dedent("""
    #include <bang.h>
    __mlu_global__ void axpy_relu(float* y, const float* x, float a, int n) {
      __nram__ float tx[256];
      __nram__ float ty[256];
      int per = (n + taskDim - 1) / taskDim;
      int lo = taskId * per;
      int hi = lo + per < n ? lo + per : n;
      for (int o = lo; o < hi; o += 256) {
        int cnt = hi - o < 256 ? hi - o : 256;
        __memcpy(tx, x + o, cnt * sizeof(float), GDRAM2NRAM);
        __memcpy(ty, y + o, cnt * sizeof(float), GDRAM2NRAM);
        __bang_mul_scalar(tx, tx, a, cnt);
        __bang_add(ty, ty, tx, cnt);
        __bang_active_relu(ty, ty, cnt);
        __memcpy(y + o, ty, cnt * sizeof(float), NRAM2GDRAM);
      }
    }
""")


def test_handwritten_bang_kernel_detensorizes_into_loops() -> None:
    cuda, reason = translate_bang_to_cuda(HANDWRITTEN, "axpy.mlu")
    assert cuda is not None, reason
    assert "__global__ void axpy_relu" in cuda
    assert "__bang_" not in cuda and "__shared__ float tx[256]" in cuda


@needs_nvcc
def test_handwritten_bang_kernel_runs_as_cuda_at_any_block_count(tmp_path: Path) -> None:
    cuda, _ = translate_bang_to_cuda(HANDWRITTEN, "axpy.mlu")
    assert cuda is not None
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n"
        "def ref(y, x, a, n):\n    return np.maximum(y + np.float32(a) * x, 0).astype(np.float32)\n")
    (tmp_path / "k.cu").write_text(cuda)
    (tmp_path / "spec.toml").write_text(textwrap.dedent("""
        name = "axpy_relu"
        source = "k.cu"
        entry = "axpy_relu"
        kind = "kernel"
        grid = ["g"]
        block = [32]
        reference = "ref.py:ref"
        tolerance = { atol = 1e-5, rtol = 1e-5 }
        [[args]]
        name = "y"
        dtype = "float32"
        shape = ["n"]
        role = "inout"
        [[args]]
        name = "x"
        dtype = "float32"
        shape = ["n"]
        role = "in"
        [[args]]
        name = "a"
        dtype = "float32"
        role = "scalar"
        value = "3"
        [[args]]
        name = "n"
        dtype = "int32"
        role = "scalar"
        value = "n"
        [[cases]]
        n = 1000
        g = 3
        [[cases]]
        n = 7
        g = 5
    """))
    spec = load_spec(str(tmp_path / "spec.toml"))
    report = run_spec(spec, warp_size=32)
    assert report.passed, report.summary()


def test_cluster_synchronisation_is_reported_unresolved() -> None:
    src = "__mlu_global__ void k(float* x) { __sync_cluster(); }\n"
    cuda, reason = translate_bang_to_cuda(src, "k.mlu")
    assert cuda is None and "__sync_cluster" in reason


def test_intrinsic_without_rule_is_reported_unresolved() -> None:
    src = textwrap.dedent("""
        __mlu_global__ void k(float* x) {
          __nram__ float t[64];
          __bang_lut_s16(t, t, t, 64, 16);
        }
    """)
    cuda, reason = translate_bang_to_cuda(src, "k.mlu")
    assert cuda is None and "__bang_lut_s16" in reason


UNION_PROGRAM = textwrap.dedent("""
    #include <bang.h>
    // a Union1 launch: 4 cores per cluster, each core one 5-element slice of its cluster's 20 elements
    __mlu_global__ void act(float* x, float* y) {
      __nram__ float t[8];
      if (clusterId < 2) {
        __memcpy(t, x + clusterId * 20 + coreId * 5, 5 * sizeof(float), GDRAM2NRAM);
        __bang_active_gelup(t, t, 5);
        __bang_active_recip(t, t, 5);
        __memset_nram(t + 5, 3, 1.0f);
        __memcpy(y + clusterId * 20 + coreId * 5, t, 5 * sizeof(float), NRAM2GDRAM);
      }
    }
    extern "C" void host_act(float* x, float* y) {
      cnrtQueue_t q;
      cnrtQueueCreate(&q);
      float *dx, *dy;
      cnrtMalloc((void**)&dx, 40 * sizeof(float));
      cnrtMalloc((void**)&dy, 40 * sizeof(float));
      cnrtMemcpy(dx, x, 40 * sizeof(float), cnrtMemcpyHostToDev);
      cnrtDim3_t dim = {8, 1, 1};
      act<<<dim, cnrtFuncTypeUnion1, q>>>(dx, dy);
      cnrtQueueSync(q);
      cnrtMemcpy(y, dy, 40 * sizeof(float), cnrtMemcpyDevToHost);
      cnrtFree(dx);
      cnrtFree(dy);
      cnrtQueueDestroy(q);
    }
""")


def test_union_tasks_number_their_cores_and_clusters(tmp_path: Path) -> None:
    cuda, reason = translate_bang_to_cuda(UNION_PROGRAM, "act.mlu")
    assert cuda is not None, reason
    (tmp_path / "k.cu").write_text(cuda)
    (tmp_path / "ref.py").write_text(
        "import numpy as np\nfrom math import erf\n"
        "def ref(x):\n    g = np.array([0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x.astype(np.float64)])\n"
        "    return (1.0 / g).astype(np.float32)\n")
    (tmp_path / "spec.toml").write_text(textwrap.dedent("""
        name = "act"
        source = "k.cu"
        entry = "host_act"
        kind = "host"
        reference = "ref.py:ref"
        tolerance = { atol = 1e-4, rtol = 1e-4 }
        [[args]]
        name = "x"
        dtype = "float32"
        shape = [40]
        role = "in"
        init = "uniform(0.5, 2)"
        [[args]]
        name = "y"
        dtype = "float32"
        shape = [40]
        role = "out"
        [[cases]]
    """))
    report = run_spec(load_spec(str(tmp_path / "spec.toml")), warp_size=32)
    assert report.passed, report.summary()


PER_THREAD_TILES = textwrap.dedent("""
    #include <bang.h>
    __mlu_global__ void row_sums(const float* x, float* y, int n) {
      const int xp_nt = 32;
      float frag[xp_nt][512];
      int lane[xp_nt];
      for (int r = taskId; r < n; r += taskDim) {
        for (int t = 0; t < xp_nt; ++t) {
          lane[t] = t;
          for (int k = 0; k < 512; ++k) frag[t][k] = x[(r * xp_nt + t) * 512 + k];
        }
        float s = 0.0f;
        for (int t = 0; t < xp_nt; ++t)
          for (int k = 0; k < 512; ++k) s += frag[lane[t]][k];
        y[r] = s;
      }
    }
""")


def test_large_per_thread_arrays_leave_the_stack() -> None:
    # 1024 threads x 512 floats would be 2 MiB on thread 0's stack; small per-thread arrays stay there
    cuda, reason = translate_bang_to_cuda(PER_THREAD_TILES, "rows.mlu")
    assert cuda is not None, reason
    assert "xp_block_array<float[512]> frag_heap(xp_nt);" in cuda
    assert "float (*frag)[512] = frag_heap.p;" in cuda
    assert "int lane[1024];" in cuda


@needs_nvcc
def test_large_per_thread_arrays_on_the_heap_run_as_cuda(tmp_path: Path) -> None:
    cuda, _ = translate_bang_to_cuda(PER_THREAD_TILES, "rows.mlu")
    assert cuda is not None
    assert compile_check(cuda, Dialect.CUDA).ok
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n"
        "def ref(x, n):\n    return x.reshape(n, -1).astype(np.float64).sum(axis=1).astype(np.float32)\n")
    (tmp_path / "k.cu").write_text(cuda)
    (tmp_path / "spec.toml").write_text(textwrap.dedent("""
        name = "row_sums"
        source = "k.cu"
        entry = "row_sums"
        kind = "kernel"
        grid = ["3"]
        block = [1]
        reference = "ref.py:ref"
        tolerance = { atol = 1e-3, rtol = 1e-4 }
        [[args]]
        name = "x"
        dtype = "float32"
        shape = ["n * 32 * 512"]
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
        n = 5
    """))
    report = run_spec(load_spec(str(tmp_path / "spec.toml")), warp_size=32)
    assert report.passed, report.summary()


CONV = """
extern "C" __mlu_global__ void conv_hwc(float *data, float *filter, float *out, int tasks) {
  int task = (clusterId * 4) + coreId;
  if (task < tasks) {
    __nram__ float tile[BUF];
    __wram__ float weights[2 * 3 * 3 * 64];
    __memcpy(weights, filter, 2 * 3 * 3 * 64 * 4, GDRAM2WRAM);
    __memcpy(tile, data + task * 5 * 6 * 64, 5 * 6 * 64 * 4, GDRAM2NRAM);
    __bang_conv(tile + 5 * 6 * 64, tile, weights, 64, 5, 6, 3, 3, 1, 2, 2);
    __memcpy(out + task * 2 * 4 * 2, tile + 5 * 6 * 64, 2 * 4 * 2 * 4, NRAM2GDRAM);
  }
}
"""


def _conv_reference(data: np.ndarray, filt: np.ndarray, tasks: int) -> np.ndarray:
    x = data.reshape(tasks, 5, 6, 64).astype(np.float64)
    w = filt.reshape(2, 3, 3, 64).astype(np.float64)  # [co][kh][kw][ci]
    out = np.zeros((tasks, 2, 4, 2))  # stride 1 along the width, 2 along the height
    for y in range(2):
        for xo in range(4):
            patch = x[:, 2 * y:2 * y + 3, xo:xo + 3, :]
            out[:, y, xo, :] = np.einsum("thwc,ohwc->to", patch, w)
    return out.astype(np.float32).reshape(-1)


@needs_nvcc
@pytest.mark.parametrize("buf", [5 * 6 * 64 + 2 * 4 * 2, 16384])  # in shared memory; beyond its 48 KiB
def test_bang_conv_in_a_nested_block_runs_as_cuda(tmp_path: Path, buf: int) -> None:
    """``__nram__`` buffers declared inside an ``if`` are lowered (not kept as text), ``__bang_conv`` becomes
    loops with the model's HWC layout, and buffers larger than CUDA's static shared memory go to the heap."""
    import ctypes

    from xpiler_core.runtime.build import build_library

    cuda, reason = translate_bang_to_cuda(CONV.replace("BUF", str(buf)), "conv.mlu")
    assert cuda is not None, reason
    assert "__nram__" not in cuda and "__bang_conv" not in cuda
    assert ("_heap(" in cuda) == (buf * 4 > 48 * 1024)
    verdict = compile_check(cuda, Dialect.CUDA)
    assert verdict.ok, verdict.stderr
    host = cuda + ('\nextern "C" void run(float* d, float* f, float* o, int tasks) {\n'
                   "  cnrtDim3_t dim = {(unsigned)((tasks + 3) / 4 * 4), 1, 1};  // a Union1 launch: 4 cores a cluster\n"
                   "  conv_hwc<<<xp_cuda_grid(dim, cnrtFuncTypeUnion1), 1>>>(d, f, o, tasks);\n}\n")
    built = build_library(host, Dialect.CUDA, tmp_path, display_name="conv.cu")
    assert built.ok, built.log
    lib = ctypes.CDLL(str(built.library))
    tasks = 3
    rng = np.random.default_rng(buf)
    data = rng.standard_normal(tasks * 5 * 6 * 64).astype(np.float32)
    filt = rng.standard_normal(2 * 3 * 3 * 64).astype(np.float32)
    out = np.full(tasks * 2 * 4 * 2, np.nan, np.float32)
    lib.run(*(ctypes.c_void_p(a.ctypes.data) for a in (data, filt, out)), ctypes.c_int(tasks))
    np.testing.assert_allclose(out, _conv_reference(data, filt, tasks), rtol=1e-4, atol=1e-4)


# a kernel-only BANG file (as XpilerBench ships its MLU kernels): what calls it links against the C symbol `shift`
KERNEL_ONLY = textwrap.dedent("""
    #include <bang.h>
    extern "C" __mlu_global__ void shift(float *x, float *y) {
      __nram__ float t[64];
      for (int o = 0; o < 2; ++o) {
        if (o * 16 + clusterId * 4 + coreId < 20) {
          __memcpy(t, x + (o * 16 + clusterId * 4 + coreId) * 64, 256, GDRAM2NRAM);
          __bang_add_scalar(t, t, 1.5f, 64);
          __memcpy(y + (o * 16 + clusterId * 4 + coreId) * 64, t, 256, NRAM2GDRAM);
        }
      }
    }
""")


@needs_nvcc
def test_a_kernel_only_file_keeps_its_symbol_as_a_host_entry(tmp_path: Path) -> None:
    cuda, reason = translate_bang_to_cuda(KERNEL_ONLY, "shift.mlu")
    assert cuda is not None, reason
    assert 'extern "C" void shift(float *x, float *y)' in cuda and "xp_shift_task<<<" in cuda
    (tmp_path / "ref.py").write_text("import numpy as np\ndef ref(x):\n    return (x + np.float32(1.5)).astype(np.float32)\n")
    (tmp_path / "k.cu").write_text(cuda)
    (tmp_path / "spec.toml").write_text(textwrap.dedent("""
        name = "shift"
        source = "k.cu"
        entry = "shift"
        kind = "host"
        reference = "ref.py:ref"
        tolerance = { atol = 1e-6, rtol = 1e-6 }
        [[args]]
        name = "x"
        dtype = "float32"
        shape = [1280]
        role = "in"
        [[args]]
        name = "y"
        dtype = "float32"
        shape = [1280]
        role = "out"
        [[cases]]
    """))
    report = run_spec(load_spec(str(tmp_path / "spec.toml")), warp_size=32)
    assert report.passed, report.summary()


def test_only_an_unlaunched_c_linkage_kernel_becomes_a_host_entry() -> None:
    cxx, _ = translate_bang_to_cuda(KERNEL_ONLY.replace('extern "C" ', ""), "shift.mlu")
    assert cxx is not None and "xp_shift_task" not in cxx and "__global__ void shift(" in cxx
    launched = KERNEL_ONLY + textwrap.dedent("""
        void run(float *x, float *y, cnrtQueue_t q) {
          cnrtDim3_t dim = {16, 1, 1};
          shift<<<dim, cnrtFuncTypeUnion1, q>>>(x, y);
        }
    """)
    hosted, _ = translate_bang_to_cuda(launched, "shift.mlu")
    assert hosted is not None and "xp_shift_task" not in hosted


@needs_nvcc
def test_bang_integer_names_and_a_kernel_named_like_a_math_function_compile() -> None:
    # BANG declares int8 ... uint64; a kernel called `exp` must not redeclare <math.h>'s exp
    src = textwrap.dedent("""
        #include <bang.h>
        extern "C" __mlu_global__ void exp(int8 *q, float *y) {
          uint32_t i = taskId;
          int16 v = q[i];
          y[i] = (float)v;
        }
    """)
    cuda, reason = translate_bang_to_cuda(src, "exp.mlu")
    assert cuda is not None, reason
    assert '__asm__("exp")' in cuda
    verdict = compile_check(cuda, Dialect.CUDA)
    assert verdict.ok, verdict.stderr[-2000:]


@needs_nvcc
def test_an_on_chip_array_sized_at_run_time_goes_to_the_heap(tmp_path: Path) -> None:
    src = textwrap.dedent("""
        #include <bang.h>
        __mlu_global__ void twice(float *x, float *y, int per) {
          __nram__ float t[per * 2];
          __memcpy(t, x + taskId * per, per * sizeof(float), GDRAM2NRAM);
          __bang_mul_scalar(t, t, 2.0f, per);
          __memcpy(y + taskId * per, t, per * sizeof(float), NRAM2GDRAM);
        }
    """)
    cuda, reason = translate_bang_to_cuda(src, "twice.mlu")
    assert cuda is not None, reason
    assert "__shared__ float t[" not in cuda and "t_heap(" in cuda
    (tmp_path / "ref.py").write_text("import numpy as np\ndef ref(x, per):\n    return (2 * x).astype(np.float32)\n")
    (tmp_path / "k.cu").write_text(cuda)
    (tmp_path / "spec.toml").write_text(textwrap.dedent("""
        name = "twice"
        source = "k.cu"
        entry = "twice"
        kind = "kernel"
        grid = [4]
        block = [1]
        reference = "ref.py:ref"
        tolerance = { atol = 1e-6, rtol = 1e-6 }
        [[args]]
        name = "x"
        dtype = "float32"
        shape = ["4 * per"]
        role = "in"
        [[args]]
        name = "y"
        dtype = "float32"
        shape = ["4 * per"]
        role = "out"
        [[args]]
        name = "per"
        dtype = "int32"
        role = "scalar"
        value = "per"
        [[cases]]
        per = 37
    """))
    report = run_spec(load_spec(str(tmp_path / "spec.toml")), warp_size=32)
    assert report.passed, report.summary()


def test_the_older_five_argument_division_detensorizes() -> None:
    src = textwrap.dedent("""
        __mlu_global__ void q(float *x, float *y) {
          __nram__ float a[32];
          __nram__ float b[32];
          __nram__ float tmp[32];
          __bang_div(a, a, b, tmp, 32);
        }
    """)
    cuda, reason = translate_bang_to_cuda(src, "q.mlu")
    assert cuda is not None, reason
    assert "__bang_div" not in cuda and "a[xp_i1] = a[xp_i1] / b[xp_i1]" in cuda


@needs_nvcc
def test_a_kernel_only_file_is_verified_against_itself_on_the_mlu_model(tmp_path: Path) -> None:
    """No spec: the tests launch the source on the MLU model as the job the translation's host entry runs (16
    tasks, Union1), with buffers as long as the kernel touches (20 tasks' rows of 64 here); a wrong translation
    fails them."""
    from xpiler_core.pipeline import TranslateOptions, translate
    from xpiler_core.verify.autospec import build_spec
    from xpiler_core.verify.expr import evaluate_int

    result = translate(KERNEL_ONLY, "shift.mlu", TranslateOptions(target=Dialect.CUDA, source_dialect=Dialect.BANG))
    assert result.status == "verified", result.summary
    assert result.manifest["spec"]["auto"] is True
    built = build_spec(KERNEL_ONLY, "shift.mlu", Dialect.BANG, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    assert spec.kind == "host" and spec.entry == "shift" and spec.reference_kind == "kernel"
    lengths = {a.name: evaluate_int(str(a.shape[0]), {}) for a in spec.args}
    assert lengths["x"] >= 1280 and lengths["y"] >= 1280  # the guard stops at task row 20 of 64 elements
    assert {a.name: a.role for a in spec.args} == {"x": "in", "y": "inout"}
    assert all(a.init != "zeros" for a in spec.args)
    cuda, _ = translate_bang_to_cuda(KERNEL_ONLY, "shift.mlu")
    assert cuda is not None
    assert run_spec(spec, candidate_text=cuda, candidate_dialect=Dialect.CUDA, warp_size=32).passed
    wrong = cuda.replace("1.5f", "2.5f")
    assert wrong != cuda
    assert not run_spec(spec, candidate_text=wrong, candidate_dialect=Dialect.CUDA, warp_size=32).passed


def test_a_bang_kernel_taking_an_integer_is_not_guessed(tmp_path: Path) -> None:
    from xpiler_core.verify.autospec import build_spec

    text = KERNEL_ONLY.replace("float *y)", "float *y, int n)").replace("< 20", "< n")
    built = build_spec(text, "shift.mlu", Dialect.BANG, tmp_path)
    assert built.spec_path is None and "integer parameters (n)" in built.reason


@needs_nvcc
def test_a_wram_buffer_of_bang_fixed_width_type_over_48_kib_compiles_as_cuda() -> None:
    """``__wram__ int8 f[65536]`` (BANG's own name for the type) is 64 KiB: over CUDA's static shared memory, it
    goes to the device heap (nvcc's ptxas refused it as shared data)."""
    text = textwrap.dedent("""
        #include <bang.h>
        extern "C" __mlu_global__ void copy_filter(int8 *filter, int8 *out) {
          __wram__ int8 f[65536];
          __nram__ int8 t[256];
          __memcpy(f, filter, 65536, GDRAM2WRAM);
          __memcpy(t, filter + taskId * 256, 256, GDRAM2NRAM);
          for (int i = 0; i < 256; ++i) t[i] = t[i] + f[65535 - taskId * 256 - i];
          __memcpy(out + taskId * 256, t, 256, NRAM2GDRAM);
        }
    """)
    cuda, reason = translate_bang_to_cuda(text, "copy_filter.mlu")
    assert cuda is not None, reason
    verdict = compile_check(cuda, Dialect.CUDA)
    assert verdict.ok, verdict.stderr[-2000:]


@needs_nvcc
def test_a_source_that_does_not_build_on_the_mlu_model_is_named_when_its_translation_does_not_compile() -> None:
    """``__bang_add(d, d, 2048, 128)`` passes a number where BANG takes a tile (``__bang_add`` has no scalar
    form, unlike ``__bang_div``): the MLU model rejects the source, and the translation cannot compile either;
    the result says the source is the reason, not only nvcc."""
    from xpiler_core.pipeline import TranslateOptions, translate

    text = textwrap.dedent("""
        #include <bang.h>
        extern "C" __mlu_global__ void scale(float *x, float *y) {
          __nram__ float t[128];
          __memcpy(t, x + taskId * 128, 512, GDRAM2NRAM);
          __bang_add(t, t, 2048, 128);
          __memcpy(y + taskId * 128, t, 512, NRAM2GDRAM);
        }
    """)
    result = translate(text, "scale.mlu", TranslateOptions(target=Dialect.CUDA, source_dialect=Dialect.BANG))
    assert result.status == "unresolved"
    assert "the source itself does not build (on the MLU model" in result.reason and "__bang_add" in result.reason
