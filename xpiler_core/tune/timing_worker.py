"""Child process that times one or more built libraries on the same inputs, interleaved round by round.

``python -S -E timing_worker.py REQUEST.json`` (standard library only: it starts fast). The request names
the libraries, the entry, the arguments (buffers as raw files, scalars as ctypes type names with values),
the number of warm-up calls, rounds and the target time of one sample. Each library gets its own copy of
the buffers. Per round every library is timed once (a sample = ``inner`` back-to-back calls, timed with
``perf_counter_ns``); interleaving means background load drifts hit every library alike. Writes
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


def _bind(library: str, entry: str, args: list[dict[str, Any]], workdir: Path) -> tuple[Any, list[Any], list[Any]]:
    lib = ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)
    values: list[Any] = []
    keep: list[Any] = []
    for arg in args:
        if arg["kind"] == "buffer":
            data = bytearray((workdir / arg["file"]).read_bytes())
            data.extend(b"\0")  # a valid pointer even for empty arrays
            holder = (ctypes.c_char * len(data)).from_buffer(data)
            keep.append((data, holder))
            values.append(ctypes.c_void_p(ctypes.addressof(holder)))
        else:
            values.append(CTYPES[arg["ctype"]](arg["value"]))
    fn = getattr(lib, entry)
    fn.restype = None
    fn.argtypes = [type(v) for v in values]
    keep.append(lib)
    return fn, values, keep


def main(argv: list[str]) -> int:
    request_path = Path(argv[1])
    request = json.loads(request_path.read_text())
    workdir = request_path.parent
    bound = [_bind(lib, request["entry"], request["args"], workdir) for lib in request["libraries"]]
    warmup, rounds, sample_s = int(request["warmup"]), int(request["rounds"]), float(request["sample_s"])
    max_s = float(request["max_s"])
    inner: list[int] = []
    for fn, values, _keep in bound:
        started = time.perf_counter()
        for _ in range(max(1, warmup)):
            fn(*values)
        single = (time.perf_counter() - started) / max(1, warmup)
        inner.append(max(1, min(100000, int(sample_s / max(single, 1e-9)))))
    samples: list[list[float]] = [[] for _ in bound]
    deadline = time.perf_counter() + max_s
    for r in range(rounds):
        for i, (fn, values, _keep) in enumerate(bound):
            count = inner[i]
            t0 = time.perf_counter_ns()
            for _ in range(count):
                fn(*values)
            samples[i].append((time.perf_counter_ns() - t0) * 1e-9 / count)
        if r >= 2 and time.perf_counter() > deadline:
            break
    (workdir / "timings.json").write_text(json.dumps({"samples": samples, "inner": inner}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
