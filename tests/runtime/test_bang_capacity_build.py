"""Build-time checks of the BANG model: per-generation on-chip capacities located at the offending
declaration, the generation table, the launch rewrite and located compiler errors."""

from __future__ import annotations

import numpy as np
import pytest

from xpiler_core.runtime.bang.build import (
    _local_rewrite_launches,
    build_bang,
    format_build_errors,
    get_generation,
    rewrite_launches,
)
from xpiler_core.runtime.bang.run import BangWorker

KIB = 1024


def _kernel(decls: str, name: str = "k") -> str:
    return f"""__mlu_global__ void {name}(float* out) {{
{decls}
  out[0] = 1.0f;
}}
"""


@pytest.mark.parametrize(
    "generation,decl,space,used,capacity",
    [
        ("MLU370", "  __nram__ float big[200000];", "NRAM", 800000, 768 * KIB),
        ("MLU270", "  __nram__ char big[600000];", "NRAM", 600000, 512 * KIB),
        ("MLU290", "  __wram__ float big[140000];", "WRAM", 560000, 512 * KIB),
        ("MLU370", "  __wram__ float big[270000];", "WRAM", 1080000, 1024 * KIB),
        ("MLU370", "  __mlu_shared__ float big[1100000];", "SRAM", 4400000, 4096 * KIB),
    ],
)
def test_over_capacity_buffer_is_a_located_build_error(generation: str, decl: str, space: str, used: int,
                                                       capacity: int) -> None:
    source = _kernel(decl)
    build = build_bang(source, path="cap.mlu", generation=generation)
    assert not build.ok and build.output is None
    (violation,) = build.capacity_violations
    assert (violation.space.upper(), violation.used, violation.capacity) == (space, used, capacity)
    diag = violation.diagnostic
    assert diag.span.start_line == 1 and diag.file == "cap.mlu"  # the declaration's line (0-based)
    assert f"{space} capacity exceeded in kernel/function 'k'" in diag.message and "big" in diag.message
    assert generation in diag.message
    assert format_build_errors(build).startswith("cap.mlu:2:")


def test_exactly_full_nram_fits_mlu370_but_not_mlu270() -> None:
    source = _kernel("  __nram__ char full[786432];")
    assert build_bang(source, path="full.mlu", generation="MLU370").ok
    small = build_bang(source, path="full.mlu", generation="MLU270")
    assert not small.ok and small.capacity_violations[0].capacity == 512 * KIB


def test_capacity_is_per_kernel_plus_file_scope() -> None:
    two_kernels = _kernel("  __nram__ char a[500000];", "k1") + _kernel("  __nram__ char b[500000];", "k2")
    build = build_bang(two_kernels, path="two.mlu", generation="MLU370")
    assert build.ok, format_build_errors(build)
    assert build.usage["k1"]["nram"] == 500000 and build.usage["k2"]["nram"] == 500000

    shared = "__nram__ char table[400000];\n" + _kernel("  __nram__ char a[400000];", "k1")
    build = build_bang(shared, path="shared.mlu", generation="MLU370")
    assert not build.ok
    (violation,) = build.capacity_violations
    assert violation.used == 800000 and {s.name for s in violation.symbols} == {"table", "a"}


def test_generation_table() -> None:
    assert get_generation().name == "MLU370"
    rows = {g: get_generation(g) for g in ("MLU270", "MLU290", "MLU370", "mlu590")}
    assert [(r.nram_kib, r.wram_kib, r.sram_kib) for r in rows.values()] == [
        (512, 1024, 2048), (512, 512, 2048), (768, 1024, 4096), (512, 512, 2048)]
    assert rows["MLU270"].strict_alignment and not rows["MLU370"].strict_alignment
    with pytest.raises(ValueError):
        get_generation("MLU100")


def test_generation_macros_reach_the_source() -> None:
    source = """
extern "C" int sizes(int* out) {
  out[0] = __BANG_ARCH__; out[1] = __MLU_NRAM_SIZE__; out[2] = __MLU_WRAM_SIZE__; out[3] = __MLU_SRAM_SIZE__;
  return 0;
}
"""
    build = build_bang(source, path="sizes.mlu", generation="MLU290")
    assert build.ok and build.output is not None
    with BangWorker() as worker:
        res = worker.call(str(build.output), "sizes", [np.zeros(4, np.int32)])
    assert res.error is None and list(res.arrays[0]) == [290, 512, 512, 2048]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("k<<<dim, CNRT_FUNC_TYPE_UNION1, q>>>(a, b);", "::xpiler::launch(k, dim, CNRT_FUNC_TYPE_UNION1, q)(a, b);"),
        ("ns::k<float><<<d, t, q>>>(x);", "::xpiler::launch(ns::k<float>, d, t, q)(x);"),
        ("k<<<d,\n  t, q>>>(x);", "::xpiler::launch(k, d,\n  t, q)(x);"),
        ("int a = b << 3;", "int a = b << 3;"),
    ],
)
def test_local_launch_rewrite(text: str, expected: str) -> None:
    assert _local_rewrite_launches(text) == expected
    assert rewrite_launches(text).count("\n") == text.count("\n")  # line numbers survive


