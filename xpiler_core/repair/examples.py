"""Small concrete examples for repair: tiny shapes derived from a spec, seeded inputs, reference outputs.

The solver sees executions on these shapes only; the full spec cases re-verify every repair afterwards.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import detect_dialect
from xpiler_core.repair.interp import LaunchShape, Unsupported
from xpiler_core.repair.trace import HostRun
from xpiler_core.verify.expr import ExprError
from xpiler_core.verify.harness import (
    _load_reference,
    _program,
    build_program,
    launch_config,
    reference_outputs,
    run_program,
)
from xpiler_core.verify.inputs import case_inputs, shape_of, to_view
from xpiler_core.verify.spec import KernelSpec

# Sizes a spec's case variables are shrunk towards (odd, so partial blocks and tails are exercised).
_TARGETS = (3, 5, 9, 17, 33, 65, 129, 1100, 2100)
_FACTORS = (2, 4, 8, 16, 64)  # common divisors a case is also scaled down by (relations between sizes kept)


class ReferenceFailed(Exception):
    """The reference gives no outputs for a small case (the source refuses those sizes): try another."""


@dataclass
class Example:
    """One tiny case: sizes, inputs (stored arrays and scalars), expected outputs, launch shape."""

    case: dict[str, int]
    inputs: dict[str, Any]
    expected: dict[str, np.ndarray]
    shape: LaunchShape
    threads: int
    seconds: float = 0.0  # how long the candidate's concrete run on it took (set by the repair engine)
    ran_out: bool = False  # that run was stopped by the interpreter's step budget (a loop that never ends)
    host_run: HostRun | None = None  # the candidate's host entry, run for real on it (set by the repair engine)


def shape_for(spec: KernelSpec, case: Mapping[str, Any]) -> LaunchShape:
    cfg = launch_config(spec, case)
    return LaunchShape((cfg[0], cfg[1], cfg[2]), (cfg[3], cfg[4], cfg[5]), cfg[6])


def tiny_cases(spec: KernelSpec, max_threads: int) -> list[dict[str, int]]:
    """Candidate small cases, smallest launch first (each at most ``max_threads`` threads in all)."""
    seen: set[tuple[tuple[str, int], ...]] = set()
    scored: list[tuple[int, int, dict[str, int]]] = []
    for base in spec.cases:
        variants = [dict(base)]
        if spec.cases_are_alternatives:
            # sizes solved for kernels with their shape built in: the source is right at these only
            scored.append((0, len(scored), {k: int(v) for k, v in base.items()}))  # in the order solved
            continue
        for t in _TARGETS:
            # Shrink towards t while keeping each value's residue mod 8 (kernels often assume even sizes).
            variants.append(
                {k: int(v) if int(v) <= t + 2 * j else t + 2 * j + (int(v) - t - 2 * j) % 8
                 for j, (k, v) in enumerate(sorted(base.items()))}
            )
        variants += [_scaled(base, f) for f in _FACTORS]
        for case in variants:
            key = tuple(sorted(case.items()))
            if key in seen:
                continue
            seen.add(key)
            try:
                shape = shape_for(spec, case)
                for a in spec.args:
                    if a.is_buffer:
                        shape_of(a, case, str(spec.path))
            except (XpilerError, ExprError, ZeroDivisionError):
                continue
            threads = math.prod(shape.grid) * (math.prod(shape.block) if spec.kind == "kernel" else 1)
            if 0 < threads <= max_threads:
                scored.append((threads, sum(case.values()), case))
    scored.sort(key=lambda s: (s[0], s[1]))
    return [c for _, _, c in scored]


def _scaled(base: Mapping[str, Any], factor: int) -> dict[str, int]:
    """The case divided by ``factor``, keeping each value's residue mod 8 and the order between the values.

    Why: shrinking every size towards one target loses which size is larger (K > M in a GEMM), and a bug that
    confuses two sizes shows only while they differ in the same direction as in the spec's case."""
    out: dict[str, int] = {}
    prev: tuple[int, int] | None = None  # (original, scaled) of the previous value in ascending order
    for k, v in sorted(((k, int(v)) for k, v in base.items()), key=lambda kv: kv[1]):
        w = v if v <= 8 else max(1, -(-v // factor))
        w += (v - w) % 8
        if prev is not None:
            if v == prev[0]:
                w = prev[1]
            elif w <= prev[1]:
                w += 8 * -(-(prev[1] - w + 1) // 8)
        out[k] = w
        prev = (v, w)
    return out


def make_example(spec: KernelSpec, case: dict[str, int], index: int, seed: int) -> Example:
    inputs = case_inputs(spec, case, 1000 + index, seed)
    if spec.reference is not None:
        with _load_reference(spec) as reference:
            expected = reference_outputs(reference, spec, inputs)
    else:
        expected = _source_reference(spec, case, inputs)
    shape = shape_for(spec, case)
    threads = math.prod(shape.grid) * (math.prod(shape.block) if spec.kind == "kernel" else 1)
    return Example(case, inputs, {k: np.asarray(v) for k, v in expected.items()}, shape, threads)


def _source_reference(spec: KernelSpec, case: dict[str, int], inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Differential specs: the reference source run for real on the runtime, as the tests run it."""
    assert spec.reference_source is not None
    text = spec.reference_source.read_text(encoding="utf-8")
    dialect = detect_dialect(text, str(spec.reference_source))
    program = _program(spec, text, dialect, spec.reference_entry or spec.entry, spec.reference_kind or spec.kind,
                       None, spec.reference_source.name)
    with tempfile.TemporaryDirectory(prefix="xpiler-example-") as tmp:
        built = build_program(program, spec, Path(tmp) / "build")
        if not built.build.ok:
            raise XpilerError("the reference source does not build", str(spec.reference_source))
        run = run_program(built, spec, inputs, case, Path(tmp) / "call")
    if not run.ok:
        raise ReferenceFailed(f"the reference source fails on a small case: {run.error}")
    return dict(run.outputs)


def stored_args(spec: KernelSpec, inputs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in spec.args:
        v = inputs[a.name]
        if a.is_buffer:
            if a.dtype == "bfloat16":
                raise Unsupported(f"{a.dtype} buffers")
            out[a.name] = np.array(v, copy=True)
        else:
            out[a.name] = v
    return out


def tolerance(spec: KernelSpec, name: str) -> tuple[float, float]:
    for a in spec.args:
        if a.name == name:
            return (a.atol if a.atol is not None else spec.atol, a.rtol if a.rtol is not None else spec.rtol)
    return spec.atol, spec.rtol


def close(got: Any, expected: float, atol: float, rtol: float) -> bool:
    """The harness's element rule: |got - expected| <= atol + rtol |expected|; NaN only matches NaN."""
    g, e = float(got), float(expected)
    if math.isnan(e) or math.isnan(g):
        return math.isnan(e) and math.isnan(g)
    if math.isinf(e) or math.isinf(g):
        return e == g
    return abs(g - e) <= atol + rtol * abs(e)


def expected_flat(spec: KernelSpec, ex: Example, name: str) -> np.ndarray:
    arg = next(a for a in spec.args if a.name == name)
    exp = ex.expected[name]
    if exp.dtype == np.uint16 and arg.dtype == "bfloat16":
        exp = to_view(exp, arg.dtype)
    return np.asarray(exp, dtype=np.float64).reshape(-1)
