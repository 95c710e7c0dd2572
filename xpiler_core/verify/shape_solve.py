"""The sizes a host entry is written for, when its kernels have their shape built in and take no size.

Generated kernels hard-code their shape (``if (idx < 2048) B[idx * 8192 + j] = ...``); the host entry around
them still takes sizes, allocates and copies by them, and is right only where the two agree. Guessed sizes read
past the kernels' buffers or leave outputs unwritten, so nothing can be tested at them. This finds sizes where
they agree, in two steps:

1. *Candidates.* The elements each kernel touches in each buffer (:mod:`index_bounds`) are compared with the
   lengths the host gives the buffers behind them (formulas over the sizes, from the recorded probe runs).
   What a kernel touches is bounded over any launch where its guards allow, else at the launch the sizes give
   (its shape fitted to the probe runs: ``ceil_div(m, 16)``), else at each launch shape the code's constants
   suggest. Sizes are drawn from the integer constants of the kernels and the file (and 1); up to two may
   instead be solved from a length that leaves only them open. Sizes at which every bounded buffer is exactly
   as long as what the kernels touch come first; then long enough and no longer than the sizes' steps allow;
   the smallest test first.
2. *Confirmation.* The entry runs for real on the runtime at each candidate, kernels skipped
   (``XPILER_RECORD_ONLY``): its allocations and launches at those sizes bound the kernels again with the launch
   it really makes, every access must fall inside the allocation it points into, and every element copied back
   to the caller must be one the kernels may write. The first candidate that fits exactly wins.

Only a run of the source at the chosen sizes then decides whether they are right: the tests run it first and
drop a case where it fails, as for any sizes.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from xpiler_core import ast as A
from xpiler_core.runtime.record import Alloc, Copy, Launch, Record
from xpiler_core.verify.expr import ExprError, IntFunction, compile_int
from xpiler_core.verify.host_record import EntryRecorder, RecordedShapes, fit_length
from xpiler_core.verify.index_bounds import (
    MAX_BLOCK_THREADS,
    BufferBounds,
    buffer_bounds,
    guard_limits,
    module_constants,
)

MAX_VALUE = 1 << 24  # the largest size tried
SEARCH_NODES = 200_000  # partial assignments visited per search (a phase at one assumed launch)
MAX_CANDIDATES = 64
CONFIRM_RUNS = 24
ALTERNATIVES = 3  # sizes handed to the tests, tried in turn
MAX_ASSUMED = 32  # launch shapes assumed for a kernel whose shape no formula fits
CONFIRM_SECONDS = 20.0
SEARCH_SECONDS = 1.5  # for the candidates of each phase


@dataclass
class SolvedSizes:
    sizes: dict[str, int]
    lengths: dict[str, int]  # per buffer parameter of the entry: elements its copies reached at those sizes
    roles: dict[str, set[str]]
    exact: bool  # every bounded buffer exactly as long as what the kernels touch
    runs: int  # confirmation runs made


Touched = tuple[int | None, int | None]  # bytes up to the highest element written, and read (None: not)


@dataclass(frozen=True)
class _Need:
    """One host buffer behind one kernel argument: its length in bytes must match what the kernel touches."""

    formula: str
    names: frozenset[str]  # the sizes it depends on (with those of its kernel's launch when ``static`` is None)
    unit_bytes: int  # bytes per unit of the formula
    output: bool  # copied back to the caller: the kernels must write all of it
    kernel: str
    param: str
    elem: int  # bytes of the kernel parameter's element
    static: Touched | None  # what the kernel touches at any launch, when that is bounded
    length_of: IntFunction = field(compare=False, hash=False)  # ``formula`` compiled

    def length(self, sizes: dict[str, int]) -> int | None:
        """The buffer's length in bytes at ``sizes``."""
        try:
            return self.length_of(sizes) * self.unit_bytes
        except (ExprError, ZeroDivisionError, OverflowError, TypeError, ValueError):
            return None

    def holds(self, sizes: dict[str, int], exact: bool, touched: Touched) -> bool | None:
        length = self.length(sizes)
        if length is None:
            return None
        write, read = touched
        need = max(write or 0, read or 0)
        if length <= 0 or length < need:
            return False
        if self.output and write is not None and length != write:
            return False
        if length == need:
            return True
        if exact:
            return False
        # long enough, and as short as the sizes allow: one less of any of them and it would not be
        return any((self.length({**sizes, n: sizes[n] - 1}) or 0) < need for n in self.names
                   if n in sizes and sizes[n] > 1)


