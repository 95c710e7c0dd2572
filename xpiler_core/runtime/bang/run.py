"""Call functions of a built BANG-model library in a child process with time and memory limits.

``BangWorker`` keeps one child alive across calls (loading numpy and the library once); a crash or
a timeout kills that child, is reported as the call's error, and the next call starts a fresh one.
Arrays are passed as pointers to contiguous copies and come back after the call, so outputs are read
from the returned arrays. Model errors (``xpiler_bang_last_error()``) are returned as ``error``.

Child side: ``python -m xpiler_core.runtime.bang.run`` reads length-prefixed pickled requests on
stdin and answers on stdout.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xpiler_core.runtime import children

CALL_TIMEOUT_S = 60.0
CHILD_MEMORY_BYTES = 8 << 30

Scalar = tuple[str, float | int]  # ("int" | "long" | "float" | "double", value)
Arg = np.ndarray | Scalar


@dataclass
class CallResult:
    """What one call produced: the array arguments after the call, the return value, any error."""

    arrays: list[np.ndarray | None] = field(default_factory=list)  # per argument (None for scalars)
    returned: int | None = None
    error: str | None = None  # model error, crash or timeout, in words




def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class BangWorker:
    """A long-lived child process running calls into BANG-model libraries."""

    def __init__(self, timeout_s: float = CALL_TIMEOUT_S, env: dict[str, str] | None = None) -> None:
        self.timeout_s = timeout_s
        self.env = {**os.environ, **env} if env else None  # extra variables for the child (model switches)
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BangWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._proc is not None:
            self._kill()

    def _kill(self) -> None:
        proc = self._proc
        self._proc = None
        if proc is None:
            return
        proc.kill()
        proc.wait(timeout=10)
        _close_pipes(proc)

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = children.Popen(
                [sys.executable, "-m", "xpiler_core.runtime.bang.run"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                # a persistent worker serving many calls: its CPU budget covers a long session of them
                memory_bytes=CHILD_MEMORY_BYTES,
                wall_seconds=3600.0,
                env=self.env,
            )
        return self._proc

    def call(self, library: str, function: str, args: list[Arg], timeout_s: float | None = None) -> CallResult:
        """Calls ``function`` of ``library`` (an ``int``-returning extern "C" function) with ``args``."""
        proc = self._ensure()
        assert proc.stdin is not None and proc.stdout is not None
        payload = pickle.dumps(
            {"library": library, "function": function, "args": [_encode(a) for a in args]}, protocol=4
        )
        try:
            proc.stdin.write(struct.pack("<Q", len(payload)) + payload)
            proc.stdin.flush()
        except BrokenPipeError:
            return self._crashed(function)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        header = _read_exact(proc, 8, deadline)
        if header is None:
            return self._failed(function, deadline)
        body = _read_exact(proc, struct.unpack("<Q", header)[0], deadline)
        if body is None:
            return self._failed(function, deadline)
        reply: dict[str, Any] = pickle.loads(body)
        return CallResult(reply["arrays"], reply["returned"], reply["error"])

    def _failed(self, function: str, deadline: float) -> CallResult:
        if time.monotonic() >= deadline:
            self._kill()
            return CallResult(error=f"timeout: {function} did not return within {self.timeout_s:g} s")
        return self._crashed(function)

    def _crashed(self, function: str) -> CallResult:
        proc = self._proc
        code = proc.wait(timeout=10) if proc is not None else 0
        if proc is not None:
            _close_pipes(proc)
        self._proc = None
        if code < 0:
            what = {"SIGSEGV": "segmentation fault", "SIGBUS": "bus error", "SIGABRT": "abort"}.get(
                _signal_name(code), _signal_name(code)
            )
            return CallResult(error=f"{what} in {function}")
        return CallResult(error=f"the worker exited with status {code} in {function}")


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def _read_exact(proc: subprocess.Popen[bytes], n: int, deadline: float) -> bytes | None:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    remaining = n
    while remaining > 0:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _encode(arg: Arg) -> Any:
    if isinstance(arg, np.ndarray):
        return ("array", np.ascontiguousarray(arg))
    kind, value = arg
    if kind not in ("int", "long", "float", "double"):
        raise ValueError(f"unknown scalar kind {kind!r}")
    return (kind, value)


# ----- child side ----------------------------------------------------------------------------------------
_CTYPES = {"int": ctypes.c_int, "long": ctypes.c_longlong, "float": ctypes.c_float, "double": ctypes.c_double}


def _serve() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    libraries: dict[str, ctypes.CDLL] = {}
    while True:
        header = stdin.read(8)
        if len(header) < 8:
            return
        request = pickle.loads(stdin.read(struct.unpack("<Q", header)[0]))
        lib = libraries.get(request["library"])
        if lib is None:
            lib = ctypes.CDLL(request["library"])
            libraries[request["library"]] = lib
        arrays: list[np.ndarray | None] = []
        c_args: list[Any] = []
        for kind, value in request["args"]:
            if kind == "array":
                arr = np.array(value, copy=True, order="C")
                arrays.append(arr)
                c_args.append(ctypes.c_void_p(arr.ctypes.data))
            else:
                arrays.append(None)
                c_args.append(_CTYPES[kind](value))
        func = getattr(lib, request["function"])
        func.restype = ctypes.c_int
        returned = int(func(*c_args))
        error = None
        count = getattr(lib, "xpiler_bang_error_count", None)
        if count is not None and count() > 0:
            last = lib.xpiler_bang_last_error
            last.restype = ctypes.c_char_p
            error = last().decode("utf-8", "replace")
            lib.xpiler_bang_clear_error()
        reply = pickle.dumps({"arrays": arrays, "returned": returned, "error": error}, protocol=4)
        stdout.write(struct.pack("<Q", len(reply)) + reply)
        stdout.flush()


if __name__ == "__main__":
    _serve()
