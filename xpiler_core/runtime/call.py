"""Python API: build CUDA/HIP/C source for the CPU and call a kernel or host entry on numpy arrays.

>>> out = run_kernel(src, "add", grid=4, block=256, args=[a, b, c, np.int32(n)])
>>> out.arrays[2]   # every buffer after the call, in argument order

Scalars are numpy scalars (their dtype is the C type) or Python ints (int32) / floats (float32).
Builds are cached; each call runs in a sandboxed child process (see :mod:`xpiler_core.runtime.sandbox`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xpiler_core.dialect import Dialect
from xpiler_core.runtime.build import BuildResult, build_library
from xpiler_core.runtime.entry import ENTRY_SYMBOL, kernel_entry_glue
from xpiler_core.runtime.sandbox import CallArg, call_library

Dim = int | tuple[int, ...]
ArgValue = np.ndarray | np.generic | int | float


@dataclass
class KernelRun:
    ok: bool
    arrays: list[np.ndarray | None] = field(default_factory=list)
    error: str | None = None
    build_log: str = ""
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0


def _dims(d: Dim) -> list[int]:
    v = [d] if isinstance(d, int) else list(d)
    return (v + [1, 1, 1])[:3]


def _dtype_name(value: ArgValue) -> str:
    if isinstance(value, np.ndarray | np.generic):
        if value.dtype == np.float16:
            return "float16"
        return str(value.dtype)
    if isinstance(value, bool):
        return "bool"
    return "int32" if isinstance(value, int) else "float32"


def build(
    text: str,
    dialect: Dialect,
    out_dir: Path,
    *,
    kernel: str | None,
    arg_dtypes: Sequence[tuple[str, bool]],
    warp_size: int,
    fibers: str = "fcontext",
) -> BuildResult:
    glue = kernel_entry_glue(kernel, list(arg_dtypes)) if kernel else ""
    return build_library(
        text,
        dialect,
        out_dir,
        warp_size=warp_size,
        extra=glue,
        fibers=fibers,
        display_name=f"kernel{dialect.suffix}",
        cplusplus_c=dialect is Dialect.C and 'extern "C"' in text,
    )


def run_kernel(
    text: str,
    kernel: str,
    *,
    grid: Dim,
    block: Dim,
    args: Sequence[ArgValue],
    shared_bytes: int = 0,
    dialect: Dialect = Dialect.CUDA,
    warp_size: int | None = None,
    kind: str = "kernel",
    timeout_s: float = 60.0,
    threads: int | None = None,
    fibers: str = "fcontext",
    env: dict[str, str] | None = None,
) -> KernelRun:
    """Launch ``kernel`` (or call host function ``kernel`` when ``kind == "host"``) on copies of ``args``."""
    warp = warp_size or (64 if dialect is Dialect.HIP else 32)
    dtypes = [(_dtype_name(a), isinstance(a, np.ndarray)) for a in args]
    with tempfile.TemporaryDirectory(prefix="xpiler-run-") as tmp:
        work = Path(tmp)
        built = build(
            text,
            dialect,
            work / "build",
            kernel=kernel if kind == "kernel" else None,
            arg_dtypes=dtypes,
            warp_size=warp,
            fibers=fibers,
        )
        if not built.ok or built.library is None:
            return KernelRun(False, error="build failed", build_log=built.log)
        call_args = []
        names = []
        for i, a in enumerate(args):
            name = f"a{i}"
            if isinstance(a, np.ndarray):
                call_args.append(CallArg(name, _dtype_name(a), array=np.ascontiguousarray(a)))
                names.append(name)
            else:
                call_args.append(
                    CallArg(name, _dtype_name(a), value=a.item() if isinstance(a, np.generic) else a)
                )
        config = (*_dims(grid), *_dims(block), shared_bytes)
        res = call_library(
            built.library,
            ENTRY_SYMBOL if kind == "kernel" else kernel,
            kind,
            call_args,
            names,
            work / "call",
            config=config,
            timeout_s=timeout_s,
            threads=threads,
            kernel_hint=kernel,
            env=env,
        )
        arrays: list[np.ndarray | None] = [
            res.outputs.get(f"a{i}") if isinstance(a, np.ndarray) else None for i, a in enumerate(args)
        ]
        return KernelRun(res.ok, arrays, res.error, built.log, res.stdout, res.stderr, res.seconds)