def _length(need: _Need, sizes: dict[str, int]) -> int:
    got = need.length(sizes)
    return MAX_VALUE if got is None else got


def _non_negative(parts: list[IntFunction], sizes: dict[str, int]) -> bool:
    try:
        return all(part(sizes) >= 0 for part in parts)
    except (ExprError, ZeroDivisionError, OverflowError, TypeError, ValueError):
        return False


def _touched(bounds: BufferBounds | None, elem: int) -> Touched | None:
    if bounds is None or not bounds.bounded or (bounds.read is None and bounds.write is None) \
            or any(r is not None and r[0] < 0 for r in (bounds.read, bounds.write)):
        return None
    return ((bounds.write[1] + 1) * elem if bounds.write is not None else None,
            (bounds.read[1] + 1) * elem if bounds.read is not None else None)


class _Launches:
    """Each kernel's launch shape as formulas over the sizes, fitted to the probe runs (``(m + 15) / 16``,
    ``batch``, ``256``), and what the kernel touches at the shape some sizes give."""

    def __init__(self, launch_sets: list[tuple[dict[str, int], list[Launch]]], kernels: dict[str, A.Function],
                 constants: dict[str, int], divisors: set[int]) -> None:
        self.kernels, self.constants = kernels, constants
        self.formulas: dict[str, list[str]] = {}
        self.seen: dict[str, list[tuple[int, ...]]] = {}  # per kernel, its (grid, block) in each probe run
        self._compiled: dict[str, list[IntFunction]] = {}
        self._bounds: dict[tuple[str, tuple[int, ...]], dict[str, BufferBounds]] = {}
        cases = [case for case, _ in launch_sets]
        for name in kernels:
            shapes: list[tuple[int, ...]] = []
            for _, launches in launch_sets:
                first = next((x for x in launches if kernel_name(x.kernel) == name), None)
                if first is None:
                    break
                shapes.append((*first.grid, *first.block))
            if len(shapes) != len(cases) or len(cases) < 3:
                continue
            self.seen[name] = shapes
            fitted = [_fit_dimension(cases, [shape[d] for shape in shapes], divisors) for d in range(6)]
            if all(f is not None for f in fitted):
                self.formulas[name] = [f for f in fitted if f is not None]
                self._compiled[name] = [compile_int(f) for f in self.formulas[name]]

    def grid_fixed_in_probes(self, kernel: str) -> bool:
        """The kernel's grid was the same in every probe run (its fitted grid formulas are constants)."""
        return kernel in self.formulas and all(len({shape[d] for shape in self.seen[kernel]}) == 1 for d in range(3))

    def names(self, kernel: str) -> frozenset[str]:
        return frozenset().union(*(_formula_names(f) for f in self.formulas.get(kernel, [])))

    def touched(self, need: _Need, sizes: dict[str, int]) -> Touched | None:
        if need.static is not None:
            return need.static
        formulas = self._compiled.get(need.kernel)
        if formulas is None:
            return None
        try:
            shape = tuple(f(sizes) for f in formulas)
        except (ExprError, ZeroDivisionError, OverflowError, TypeError, ValueError):
            return None
        if any(v <= 0 for v in shape):
            return None
        return self.at(need.kernel, shape, need.param, need.elem)

    def at(self, kernel: str, shape: tuple[int, ...], param: str, elem: int) -> Touched | None:
        """What ``kernel`` touches in ``param`` when launched with ``shape`` (grid, block)."""
        key = (kernel, shape)
        if key not in self._bounds:
            self._bounds[key] = buffer_bounds(self.kernels[kernel], self.constants,
                                              (shape[0], shape[1], shape[2]), (shape[3], shape[4], shape[5]))
        return _touched(self._bounds[key].get(param), elem)

    def assumed(self, kernel: str, values: list[int]) -> list[tuple[int, ...]]:
        """Launch shapes to assume for a kernel whose shape no formula fits (``ceil_div`` of a local the host
        computes): those of the probe runs with the dimensions that changed between them set to each of the
        code's constants (at most two such dimensions; the first ``MAX_ASSUMED`` shapes)."""
        shapes = self.seen.get(kernel, [])
        if not shapes or kernel in self.formulas:
            return []
        varying = [d for d in range(6) if len({shape[d] for shape in shapes}) > 1]
        if not varying or len(varying) > 2:
            return []
        limits = (1 << 31) - 1, 65535, 65535, MAX_BLOCK_THREADS, MAX_BLOCK_THREADS, 64
        # the block counts the kernel's own guards stop at come first
        guarded = guard_limits(self.kernels[kernel], self.constants)
        choices = [list(dict.fromkeys([*sorted(guarded.get(d, set())), *(v for v in values if v <= limits[d])]))
                   for d in varying]
        out = []
        for picked in itertools.islice(itertools.product(*choices), MAX_ASSUMED):
            shape = list(shapes[0])
            for d, v in zip(varying, picked, strict=True):
                shape[d] = v
            out.append(tuple(shape))
        return out


