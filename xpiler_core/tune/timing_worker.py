"""Child process that times one or more built libraries on the same inputs, interleaved round by round.

``python -S -E timing_worker.py REQUEST.json`` (standard library only: it starts fast). The request names
the libraries, the entry, the arguments (buffers as raw files, scalars as ctypes type names with values),
the number of warm-up calls (and the least warm-up time), rounds and the target time of one sample. All
libraries run on one set of buffers with a fixed, alias-free layout. Per round every library is timed once
(a sample = the fastest of ``bursts`` runs of ``inner`` back-to-back calls, timed with ``perf_counter_ns``:
a burst that another process preempted is dropped, since interference only ever adds time), starting with
a different library each round so none always runs right after another; interleaving means background load
drifts hit every library alike. Writes
``timings.json``: per library, the per-call seconds of every round.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from pathlib import Path
from typing import Any

CTYPES: dict[str, Any] = {
    "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16, "uint16": ctypes.c_uint16,
    "int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
}


def _buffers(args: list[dict[str, Any]], workdir: Path) -> tuple[list[Any], list[Any]]:
    """The argument values, every buffer in memory of its own, 4 KiB-aligned plus a different multiple of 320
    bytes per buffer: the layout does not depend on the allocator's whims, and no two streams are a multiple
    of 4 KiB apart (4K aliasing stalls loads behind unrelated stores)."""
    values: list[Any] = []
    keep: list[Any] = []
    for index, arg in enumerate(args):
        if arg["kind"] == "buffer":
            data = (workdir / arg["file"]).read_bytes()
            offset = (index * 320) % 4096
            arena = ctypes.create_string_buffer(len(data) + 2 * 4096 + 64)  # a valid pointer even when empty
            base = ctypes.addressof(arena)
            address = (base + 4095) // 4096 * 4096 + offset
            ctypes.memmove(address, data, len(data))
            keep.append(arena)
            values.append(ctypes.c_void_p(address))
        else:
            values.append(CTYPES[arg["ctype"]](arg["value"]))
    return values, keep


def _bind(library: str, entry: str, values: list[Any]) -> Any:
    lib = ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)
    fn = getattr(lib, entry)
    fn.restype = None
    fn.argtypes = [type(v) for v in values]
    return fn, lib


def main(argv: list[str]) -> int:
    request_path = Path(argv[1])
    request = json.loads(request_path.read_text())
    workdir = request_path.parent
    # Every library runs on the same buffers (each call overwrites the outputs anyway), so all see the same
    # memory layout and cache state.
    values, keep = _buffers(request["args"], workdir)
    bound = [(*_bind(lib, request["entry"], values), values) for lib in request["libraries"]]
    warmup, rounds, sample_s = int(request["warmup"]), int(request["rounds"]), float(request["sample_s"])
    max_s = float(request["max_s"])
    warmup_s = float(request.get("warmup_s", 0.0))
    bursts = max(1, int(request.get("bursts", 1)))
    inner: list[int] = []
    for fn, _lib, values in bound:
        started = time.perf_counter()
        calls = 0
        while calls < max(1, warmup) or (time.perf_counter() - started < warmup_s and calls < 100000):
            fn(*values)
            calls += 1
        single = (time.perf_counter() - started) / calls
        inner.append(max(1, min(100000, int(sample_s / bursts / max(single, 1e-9)))))
    samples: list[list[float]] = [[] for _ in bound]
    deadline = time.perf_counter() + max_s
    for r in range(rounds):
        for k in range(len(bound)):
            i = (r + k) % len(bound)
            fn, _lib, values = bound[i]
            count = inner[i]
            fastest = None
            for _ in range(bursts):
                t0 = time.perf_counter_ns()
                for _ in range(count):
                    fn(*values)
                elapsed = time.perf_counter_ns() - t0
                fastest = elapsed if fastest is None else min(fastest, elapsed)
            assert fastest is not None
            samples[i].append(fastest * 1e-9 / count)
        if r >= 2 and time.perf_counter() > deadline:
            break
    del keep
    (workdir / "timings.json").write_text(json.dumps({"samples": samples, "inner": inner}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