def test_compiler_errors_are_located_in_the_users_file() -> None:
    build = build_bang("__mlu_global__ void k(float* out) {\n  out[0] = undefined_name;\n}\n", path="bad.mlu")
    assert not build.ok
    errors = [d for d in build.diagnostics if d.severity.value == "error"]
    assert errors and errors[0].file == "bad.mlu" and errors[0].span.start_line == 1
    assert "undefined_name" in errors[0].message


def test_entry_glue_launches_a_kernel_with_dims_and_type() -> None:
    from xpiler_core.runtime.bang.entry import TASK_TYPES, bang_entry_glue

    kernel = """
__mlu_global__ void scale(float* out, const float* in, float factor, int n) {
  __nram__ float tile[256];
  int per = n / taskDim;
  __memcpy(tile, in + taskId * per, per * sizeof(float), GDRAM2NRAM);
  __bang_mul_scalar(tile, tile, factor, per);
  __memcpy(out + taskId * per, tile, per * sizeof(float), NRAM2GDRAM);
}
"""
    glue = bang_entry_glue("scale", [("float32", True), ("float32", True), ("float32", False), ("int32", False)])
    call = """
extern "C" int call_entry(float* out, const float* in, float factor, int n, unsigned x, unsigned type) {
  void* args[4] = {out, const_cast<float*>(in), &factor, &n};
  unsigned cfg[4] = {x, 1, 1, type};
  return xpiler_entry(args, cfg);
}
"""
    build = build_bang(kernel + glue + call, path="scale.mlu")
    assert build.ok and build.output is not None, format_build_errors(build)
    x = np.arange(64, dtype=np.float32)
    with BangWorker() as worker:
        res = worker.call(str(build.output), "call_entry",
                          [np.zeros(64, np.float32), x, ("float", 1.5), ("int", 64), ("int", 8), ("int", TASK_TYPES["union2"])])
        assert res.error is None and res.returned == 0
        np.testing.assert_array_equal(res.arrays[0], x * 1.5)
        bad = worker.call(str(build.output), "call_entry",
                          [np.zeros(64, np.float32), x, ("float", 1.5), ("int", 64), ("int", 4), ("int", TASK_TYPES["union2"])])
        assert bad.returned != 0 and bad.error is not None and "multiple of 8" in bad.error


def test_shared_rewrite_is_used_for_bang_sources() -> None:
    text = "__mlu_global__ void k(float* x) {}\nvoid host(float* x) {\n  cnrtDim3_t d = {4, 1, 1};\n  k<<<d, CNRT_FUNC_TYPE_UNION1, nullptr>>>(x);\n}\n"
    out = rewrite_launches(text)
    assert "::xpiler::launch(k, d, CNRT_FUNC_TYPE_UNION1, nullptr)(x);" in out
    assert out.count("\n") == text.count("\n")


def test_run_bang_kernel_api() -> None:
    from xpiler_core.runtime.bang.call import run_bang_kernel

    source = """
__mlu_global__ void axpy(float* y, const float* x, float a, int n) {
  __nram__ float tx[1024];
  __nram__ float ty[1024];
  int per = n / taskDim, off = taskId * per;
  __memcpy(tx, x + off, per * sizeof(float), GDRAM2NRAM);
  __memcpy(ty, y + off, per * sizeof(float), GDRAM2NRAM);
  __bang_mul_scalar(tx, tx, a, per);
  __bang_add(ty, ty, tx, per);
  __memcpy(y + off, ty, per * sizeof(float), NRAM2GDRAM);
}
__mlu_global__ void broken(float* y, int n) { __bang_active_relu(y, y, n); }
"""
    x = np.arange(256, dtype=np.float32)
    y = np.ones(256, np.float32)
    run = run_bang_kernel(source, "axpy", [y, x, np.float32(0.5), 256], dim=(16, 1, 1), task_type="union1",
                          path="axpy.mlu")
    assert run.ok, run.error
    np.testing.assert_array_equal(run.arrays[0], 1 + 0.5 * x)
    bad = run_bang_kernel(source, "broken", [y, 256], path="axpy.mlu")
    assert not bad.ok and bad.error is not None and "axpy.mlu:12: error: __bang_active_relu: dst points to GDRAM" in bad.error
    not_built = run_bang_kernel("__mlu_global__ void k(float* y) { y[0] = nope; }", "k", [y], path="nb.mlu")
    assert not not_built.ok and not_built.error is not None and not_built.error.startswith("nb.mlu:1:")
