"""Seeded input generation for spec arguments, and the float16/bfloat16 storage conventions.

float16 buffers are numpy float16; bfloat16 buffers travel as uint16 bit patterns (numpy has no bfloat16)
and are shown to references as float32 holding the bfloat16-rounded values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from xpiler_core.diagnostics import XpilerError
from xpiler_core.verify.expr import ExprError, evaluate, evaluate_int
from xpiler_core.verify.spec import ArgSpec, KernelSpec, parse_init

MAX_ELEMENTS = 1 << 28


def float_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), rounded).astype(np.uint16)


def bf16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def storage_dtype(dtype: str) -> np.dtype:
    return np.dtype(np.uint16) if dtype == "bfloat16" else np.dtype(dtype)


def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return float_to_bf16_bits(values)
    return np.asarray(values).astype(dtype)


def to_view(stored: np.ndarray, dtype: str) -> np.ndarray:
    """What references see and what comparisons use."""
    if dtype == "bfloat16":
        return bf16_bits_to_float(stored)
    return stored


def shape_of(arg: ArgSpec, env: Mapping[str, Any], spec_path: str) -> tuple[int, ...]:
    try:
        shape = tuple(evaluate_int(s, env) for s in arg.shape)
    except ExprError as exc:
        raise XpilerError(f"args '{arg.name}' shape: {exc}", spec_path) from None
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) > MAX_ELEMENTS:
        raise XpilerError(f"args '{arg.name}' shape {shape} is negative or too large", spec_path)
    return shape


def generate(arg: ArgSpec, env: Mapping[str, Any], rng: np.random.Generator, spec_path: str) -> np.ndarray:
    """Stored array for a buffer argument."""
    shape = shape_of(arg, env, spec_path)
    kind, params = parse_init(arg.init, spec_path)
    p = [evaluate(x, env) for x in params]
    integer = arg.dtype.startswith(("int", "uint")) or arg.dtype == "bool"
    if kind == "normal":
        mean, std = (p + [0.0, 1.0][len(p) :])[:2] if p else (0.0, 1.0)
        values: np.ndarray = rng.normal(mean, std, size=shape)
        if integer:
            values = np.rint(values * 10)
    elif kind == "uniform":
        lo, hi = (p + [0.0, 1.0][len(p) :])[:2] if p else (0.0, 1.0)
        values = rng.uniform(lo, hi, size=shape)
    elif kind == "randint":
        lo, hi = (int(p[0]), int(p[1])) if len(p) >= 2 else (0, 100)
        values = rng.integers(lo, hi, size=shape)
    elif kind == "zeros" or kind == "empty":
        values = np.zeros(shape)
    elif kind == "ones":
        values = np.ones(shape)
    elif kind == "arange":
        values = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    else:  # value(x)
        values = np.full(shape, p[0] if p else 0)
    if arg.dtype == "bool":
        values = values != 0
    return to_storage(values, arg.dtype)


def scalar_value(arg: ArgSpec, env: Mapping[str, Any], spec_path: str) -> int | float:
    try:
        v = evaluate(arg.value if arg.value is not None else 0, env)
    except ExprError as exc:
        raise XpilerError(f"args '{arg.name}' value: {exc}", spec_path) from None
    if arg.dtype.startswith(("int", "uint")) or arg.dtype == "bool":
        return int(v)
    return float(v)


def case_inputs(spec: KernelSpec, case: Mapping[str, Any], case_index: int, seed: int) -> dict[str, Any]:
    """Every argument's stored value for one case: arrays for buffers, numbers for scalars."""
    rng = np.random.default_rng([seed, case_index])
    out: dict[str, Any] = {}
    for arg in spec.args:
        if arg.is_buffer:
            out[arg.name] = generate(arg, case, rng, str(spec.path))
        else:
            out[arg.name] = scalar_value(arg, case, str(spec.path))
    return out
