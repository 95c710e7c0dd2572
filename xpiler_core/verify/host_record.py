"""Run a host entry for real on the runtime and read back what it did.

The test builder needs each buffer parameter's length and direction. Reading them out of the host code by
pattern fails on ordinary spellings (a copy inside a helper template, ``static_cast<size_t>(n) * sizeof *d``,
a size computed in a local); running the code does not. The source's host entry is built against the runtime
as the tests build it and called at a few small probe sizes with *probe buffers* (zero pages, far longer than
any copy) for its pointers, with ``XPILER_RECORD`` set: the runtime writes one line per copy (addresses and
byte spans) and per launch, and ``XPILER_RECORD_ONLY`` skips the kernels themselves (their results do not
decide what the host code copies; the tests run them later). A copy that reads a probe buffer makes that
parameter an input, one that writes it an output, and the furthest byte reached is its length at those sizes.
Lengths at three probe size sets are fitted to a formula over the size parameters (``rows * cols``,
``n - k + 1``, a constant), confirmed on every set; the formula is the spec's shape. Whatever the record does
not settle (a buffer no copy touched, a length no formula fits) is left to the caller, which says so.
"""

from __future__ import annotations

import itertools
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.project import BuildSettings
from xpiler_core.runtime.build import build_library
from xpiler_core.runtime.record import Alloc, Copy, Launch, Record, parse_record
from xpiler_core.runtime.sandbox import CallArg, call_library
from xpiler_core.verify.entry_shim import add_entry_shim

# Size parameters take these values in the probe runs (one set per run; parameter i takes the i-th value):
# small, pairwise distinct and prime, so products of different parameters are told apart and no size divides
# another; the gaps between them differ from set to set (in either order), so a difference of two sizes is no
# constant. The last set uses the tests' own sizes, for entries that refuse sizes this small.
PROBE_SETS: tuple[tuple[int, ...], ...] = (
    (37, 23, 29, 41, 19, 31, 43, 17),
    (67, 47, 59, 53, 71, 61, 73, 79),
    (113, 83, 101, 97, 89, 107, 109, 127),
)
LARGE_PROBE_SETS: tuple[tuple[int, ...], ...] = (
    (257, 263, 269, 271, 277, 281, 283, 293),
    (1000, 1009, 1013, 1019, 1021, 1031, 1033, 1039),
    (4099, 4111, 4127, 4129, 4133, 4139, 4153, 4157),
)
# Sizes of mixed magnitude (large and small alternating) for the run that confirms the fitted formulas.
CONFIRM_SET: tuple[int, ...] = (97, 89, 7, 83, 5, 3, 79, 2)
PROBE_BUFFER_BYTES = 1 << 30  # virtual: untouched pages cost nothing
PROBE_TIMEOUT_S = 20.0
MAX_FACTORS = 3  # size parameters one buffer length may multiply


@dataclass(frozen=True)
class EntryParam:
    """A parameter as the probe passes it: a buffer (element bytes), an integer size, a float or a handle."""

    name: str
    kind: str  # "buffer", "size", "float32", "float64", "handle"
    element_bytes: int = 1


@dataclass
class RecordedShapes:
    """Per buffer parameter: its length in elements as a formula over the size parameters, and its roles."""

    shapes: dict[str, str]
    roles: dict[str, set[str]]
    launches: list[Launch]  # those of the first probe run
    sizes_tried: list[dict[str, int]]
    # per buffer parameter, the kernel arguments (kernel, position) backed by it in the first probe run
    bindings: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    # the launches of every probe run (and of the run confirming the formulas), with its sizes
    launch_sets: list[tuple[dict[str, int], list[Launch]]] = field(default_factory=list)
    # buffers the entry copies to or from the device as host memory and also passes to a kernel itself (a
    # GPU cannot dereference them): (buffer, kernel, argument position)
    host_memory_launched: list[tuple[str, str, int]] = field(default_factory=list)


