"""Child process that loads a built library with ctypes and calls one entry on numpy arrays.

``python -m xpiler_core.runtime.worker REQUEST.json``. The request names the library, the entry, the
call mode (``kernel``: the generated ``xpiler_entry(void** args, const unsigned* config)`` wrapper;
``host``: an ``extern "C"`` function called with the arguments themselves), and the arguments (buffers as
``.npy`` files, scalars by value with a dtype). Buffers are written back as ``.npy`` files into the
request's directory. Faults and deadlocks end this process with a message from the runtime on stderr; the
parent turns that into a report. This module imports nothing from the rest of the package, so it starts fast.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

CTYPES_SCALARS: dict[str, Any] = {
    "int8": ctypes.c_int8,
    "uint8": ctypes.c_uint8,
    "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16,
    "int32": ctypes.c_int32,
    "uint32": ctypes.c_uint32,
    "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "bool": ctypes.c_bool,
}


def _scalar(dtype: str, value: float | int) -> Any:
    if dtype == "float16":
        return ctypes.c_uint16(int(np.array(value, dtype=np.float16).view(np.uint16)))
    if dtype == "bfloat16":
        bits = int(np.array(value, dtype=np.float32).view(np.uint32))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return ctypes.c_uint16(bits)
    return CTYPES_SCALARS[dtype](value)


def main(argv: list[str]) -> int:
    request_path = Path(argv[1])
    request = json.loads(request_path.read_text())
    workdir = request_path.parent
    lib = ctypes.CDLL(request["library"], mode=ctypes.RTLD_LOCAL)
    arrays: dict[str, np.ndarray] = {}
    values: list[Any] = []
    for arg in request["args"]:
        if arg["kind"] == "buffer":
            arr = np.ascontiguousarray(np.load(workdir / arg["file"]))
            arrays[arg["name"]] = arr
            values.append(ctypes.c_void_p(arr.ctypes.data))
        else:
            values.append(_scalar(arg["dtype"], arg["value"]))
    fn = getattr(lib, request["entry"])
    if request["mode"] == "kernel":
        pointers = (ctypes.c_void_p * max(1, len(values)))()
        for i, v in enumerate(values):
            pointers[i] = (
                v.value
                if isinstance(v, ctypes.c_void_p)
                else ctypes.cast(ctypes.pointer(v), ctypes.c_void_p).value
            )
        config = (ctypes.c_uint * 7)(*request["config"])
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        status = int(fn(pointers, config))
    else:
        fn.restype = None
        fn.argtypes = [type(v) for v in values]
        fn(*values)
        status = 0
    sys.stdout.flush()
    for name in request["outputs"]:
        np.save(workdir / f"out_{name}.npy", arrays[name])
    (workdir / "result.json").write_text(json.dumps({"status": status}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
