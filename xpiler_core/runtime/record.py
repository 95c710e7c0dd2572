"""The runtime's record of what host code did (``XPILER_RECORD=FILE``), read back as data.

One line per operation, in program order (see ``record_*`` in ``include/xpiler/simt.h``): device allocations,
copies (plain, pitched 2-D, into and out of ``__constant__``/``__device__`` symbols), memsets, and launches with
their arguments (``arg`` lines, closed by the ``launch`` line); with ``XPILER_RECORD_DATA=1`` a ``data`` line
after a copy holds the bytes it read. Addresses are the process's own; callers relate
them to the buffers they passed (the worker reports where each one was).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Alloc:
    address: int
    bytes: int


@dataclass(frozen=True)
class Copy:
    dst: int
    src: int
    bytes: int
    data: builtins.bytes | None = None  # the source bytes (XPILER_RECORD_DATA=1)


@dataclass(frozen=True)
class Copy2D:
    dst: int
    dst_pitch: int
    src: int
    src_pitch: int
    width: int
    height: int
    data: builtins.bytes | None = None  # the rows copied, one after another

    def spans(self) -> tuple[int, int]:
        """Bytes from the first to the last byte copied, at the destination and at the source."""
        if self.height == 0:
            return 0, 0
        return ((self.height - 1) * self.dst_pitch + self.width, (self.height - 1) * self.src_pitch + self.width)


@dataclass(frozen=True)
class SymbolCopy:
    to_symbol: bool  # host → symbol (cudaMemcpyToSymbol), else symbol → host
    symbol: str  # the symbol's name in the library ("?" when the loader does not know it)
    offset: int
    host: int
    bytes: int
    data: builtins.bytes | None = None  # what a copy into the symbol wrote


@dataclass(frozen=True)
class Memset:
    dst: int
    value: int
    bytes: int


@dataclass(frozen=True)
class Arg:
    kind: str  # "ptr" | "int" | "float" | "other" (a struct passed by value: its size)
    value: int | float


@dataclass(frozen=True)
class Launch:
    kernel: str  # as the runtime names it (demangled, template arguments kept)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[Arg, ...] = ()


Op = Alloc | Copy | Copy2D | SymbolCopy | Memset | Launch


@dataclass
class Record:
    ops: list[Op] = field(default_factory=list)

    @property
    def launches(self) -> list[Launch]:
        return [op for op in self.ops if isinstance(op, Launch)]

    @property
    def copies(self) -> list[Copy | Copy2D | SymbolCopy]:
        return [op for op in self.ops if isinstance(op, Copy | Copy2D | SymbolCopy)]

    def touched(self, regions: dict[str, tuple[int, int]]) -> dict[str, tuple[int, set[str]]]:
        """For each named region (address, bytes) a copy touched: (bytes from its start to the furthest byte
        touched, {"in"} when a copy read it, {"out"} when one wrote it)."""
        out: dict[str, tuple[int, set[str]]] = {}

        def touch(address: int, span: int, role: str) -> None:
            for name, (base, size) in regions.items():
                if base <= address < base + size:
                    end, roles = out.get(name, (0, set()))
                    out[name] = (max(end, address - base + span), roles | {role})

        for op in self.copies:
            if isinstance(op, Copy):
                touch(op.src, op.bytes, "in")
                touch(op.dst, op.bytes, "out")
            elif isinstance(op, Copy2D):
                dst_span, src_span = op.spans()
                touch(op.src, src_span, "in")
                touch(op.dst, dst_span, "out")
            else:
                touch(op.host, op.bytes, "in" if op.to_symbol else "out")
        return out


def parse_record(text: str) -> Record:
    """The operations of a record file; a line cut short by a crash (the last one) is dropped."""
    record = Record()
    pending: list[Arg] = []
    for line in text.splitlines():
        parts = line.split(" ")
        try:
            kind = parts[0]
            if kind == "data" and len(parts) == 2 and record.ops:
                last = record.ops[-1]
                if isinstance(last, Copy | Copy2D | SymbolCopy) and last.data is None:
                    record.ops[-1] = replace(last, data=bytes.fromhex(parts[1]))
                continue
            if kind == "arg" and len(parts) == 3:
                value: int | float = float(parts[2]) if parts[1] == "float" else int(parts[2])
                pending.append(Arg(parts[1], value))
                continue
            if kind == "launch" and len(parts) >= 9:
                g, b = (int(p) for p in parts[1:4]), (int(p) for p in parts[4:7])
                gx, gy, gz = g
                bx, by, bz = b
                record.ops.append(Launch(" ".join(parts[8:]), (gx, gy, gz), (bx, by, bz), int(parts[7]),
                                         tuple(pending)))
            elif kind == "alloc" and len(parts) == 3:
                record.ops.append(Alloc(int(parts[1]), int(parts[2])))
            elif kind == "copy" and len(parts) == 4:
                record.ops.append(Copy(int(parts[1]), int(parts[2]), int(parts[3])))
            elif kind == "copy2d" and len(parts) == 7:
                d, dp, src, sp, w, h = (int(p) for p in parts[1:7])
                record.ops.append(Copy2D(d, dp, src, sp, w, h))
            elif kind in ("tosymbol", "fromsymbol") and len(parts) == 5:
                record.ops.append(SymbolCopy(kind == "tosymbol", parts[1], int(parts[2]), int(parts[3]),
                                             int(parts[4])))
            elif kind == "memset" and len(parts) == 4:
                record.ops.append(Memset(int(parts[1]), int(parts[2]), int(parts[3])))
        except ValueError:
            pass  # a partial line
        pending = []  # arguments belong to the launch line that follows them, or to none
    return record
