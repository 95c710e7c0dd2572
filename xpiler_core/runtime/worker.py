"""Child process that loads a built library with ctypes and calls one entry on raw buffers.

``python -S -E worker.py REQUEST.json`` (standard library only, no site packages: it starts fast). The
request names the library, the entry, the call mode (``kernel``: the generated
``xpiler_entry(void** args, const unsigned* config)`` wrapper; ``gpu-kernel``: the CUDA glue
``xpiler_gpu_entry(void** args, const unsigned long long* bytes, const unsigned* config)``; ``host``: an ``extern "C"`` function called
with the arguments themselves) and the arguments: buffers as raw files (read into memory, written back
after the call), scalars as ctypes type names with values (16-bit floats arrive as their bit patterns).
Probe buffers (``probe``: a byte count) are anonymous mappings, zero pages until written, so a host entry can
be run on buffers longer than any it copies; where every buffer was goes back in ``result.json`` (to read the
runtime's record of copies and launches against). Faults and deadlocks end this process with a message from the runtime on stderr;
the parent turns that into a report.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import sys
from pathlib import Path
from typing import Any

CTYPES: dict[str, Any] = {
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


def main(argv: list[str]) -> int:
    request_path = Path(argv[1])
    request = json.loads(request_path.read_text())
    workdir = request_path.parent
    lib = ctypes.CDLL(request["library"], mode=ctypes.RTLD_LOCAL)
    buffers: dict[str, tuple[bytearray, Any]] = {}
    values: list[Any] = []
    addresses: dict[str, list[int]] = {}  # every buffer's (address, bytes)
    mappings: list[Any] = []
    for arg in request["args"]:
        if arg["kind"] == "probe":
            mapping = mmap.mmap(-1, max(1, int(arg["bytes"])))
            address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
            mappings.append(mapping)
            addresses[arg["name"]] = [address, int(arg["bytes"])]
            values.append(ctypes.c_void_p(address))
        elif arg["kind"] == "buffer":
            data = bytearray((workdir / arg["file"]).read_bytes())
            # One spare byte keeps from_buffer valid for empty arrays (a pointer is still passed).
            data.extend(b"\0")
            holder = (ctypes.c_char * len(data)).from_buffer(data)
            buffers[arg["name"]] = (data, holder)
            values.append(ctypes.c_void_p(ctypes.addressof(holder)))
            addresses[arg["name"]] = [ctypes.addressof(holder), len(data) - 1]
        else:
            values.append(CTYPES[arg["ctype"]](arg["value"]))
    if os.environ.get("XPILER_RECORD"):
        # where the buffers are, for the runtime's record to be read against; written before the call, so a
        # call that faults still says
        (workdir / "addresses.json").write_text(json.dumps(addresses))
    fn = getattr(lib, request["entry"])
    if request["mode"] == "kernel":
        pointers = (ctypes.c_void_p * max(1, len(values)))()
        for i, v in enumerate(values):
            pointers[i] = v.value if isinstance(v, ctypes.c_void_p) else ctypes.addressof(v)
        config = (ctypes.c_uint * 7)(*request["config"])
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        status = int(fn(pointers, config))
    elif request["mode"] == "gpu-kernel":  # glue that copies each buffer to a CUDA device and back
        pointers = (ctypes.c_void_p * max(1, len(values)))()
        sizes = (ctypes.c_ulonglong * max(1, len(values)))()
        for i, (v, arg) in enumerate(zip(values, request["args"], strict=True)):
            pointers[i] = v.value if isinstance(v, ctypes.c_void_p) else ctypes.addressof(v)
            sizes[i] = len(buffers[arg["name"]][0]) - 1 if arg["kind"] == "buffer" else 0
        config = (ctypes.c_uint * 7)(*request["config"])
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        status = int(fn(pointers, sizes, config))
    else:
        fn.restype = None
        fn.argtypes = [type(v) for v in values]
        fn(*values)
        status = 0
    sys.stdout.flush()
    for name in request["outputs"]:
        data, _ = buffers[name]
        (workdir / f"out_{name}.bin").write_bytes(bytes(data[:-1]))
    (workdir / "result.json").write_text(json.dumps({"status": status}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
