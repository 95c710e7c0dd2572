"""The one pass driver: CST and AST passes in one list, records, refusals, instruments, cancellation."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.passes.driver import DumpIntermediates, run_passes
from xpiler_core.progress import Cancelled, CancelToken

KERNEL = """#include <cuda_runtime.h>
__global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
extern "C" void run(float* x, int n) { scale<<<(n + 255) / 256, 256>>>(x, n); cudaDeviceSynchronize(); }
"""


def ctx(target: Dialect = Dialect.C) -> PassContext:
    return PassContext(source_dialect=Dialect.CUDA, target=target, file="k.cu")


def test_cst_then_ast_passes_on_one_source_unit() -> None:
    run = run_passes(SourceUnit(KERNEL, Dialect.CUDA, "k.cu"), ["api_map", "loop_recovery", "loop_binding"],
                     ctx(Dialect.C))
    assert [r["name"] for r in run.records] == ["api_map", "loop_recovery", "loop_binding"]
    assert isinstance(run.unit, A.Module) and run.refused is None
    assert run.records[1]["changed"] and all(r["seconds"] >= 0 for r in run.records)
    assert set(run.records[0]) >= {"name", "params", "changed", "refused", "notes", "unresolved", "seconds"}


def test_refusal_is_recorded_and_can_stop_the_run() -> None:
    text = "void plain(float* x) { x[0] = 1.0f; }\n"
    kept = run_passes(SourceUnit(text, Dialect.CUDA, "k.cu"), ["grid_reduce", "loop_recovery"], ctx())
    assert kept.refused is not None and kept.refused["name"] == "grid_reduce"
    assert [r["name"] for r in kept.records] == ["grid_reduce", "loop_recovery"]
    stopped = run_passes(SourceUnit(text, Dialect.CUDA, "k.cu"), ["grid_reduce", "loop_recovery"], ctx(),
                         stop_on_refusal=True)
    assert [r["name"] for r in stopped.records] == ["grid_reduce"]


def test_dump_instrument_writes_each_intermediate_program(tmp_path: Path) -> None:
    dump = DumpIntermediates(tmp_path, Dialect.C)
    run_passes(SourceUnit(KERNEL, Dialect.CUDA, "k.cu"), ["loop_recovery", "loop_binding"], ctx(), instruments=[dump])
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["01-loop_recovery.c", "02-loop_binding.c"]
    assert "omp" in (tmp_path / "02-loop_binding.c").read_text()


def test_cancellation_between_passes() -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        run_passes(SourceUnit(KERNEL, Dialect.CUDA, "k.cu"), ["loop_recovery"], ctx(), cancel=token)


def test_per_step_parameters_override_the_run_parameters() -> None:
    run = run_passes(SourceUnit(KERNEL, Dialect.CUDA, "k.cu"), ["loop_recovery", ("loop_binding", {"simd": False})],
                     ctx(), {"loop_binding": {"simd": True}})
    assert run.records[1]["params"]["simd"] is False
