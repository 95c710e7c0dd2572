"""Fixtures and helpers shared by the rooms' tests: the benchmark suite, C/C++ builds of CPU translations
called through ctypes, the tuner's candidate for one inserted pass, and a CUDA text after loop recovery."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.runtime.build import build_library

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "suite"


@pytest.fixture
def suite() -> Path:
    if not SUITE.is_dir():
        pytest.skip("benchmark suite not present")
    return SUITE


def build_c(text: str, workdir: Path, cplusplus: bool | None = None) -> ctypes.CDLL:
    """Plain C unless the text has C++ linkage markers (or ``cplusplus`` says so: the CPU plan's output is C++)."""
    as_cpp = "extern \"C\"" in text if cplusplus is None else cplusplus
    result = build_library(text, Dialect.C, workdir, display_name="t.c", cplusplus_c=as_cpp)
    assert result.ok, result.log
    assert result.library is not None
    return ctypes.CDLL(str(result.library))


@pytest.fixture
def cbuild(tmp_path: Path):  # noqa: ANN201 - fixture
    return lambda text, cplusplus=None: build_c(text, tmp_path, cplusplus)


def tuner_candidate(spec: Path, pass_name: str, workdir: Path) -> tuple[Any, str]:
    """The tuning problem of a suite kernel and its candidate with ``pass_name`` inserted at the first place the
    tuner offers it (asserting that it does)."""
    from xpiler_core.tune.config import Config, Step
    from xpiler_core.tune.cpu_problem import CpuTuningProblem
    from xpiler_core.verify.spec import load_spec

    kernel_spec = load_spec(spec)
    problem = CpuTuningProblem(kernel_spec.source.read_text(), str(kernel_spec.source), kernel_spec, workdir)
    actions = [a for a in problem.actions(()) if a.name == pass_name]
    assert actions, f"the tuner offers no {pass_name} step"
    text = problem.render(Config((Step(actions[0].name, actions[0].target),), problem.binding_defaults))
    assert text is not None
    return problem, text


def build_shared(text: str, workdir: Path) -> Path:
    """Build a CPU translation (C++) into a shared library for tests that call it directly."""
    result = build_library(text, Dialect.C, workdir, display_name="t.cpp", cplusplus_c=True)
    assert result.ok and result.library is not None, result.log
    return Path(result.library)


def loop_recovered(text: str) -> tuple[Any, Any]:
    """CUDA ``text`` after loop recovery (no wrapper), and the pass context a CPU pass continues with."""
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.passes import get_pass
    from xpiler_core.passes.base import PassContext

    module = lower_text(text, "k.cu")
    ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file="k.cu")
    recovery = get_pass("loop_recovery")
    return recovery.apply(module, {**recovery.INFO.defaults(), "wrapper": False}, ctx), ctx


