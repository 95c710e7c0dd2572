"""Every suite spec is well formed and every numpy reference runs on every case of its spec."""

from __future__ import annotations

import numpy as np
import pytest
from suite_catalog import SuiteEntry, eval_int_expr, iter_entries, make_inputs, output_args, run_reference

ENTRIES = list(iter_entries())
SPEC_KEYS = {"name", "group", "source", "entry", "kind", "reference", "tolerance", "features", "args", "cases"}
DTYPE_NAMES = {"float32", "float16", "int32", "int8", "float64", "int64", "uint32"}


def test_suite_size() -> None:
    operators = [e for e in ENTRIES if not e.is_hazard]
    hazards = [e for e in ENTRIES if e.is_hazard]
    assert len(operators) >= 30
    assert len(hazards) >= 5
    assert len({e.group for e in operators}) >= 9


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.test_id for e in ENTRIES])
def test_spec_is_well_formed(entry: SuiteEntry) -> None:
    data = entry.data
    assert SPEC_KEYS <= data.keys(), SPEC_KEYS - data.keys()
    assert entry.spec_path.parent.name == entry.name
    assert entry.spec_path.parent.parent.name == entry.group
    assert entry.source_path.is_file()
    assert data["entry"] in entry.source_path.read_text()
    assert data["kind"] in ("kernel", "host")
    if data["kind"] == "kernel":
        assert 1 <= len(data["grid"]) <= 3 and 1 <= len(data["block"]) <= 3
    assert len(entry.cases) >= 3
    assert entry.features
    if entry.is_hazard:
        assert "warp32-hazard" in entry.features
    for arg in data["args"]:
        assert arg["role"] in ("in", "out", "inout", "scalar"), arg
        assert arg["dtype"] in DTYPE_NAMES, arg
        if arg["role"] == "scalar":
            assert "value" in arg
        else:
            assert "shape" in arg
            if arg["role"] != "out":
                assert "init" in arg, arg
    assert output_args(entry), "a spec needs an out or inout argument"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.test_id for e in ENTRIES])
def test_some_case_is_not_a_block_multiple(entry: SuiteEntry) -> None:
    """Some case has a tensor whose size is not a multiple of the block (host entries: not a power of two)."""
    data = entry.data
    if data["kind"] == "host":
        sizes = [v for case in entry.cases for v in case.values()]
        assert any(v & (v - 1) for v in sizes)
        return
    partial = False
    for case in entry.cases:
        grid = [eval_int_expr(g, case) for g in data["grid"]]
        assert all(g >= 1 for g in grid), (case, grid)
        block_threads = int(np.prod([eval_int_expr(b, case) for b in data["block"]]))
        for arg in data["args"]:
            if arg["role"] != "scalar":
                size = int(np.prod([eval_int_expr(s, case) for s in arg["shape"]]))
                partial |= size % block_threads != 0
    assert partial


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.test_id for e in ENTRIES])
def test_reference_runs_on_every_case(entry: SuiteEntry) -> None:
    for case in entry.cases:
        inputs = make_inputs(entry, case, seed=0)
        outputs = run_reference(entry, inputs)
        for arg in output_args(entry):
            got = outputs[arg["name"]]
            shape = tuple(eval_int_expr(s, case) for s in arg["shape"])
            assert got.shape == shape, (arg["name"], case, got.shape, shape)
            assert got.dtype == np.dtype(arg["dtype"]), (arg["name"], got.dtype)
            assert np.all(np.isfinite(got)), (arg["name"], case)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.test_id for e in ENTRIES])
def test_spec_loads_with_the_harness_loader(entry: SuiteEntry) -> None:
    """The harness's own loader accepts the spec and sees the same entry, arguments and cases."""
    spec_module = pytest.importorskip("xpiler_core.verify.spec", reason="the spec loader is not built yet")
    spec = spec_module.load_spec(entry.spec_path)
    assert spec.entry == entry.data["entry"]
    assert spec.kind == entry.data["kind"]
    assert [a.name for a in spec.args] == [a["name"] for a in entry.data["args"]]
    assert len(spec.cases) == len(entry.cases)
    assert spec.source.resolve() == entry.source_path.resolve()
