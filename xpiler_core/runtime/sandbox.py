"""Run one call of a built library in a child process, with a time limit and a memory limit.

The child (``xpiler_core.runtime.worker``) runs in its own process group, so a timeout kills everything it
started. The runtime reports faults and deadlocks itself (a line ``xpiler: ... in kernel K`` on stderr and
a distinctive exit code); a timeout is attributed to the kernel named in the status file the runtime updates
at each launch. The calling Python process never sees a signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xpiler_core.progress import Cancelled, CancelToken
from xpiler_core.runtime import children

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_BYTES = 16 * 1024**3
EXIT_DEADLOCK = 86
EXIT_FAULT = 87


@dataclass
class CallArg:
    """One argument: a buffer (numpy array), a probe buffer (a byte count: zero pages, nothing read back) or a
    scalar value with its dtype name."""

    name: str
    dtype: str
    array: np.ndarray | None = None
    value: float | int | None = None
    probe_bytes: int | None = None


@dataclass
class CallResult:
    ok: bool
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    error: str | None = None
    status: int = 0
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    addresses: dict[str, tuple[int, int]] = field(default_factory=dict)  # buffer → (address, bytes) in the child


WORKER = Path(__file__).resolve().parent / "worker.py"



TIMEOUT_PREFIX = "timeout after"  # how a run stopped by its time limit is reported


def is_timeout(error: str | None) -> bool:
    """Whether ``error`` reports a run stopped by its time limit (not a fault of the program)."""
    return error is not None and TIMEOUT_PREFIX in error

def _scalar(dtype: str, value: float | int | None) -> tuple[str, float | int]:
    """The ctypes type name and value the worker passes; 16-bit floats travel as their bit patterns."""
    v = 0 if value is None else value
    if dtype == "float16":
        return "uint16", int(np.array(v, dtype=np.float16).view(np.uint16))
    if dtype == "bfloat16":
        bits = int(np.array(v, dtype=np.float32).view(np.uint32))
        return "uint16", (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    if dtype == "bool":
        return "bool", bool(v)
    return dtype, int(v) if dtype.startswith(("int", "uint")) else float(v)


def _runtime_message(stderr: str) -> str | None:
    for line in reversed(stderr.splitlines()):
        if line.startswith("xpiler: "):
            return line[len("xpiler: ") :].strip()
    return None


def call_library(
    library: Path,
    entry: str,
    mode: str,
    args: list[CallArg],
    outputs: list[str],
    workdir: Path,
    *,
    config: tuple[int, ...] = (1, 1, 1, 1, 1, 1, 0),
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    threads: int | None = None,
    kernel_hint: str | None = None,
    env: dict[str, str] | None = None,
    cancel: CancelToken | None = None,
) -> CallResult:
    """Call ``entry`` of ``library`` in a sandboxed child; outputs are the named buffers after the call."""
    workdir.mkdir(parents=True, exist_ok=True)
    request_args: list[dict[str, Any]] = []
    layouts: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
    for i, arg in enumerate(args):
        if arg.probe_bytes is not None:
            request_args.append({"name": arg.name, "kind": "probe", "bytes": arg.probe_bytes})
        elif arg.array is not None:
            file = f"in{i}_{arg.name}.bin"
            array = np.ascontiguousarray(arg.array)
            (workdir / file).write_bytes(array.tobytes())
            layouts[arg.name] = (array.dtype, array.shape)
            request_args.append({"name": arg.name, "kind": "buffer", "file": file})
        else:
            ctype, value = _scalar(arg.dtype, arg.value)
            request_args.append({"name": arg.name, "kind": "scalar", "ctype": ctype, "value": value})
    status_file = workdir / "status.txt"
    request = {
        "library": str(library),
        "entry": entry,
        "mode": mode,
        "args": request_args,
        "config": list(config),
        "outputs": outputs,
    }
    request_path = workdir / "request.json"
    request_path.write_text(json.dumps(request))
    child_env = dict(os.environ)
    child_env["XPILER_STATUS_FILE"] = str(status_file)
    child_env.setdefault("OMP_NUM_THREADS", str(threads or os.cpu_count() or 1))
    if threads:
        child_env["XPILER_THREADS"] = str(threads)
    child_env.update(env or {})
    started = time.monotonic()
    proc = children.Popen(
        # -S -E: no site packages, no PYTHON* variables; the worker needs only the standard library.
        [sys.executable, "-S", "-E", str(WORKER), str(request_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        cwd=workdir,
        env=child_env,
        memory_bytes=memory_bytes,
        wall_seconds=timeout_s,
    )
    deadline = started + timeout_s
    while True:
        try:
            # Short waits so a cancelled job stops its child promptly; retrying communicate loses no output.
            stdout, stderr = proc.communicate(timeout=min(0.25, max(0.01, deadline - time.monotonic())))
            break
        except subprocess.TimeoutExpired:
            cancelled = cancel is not None and cancel.cancelled
            if not cancelled and time.monotonic() < deadline:
                continue
            proc.kill()
            stdout, stderr = proc.communicate()
            if cancelled:
                raise Cancelled("cancelled") from None
            kernel = status_file.read_text().strip() if status_file.exists() else ""
            where = f" in kernel {kernel}" if kernel else (f" in {kernel_hint}" if kernel_hint else "")
            return CallResult(
                False,
                error=f"{TIMEOUT_PREFIX} {timeout_s:g} s{where} (deadlock, endless loop or too long to emulate); "
                      "process killed",
                stdout=stdout,
                stderr=stderr,
                seconds=time.monotonic() - started,
            )
    seconds = time.monotonic() - started
    rc = proc.returncode
    addresses_file = workdir / "addresses.json"
    addresses = {name: (int(v[0]), int(v[1])) for name, v in
                 (json.loads(addresses_file.read_text()) if addresses_file.exists() else {}).items()}
    if rc != 0:
        message = _runtime_message(stderr)
        if message is None:
            if "MemoryError" in stderr or "bad_alloc" in stderr or "Cannot allocate memory" in stderr:
                message = f"out of memory (limit {memory_bytes / 2**30:g} GiB)"
            elif rc < 0:
                name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
                where = f" in {kernel_hint}" if kernel_hint else ""
                message = f"killed by {name}{where}"
            else:
                tail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {rc}"
                message = f"run failed: {tail}"
        return CallResult(False, error=message, status=rc, stdout=stdout, stderr=stderr, seconds=seconds,
                          addresses=addresses)
    result = json.loads((workdir / "result.json").read_text())
    outs = {
        name: np.frombuffer((workdir / f"out_{name}.bin").read_bytes(), dtype=layouts[name][0])
        .reshape(layouts[name][1])
        .copy()
        for name in outputs
    }
    status = int(result.get("status", 0))
    error = None
    if status != 0:
        error = (
            f"launch failed with error {status} (invalid configuration)"
            if status == 9
            else f"launch error {status}"
        )
    return CallResult(error is None, outs, error, status, stdout, stderr, seconds, addresses)