# The default run's budget (< 15 min on 2 cores): sweeps over more instances of a behaviour it already covers
# keep the instances named here and leave the others to the `extended` phase, which CI runs after the default
# run (`.ci/run`). A test renamed away from this table simply runs by default again.
_DEFAULT_INSTANCES: dict[str, tuple[str, ...]] = {
    # the README's first command (tests/plans/test_cuda_to_cpu.py verifies the example program on the CPU)
    "tests/cli/test_examples.py::test_the_example_verifies_as_shipped": ("vector_add.cu->hip",),
    "tests/cli/test_replay_every_direction.py::test_translate_then_replay_reproduces": ("cuda->hip",),
    "tests/suite/test_runtime.py::test_operator_matches_numpy_at_warp_32": (
        "matrix/gemm", "normalization/softmax", "reduction/argmax", "layout/scatter_add", "llm/attention"),
    "tests/suite/test_runtime.py::test_relative_shuffle_operator_is_still_right_at_warp_64": ("normalization/softmax",),
    "tests/suite/test_runtime.py::test_hazard_is_right_at_warp_32": ("warp64/warp_softmax", "warp64/ballot_count"),
    "tests/suite/test_compile.py::test_source_compiles_with_nvcc": ("llm/attention", "matrix/gemv_int8"),
    "tests/repair/test_repair_styles.py::test_bug_in_another_style_is_repaired": ("const_stencil",),
    "tests/repair/test_repair_recorded_host.py::test_a_flipped_comparison_is_repaired": ("guard_over_a_loop",),
    "tests/repair/test_repair_recorded_host.py::test_kernel_bug_behind_real_host_code_is_repaired": (
        "c_weights", "flags"),
    "tests/repair/test_repair_recorded_host.py::test_a_bug_in_the_host_code_is_repaired_on_the_harness": (
        "threads = 256",),
    "tests/tables/test_tables_compile.py::test_wider_overloads_exist_in_hip_and_not_in_cuda": ("atomicMax",),
    "tests/plans/test_c_to_cuda.py::test_c_to_cuda_on_cpu_outputs": ("activation/relu",),
    "tests/plans/test_real_code_styles.py::test_jumps_multiple_returns_and_static_asserts_reach_bang": (
        "multireturn_warp",),
    "tests/plans/test_bang_to_cuda.py::test_round_trip_of_a_bang_translation_compiles_and_matches_numpy": (
        "activation/relu",),
    "tests/frontend/test_ast_stress.py::test_stress_round_trip_compiles": ("stress.cu",),
    "tests/verify/test_uninitialized_reads.py::test_shared_memory_never_written_is_the_sources_defect": (
        "16-4-cpu",),
    "tests/passes/test_cpu_gemm_spellings.py::test_split_block_with_advancing_pointers_is_a_product": ("48-32-80",),
    "tests/passes/test_api_map.py::test_stand_ins_in_a_branch_the_build_does_not_take_are_not_the_files_names": (
        "#ifndef", "#ifdef"),
    "tests/passes/test_reduction_idiom.py::test_suite_kernel_matches_numpy": ("normalization/softmax", "reduction/max"),
    "tests/plans/test_real_code_styles.py::test_every_style_verifies_on_the_cpu_structural_tier": (
        "ballot_compact", "wmma_gemm"),
    "tests/passes/test_wave64_styles.py::test_wave64_style_verifies_at_warp_64": (
        "activemask_early_exit", "warp_histogram", "warp_scan_total"),
    "tests/plans/test_cuda_to_bang.py::test_suite_operator_translates_and_matches_numpy_on_the_model": (
        "normalization/softmax",),
    "tests/plans/test_cuda_to_cpu.py::test_cuda_to_cpu_subset": ("normalization/softmax", "matrix/gemm_wmma",
                                                                "llm/gqa_decode"),
    "tests/plans/test_parse_once.py::test_the_source_text_is_parsed_once_per_translation": ("hip",),
    # one direction of a behaviour both directions share (the other's plan is covered by its own tests)
    "tests/verify/test_autospec.py::test_a_file_of_kernels_only_verifies_kernel_by_kernel": ("hip",),
    "tests/verify/test_uninitialized_reads.py::test_output_never_written_is_the_sources_defect": ("cpu",),
    "tests/verify/test_uninitialized_reads.py::test_program_printing_unwritten_memory_is_defective": ("1-4",),
    "tests/runtime/test_warp_synchronous.py::test_a_warp_reduces_through_a_volatile_pointer_in_step": ("hip",),
    "tests/runtime/test_device_heap.py::test_a_source_writing_out_of_bounds_is_the_verdict": ("cpu",),
    "tests/project/test_projects.py::test_a_program_of_two_units_with_arguments_from_xpiler_toml": ("hip",),
    "tests/project/test_projects.py::test_a_c_unit_is_built_as_c_and_copied_beside_the_output": ("cpu",),
    "tests/passes/test_bang_pool.py::test_window_reduction_runs_on_the_pooling_intrinsic_and_matches_numpy": (
        "avg3x3s2",),
    "tests/repair/test_repair.py::test_injected_bug_is_repaired_back_to_the_correct_kernel": ("pooling/avgpool2d",),
    "tests/project/test_projects.py::test_a_header_only_another_unit_includes_is_translated_with_it": ("hip",),
    "tests/verify/test_harness_dtypes.py::test_rename_only_hip_port_is_caught_at_warp_64": ("64",),
    "tests/verify/test_bang_specs.py::test_the_scalar_division_translates_to_cuda_as_a_division_by_the_number": (
        "sin",),
    "tests/verify/test_copy_back.py::test_a_wrong_translation_of_a_silent_program_is_caught": ("hip",),
    "tests/verify/test_copy_back.py::test_a_wrong_translation_of_a_program_that_copies_nothing_back_is_caught": ("c",),
    "tests/verify/test_schedule_order.py::test_translations_of_a_compaction_verify": ("hip",),
    "tests/translation/test_source_build.py::test_a_source_nvcc_rejects_is_named_before_the_translation_is_blamed": (
        "hip",),
    "tests/plans/test_cpu_function_switches.py::test_switches_in_function_bodies_are_read_as_the_build_sets_them": (
        "defines1",),
    "tests/passes/test_partial_accumulators.py::test_guarded_sum_matches_numpy": ("0", "95", "12289"),
    "tests/passes/test_cpu_gemm_spellings.py::test_transposed_tile_through_local_pointers": ("64-48-96",),
    "tests/passes/test_reduction_idiom.py::test_output_still_rebinds_to_cuda": ("normalization/softmax",),
    "tests/plans/test_bang_to_cuda.py::test_bang_conv_in_a_nested_block_runs_as_cuda": ("1936",),
    "tests/verify/test_schedule_order.py::test_only_the_order_is_forgiven": ("same elements", "negated"),
    "tests/verify/test_copy_back.py::test_a_program_that_copies_nothing_back_verifies_by_its_freed_buffers": (
        "cpu-float4", "hip"),
    "tests/passes/test_detensorization.py::test_fragment_elements_are_the_tile_the_loops_compute": ("c",),
    "tests/verify/test_gpu_reference.py::test_the_launch_glue_compiles_with_nvcc": ("tile_sum",),
    # a stop during start-up by Ctrl-C is tests/cli/test_trust_boundaries.py's; SIGTERM unwinds the same way
    "tests/cli/test_kill_translation.py::test_a_stopped_translation_leaves_nothing": ("SIGTERM", "SIGKILL"),
}
# whole tests whose behaviour other default tests cover at a fraction of the time
_EXTENDED_TESTS = frozenset({
    "tests/repair/test_repair_general.py::test_a_loop_bound_bug_whose_threads_fault_is_repaired",
    "tests/migration/test_tree_migration.py::test_two_jobs_give_the_same_results_as_one",
    "tests/frontend/test_ast_roundtrip.py::test_benchmark_suite_sample_round_trip_compile",
    "tests/frontend/test_ast_stress.py::test_stress_round_trip_compiles",
    "tests/tune/test_tune_cpu.py::test_cli_prints_a_table_of_candidates",
    "tests/tune/test_tune_cpu.py::test_a_template_kernel_is_tuned_under_its_exported_symbol",
    "tests/tune/test_tune_cpu.py::test_probing_the_plan_space_stops_when_told_and_keeps_what_it_did_not_probe",
    "tests/runtime/test_graphs.py::test_positional_node_parameters_run_in_each_apis_member_order",
    "tests/runtime/test_preamble_pch.py::test_a_macro_of_the_project_gets_its_own_hip_copy_and_failures_are_the_plain_compilers",
    "tests/repair/test_repair_recorded_host.py::test_bug_in_a_kernel_with_its_shape_built_in_is_repaired",
    "tests/repair/test_repair_recorded_host.py::test_a_constant_mixed_up_with_another_extent_is_repaired",
    "tests/passes/test_cpu_gemm_spellings.py::test_split_block_with_advancing_pointers_is_a_product",
    "tests/passes/test_cpu_gemm_spellings.py::test_split_block_of_another_size_runs_the_loops",
    "tests/passes/test_partial_accumulators.py::test_max_over_merged_loops_is_exact",
    "tests/plans/test_cpu_tiers_real_constructs.py::test_warp_aggregated_program_takes_the_portable_tier_and_computes_what_python_does",
    "tests/migration/test_tree_migration.py::test_a_killed_run_resumes_where_it_stopped",
    "tests/runtime/test_warp_synchronous.py::test_the_cpu_translation_does_not_run_the_idiom_thread_after_thread",
    # nvcc's acceptance of a test's own program (the runtime's reference programs are real CUDA)
    "tests/runtime/test_nested_tiles.py::test_the_program_is_cuda_nvcc_accepts",
    "tests/runtime/test_partitions.py::test_nvcc_accepts_the_program",
    "tests/tune/test_tune_cpu.py::test_a_kernel_whose_header_and_other_unit_the_project_supplies_is_tuned",
    "tests/runtime/test_bang_memory.py::test_strict_generation_rejects_unaligned_counts",
    "tests/repair/test_repair_general.py::test_a_kernel_with_dynamic_shared_memory_is_repaired",
    "tests/plans/test_hip_to_bang.py::test_warp_32_translation_fails_the_64_lane_reference",
    "tests/translation/test_status.py::test_units_that_build_apart_but_not_as_one_unit_are_not_called_a_broken_source",
    "tests/repair/test_repair_selector.py::test_selector_runs_each_completion_as_its_plain_text",
    "tests/frontend/test_ast_roundtrip.py::test_examples_round_trip_compile",
    "tests/passes/test_partial_accumulators.py::test_row_sums_of_squares_match_numpy",
    "tests/plans/test_cpu_tiers_real_constructs.py::test_a_graph_built_node_by_node_stays_on_the_structural_tier",
    "tests/passes/test_hip_compat_constructs.py::test_any_other_libcu_header_is_unresolved_for_hip_at_its_line",
    "tests/repair/test_repair_selector.py::test_completions_of_apart_spans_share_one_program_and_overlapping_ones_do_not",
    "tests/project/test_projects.py::test_units_with_static_functions_of_one_name_keep_their_own",
    "tests/plans/test_error_macro_programs.py::test_translations_build_and_reproduce_the_source",
    "tests/verify/test_harness.py::test_kept_reference_outputs_give_the_same_verdicts",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    extended = pytest.mark.extended
    for item in items:
        test, _, instance = item.nodeid.partition("[")
        kept = _DEFAULT_INSTANCES.get(test)
        if test in _EXTENDED_TESTS or (kept is not None and not any(instance.startswith(k) for k in kept)):
            item.add_marker(extended)