class EntryRecorder:
    """The entry built once on the runtime (in a temporary folder it owns), recorded at any sizes asked."""

    def __init__(self, text: str, dialect: Dialect, display_name: str, entry: str, params: Sequence[EntryParam],
                 *, build: BuildSettings | None = None, warp_size: int | None = None) -> None:
        self.params = list(params)
        shimmed = add_entry_shim(text, dialect, entry, display_name)
        self.symbol = entry
        if shimmed is not None:
            text, self.symbol = shimmed
        self._tmp = tempfile.TemporaryDirectory(prefix="xpiler-record-")
        self.work = Path(self._tmp.name)
        built = build_library(text, dialect, self.work / "build",
                              warp_size=warp_size or (64 if dialect is Dialect.HIP else 32),
                              display_name=display_name, build=build)
        self.library = built.library if built.ok else None
        self.calls = 0

    def __enter__(self) -> EntryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()

    def record(self, case: dict[str, int]) -> tuple[Record, dict[str, tuple[int, int]]] | None:
        """What one call at the sizes ``case`` allocated, copied and launched (kernels not run), with the probe
        buffers' (address, bytes); None when the call failed."""
        if self.library is None:
            return None
        self.calls += 1
        buffers = sum(p.kind == "buffer" for p in self.params)
        return _call(self.library, self.symbol, self.params, case, self.work / f"call{self.calls}", buffers)


