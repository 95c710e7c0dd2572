"""Host code for repair: run for real once, recorded; the interpreter replays the record and runs kernels only.

A candidate's host entry (error checks, ``fprintf(stderr, …)``, user macros, template launchers, whatever
compiles) is built on the runtime as its tests build it and called on an example's inputs with
``XPILER_RECORD`` set; the runtime writes its allocations, copies (with the bytes they read), memsets and
launches with their arguments (:mod:`xpiler_core.runtime.record`) and skips the kernels themselves, so a buggy
kernel that faults or never ends does not cut the record short. :func:`replay` then moves the example's data the way those operations did
and runs each launched kernel on the repair interpreter, so a hole in kernel code reaches the entry's outputs
exactly as the real host code carries it. Host code is never interpreted: what the replay cannot follow is a
refusal that names the operation (a kernel the interpreter does not see, host memory the entry allocated
itself). Host code that decides its copies from kernel results is replayed as the failing candidate decided
them; every repair is re-verified on the real harness afterwards.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.repair.interp import (
    Buffer,
    LaunchShape,
    Program,
    Ptr,
    Thread,
    Unsupported,
    _zero_of,
    convert,
    make_buffer,
    run_grid,
    type_bytes,
    type_kind,
)
from xpiler_core.runtime.record import Alloc, Copy, Copy2D, Launch, Memset, Record, SymbolCopy, parse_record
from xpiler_core.verify.harness import _program, build_program, run_program
from xpiler_core.verify.spec import KernelSpec


@dataclass
class HostRun:
    """One recorded call of a host entry: what it did, and where each argument buffer was."""

    record: Record
    addresses: dict[str, tuple[int, int]]


def record_host_run(spec: KernelSpec, text: str, dialect: Dialect, entry: str, warp_size: int | None,
                    inputs: Mapping[str, Any], case: Mapping[str, Any]) -> HostRun | str:
    """Call ``entry`` of ``text`` on ``inputs`` on the runtime with the record on; or why it could not run."""
    if dialect not in (Dialect.CUDA, Dialect.HIP):
        return f"{dialect.value} host code has no launches to record"
    program = _program(spec, text, dialect, entry, "host", warp_size, f"candidate{dialect.suffix}")
    with tempfile.TemporaryDirectory(prefix="xpiler-trace-") as tmp:
        work = Path(tmp)
        built = build_program(program, spec, work / "build")
        if not built.build.ok:
            return "the candidate does not build"
        record_path = work / "record.txt"
        result = run_program(built, spec, inputs, dict(case), work / "call",
                             env={"XPILER_RECORD": str(record_path), "XPILER_RECORD_DATA": "1",
                                  "XPILER_RECORD_ONLY": "1", "XPILER_THREADS": "1"})
        if not result.ok or not record_path.exists():
            return f"the candidate's host entry did not run to its end: {result.error}"
        record = parse_record(record_path.read_text(encoding="utf-8", errors="replace"))
    return HostRun(record, dict(result.addresses))


@dataclass
class _Region:
    name: str
    base: int
    size: int
    buffer: Buffer | None = None
    raw: bytearray | None = None  # bytes written before the region had an element type (None: zeros)


_NUMPY_OF = {("float", 4): np.float32, ("double", 8): np.float64, ("half", 2): np.float16, ("int", 1): np.int8,
             ("int", 2): np.int16, ("int", 4): np.int32, ("int", 8): np.int64, ("bool", 1): np.bool_}


def _dtype(kind: str, elem_bytes: int) -> Any:
    dtype = _NUMPY_OF.get((kind, elem_bytes))
    if dtype is None:
        raise Unsupported(f"raw bytes as {elem_bytes}-byte {kind} elements")
    return dtype


def _values(kind: str, elem_bytes: int, data: bytes) -> list[Any]:
    """``data`` read as elements of the interpreter's ``kind``."""
    array = np.frombuffer(data[: len(data) // elem_bytes * elem_bytes], dtype=_dtype(kind, elem_bytes))
    if kind == "bool":
        return [bool(v) for v in array]
    if kind == "int":
        return [int(v) for v in array]
    if kind == "double":
        return [float(v) for v in array]
    return list(array)


# the Python types a buffer of each kind holds when its values are concrete (what a store converts to)
_PLAIN: dict[str, set[type]] = {"float": {np.float32}, "half": {np.float16}, "double": {float}, "int": {int},
                                "bool": {bool}}


class _Memory:
    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.regions: list[_Region] = []
        self.host = Thread(prog, {}, {})

    def region_at(self, address: int) -> _Region | None:
        return next((r for r in self.regions if r.base <= address < r.base + max(r.size, 1)), None)

    def find(self, address: int, what: str) -> tuple[_Region, int]:
        region = self.region_at(address)
        if region is None:
            raise Unsupported(f"{what} memory the host entry allocated itself (not a device buffer or an argument)")
        return region, address - region.base

    def typed(self, region: _Region, kind: str, elem_bytes: int) -> Buffer:
        if region.buffer is None:
            count = region.size // elem_bytes
            data = [_zero_of(kind)] * count if region.raw is None else _values(kind, elem_bytes, bytes(region.raw))
            region.buffer = Buffer(region.name, kind, data, {} if self.prog.instrument else None,
                                   elem_bytes=elem_bytes)
        elif (region.buffer.kind, region.buffer.elem_bytes) != (kind, elem_bytes):
            raise Unsupported(f"buffer {region.name} used with two element types")
        return region.buffer

    def pointer(self, address: int, kind: str, elem_bytes: int, what: str) -> Ptr:
        region, offset = self.find(address, what)
        buffer = self.typed(region, kind, elem_bytes)
        if offset % elem_bytes:
            raise Unsupported(f"a pointer into {region.name} that is not element-aligned")
        return Ptr(buffer, offset // elem_bytes)

    def write_bytes(self, dst: int, data: bytes) -> None:
        """Bytes the record carries (from host memory the entry owns) written at ``dst``."""
        region, offset = self.find(dst, "a copy into")
        if region.buffer is None:
            if region.raw is None:
                region.raw = bytearray(region.size)
            region.raw[offset : offset + len(data)] = data
            return
        buf = region.buffer
        if offset % buf.elem_bytes or len(data) % buf.elem_bytes:
            raise Unsupported("a copy that does not move whole elements")
        values = _values(buf.kind, buf.elem_bytes, data)
        start = offset // buf.elem_bytes
        if self._bulk(buf, start, len(values)):
            buf.data[start : start + len(values)] = values  # already the buffer's kind: what a store converts to
            if buf.writers is not None:
                buf.writers.update(dict.fromkeys(range(start, start + len(values)), self.host.stmt_id))
            return
        for k, value in enumerate(values):
            self.host.store(Ptr(buf, start + k), value)

    def _bulk(self, buf: Buffer, start: int, count: int) -> bool:
        """Elements ``[start, start + count)`` of ``buf`` can be written as one slice: in bounds, on the host's
        unconditional path, with no store log (what an element-by-element store would do)."""
        return buf.events is None and self.host.pc is True and 0 <= start and start + count <= len(buf.data)

    def copy(self, dst: int, src: int, nbytes: int, data: bytes | None = None) -> None:
        if nbytes == 0:
            return
        if data is not None and self.region_at(src) is None:
            self.write_bytes(dst, data)  # from a host table or staging buffer of the entry's own
            return
        d_region, d_off = self.find(dst, "a copy into")
        s_region, s_off = self.find(src, "a copy from")
        if d_region.buffer is None and s_region.buffer is None:
            return  # neither side has a type yet (uninitialized device memory moved): nothing the kernels read
        like = d_region.buffer or s_region.buffer
        assert like is not None
        d_buf = self.typed(d_region, like.kind, like.elem_bytes)
        s_buf = self.typed(s_region, like.kind, like.elem_bytes)
        eb = like.elem_bytes
        if d_off % eb or s_off % eb or nbytes % eb:
            raise Unsupported("a copy that does not move whole elements")
        count, d0, s0 = nbytes // eb, d_off // eb, s_off // eb
        if self._bulk(d_buf, d0, count) and s_buf.events is None and s0 + count <= len(s_buf.data):
            values = s_buf.data[s0 : s0 + count]
            # plain values of the buffer's kind move as a slice; a symbolic one (a kernel's hole) goes through load
            if {type(v) for v in values} <= _PLAIN[like.kind]:
                d_buf.data[d0 : d0 + count] = values
                if d_buf.writers is not None:
                    sources = s_buf.writers or {}
                    d_buf.writers.update({d0 + k: sources.get(s0 + k, self.host.stmt_id) for k in range(count)})
                return
        for k in range(count):
            at_src, at_dst = Ptr(s_buf, s_off // eb + k), Ptr(d_buf, d_off // eb + k)
            self.host.store(at_dst, self.host.load(at_src))
            # copied elements keep the statements that computed them (localization follows the data)
            if d_buf.writers is not None and s_buf.writers is not None and at_src.off in s_buf.writers:
                d_buf.writers[at_dst.off] = s_buf.writers[at_src.off]

    def memset(self, dst: int, byte: int, nbytes: int) -> None:
        self.write_bytes(dst, bytes([byte & 0xFF]) * nbytes)


def replay(prog: Program, run: HostRun, args: Mapping[str, Any]) -> dict[str, Buffer]:
    """The entry's buffers (by argument name) after its recorded operations, with every launched kernel run on
    the interpreter (holes and instrumentation as ``prog`` says)."""
    prog.globals = {}
    prog.hot_loop, prog.hot_iterations = None, 0
    memory = _Memory(prog)
    buffers: dict[str, Buffer] = {}
    for name, value in args.items():
        if isinstance(value, np.ndarray) and name in run.addresses:
            base, size = run.addresses[name]
            buffer = make_buffer(name, value, prog.instrument)
            if name in prog.observe:
                buffer.events = []
            buffers[name] = buffer
            memory.regions.append(_Region(name, base, size, buffer))
    device = 0
    for op in run.record.ops:
        if isinstance(op, Alloc):
            memory.regions.append(_Region(f"device buffer {device}", op.address, op.bytes))
            device += 1
        elif isinstance(op, Copy):
            memory.copy(op.dst, op.src, op.bytes, op.data)
        elif isinstance(op, Copy2D):
            for row in range(op.height):
                rows = op.data[row * op.width : (row + 1) * op.width] if op.data is not None else None
                memory.copy(op.dst + row * op.dst_pitch, op.src + row * op.src_pitch, op.width, rows)
        elif isinstance(op, SymbolCopy):
            _symbol_copy(memory, op)
        elif isinstance(op, Memset):
            memory.memset(op.dst, op.value, op.bytes)
        else:
            _launch(prog, memory, op)
    return buffers


def _symbol_copy(memory: _Memory, op: SymbolCopy) -> None:
    slot = memory.host.global_slot(op.symbol)
    if slot is None:
        raise Unsupported(f"a copy {'into' if op.to_symbol else 'out of'} symbol '{op.symbol}' the interpreter "
                          "does not see")
    target = slot[0]
    if op.to_symbol and op.data is not None and memory.region_at(op.host) is None:
        _symbol_from_bytes(memory, slot, op)  # a table of the host entry's own
        return
    if not isinstance(target, Ptr):
        # a scalar symbol: one element, typed by its declaration
        region, offset = memory.find(op.host, "a symbol copy from")
        if region.buffer is None:
            raise Unsupported(f"a copy into symbol '{op.symbol}' from memory with no element type")
        buf = region.buffer
        if op.to_symbol:
            slot[0] = convert(memory.host.load(Ptr(buf, offset // buf.elem_bytes)), slot[1])
        else:
            memory.host.store(Ptr(buf, offset // buf.elem_bytes), slot[0])
        return
    sym_buf = target.buf
    eb = sym_buf.elem_bytes
    region, offset = memory.find(op.host, "a symbol copy with")
    host_buf = memory.typed(region, sym_buf.kind, eb)
    for k in range(op.bytes // eb):
        at_sym, at_host = Ptr(sym_buf, op.offset // eb + k), Ptr(host_buf, offset // eb + k)
        if op.to_symbol:
            memory.host.store(at_sym, memory.host.load(at_host))
        else:
            memory.host.store(at_host, memory.host.load(at_sym))


def _symbol_from_bytes(memory: _Memory, slot: list[Any], op: SymbolCopy) -> None:
    assert op.data is not None
    target = slot[0]
    if not isinstance(target, Ptr):
        values = _values(slot[1], op.bytes, op.data) if slot[1] != "auto" else []
        if len(values) != 1:
            raise Unsupported(f"a copy of {op.bytes} bytes into scalar symbol '{op.symbol}'")
        slot[0] = convert(values[0], slot[1])
        return
    buf = target.buf
    eb = buf.elem_bytes
    for k, value in enumerate(_values(buf.kind, eb, op.data)):
        memory.host.store(Ptr(buf, op.offset // eb + k), value)


def _launch(prog: Program, memory: _Memory, op: Launch) -> None:
    fn = prog.functions.get(op.kernel)
    if fn is None or fn.template is not None:
        raise Unsupported(f"launch of kernel '{op.kernel}' (a template instance or one the interpreter does not "
                          "see)")
    if len(fn.params) != len(op.args):
        raise Unsupported(f"launch of '{op.kernel}' with {len(op.args)} recorded arguments for "
                          f"{len(fn.params)} parameters")
    params: list[tuple[str, Any, str]] = []
    for p, arg in zip(fn.params, op.args, strict=True):
        if not isinstance(p, A.Param) or p.name is None:
            raise Unsupported("unnamed parameter")
        if p.type.pointers:
            if arg.kind != "ptr":
                raise Unsupported(f"parameter '{p.name}' of '{op.kernel}' recorded as {arg.kind}")
            if arg.value == 0:
                params.append((p.name, 0, "auto"))
                continue
            element = A.replace(p.type, pointers=p.type.pointers[:-1], quals=())
            if element.pointers:
                raise Unsupported(f"parameter '{p.name}' of '{op.kernel}' is a pointer to pointers")
            ptr = memory.pointer(int(arg.value), type_kind(element), type_bytes(element),
                                 f"kernel '{op.kernel}' given")
            params.append((p.name, ptr, "auto"))
        else:
            if arg.kind not in ("int", "float"):
                raise Unsupported(f"parameter '{p.name}' of '{op.kernel}' passed by value as a {arg.kind}")
            kind = type_kind(p.type)
            params.append((p.name, convert(arg.value, kind), kind))
    run_grid(prog, fn, params, LaunchShape(op.grid, op.block, op.shared_bytes))
