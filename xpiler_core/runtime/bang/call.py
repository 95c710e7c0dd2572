"""Python API: build BANG C source on the MLU model and run one kernel on numpy arrays.

>>> run = run_bang_kernel(src, "scale", [out, x, np.float32(2.0), np.int32(n)], dim=(16, 1, 1), task_type="union1")
>>> run.arrays[0]          # every buffer after the launch, in argument order (None for scalars)

Buffers are numpy arrays (passed as GDRAM pointers); scalars are numpy scalars (their dtype is the C
type) or Python ints (int32) / floats (float32). The kernel runs in a child process with limits
(``BangWorker``); builds are cached (``bang_build``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from xpiler_core.runtime.bang.build import BangBuild, build_bang, format_build_errors
from xpiler_core.runtime.bang.entry import TASK_TYPES
from xpiler_core.runtime.bang.run import BangWorker

CALL_SYMBOL = "xpiler_bang_call"
_SCALAR_KINDS = {"int32": ("int", "int32_t"), "int64": ("long", "int64_t"), "float32": ("float", "float"),
                 "float64": ("double", "double")}  # fmt: skip


@dataclass
class BangKernelRun:
    ok: bool
    arrays: list[np.ndarray | None] = field(default_factory=list)
    error: str | None = None
    build: BangBuild | None = None


def _scalar_dtype(value: object) -> str:
    if isinstance(value, np.generic):
        return str(value.dtype)
    if isinstance(value, bool | int):
        return "int32"
    if isinstance(value, float):
        return "float32"
    raise TypeError(f"unsupported kernel argument {value!r}")


def call_glue(entry: str, dtypes: Sequence[str | None]) -> str:
    """``extern "C" int xpiler_bang_call(params..., dx, dy, dz, type)`` launching ``entry``;
    ``dtypes`` has None for buffers and the numpy dtype name for scalars."""
    params, actuals = [], []
    for i, dtype in enumerate(dtypes):
        if dtype is None:
            params.append(f"void* a{i}")
            actuals.append(f"::xpiler::bang::AnyPtr{{a{i}}}")
        else:
            params.append(f"{_SCALAR_KINDS[dtype][1]} a{i}")
            actuals.append(f"a{i}")
    params += ["unsigned dx", "unsigned dy", "unsigned dz", "int type"]
    return (
        f'\nextern "C" int {CALL_SYMBOL}({", ".join(params)}) {{\n'
        "  cnrtDim3_t dim = {dx, dy, dz};\n"
        f"  ::xpiler::launch({entry}, dim, static_cast<cnrtFunctionType_t>(type), nullptr)({', '.join(actuals)});\n"
        "  return static_cast<int>(xpiler_cnrt_status());\n"
        "}\n"
    )


def run_bang_kernel(
    text: str,
    entry: str,
    args: Sequence[np.ndarray | np.generic | int | float],
    *,
    dim: tuple[int, int, int] = (1, 1, 1),
    task_type: str = "block",
    generation: str | None = None,
    path: str = "kernel.mlu",
    worker: BangWorker | None = None,
) -> BangKernelRun:
    """Builds ``text`` with a launcher for ``entry`` and runs it once with ``dim`` tasks of ``task_type``
    (``block``, ``union1``, ``union2``, ``union4``, ``union8``, ``union16``)."""
    if task_type.lower() not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; known: {', '.join(TASK_TYPES)}")
    dtypes: list[str | None] = []
    for a in args:
        if isinstance(a, np.ndarray):
            dtypes.append(None)
        else:
            scalar_type = _scalar_dtype(a)
            if scalar_type not in _SCALAR_KINDS:
                raise TypeError(f"scalar arguments of type {scalar_type} are not supported")
            dtypes.append(scalar_type)
    build = build_bang(text + call_glue(entry, dtypes), path=path, generation=generation)
    if not build.ok or build.output is None:
        return BangKernelRun(False, error=format_build_errors(build), build=build)
    call_args: list[np.ndarray | tuple[str, float | int]] = []
    for a, dtype in zip(args, dtypes, strict=True):
        if dtype is None:
            assert isinstance(a, np.ndarray)
            call_args.append(a)
        else:
            value = a.item() if isinstance(a, np.generic) else a
            assert isinstance(value, int | float)
            call_args.append((_SCALAR_KINDS[dtype][0], value))
    call_args += [("int", int(d)) for d in dim] + [("int", TASK_TYPES[task_type.lower()])]
    own = worker is None
    runner = worker if worker is not None else BangWorker()
    try:
        result = runner.call(str(build.output), CALL_SYMBOL, call_args)
    finally:
        if own:
            runner.close()
    arrays = result.arrays[: len(args)] if result.arrays else []
    ok = result.error is None and result.returned == 0
    return BangKernelRun(ok, arrays, result.error, build)