def _fit_dimension(cases: list[dict[str, int]], values: list[int], divisors: set[int]) -> str | None:
    """A formula for one launch dimension: as a buffer length is fitted, else ``ceil_div(a [* b], c)`` with
    ``c`` a power of two or one of the code's own constants (``divisors``): a few probe runs leave a range of
    divisors open, and any other one would fit by chance."""
    formula = fit_length(cases, values)
    if formula is not None:
        return formula
    names = list(cases[0])
    for r in (1, 2):
        for subset in itertools.combinations(names, r):
            low, high = 1, MAX_VALUE
            for case, g in zip(cases, values, strict=True):
                product = math.prod(case[n] for n in subset)
                if g <= 0:
                    break
                low = max(low, -(-product // g))  # ceil(p / c) = g  ⟺  p / g <= c < p / (g - 1)
                if g > 1:
                    high = min(high, -(-product // (g - 1)) - 1)
            else:
                fitting = [c for c in divisors | {1 << k for k in range(25)} if low <= c <= high]
                if fitting:
                    return f"ceil_div({' * '.join(subset)}, {min(fitting)})"
    return None


def kernel_name(runtime_name: str) -> str:
    """``void ns::kern<4>(float*)`` → ``kern``: a launch record's kernel as the source names it."""
    head = runtime_name.split("(", 1)[0].strip().split(" ")[-1]
    return head.split("<", 1)[0].split("::")[-1]


def _values(module: A.Module, kernels: list[A.Function], constants: dict[str, int]) -> list[int]:
    """Sizes to try: the integer literals of the kernels and the file's constants, most frequent first, and 1."""
    counts: dict[int, int] = {}
    for fn in kernels:
        for node in A.walk(fn.body):
            if isinstance(node, A.Literal) and (v := node.int_value) is not None and 1 <= v <= MAX_VALUE:
                counts[v] = counts.get(v, 0) + 1
    for v in constants.values():
        if 1 <= v <= MAX_VALUE:
            counts[v] = counts.get(v, 0) + 1
    counts.setdefault(1, 0)
    return sorted(counts, key=lambda v: (-counts[v], -v))


def _launch_numbers(launches: _Launches) -> list[int]:
    """The integer constants of the fitted launch formulas (block sizes, divisors), largest first."""
    found: set[int] = set()
    for formulas in launches.formulas.values():
        for formula in formulas:
            found.update(int(v) for v in re.findall(r"\b\d+\b", formula) if 1 < int(v) <= MAX_VALUE)
    return sorted(found, reverse=True)


def _formula_names(formula: str) -> frozenset[str]:
    try:
        tree = ast.parse(formula, mode="eval")
    except SyntaxError:
        return frozenset()
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)) - {"max", "min", "ceil_div"}


def _derive(need: _Need, name: str, sizes: dict[str, int], exact: bool) -> int | None:
    """The value of ``name`` (all other sizes of ``need`` set) at which ``need`` holds, when the buffer's length
    moves one way with it: where it first reaches what the kernel touches (an output: where it equals it)."""
    if need.static is None:
        return None

    def length(v: int) -> int | None:
        return need.length({**sizes, name: v})

    write, read = need.static
    target = write if need.output and write is not None else max(write or 0, read or 0)
    low, high = length(1), length(MAX_VALUE)
    if low is None or high is None or low == high:
        return None
    grows = high > low
    if (high if grows else low) < target:
        return None
    lo, hi = 1, MAX_VALUE
    while lo < hi:  # the first value at which the length has reached the target (grows), or fallen to it
        mid = (lo + hi) // 2
        got = length(mid)
        if got is None:
            return None
        if (got >= target) if grows else (got <= target):
            hi = mid
        else:
            lo = mid + 1
    if not grows and (length(lo) or 0) < target:
        lo -= 1  # falling: the last value still long enough
    return lo if lo >= 1 and need.holds({**sizes, name: lo}, exact, need.static) else None


MAX_DERIVED = 2  # sizes solved from a need instead of drawn from the constants, per candidate


def _search(names: list[str], values: list[int], needs: list[_Need], exact: bool, derive: bool,
            launches: _Launches, deadline: float) -> list[dict[str, int]]:
    """Assignments of ``names`` from ``values`` meeting every need, until ``deadline`` (``time.monotonic``).
    ``derive``: some names (at least one, at most ``MAX_DERIVED``) are instead solved from a need that leaves
    only them open."""
    position = {n: i for i, n in enumerate(names)}
    by_depth: dict[int, list[_Need]] = {}
    for need in needs:
        by_depth.setdefault(max((position[n] for n in need.names if n in position), default=0), []).append(need)
    found: list[dict[str, int]] = []
    visited = 0
    derived: dict[tuple[int, str, tuple[int, ...]], int | None] = {}

    def meets(need: _Need, sizes: dict[str, int]) -> bool:
        touched = launches.touched(need, sizes)
        return touched is not None and need.holds(sizes, exact, touched) is True

    def derive_once(need: _Need, name: str, sizes: dict[str, int]) -> int | None:
        key = (id(need), name, tuple(sizes[n] for n in sorted(need.names - {name})))
        if key not in derived:
            derived[key] = _derive(need, name, sizes, exact)
        return derived[key]

    def settle(sizes: dict[str, int], ready: list[_Need]) -> dict[str, int] | None:
        """``sizes`` with deferred names solved from ready needs that leave only them open, if every ready need
        whose names are all set then holds; else None."""
        progress = True
        while progress:
            progress = False
            for need in ready:
                open_ = [n for n in need.names if n not in sizes]
                if len(open_) == 1 and open_[0] in deferred:
                    value = derive_once(need, open_[0], sizes)
                    if value is None:
                        return None
                    sizes = {**sizes, open_[0]: value}
                    progress = True
        if all(meets(n, sizes) for n in ready if n.names <= sizes.keys()):
            return sizes
        return None

    deferred: list[str] = []  # names whose value is to be solved from a need, along the current path

    def visit(depth: int, sizes: dict[str, int], pending: list[_Need]) -> Iterator[dict[str, int]]:
        nonlocal visited
        visited += 1
        if visited > SEARCH_NODES or time.monotonic() > deadline:
            return
        if depth == len(names):
            if (not derive or deferred) and sizes.keys() >= set(names) and all(meets(n, sizes) for n in needs):
                yield sizes
            return
        name = names[depth]
        ready = [*pending, *by_depth.get(depth, [])]
        choices: list[int | None] = [*values, None] if derive and len(deferred) < MAX_DERIVED else list(values)
        for value in choices:
            if value is None:
                deferred.append(name)
            settled = settle(sizes if value is None else {**sizes, name: value}, ready)
            if settled is not None:
                # needs still waiting on a deferred name are checked once it is solved
                waiting = [n for n in ready if not n.names <= settled.keys()]
                yield from visit(depth + 1, settled, waiting)
            if value is None:
                deferred.pop()

    for solution in visit(0, {}, []):
        if solution not in found:
            found.append(solution)
        if len(found) >= MAX_CANDIDATES:
            break
    return found


def _confirm(record: Record, regions: dict[str, tuple[int, int]], kernels: dict[str, A.Function],
             constants: dict[str, int], element_bytes: Callable[[A.Type], int | None]) -> tuple[bool, bool]:
    """(every access inside its allocation and every element copied back writable, every argument's
    allocation exactly as long as what its kernel touches) for the launches of ``record``."""
    allocs = [op for op in record.ops if isinstance(op, Alloc)]

    def alloc(address: int) -> Alloc | None:
        return next((a for a in reversed(allocs) if a.address <= address < a.address + max(1, a.bytes)), None)

    written: dict[int, int] = {}  # allocation → bytes up to the highest element written; -1: not bounded
    exact = True
    for launch in record.launches:
        fn = kernels.get(kernel_name(launch.kernel))
        if fn is None:
            return False, False
        bounds = buffer_bounds(fn, constants, launch.grid, launch.block)
        params = [p for p in fn.params if isinstance(p, A.Param)]
        for param, arg in zip(params, launch.args, strict=False):
            if arg.kind != "ptr" or not param.name or param.name not in bounds:
                continue
            target = alloc(int(arg.value))
            elem = element_bytes(param.type.pointee())
            got: BufferBounds = bounds[param.name]
            if target is None or elem is None or not got.bounded:
                exact = False
                if target is not None:
                    written[target.address] = -1
                continue
            offset = int(arg.value) - target.address
            touched = [r for r in (got.read, got.write) if r is not None]
            if any(lo * elem + offset < 0 or (hi + 1) * elem + offset > target.bytes for lo, hi in touched):
                return False, False
            top = max((hi + 1) * elem + offset for _, hi in touched) if touched else 0
            exact = exact and top == target.bytes
            if got.write is not None and written.get(target.address, 0) >= 0:
                written[target.address] = max(written.get(target.address, 0), (got.write[1] + 1) * elem + offset)
    for op in record.copies:
        if isinstance(op, Copy) and (source := alloc(op.src)) is not None \
                and any(base <= op.dst < base + size for base, size in regions.values()):
            reach = written.get(source.address)
            if reach is None or (reach >= 0 and op.src - source.address + op.bytes > reach):
                return False, False  # copies back what no kernel writes
    return True, exact


# (every bounded buffer exactly as long as what the kernels touch, some sizes solved from a length), in turn
_PHASES = ((True, False), (True, True), (False, False), (False, True))


def solve_sizes(module: A.Module, launched: set[str], sizes: list[str], formulas: dict[str, tuple[str, int]],
                outputs: set[str], buffer_bytes: dict[str, int], recorded: RecordedShapes, recorder: Callable[[], EntryRecorder],
                element_bytes: Callable[[A.Type], int | None]) -> list[SolvedSizes]:
    """Sizes for ``sizes`` at which the kernels ``launched`` touch exactly the buffers the entry gives them,
    confirmed by recording the entry at them, best first (at most ``ALTERNATIVES``: the bounds cannot always
    tell that an output is written everywhere, so the tests try them in turn); empty when there are none.

    ``formulas``: per buffer parameter of the entry, its length as a formula over the sizes and the bytes one
    unit of it stands for; ``outputs``: the buffer parameters the entry copies results into; ``buffer_bytes``: per buffer parameter, the bytes of its elements; ``recorded``: the probe runs (which kernel arguments each buffer backs);
    ``recorder``: builds the entry to record it again; ``element_bytes``: the size of a pointee type."""
    kernels = {fn.name: fn for fn in module.functions() if fn.name in launched}
    if not kernels or not sizes:
        return []
    constants = module_constants(module)
    static = {name: buffer_bounds(fn, constants) for name, fn in kernels.items()}
    values = _values(module, list(kernels.values()), constants)
    # a launch's divisor is the host's constant (``(size + 320 - 1) / 320``), not always the kernels'
    launches = _Launches(recorded.launch_sets, kernels, constants,
                         set(values) | set(_values(module, list(module.functions()), constants)))
    # a kernel that indexes by its thread alone is written for one block of its launch's size: the numbers of
    # the fitted launch shapes are sizes to try too
    values += [v for v in _launch_numbers(launches) if v not in values]

    compiled: dict[str, IntFunction] = {}
    for buffer, (formula, _) in formulas.items():
        try:
            compiled[buffer] = compile_int(formula)
        except ExprError:
            continue

    parts: list[IntFunction] = []  # every sub-expression of every length formula
    for formula, _ in formulas.values():
        try:
            tree = ast.parse(formula, mode="eval")
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp):
                try:
                    parts.append(compile_int(ast.unparse(node)))
                except ExprError:
                    continue

    def needs_at(assumed: dict[str, tuple[int, ...]]) -> list[_Need]:
        """What each host buffer must match, with the kernels in ``assumed`` launched with that shape."""
        needs: list[_Need] = []
        for buffer, uses in recorded.bindings.items():
            if buffer not in compiled:
                continue
            formula, unit = formulas[buffer]
            for kernel, position in uses:
                fn = kernels.get(kernel_name(kernel))
                params = [p for p in fn.params if isinstance(p, A.Param)] if fn is not None else []
                if fn is None or position >= len(params) or not params[position].name:
                    continue
                param = params[position]
                elem = element_bytes(param.type.pointee())
                if elem is None or not param.name or param.name not in static[fn.name]:
                    continue
                bounds = static[fn.name][param.name]
                # what it touches at any launch; one bounded only through a block's largest size is not that
                touched = _touched(bounds, elem) if bounds.launch_free else None
                if touched is None and fn.name in assumed and bounds.known:
                    touched = launches.at(fn.name, assumed[fn.name], param.name, elem)
                    if touched is None:
                        continue
                elif touched is None and (not bounds.known or fn.name not in launches.formulas):
                    continue  # nothing to compare: the kernel's use of it is not bounded at any launch
                names = _formula_names(formula) | (launches.names(fn.name) if touched is None else frozenset())
                needs.append(_Need(formula, names, unit, buffer in outputs, fn.name, param.name, elem, touched,
                                   compiled[buffer]))
        return needs

    # kernels whose launch shape no formula fits and whose buffers are bounded only with a launch: each shape
    # the code's constants suggest is assumed in turn (the confirming run checks the launch really made)
    unfitted = [name for name in kernels if launches.assumed(name, values)
                and any((not b.bounded or not b.launch_free) and b.known for b in static[name].values())]
    assumptions: list[dict[str, tuple[int, ...]]] = [{}]
    if len(unfitted) == 1:
        assumptions += [{unfitted[0]: shape} for shape in launches.assumed(unfitted[0], values)]
    cases = [(assumed, needs) for assumed in assumptions if (needs := needs_at(assumed))]
    # a grid that did not change between the probe runs may still grow with the sizes past the probes'
    # (``(size1 + 1023) / 1024`` is 1 at every probe): when nothing fits with it taken as fixed, the needs
    # through it are left to the confirming runs, which see the launch really made
    unsure = [(assumed, kept) for assumed, needs in cases
              if len(kept := [n for n in needs if n.static is not None or n.kernel in assumed
                              or not launches.grid_fixed_in_probes(n.kernel)]) not in (0, len(needs))]
    if not cases:
        return []
    started = time.monotonic()
    runs = 0
    with recorder() as entry:
        for exact, derive, phase_cases in (*((e, d, cases) for e, d in _PHASES), *((e, d, unsure) for e, d in _PHASES)):
            deadline = time.monotonic() + SEARCH_SECONDS
            found: list[tuple[int, dict[str, int]]] = []
            for _, needs in phase_cases:
                weight = {n: sum(n in need.names for need in needs) for n in sizes}
                order = sorted(sizes, key=lambda n: -weight[n])
                for candidate in _search(order, values, needs, exact, derive, launches, deadline):
                    # the smallest first: where several sizes fit (a batch the kernels do not guard), the
                    # test is cheaper
                    found.append((sum(_length(n, candidate) for n in needs), candidate))
            # sizes at which a quantity the host computes from them is negative (an output height
            # ``(h - k) / s + 1`` below zero, squared into a positive length) are not sizes it is written for
            found = [item for item in found if _non_negative(parts, item[1])]
            found.sort(key=lambda item: item[0])
            fitting: list[tuple[bool, dict[str, int], Record, dict[str, tuple[int, int]]]] = []
            tried: list[dict[str, int]] = []
            for _, sizes_tried in found:
                if runs >= CONFIRM_RUNS or time.monotonic() - started > CONFIRM_SECONDS \
                        or sum(tight for tight, *_ in fitting) >= ALTERNATIVES:
                    break
                if sizes_tried in tried:
                    continue
                tried.append(sizes_tried)
                runs += 1
                got_record = entry.record(sizes_tried)
                if got_record is None or not got_record[0].launches:
                    continue
                fits, tight = _confirm(*got_record, kernels, constants, element_bytes)
                if fits:
                    fitting.append((tight, sizes_tried, *got_record))
            if fitting:
                fitting.sort(key=lambda item: not item[0])  # those that fit exactly first, in the order found
                solved = []
                for tight, chosen, record, regions in fitting[:ALTERNATIVES]:
                    reached = record.touched(regions)
                    lengths = {name: -(-span // buffer_bytes.get(name, 1)) for name, (span, _) in reached.items()}
                    roles = {name: set(role) for name, (_, role) in reached.items()}
                    solved.append(SolvedSizes({n: chosen[n] for n in sizes}, lengths, roles, tight, runs))
                return solved
    return []


def describe(solved: list[SolvedSizes]) -> str:
    first = solved[0]
    values = ", ".join(f"{n}={v}" for n, v in first.sizes.items())
    how = "exactly as long as" if first.exact else "long enough for"
    more = f"; {len(solved) - 1} alternative{'s' if len(solved) > 2 else ''} if the source fails there" \
        if len(solved) > 1 else ""
    return (f"sizes {values} solved from the kernels' built-in shape (every buffer {how} what the kernels touch, "
            f"confirmed by recording the entry at them: {first.runs} run{'s' if first.runs != 1 else ''}{more})")