def record_entry(
    text: str,
    dialect: Dialect,
    display_name: str,
    entry: str,
    params: Sequence[EntryParam],
    *,
    build: BuildSettings | None = None,
    warp_size: int | None = None,
) -> RecordedShapes | str:
    """Build ``entry`` on the runtime and record it at the probe sizes; or why it could not be recorded."""
    if dialect not in (Dialect.CUDA, Dialect.HIP):
        return "only CUDA/HIP host code copies through the runtime"
    buffers = [p for p in params if p.kind == "buffer"]
    if not buffers:
        return "the entry takes no buffer"
    sizes = [p.name for p in params if p.kind == "size"]
    with EntryRecorder(text, dialect, display_name, entry, params, build=build, warp_size=warp_size) as recorder:
        if recorder.library is None:
            return "the source does not build on the runtime"
        per_set: list[tuple[dict[str, int], dict[str, tuple[int, set[str]]]]] = []
        launches: list[Launch] = []
        bindings: dict[str, list[tuple[str, int]]] = {}
        host_launched: list[tuple[str, str, int]] = []
        launch_sets: list[tuple[dict[str, int], list[Launch]]] = []
        for family in (PROBE_SETS, LARGE_PROBE_SETS):
            per_set = []
            launch_sets = []
            for values in family if sizes else family[:1]:
                record = None
                # the values as given, then largest first and smallest first: sizes often have an order
                # (an input longer than its filter) the source checks or silently needs
                for ordered in _orders(values[: len(sizes)]):
                    case = dict(zip(sizes, ordered, strict=True))
                    record = recorder.record(case)
                    if record is not None and record[0].copies:
                        break
                if record is None or not record[0].copies:
                    break  # refused these sizes (or failed): try larger ones
                if not per_set:
                    launches = record[0].launches
                    bindings = bind_buffers(*record)
                    host_launched = host_memory_launched(*record)
                per_set.append((case, record[0].touched(record[1])))
                launch_sets.append((case, record[0].launches))
            if per_set and len(per_set) == (len(family) if sizes else 1):
                break
        else:
            return "the entry copied nothing at the probe sizes (or failed at every one)"
        # one more call at sizes of mixed magnitude confirms the formulas: sizes that divide (a stride) all
        # larger than those they divide fit ``(h - k) / s + 1`` as the constant 1 in every probe set above
        confirm = dict(zip(sizes, CONFIRM_SET[: len(sizes)], strict=False)) if len(sizes) > 1 else None
        confirmed = recorder.record(confirm) if confirm is not None else None
    checks = list(per_set)
    if confirm is not None and confirmed is not None and confirmed[0].copies:
        checks.append((confirm, confirmed[0].touched(confirmed[1])))
        launch_sets.append((confirm, confirmed[0].launches))
    shapes: dict[str, str] = {}
    roles: dict[str, set[str]] = {}
    for p in buffers:
        # a buffer some run did not touch, or whose lengths no formula fits, is left to the caller
        seen = [reached.get(p.name) for _, reached in per_set]
        if any(s is None for s in seen):
            continue
        lengths = [-(-s[0] // p.element_bytes) for s in seen if s is not None]
        formula = fit_length([case for case, _ in per_set], lengths)
        if formula is None or not _holds(formula, p, checks[len(per_set):]):
            continue
        shapes[p.name] = formula
        roles[p.name] = set().union(*(s[1] for s in seen if s is not None))
    return RecordedShapes(shapes, roles, launches, [case for case, _ in per_set], bindings, launch_sets,
                          host_launched)


def _holds(formula: str, param: EntryParam,
           checks: Sequence[tuple[dict[str, int], dict[str, tuple[int, set[str]]]]]) -> bool:
    """``formula`` gives the length ``param``'s copies reached in every extra run of ``checks``."""
    from xpiler_core.verify.expr import ExprError, evaluate_int

    for case, reached in checks:
        touched = reached.get(param.name)
        try:
            if touched is not None and evaluate_int(formula, case) != -(-touched[0] // param.element_bytes):
                return False
        except (ExprError, ZeroDivisionError):
            return False
    return True


def bind_buffers(record: Record, regions: dict[str, tuple[int, int]]) -> dict[str, list[tuple[str, int]]]:
    """Per buffer parameter of the entry: the kernel arguments (kernel, argument position) that point into the
    device allocation its copies filled or drained (or into the buffer itself)."""
    allocs = [op for op in record.ops if isinstance(op, Alloc)]

    def region(address: int) -> str | None:
        return _region_at(regions, address)

    def alloc(address: int) -> Alloc | None:
        return _allocation_at(allocs, address)

    backing: dict[int, set[str]] = {}
    for op in record.copies:
        if isinstance(op, Copy):
            for host, device in ((op.src, op.dst), (op.dst, op.src)):
                name, target = region(host), alloc(device)
                if name is not None and target is not None:
                    backing.setdefault(target.address, set()).add(name)
    bound: dict[str, list[tuple[str, int]]] = {}
    for launch in record.launches:
        for position, arg in enumerate(launch.args):
            if arg.kind != "ptr":
                continue
            target = alloc(int(arg.value))
            names = backing.get(target.address, set()) if target is not None else set()
            if (direct := region(int(arg.value))) is not None:
                names = names | {direct}
            for name in names:
                bound.setdefault(name, []).append((launch.kernel, position))
    return bound


def _region_at(regions: dict[str, tuple[int, int]], address: int) -> str | None:
    """The entry buffer (name → base, size) that holds ``address``."""
    return next((name for name, (base, size) in regions.items() if base <= address < base + size), None)


def _allocation_at(allocs: list[Alloc], address: int) -> Alloc | None:
    """The latest device allocation that holds ``address``."""
    return next((a for a in reversed(allocs) if a.address <= address < a.address + max(1, a.bytes)), None)


def host_memory_launched(record: Record, regions: dict[str, tuple[int, int]]) -> list[tuple[str, str, int]]:
    """Kernel arguments that point into an entry buffer the entry also copies to or from a device allocation:
    the caller's host memory (``transpose<<<g, b>>>(input, output)`` after ``cudaMemcpy(d_input, input, ...)``),
    which a GPU cannot dereference — the runtime, sharing one address space, would run it."""
    allocs = [op for op in record.ops if isinstance(op, Alloc)]

    def region(address: int) -> str | None:
        return _region_at(regions, address)

    def device(address: int) -> bool:
        return _allocation_at(allocs, address) is not None

    host_side: set[str] = set()
    for op in record.copies:
        if isinstance(op, Copy):
            for host, other in ((op.src, op.dst), (op.dst, op.src)):
                if (name := region(host)) is not None and device(other):
                    host_side.add(name)
    found: list[tuple[str, str, int]] = []
    for launch in record.launches:
        for position, arg in enumerate(launch.args):
            if arg.kind == "ptr" and (name := region(int(arg.value))) is not None and name in host_side \
                    and not device(int(arg.value)):
                found.append((name, launch.kernel, position))
    return found


def _orders(values: Sequence[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    for ordered in (tuple(values), tuple(sorted(values, reverse=True)), tuple(sorted(values))):
        if ordered not in out:
            out.append(ordered)
    return out


def _call(library: Path, symbol: str, params: Sequence[EntryParam], case: dict[str, int], workdir: Path,
          buffers: int) -> tuple[Record, dict[str, tuple[int, int]]] | None:
    """The record of one call at ``case`` with the probe buffers' (address, bytes), or None if it failed."""
    per_buffer = min(PROBE_BUFFER_BYTES, (8 << 30) // max(1, buffers))
    args: list[CallArg] = []
    for p in params:
        if p.kind == "buffer":
            args.append(CallArg(p.name, "uint8", probe_bytes=per_buffer))
        elif p.kind == "size":
            args.append(CallArg(p.name, "int32", value=case[p.name]))
        elif p.kind in ("float32", "float64"):
            args.append(CallArg(p.name, p.kind, value=2.0))
        else:
            args.append(CallArg(p.name, "int64", value=0))
    record_path = workdir / "record.txt"
    workdir.mkdir(parents=True, exist_ok=True)
    result = call_library(library, symbol, "host", args, [], workdir, timeout_s=PROBE_TIMEOUT_S, threads=1,
                          kernel_hint=symbol,
                          env={"XPILER_RECORD": str(record_path), "XPILER_RECORD_ONLY": "1"})
    if not result.ok or not record_path.exists():
        return None
    return parse_record(record_path.read_text(encoding="utf-8", errors="replace")), result.addresses


def fit_length(cases: Sequence[dict[str, int]], lengths: Sequence[int]) -> str | None:
    """The simplest formula over the cases' size names that gives ``lengths`` in every case, or None.

    Tried in order: a constant; ``c * a * b ...`` (a product of up to three sizes times a whole constant);
    ``a * b ... + c``; ``a - b + c`` (a sliding window's output length)."""
    if not cases or len(cases) != len(lengths):
        return None
    if len(set(lengths)) == 1:
        return str(lengths[0])
    names = list(cases[0])  # the parameters' order
    for r in range(1, min(MAX_FACTORS, len(names)) + 1):
        for subset in itertools.combinations(names, r):
            products = [math.prod(case[n] for n in subset) for case in cases]
            product = " * ".join(subset)
            if all(p > 0 and n % p == 0 for p, n in zip(products, lengths, strict=True)):
                factors = {n // p for p, n in zip(products, lengths, strict=True)}
                if len(factors) == 1:
                    c = factors.pop()
                    return product if c == 1 else f"{c} * {product}"
            offsets = {n - p for p, n in zip(products, lengths, strict=True)}
            if len(offsets) == 1 and len(cases) > 1:
                c = offsets.pop()
                return f"{product} + {c}" if c > 0 else f"{product} - {-c}"
    for a, b in itertools.permutations(names, 2):
        offsets = {n - (case[a] - case[b]) for case, n in zip(cases, lengths, strict=True)}
        if len(offsets) == 1 and len(cases) > 1:
            c = offsets.pop()
            return f"{a} - {b} + {c}" if c >= 0 else f"{a} - {b} - {-c}"
    return None
