"""Repair beyond what the symbolic encoding covers: wrong variables (rename holes), holes searched concretely in
kernels whose threads interact (atomics, shared memory), loops whose bound the hole moves past the interpreter's
default cap, and small cases that keep which size is larger. Every repair is checked against independent
references: the text of the correct kernel, and the spec's numpy reference on other inputs (harness, seed 7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.repair import examples as EX
from xpiler_core.repair.engine import apply_edits, repair_candidate
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"


def _repaired_back(op: str, old: str, new: str, kind: str | None, budget: float = 60.0, exact: bool = True) -> None:
    spec = load_spec(SUITE / op / "spec.toml")
    original = spec.source_text()
    assert original.count(old) == 1
    buggy = original.replace(old, new)
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed, "the injected bug is visible to the tests"
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=budget, initial_report=before)
    assert result.status == "repaired", result.message
    if kind is not None:
        assert result.sketch == kind
    assert result.text is not None and apply_edits(buggy, result.edits) == result.text
    if exact:
        assert result.text == original  # the one-expression change we injected, undone
    assert run_spec(spec, candidate_text=result.text, seed=7).passed  # numpy reference, other inputs


def test_wrong_variable_in_an_atomic_scatter_is_renamed_back() -> None:
    # atomicAdd on an in/out buffer: threads interact, so the hole is searched concretely (no thread sample).
    _repaired_back("layout/scatter_add", "idx[i] * dim + d", "idx[i] * num_idx + d", "rename")


def test_swapped_variables_around_an_atomic_are_swapped_back() -> None:
    _repaired_back("layout/scatter_add", "(size_t)idx[i] * dim + d", "(size_t)idx[dim] * i + d", "swap")


@pytest.mark.slow
def test_swapped_subscripts_of_a_shared_memory_tile_are_found_by_a_concrete_run() -> None:
    # Transposing the tile's reads instead (`As[k][ty]`) is as good a repair: the numpy reference decides.
    _repaired_back("matrix/gemm", "As[ty][tx] =", "As[tx][ty] =", "swap", budget=120, exact=False)


@pytest.mark.slow
def test_a_wrong_loop_start_in_a_shared_memory_kernel_is_found_by_a_concrete_search() -> None:
    # The loop header (its init statement included) encloses the bad writes; the constant is searched
    # concretely (the symbolic run of a tiled GEMM with a hole-dependent tile offset is refused).
    _repaired_back("matrix/gemm", "int k0 = 0;", "int k0 = 1;", "const", budget=120)


def test_a_loop_bound_bug_whose_threads_fault_is_repaired() -> None:
    # Every thread faults in the buggy kernel (an out-of-bounds read past the filter): learning must not stop
    # at a model whose loop merely runs long, and the repaired kernel may run longer than the faulting one.
    # (`s < KW + 0` is as good as `s < KW`: the numpy reference decides, not the text.)
    _repaired_back("convolution/conv2d_nhwc", "s < KW;", "s < KW + 1;", "const", exact=False)


def test_an_inverted_early_exit_is_repaired_though_the_fix_runs_longer_than_the_bug() -> None:
    # The buggy kernel's threads leave at once; the repaired one runs the whole convolution: checking a model
    # on the small cases must not use a step cap taken from the buggy run.
    _repaired_back("convolution/conv2d_nhwc", "idx >= total", "idx < total", "compare")


def test_a_fault_implicates_addresses_and_loops_not_the_tiles_it_reads() -> None:
    from xpiler_core import ast as A
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.repair.interp import Program
    from xpiler_core.repair.suspects import collect, get_at, implicated_statements

    spec = load_spec(SUITE / "matrix/gemm/spec.toml")
    prog = Program.of(lower_text(spec.source_text(), str(spec.source)))
    fs = collect(prog.functions[spec.entry], prog.macros)

    def stores_to(base: str) -> list[tuple[int, object]]:
        out = []
        for i, p in fs.stmt_paths.items():
            node = get_at(fs.fn, p)
            if isinstance(node, A.ExprStmt) and isinstance(node.expr, A.Assign):
                target = node.expr.target
                if (target.id if isinstance(target, A.Name) else A._base_name(target)) == base:
                    out.append((i, p))
        return out

    (acc_id, acc_path), = stores_to("acc")  # acc += As[ty][k] * Bs[k][tx]
    (_, tile_path), = stores_to("As")
    levels: dict[object, int] = {}
    written, n_written = implicated_statements(fs, {acc_id}, set(), None, levels)
    faulted, n_faulted = implicated_statements(fs, {acc_id}, set(), {acc_id})
    # A bad value written: the tile's writer fed it (one data-flow step). A fault (out-of-bounds tile read):
    # the address and the loops around it, not the tile's contents.
    assert tile_path in written[:n_written] and levels[tile_path] == 1 and levels[acc_path] == 0
    assert tile_path not in faulted[:n_faulted] and acc_path in faulted[:n_faulted]
    loop_init = (*acc_path[:-1], "init")  # for (int k = 0; ...): the header's init is suspected with the loop
    assert loop_init in faulted[:n_faulted]


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from("MNKabc"), st.integers(1, 5000), min_size=1, max_size=6),
       st.sampled_from(EX._FACTORS))
def test_scaled_cases_keep_residues_and_which_size_is_larger(case: dict[str, int], factor: int) -> None:
    small = EX._scaled(case, factor)
    assert set(small) == set(case)
    for k, v in case.items():
        assert small[k] % 8 == v % 8 and small[k] >= 1
        for k2, v2 in case.items():
            assert (v < v2) == (small[k] < small[k2]) and (v == v2) == (small[k] == small[k2])


def test_gemm_small_cases_include_a_deeper_k_than_m() -> None:
    # The spec's largest case has K > M; shrinking every size towards one target loses that, scaling keeps it.
    spec = load_spec(SUITE / "matrix/gemm/spec.toml")
    cases = EX.tiny_cases(spec, 3072)
    assert any(c["K"] > 16 >= c["M"] for c in cases)


def test_a_hole_dependent_loop_accumulates_linearly_and_runs_as_long_as_it_did_concretely() -> None:
    # A loop bound made a hole: the accumulator is an Ite chain, one case per iteration (reads under the loop's
    # path condition see the value of the previous iteration, not every earlier merge), and the loop may run
    # the 16 iterations it ran concretely (past the default cap of 12). The solved bound reproduces numpy's sum.
    import numpy as np
    import z3

    from xpiler_core import ast as A
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.repair import sketch as SK
    from xpiler_core.repair.engine import _matches
    from xpiler_core.repair.interp import LaunchShape, Program, _paths, run_kernel
    from xpiler_core.repair.suspects import collect

    src = "__global__ void k(const float* x, float* out) { float acc = 0.0f; for (int i = 0; i < 16; ++i) acc += x[i]; out[0] = acc; }"
    prog = Program.of(lower_text(src, "k.cu"))
    x = np.arange(1, 25, dtype=np.float32)
    shape = LaunchShape((1, 1, 1), (1, 1, 1))
    run_kernel(prog, "k", {"x": x, "out": np.zeros(1, dtype=np.float32)}, shape)  # concrete: 16 iterations seen
    fn = prog.functions["k"]
    site = next(s for s in collect(fn, prog.macros).sites if isinstance(s.node, A.Literal) and s.node.text == "16")
    sk = SK.const_sketch(site)
    holed, evaluators = SK.install(fn, sk)
    sprog = Program(prog.module, {"k": holed}, prog.macros, evaluators)
    sprog.bounds, sprog.loop_iters = sk.bounds, prog.loop_iters
    out = run_kernel(sprog, "k", {"x": x, "out": np.zeros(1, dtype=np.float32)}, shape)["out"].data[0]
    assert _paths(out, {}) <= 16 + 4 + 4  # one case per iteration (merging blindly would make 2**20)
    for want in (16, 18):
        solver = z3.Solver()
        solver.add(*sk.constraints, *sprog.obligations, _matches(out, float(x[:want].sum()), 0.0, 0.0, {}))
        assert solver.check() == z3.sat
        assert solver.model().eval(sk.variables[0]).as_long() == want


def test_swapping_the_two_factors_of_a_product_is_not_a_candidate() -> None:
    # `(size_t)row * K` → `(size_t)K * row` computes the same address: not a repair, not worth a run.
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.repair import sketch as SK
    from xpiler_core.repair.interp import Program
    from xpiler_core.repair.suspects import collect

    spec = load_spec(SUITE / "matrix/gemm/spec.toml")
    text = spec.source_text()
    prog = Program.of(lower_text(text, str(spec.source)))
    src = SK.SourceText(text)
    labels = {
        src.of(site.node): SK.swap_sketches(site, src)
        for site in collect(prog.functions[spec.entry], prog.macros).sites if site.ctx == "index"
    }
    assert labels["(size_t)row * K"] == []  # the only pair of names there is the commuted product
    assert len(labels["(size_t)row * K + k0 + tx"]) == 5  # six pairs of four names, less the commuted one


def test_a_rename_offers_names_of_the_same_role_first() -> None:
    # `M` (a parameter) → the other integer parameters before locals (`row`, `tx`, ...) or macros (`TILE`).
    import z3

    from xpiler_core import ast as A
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.repair import sketch as SK
    from xpiler_core.repair.interp import Program
    from xpiler_core.repair.suspects import collect

    spec = load_spec(SUITE / "matrix/gemm/spec.toml")
    prog = Program.of(lower_text(spec.source_text(), str(spec.source)))
    fs = collect(prog.functions[spec.entry], prog.macros)
    site = next(s for s in fs.sites if isinstance(s.node, A.Name) and s.node.id == "M" and s.ctx == "cmp")
    sk = SK.rename_sketch(site, fs, prog.macros)
    assert sk is not None and sk.kind == "rename"
    opt = z3.Optimize()
    opt.add(*sk.constraints)
    opt.minimize(sk.objective)
    order = []
    while opt.check() == z3.sat and len(order) < 12:
        model = opt.model()
        order.append(sk.describe(model)["name"])
        opt.add(z3.Or([v != model.eval(v, model_completion=True) for v in sk.variables]))
    assert order[0] == "M"  # distance 0: the original itself
    assert set(order[1:3]) == {"N", "K"}  # the other int parameters of gemm_tiled_kernel(..., M, N, K)
    assert {"row", "col", "tx", "ty", "TILE"} <= set(order[3:])


CAST_KERNEL = """__global__ void odd_elements(const float* __restrict__ x, float* __restrict__ y, int n) {
  const float* base = nullptr;
  base = x;
  const int i = static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
  if (i < n) {
    y[i] = base[static_cast<size_t>(2 * i + 1)];
  }
}
"""
CAST_SPEC = """name = "odd_elements"
source = "odd.cu"
entry = "odd_elements"
grid = ["ceil_div(n, 32)"]
block = [32]
reference = "ref.py:odd"
[[args]]
name = "x"
dtype = "float32"
shape = ["2 * n"]
role = "in"
init = "normal"
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
[[cases]]
n = 40
"""


def test_a_kernel_written_with_cpp_casts_and_nullptr_is_repaired(tmp_path: Path) -> None:
    (tmp_path / "odd.cu").write_text(CAST_KERNEL)
    (tmp_path / "ref.py").write_text("def odd(x, n):\n    return x[1::2].copy()\n")
    (tmp_path / "spec.toml").write_text(CAST_SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    buggy = CAST_KERNEL.replace("2 * i + 1", "2 * i + 2")
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=60, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text is not None and run_spec(spec, candidate_text=result.text, seed=7).passed  # numpy, other inputs


def test_a_kernel_with_dynamic_shared_memory_is_repaired() -> None:
    # extern __shared__ sized by the spec's shared_bytes; the block total is read from the wrong slot
    spec = load_spec(Path(__file__).resolve().parents[2] / "benchmarks" / "repair_styles" / "dyn_shared_rowsum"
                     / "spec.toml")
    original = spec.source_text()
    buggy = original.replace("out[row] = partial[0];", "out[row] = partial[1];")
    before = run_spec(spec, candidate_text=buggy)
    assert not before.passed
    result = repair_candidate(buggy, str(spec.source), spec, budget_s=60, initial_report=before)
    assert result.status == "repaired", result.message
    assert result.text is not None and run_spec(spec, candidate_text=result.text, seed=7).passed  # numpy, other inputs


def test_a_small_case_that_outruns_its_time_is_undecided_not_a_misfit() -> None:
    """A fix may do far more work than the bug it fixes (a flipped guard that skipped the work): when its run on
    the small cases outruns the time it is given, the small cases have not decided against it and the harness
    judges it. A wrong completion that finishes in time is still a misfit, and a right one fits."""
    import time

    from xpiler_core.repair.engine import UNDECIDED, _first_misfit

    spec = load_spec(SUITE / "elementwise" / "add" / "spec.toml")
    text = spec.source_text()
    chosen = [EX.make_example(spec, case, i, seed=3) for i, case in enumerate(EX.tiny_cases(spec, 1024)[:1])]
    args = (spec, text, str(spec.source), spec.source_dialect(), spec.entry, spec.kind, chosen, 32)
    assert _first_misfit(*args) is None
    wrong = text.replace("& 63)]", "& 31)]")
    assert wrong != text
    assert _first_misfit(*args[:1], wrong, *args[2:]) == 0
    assert _first_misfit(*args, deadline=time.monotonic() - 1.0) == UNDECIDED
