"""The range of elements a kernel reads and writes in each of its buffer parameters, by interval arithmetic.

Generated kernels (TVM and the like) have their shape built in: ``if (idx < 2048) B[idx * 8192 + j] = ...``.
Their host entry still takes sizes, and is right only at the sizes whose buffers the kernels fill exactly. The
tests find those sizes (:mod:`shape_solve`) by comparing what the host allocates with what this module bounds:
each index expression is evaluated over intervals — the thread and block indices within the launch (or any
launch when it is not given), counted loops over their ranges, guards (``if (i < d0 && j < d1)``, an early
``return``) narrowing what they compare — to the lowest and highest element it can touch.

A buffer whose pointer is used any other way (passed to a call, cast, stored) or indexed through a name the
kernel assigns is *unknown*: nothing is claimed about it. The bounds may be wider than what runs (a guard this
does not read) but never narrower; the sizes chosen with them are confirmed by running the source.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from xpiler_core import ast as A
from xpiler_core.verify.expr import ExprError, evaluate_int

INF = 1 << 62
MAX_BLOCK_THREADS = 1024  # no launch has more threads in one block dimension
Interval = tuple[int, int]  # lowest and highest value, inclusive; beyond ±INF is unbounded
ANY: Interval = (-INF, INF)


@dataclass
class BufferBounds:
    """Elements a kernel touches in one pointer parameter (relative to the pointer), or ``known=False``."""

    read: Interval | None = None  # None: never read
    write: Interval | None = None  # None: never written
    known: bool = True
    # the same at every launch (bounded by the code alone); False: bounded only through the largest a block
    # can be, so what one launch touches may be less (``T[threadIdx.x]``)
    launch_free: bool = True

    @property
    def bounded(self) -> bool:
        return self.known and all(r is None or (r[0] > -INF and r[1] < INF) for r in (self.read, self.write))


def _clamp(v: int) -> int:
    return max(-INF, min(INF, v))


def _join(a: Interval | None, b: Interval) -> Interval:
    return b if a is None else (min(a[0], b[0]), max(a[1], b[1]))


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _binary(op: str, x: Interval, y: Interval) -> Interval:
    if op == "+":
        return _clamp(x[0] + y[0]), _clamp(x[1] + y[1])
    if op == "-":
        return _clamp(x[0] - y[1]), _clamp(x[1] - y[0])
    if op == "*":
        corners = [x[0] * y[0], x[0] * y[1], x[1] * y[0], x[1] * y[1]]
        return _clamp(min(corners)), _clamp(max(corners))
    if op == "/" and y[0] > 0:
        corners = [_trunc_div(a, b) for a in x for b in y]
        return min(corners), max(corners)
    if x[0] == x[1] and y[0] == y[1] and abs(x[0]) < INF and abs(y[0]) < INF and op in _EXACT:
        known = _EXACT[op](x[0], y[0])  # two known values: C's result (a point of a launch bounded by points)
        return (known, known) if abs(known) < INF else ANY
    if op in _COMPARE:
        if _COMPARE[op](x, y):
            return 1, 1
        if _COMPARE[_NOT[op]](x, y):
            return 0, 0
        return 0, 1
    if op == "%" and y[0] > 0:
        if x[0] >= 0:
            return 0, min(x[1], y[1] - 1)
        return -(y[1] - 1), y[1] - 1
    if op == ">>" and y[0] >= 0 and y[0] == y[1] and y[0] < 63:
        return x[0] >> y[0], x[1] >> y[0]
    if op == "<<" and y[0] >= 0 and y[0] == y[1] and y[0] < 62:
        return _clamp(x[0] << y[0]), _clamp(x[1] << y[0])
    if op == "&" and (x[0] >= 0 or y[0] >= 0):
        highs = [h for lo, h in (x, y) if lo >= 0]
        return 0, min(highs)
    if op in ("|", "^") and x[0] >= 0 and y[0] >= 0 and max(x[1], y[1]) < INF:
        return 0, (1 << max(x[1], y[1]).bit_length()) - 1
    return ANY


def _c_rem(a: int, b: int) -> int:
    return a - _trunc_div(a, b) * b


# C's integer operators on two known values (division and remainder truncate; a zero divisor is not known)
_EXACT = {
    "/": lambda a, b: _trunc_div(a, b) if b else INF, "%": lambda a, b: _c_rem(a, b) if b else INF,
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    ">>": lambda a, b: a >> b if 0 <= b < 63 else INF, "<<": lambda a, b: _clamp(a << b) if 0 <= b < 62 else INF,
    "&&": lambda a, b: int(bool(a) and bool(b)), "||": lambda a, b: int(bool(a) or bool(b)),
}
# comparisons that hold for every pair of values of two intervals
_COMPARE = {
    "<": lambda x, y: x[1] < y[0], "<=": lambda x, y: x[1] <= y[0], ">": lambda x, y: x[0] > y[1],
    ">=": lambda x, y: x[0] >= y[1], "==": lambda x, y: x[0] == x[1] == y[0] == y[1],
    "!=": lambda x, y: x[1] < y[0] or y[1] < x[0],
}
_NOT = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _narrow(interval: Interval, op: str, limit: Interval) -> Interval:
    """``interval`` of a value known to satisfy ``value op limit``."""
    lo, hi = interval
    if op == "<":
        hi = min(hi, limit[1] - 1)
    elif op == "<=":
        hi = min(hi, limit[1])
    elif op == ">":
        lo = max(lo, limit[0] + 1)
    elif op == ">=":
        lo = max(lo, limit[0])
    return lo, hi


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


_OBJECT_MACRO = re.compile(r"#\s*define\s+([A-Za-z_]\w*)\s+([^\n]+)$")


def module_constants(module: A.Module) -> dict[str, int]:
    """Integer object-like macros (``#define M_outer 32``) and file-scope integer constants of ``module``."""
    found: dict[str, int] = {}
    for item in module.items:
        if isinstance(item, A.Opaque) and (macro := _OBJECT_MACRO.match(item.text.strip())):
            try:
                found[macro.group(1)] = evaluate_int(macro.group(2).replace("/", "//"), found)
            except (ExprError, ValueError, TypeError, ZeroDivisionError, OverflowError):
                continue
        elif isinstance(item, A.DeclStmt):
            for d in item.decls:
                if d.init is not None and not d.dims and not d.type.pointers and "const" in d.type.quals + d.storage \
                        and (value := A.const_int(d.init, found)) is not None:
                    found[d.name] = value
    return found


# BANG's whole-buffer copies ``__memcpy(dst, src, bytes, DIRECTION)``: the GDRAM side is the kernel's buffer
BANG_COPIES = frozenset({"__memcpy", "__memcpy_async"})


@dataclass
class _KernelFacts:
    """What bounding a kernel needs of its code alone, the same for every part of a launch (a large launch is
    bounded in up to REFINED_PARTS parts, and the shape solver bounds it at several sizes)."""

    fn: A.Function  # held so that the id keying it stays this function's
    assigned: frozenset[str]
    straight: frozenset[str]
    uses: dict[str, int]  # occurrences of each name
    views: dict[int, A.LoopView | None] = field(default_factory=dict)
    # buffer_bounds at a launch already bounded (the shape solver confirms sizes that often share one)
    bounds: dict[tuple[object, ...], dict[str, BufferBounds]] = field(default_factory=dict)

    def loop_view(self, loop: A.For) -> A.LoopView | None:
        key = id(loop)
        if key not in self.views:
            self.views[key] = loop.canonical()
        return self.views[key]


_FACTS: OrderedDict[int, _KernelFacts] = OrderedDict()
_FACTS_LOCK = threading.Lock()


def _kernel_facts(fn: A.Function) -> _KernelFacts:
    with _FACTS_LOCK:
        known = _FACTS.get(id(fn))
        if known is not None and known.fn is fn:
            _FACTS.move_to_end(id(fn))
            return known
    assigned: set[str] = set()
    uses: dict[str, int] = {}
    for node in A.walk(fn.body):
        if isinstance(node, A.Name):
            uses[node.id] = uses.get(node.id, 0) + 1
        if isinstance(node, A.Assign) and isinstance(node.target, A.Name):
            assigned.add(node.target.id)
        elif isinstance(node, A.Unary) and node.op in ("++", "--", "&") and isinstance(node.operand, A.Name):
            assigned.add(node.operand.id)
        elif isinstance(node, A.Opaque):  # code kept as text (a labeled statement, goto) may assign any name
            assigned.update(re.findall(r"[A-Za-z_]\w*", node.text))
    facts = _KernelFacts(fn, frozenset(assigned), frozenset(_straight_line_names(fn)), uses)
    with _FACTS_LOCK:
        _FACTS[id(fn)] = facts
        while len(_FACTS) > 32:
            _FACTS.popitem(last=False)
    return facts


class _Bounder:
    def __init__(self, fn: A.Function, constants: dict[str, int],
                 grid: tuple[int, int, int] | None, block: tuple[int, int, int] | None,
                 max_threads: int = MAX_BLOCK_THREADS, names: dict[str, Interval] | None = None) -> None:
        self.grid, self.block = grid, block
        # ranges of names the launch fixes that are not CUDA built-ins (BANG's taskId, clusterId, coreId, ...)
        self.names = names or {}
        self.element = {p.name: p.type.base for p in fn.params if isinstance(p, A.Param) and p.name}
        self.max_threads = max_threads  # of a block dimension, when no launch is given
        self.constants = constants
        # sub-ranges of the x indices this analysis covers (a launch is bounded in parts: see buffer_bounds)
        self.block_x: Interval | None = None
        self.thread_x: Interval | None = None
        # a pointer to pointers or an array parameter is indexed in units this does not follow: not claimed
        self.buffers = {p.name: BufferBounds(known=len(p.type.pointers) == 1 and not p.dims) for p in fn.params
                        if isinstance(p, A.Param) and p.name and (p.type.pointers or p.dims)}
        facts = _kernel_facts(fn)
        self.facts = facts
        # names assigned after their declaration: their declared value says nothing later
        self.assigned = facts.assigned
        self.straight = facts.straight
        self.accounted: dict[str, int] = dict.fromkeys(self.buffers, 0)
        self.aliases: dict[str, tuple[str, Interval]] = {}
        # locals that hold a multiple of a constant (``row = blockIdx.y * 16``): a guard ``row < 32`` leaves 0
        # and 16, not 0..31
        self.steps: dict[str, int] = {}
        # tensor-core fragments declared in the kernel: (rows, cols) of the tile each loads or stores, and its
        # layout in memory (None: given at the store, as for an accumulator)
        self.fragments: dict[str, tuple[int, int, str | None]] = {}
        # conditions on the launch's indices that some threads of this part pass and others fail (a finer part
        # decides them: see buffer_bounds)
        self.undecided = 0

    # -------------------------------------------------------------------------------------- expressions
    def value(self, e: A.Expr, env: dict[str, Interval], guards: dict[A.Expr, Interval]) -> Interval:
        got = self._value(e, env, guards)
        narrowed = guards.get(e)
        return got if narrowed is None else (max(got[0], narrowed[0]), min(got[1], narrowed[1]))

    def _value(self, e: A.Expr, env: dict[str, Interval], guards: dict[A.Expr, Interval]) -> Interval:
        if isinstance(e, A.Literal):
            v = e.int_value
            return (v, v) if v is not None else ANY
        if isinstance(e, A.Name):
            if e.id in env:
                return env[e.id]
            if e.id in self.names:
                return self.names[e.id]
            if e.id in self.constants:
                return self.constants[e.id], self.constants[e.id]
            return ANY
        if (ref := A.builtin_ref(e)) is not None:
            axis = "xyz".index(ref[1])
            if axis == 0 and ref[0] == "threadIdx" and self.thread_x is not None:
                return self.thread_x
            if axis == 0 and ref[0] == "blockIdx" and self.block_x is not None:
                return self.block_x
            if ref[0] == "threadIdx":
                return 0, (self.block[axis] if self.block else self.max_threads) - 1
            if ref[0] == "blockDim":
                return (self.block[axis],) * 2 if self.block else (1, self.max_threads)
            if ref[0] == "blockIdx":
                return 0, (self.grid[axis] - 1 if self.grid else INF)
            return (self.grid[axis],) * 2 if self.grid else (1, INF)
        if isinstance(e, A.Cast) and not e.type.pointers:
            return self.value(e.operand, env, guards)
        if isinstance(e, A.SizeOf) and isinstance(e.arg, A.Type | A.Name):
            # ``sizeof(half)``: a type name the grammar does not know reads as an expression's name
            size = A.SCALAR_BYTES.get(e.arg.id) if isinstance(e.arg, A.Name) else \
                8 if e.arg.pointers else A.SCALAR_BYTES.get(e.arg.base)
            return (size, size) if size is not None else ANY
        if isinstance(e, A.Call) and e.callee in ("static_cast<int>", "static_cast<unsigned>", "int", "size_t") \
                and len(e.args) == 1:
            return self.value(e.args[0], env, guards)
        if isinstance(e, A.Call) and e.callee in ("min", "max", "std::min", "std::max", "__min", "__max") \
                and len(e.args) == 2:
            x, y = (self.value(a, env, guards) for a in e.args)
            pick = min if "min" in (e.callee or "") else max
            return pick(x[0], y[0]), pick(x[1], y[1])
        if isinstance(e, A.Unary) and not e.postfix and e.op in ("-", "+"):
            x = self.value(e.operand, env, guards)
            return x if e.op == "+" else (-x[1], -x[0])
        if isinstance(e, A.Binary):
            return _binary(e.op, self.value(e.left, env, guards), self.value(e.right, env, guards))
        if isinstance(e, A.Ternary):
            taken = [self.value(branch, *ctx) for branch, ctx in self._branches(e, env, guards) if ctx is not None]
            if not taken:
                return ANY
            return min(v[0] for v in taken), max(v[1] for v in taken)
        return ANY

    # -------------------------------------------------------------------------------------- accesses
    def _pointer(self, e: A.Expr, env: dict[str, Interval],
                 guards: dict[A.Expr, Interval]) -> tuple[str, Interval] | None:
        """(buffer parameter, element offset) of a pointer expression: ``P``, an alias, ``P + e``, ``&P[e]``."""
        if isinstance(e, A.Name):
            if e.id in self.buffers:
                self.accounted[e.id] += 1
                return e.id, (0, 0)
            return self.aliases.get(e.id)
        if isinstance(e, A.Binary) and e.op in ("+", "-"):
            base = self._pointer(e.left, env, guards)
            if base is not None:
                off = self.value(e.right, env, guards)
                if e.op == "-":
                    off = (-off[1], -off[0])
                return base[0], _binary("+", base[1], off)
        if isinstance(e, A.Unary) and e.op == "&" and isinstance(e.operand, A.Index):
            return self._element(e.operand, env, guards)
        if isinstance(e, A.Cast) and len(e.type.pointers) == 1 and isinstance(e.operand, A.Name) \
                and self.element.get(e.operand.id) == e.type.base:
            return self._pointer(e.operand, env, guards)  # ``(float *)P`` of a ``float *P``: the same elements
        return None

    def _element(self, e: A.Index, env: dict[str, Interval],
                 guards: dict[A.Expr, Interval]) -> tuple[str, Interval] | None:
        base = self._pointer(e.base, env, guards)
        if base is None:
            return None
        return base[0], _binary("+", base[1], self.value(e.index, env, guards))

    def touch(self, e: A.Expr, env: dict[str, Interval], guards: dict[A.Expr, Interval],
              write: bool = False, read: bool = True) -> None:
        """Record the accesses of expression ``e`` (``write``: ``e`` is an assignment target)."""
        if isinstance(e, A.Index) or (isinstance(e, A.Unary) and e.op == "*"):
            where = self._element(e, env, guards) if isinstance(e, A.Index) else self._pointer(e.operand, env, guards)
            if where is not None:
                bounds = self.buffers[where[0]]
                if read:
                    bounds.read = _join(bounds.read, where[1])
                if write:
                    bounds.write = _join(bounds.write, where[1])
            inner = e.index if isinstance(e, A.Index) else None
            self.touch(e.base if isinstance(e, A.Index) else e.operand, env, guards)
            if inner is not None:
                self.touch(inner, env, guards)
            return
        if isinstance(e, A.Ternary):
            self.touch(e.cond, env, guards)
            for branch, ctx in self._branches(e, env, guards):
                if ctx is None:
                    self.dead(branch)  # no thread of this part takes it
                else:
                    self.touch(branch, *ctx)
            return
        if isinstance(e, A.Assign):
            self.touch(e.target, env, guards, write=True, read=e.op != "=")
            self.touch(e.value, env, guards)
            return
        if isinstance(e, A.Unary) and e.op in ("++", "--"):
            self.touch(e.operand, env, guards, write=True)
            return
        if isinstance(e, A.Call) and (e.callee or "").rsplit("::", 1)[-1] in ("load_matrix_sync", "store_matrix_sync") \
                and len(e.args) >= 3:
            self._tile(e, env, guards)
            return
        if isinstance(e, A.Call) and e.callee in BANG_COPIES and len(e.args) in (4, 7) \
                and isinstance(e.args[3], A.Name):
            self._bang_copy(e, env, guards)
            return
        if isinstance(e, A.Call) and (e.callee or "").startswith("atomic") and e.args:
            where = self._pointer(e.args[0], env, guards)
            if where is not None:
                bounds = self.buffers[where[0]]
                bounds.read = _join(bounds.read, where[1])
                bounds.write = _join(bounds.write, where[1])
            for arg in e.args[1:]:
                self.touch(arg, env, guards)
            return
        for child in A.children(e):
            if isinstance(child, A.Expr):
                self.touch(child, env, guards)

    def _branches(self, e: A.Ternary, env: dict[str, Interval], guards: dict[A.Expr, Interval]
                  ) -> list[tuple[A.Expr, tuple[dict[str, Interval], dict[A.Expr, Interval]] | None]]:
        """The branches of ``c ? a : b``, each with the environments its condition narrows (None: no thread of
        this part takes it, the condition being known)."""
        cond = self.value(e.cond, env, guards)
        # nothing assigned between the condition and its branch unless the expression assigns itself
        at_once = not any(isinstance(n, A.Assign) or (isinstance(n, A.Unary) and n.op in ("++", "--"))
                          for n in A.walk(e))
        then = None if cond == (0, 0) else self.guard(e.cond, env, guards, at_once=at_once)
        other = None if cond[0] > 0 or cond[1] < 0 else self.guard(e.cond, env, guards, negate=True,
                                                                   at_once=at_once)
        self._note_undecided(e.cond, then, other)
        return [(e.then, then), (e.else_, other)]

    def _note_undecided(self, cond: A.Expr, then: object, other: object) -> None:
        """Count ``cond`` as undecided in this part when both of its outcomes are live and it reads no memory
        (a condition on data stays undecided however finely the launch is split)."""
        if then is not None and other is not None and not any(isinstance(n, A.Index | A.Call) for n in A.walk(cond)):
            self.undecided += 1

    def _bang_copy(self, call: A.Call, env: dict[str, Interval], guards: dict[A.Expr, Interval]) -> None:
        """``__memcpy(dst, src, bytes, FROM2TO[, dst_stride, src_stride, segnum])``: the GDRAM side (``src`` of
        ``GDRAM2NRAM``, ``dst`` of ``NRAM2GDRAM``, both of ``GDRAM2GDRAM``) reads or writes ``bytes`` of its buffer
        from its offset, or ``segnum + 1`` such segments, its side's stride apart."""
        dst, src, size, direction = call.args[:4]
        assert isinstance(direction, A.Name)
        source_space, _, target_space = direction.id.partition("2")
        size_bytes = self.value(size, env, guards)
        for arg in call.args[4:]:
            self.touch(arg, env, guards)
        for pointer, gdram, write, stride in ((dst, target_space == "GDRAM", True, 4), (src, source_space == "GDRAM", False, 5)):
            nbytes = size_bytes
            if len(call.args) == 7:  # the last segment starts segnum strides after the first
                last = _binary("*", self.value(call.args[6], env, guards), self.value(call.args[stride], env, guards))
                nbytes = _binary("+", size_bytes, last)
            where = self._pointer(pointer, env, guards) if gdram else None
            if where is None:
                self.touch(pointer, env, guards)
                continue
            element = A.SCALAR_BYTES.get(self.element.get(where[0], ""))
            bounds = self.buffers[where[0]]
            if element is None or nbytes[0] < 0 or nbytes[1] >= INF:
                bounds.known = False
                continue
            span = (where[1][0], _clamp(where[1][1] + max(0, -(-nbytes[1] // element) - 1)))
            if write:
                bounds.write = _join(bounds.write, span)
            else:
                bounds.read = _join(bounds.read, span)
        self.touch(size, env, guards)

    def _updated(self, e: A.Expr, old: Interval, env: dict[str, Interval], guards: dict[A.Expr, Interval]) -> Interval:
        """The value of a straight-line name after ``e`` (``t = v``, ``t /= v``, ``++t``) assigns it."""
        if isinstance(e, A.Unary):
            return _binary("+" if e.op == "++" else "-", old, (1, 1))
        assert isinstance(e, A.Assign)
        value = self.value(e.value, env, guards)
        return value if e.op == "=" else _binary(e.op[:-1], old, value)

    def _step(self, e: A.Expr) -> int | None:
        """The constant every value of integer expression ``e`` is a multiple of (``x * 16``, ``x << 4``)."""
        while isinstance(e, A.Cast) and not e.type.pointers:
            e = e.operand
        if isinstance(e, A.Name):
            return self.steps.get(e.id)
        if not isinstance(e, A.Binary):
            return None
        if e.op == "*":
            for factor in (e.left, e.right):
                c = A.const_int(factor, self.constants)
                if c is not None and c > 1:
                    return c
        if e.op == "<<" and (c := A.const_int(e.right, self.constants)) is not None and 0 < c < 31:
            return 1 << c
        return None

    def _tile(self, call: A.Call, env: dict[str, Interval], guards: dict[A.Expr, Interval]) -> None:
        """``load_matrix_sync(frag, p, ldm[, layout])`` reads, ``store_matrix_sync(p, frag, ldm, layout)`` writes
        a rows × cols tile at ``p`` with leading dimension ``ldm``: row-major elements ``p[r * ldm + c]``,
        column-major ``p[c * ldm + r]``."""
        store = (call.callee or "").endswith("store_matrix_sync")
        frag_arg, pointer = (call.args[1], call.args[0]) if store else (call.args[0], call.args[1])
        for arg in call.args[2:]:
            self.touch(arg, env, guards)
        where = self._pointer(pointer, env, guards)
        if where is None:
            self.touch(pointer, env, guards)
            return
        fragment = self.fragments.get(frag_arg.id) if isinstance(frag_arg, A.Name) else None
        layout = fragment[2] if fragment is not None else None
        if layout is None and len(call.args) >= 4 and isinstance(call.args[3], A.Name):
            layout = "col_major" if call.args[3].id.endswith("col_major") else "row_major"
        ldm = self.value(call.args[2], env, guards)
        if fragment is None or layout is None or ldm[0] < 1:
            self.buffers[where[0]].known = False  # a tile this does not size
            return
        rows, cols = fragment[:2] if layout == "row_major" else fragment[1::-1]
        extent = _binary("+", _binary("*", (rows - 1, rows - 1), (0, ldm[1])), (0, cols - 1))
        span = _binary("+", where[1], (0, extent[1]))
        bounds = self.buffers[where[0]]
        if store:
            bounds.write = _join(bounds.write, span)
        else:
            bounds.read = _join(bounds.read, span)

    def _fragment(self, name: str, type_text: str) -> None:
        """A ``wmma::fragment<role, M, N, K, T[, layout]>`` declaration: the tile it loads or stores."""
        got = _FRAGMENT.search(type_text)
        if got is None:
            return
        parts = [part.strip() for part in got.group(1).split(",")]
        role = parts[0].rsplit("::", 1)[-1]
        sizes = [self.constants.get(v, int(v) if v.isdigit() else 0) for v in parts[1:4]]
        if len(sizes) != 3 or min(sizes) < 1:
            return
        m, n, k = sizes
        layout = next((p.rsplit("::", 1)[-1] for p in parts[4:] if p.endswith("_major")), None)
        tile = {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}.get(role)
        if tile is not None:
            self.fragments[name] = (*tile, layout)

    # -------------------------------------------------------------------------------------- statements
    def guard(self, cond: A.Expr, env: dict[str, Interval], guards: dict[A.Expr, Interval],
              negate: bool = False, at_once: bool = False) -> tuple[dict[str, Interval], dict[A.Expr, Interval]] | None:
        """Environments narrowed by ``cond`` holding (``negate``: by it failing); None when it cannot (a
        compared value outside every interval it may take: the branch is dead for these threads). ``at_once``:
        what is narrowed is used right away (a conditional expression's branch, nothing assigned between), so
        names assigned elsewhere (a loop's counter) may be narrowed too."""
        env, guards = dict(env), dict(guards)
        joiner = "||" if negate else "&&"
        parts: list[A.Expr] = []
        stack = [cond]
        while stack:
            part = stack.pop()
            if isinstance(part, A.Binary) and part.op == joiner:
                stack += [part.left, part.right]
            else:
                parts.append(part)
        for part in parts:
            if not (isinstance(part, A.Binary) and part.op in _FLIP):
                continue
            op = _NEGATE[part.op] if negate else part.op
            for subject, other, how in ((part.left, part.right, op), (part.right, part.left, _FLIP[op])):
                if A.free_names(subject) & self.assigned and not at_once:
                    continue
                limit = self.value(other, env, guards)
                if isinstance(subject, A.Name) and subject.id in env:
                    narrowed = env[subject.id] = _multiples(_narrow(env[subject.id], how, limit),
                                                            self.steps.get(subject.id))
                elif not isinstance(subject, A.Literal):
                    narrowed = guards[subject] = _multiples(_narrow(self.value(subject, env, guards), how, limit),
                                                            self._step(subject))
                    self._narrow_term(subject, narrowed, env, guards)
                else:
                    continue
                if narrowed[0] > narrowed[1]:
                    return None
        return env, guards

    def _narrow_term(self, subject: A.Expr, narrowed: Interval, env: dict[str, Interval],
                     guards: dict[A.Expr, Interval]) -> None:
        """``v + k`` / ``k + v`` / ``v - k`` known to lie in ``narrowed``, ``k`` one known value and ``v`` a
        name of the environment (a loop counter): ``v`` lies in ``narrowed`` shifted by ``k``."""
        if not (isinstance(subject, A.Binary) and subject.op in ("+", "-")):
            return
        sides = [(subject.left, subject.right, -1 if subject.op == "+" else 1)]
        if subject.op == "+":
            sides.append((subject.right, subject.left, -1))
        for name, other, sign in sides:
            if not (isinstance(name, A.Name) and name.id in env):
                continue
            k = self.value(other, env, guards)
            if k[0] != k[1] or abs(k[0]) >= INF:
                continue
            lo, hi = env[name.id]
            env[name.id] = (max(lo, _clamp(narrowed[0] + sign * k[0])), min(hi, _clamp(narrowed[1] + sign * k[0])))

    def dead(self, s: A.Stmt | A.Expr) -> None:
        """Code no thread of this part runs: its uses of the buffers are not unaccounted ones (the parts in
        which it runs account for them)."""
        for node in A.walk(s):
            if isinstance(node, A.Name) and node.id in self.accounted:
                self.accounted[node.id] += 1

    def sequence(self, stmts: tuple[A.Stmt, ...], env: dict[str, Interval], guards: dict[A.Expr, Interval]) -> None:
        env = dict(env)
        for stmt in stmts:
            if isinstance(stmt, A.If) and stmt.else_ is None and _exits(stmt.then):
                self.touch(stmt.cond, env, guards)
                past = self.guard(stmt.cond, env, guards, negate=True)
                self._note_undecided(stmt.cond, past, self.guard(stmt.cond, env, guards) if past else None)
                if past is None:
                    for rest in stmts[stmts.index(stmt) + 1:]:
                        self.dead(rest)
                    return  # every thread here returns
                env, guards = past
                continue
            self.stmt(stmt, env, guards)

    def stmt(self, s: A.Stmt, env: dict[str, Interval], guards: dict[A.Expr, Interval]) -> None:
        if isinstance(s, A.Block):
            self.sequence(s.stmts, env, guards)
        elif isinstance(s, A.DeclStmt):
            for d in s.decls:
                if "fragment<" in d.type.base:
                    self._fragment(d.name, d.type.base)
                if d.init is not None:
                    self.touch(d.init, env, guards)
                if d.type.pointers and d.init is not None and not d.dims and d.name not in self.assigned:
                    where = self._pointer(d.init, env, guards)
                    if where is not None:
                        self.aliases[d.name] = where
                        continue
                if d.init is not None and d.init_style == "=" and not d.dims and not d.type.pointers \
                        and (d.name not in self.assigned or d.name in self.straight):
                    env[d.name] = self.value(d.init, env, guards)
                    if (step := self._step(d.init)) is not None:
                        self.steps[d.name] = step
                else:
                    env[d.name] = ANY
        elif isinstance(s, A.ExprStmt):
            self.touch(s.expr, env, guards)
            target = _straight_update(s.expr)
            if target is not None and target.id in self.straight and target.id in env:
                env[target.id] = self._updated(s.expr, env[target.id], env, guards)
        elif isinstance(s, A.If):
            self.touch(s.cond, env, guards)
            taken = self.guard(s.cond, env, guards)
            other = self.guard(s.cond, env, guards, negate=True)
            self._note_undecided(s.cond, taken, other)
            if taken is not None:
                self.stmt(s.then, *taken)
            else:
                self.dead(s.then)
            if s.else_ is not None:
                if other is not None:
                    self.stmt(s.else_, *other)
                else:
                    self.dead(s.else_)
        elif isinstance(s, A.For):
            view = self.facts.loop_view(s)
            inner = dict(env)
            if view is not None:
                start, stop = self.value(view.start, env, guards), self.value(view.stop, env, guards)
                self.touch(view.start, env, guards)
                last = max(start[0], stop[1] - 1)
                step = A.const_int(view.step, self.constants)
                if step is not None and step > 1 and start[0] == start[1] and last < INF:
                    last = start[0] + (last - start[0]) // step * step  # the last value the step reaches
                inner[view.var] = (start[0], last)
            else:
                if s.init is not None:
                    self.stmt(s.init, inner, guards)
                declared = s.init.decls if isinstance(s.init, A.DeclStmt) else ()
                for decl in declared:
                    inner[decl.name] = ANY
                counter = _counted(s, declared)
                if counter is not None:  # ``for (int i = 0, p = 0; i < n; ++i, ++p)``: i is still counted
                    start = self.value(counter[1], env, guards)
                    stop = self.value(counter[2], env, guards)
                    inner[counter[0]] = (start[0], max(start[0], stop[1] - 1))
            if s.cond is not None:
                self.touch(s.cond, inner, guards)
            if s.step is not None:
                self.touch(s.step, inner, guards)
            self.stmt(s.body, inner, guards)
        elif isinstance(s, A.While | A.DoWhile):
            self.touch(s.cond, env, guards)
            self.stmt(s.body, env, guards)
        elif isinstance(s, A.Return) and s.value is not None:
            self.touch(s.value, env, guards)
        elif isinstance(s, A.Opaque):
            for name in self.buffers:
                if name in s.text:
                    self.buffers[name].known = False


def _counted(s: A.For, declared: tuple[A.VarDecl, ...]) -> tuple[str, A.Expr, A.Expr] | None:
    """(counter, start, stop) of a loop the canonical view does not read because it declares or steps other
    names too: a counter declared in its header, compared ``< stop`` in its condition, only increased by its
    step (``++i``, ``i++``, ``i += c``, c > 0) and assigned nowhere in its body."""
    cond = s.cond
    if not (isinstance(cond, A.Binary) and cond.op == "<" and isinstance(cond.left, A.Name)):
        return None
    name = cond.left.id
    decl = next((d for d in declared if d.name == name and d.init is not None and not d.dims), None)
    if decl is None or decl.init is None or s.step is None:
        return None
    steps: list[A.Expr] = []
    stack: list[A.Expr] = [s.step]
    while stack:
        part = stack.pop()
        if isinstance(part, A.Binary) and part.op == ",":
            stack += [part.left, part.right]
        else:
            steps.append(part)
    increases = [p for p in steps if (t := _straight_update(p)) is not None and t.id == name]
    if len(increases) != 1:
        return None
    step = increases[0]
    if isinstance(step, A.Unary) and step.op != "++":
        return None
    if isinstance(step, A.Assign) and (step.op != "+=" or (A.const_int(step.value) or 0) <= 0):
        return None
    for node in A.walk(s.body):
        written = node.target if isinstance(node, A.Assign) else node.operand \
            if isinstance(node, A.Unary) and node.op in ("++", "--", "&") else None
        if isinstance(written, A.Name) and written.id == name:
            return None
    return name, decl.init, cond.right


def _straight_update(e: A.Expr) -> A.Name | None:
    """The name an expression statement assigns as a whole (``t = v``, ``t /= v``, ``t++``), if any."""
    if isinstance(e, A.Assign) and isinstance(e.target, A.Name) and e.op in _UPDATES:
        return e.target
    if isinstance(e, A.Unary) and e.op in ("++", "--") and isinstance(e.operand, A.Name):
        return e.operand
    return None


_UPDATES = frozenset({"=", "+=", "-=", "*=", "/=", "%=", ">>=", "<<=", "&="})


def _straight_line_names(fn: A.Function) -> set[str]:
    """Integer locals assigned only by whole statements of the statement list that declares them (``int t =
    idx; int w = t % W; t /= W; int h = t % H;``): their value at each statement is known in order. A name
    assigned anywhere else (a loop's body, a branch, inside an expression) is not one."""
    if any(isinstance(n, A.Opaque) for n in A.walk(fn.body)):
        return set()  # a label may send control back over a list's updates
    declared_in: dict[str, int] = {}
    updates: dict[str, list[int]] = {}
    lists = [fn.body.stmts] + [n.stmts for n in A.walk(fn.body) if isinstance(n, A.Block) and n is not fn.body]
    for stmts in lists:
        for stmt in stmts:
            if isinstance(stmt, A.DeclStmt):
                for d in stmt.decls:
                    if not d.dims and not d.type.pointers:
                        declared_in[d.name] = -1 if d.name in declared_in else id(stmts)  # declared twice: neither
            elif isinstance(stmt, A.ExprStmt) and (target := _straight_update(stmt.expr)) is not None:
                updates.setdefault(target.id, []).append(id(stmts))
    assigned: dict[str, int] = {}
    for node in A.walk(fn.body):
        written = node.target if isinstance(node, A.Assign) else node.operand \
            if isinstance(node, A.Unary) and node.op in ("++", "--", "&") else None
        if isinstance(written, A.Name):
            assigned[written.id] = assigned.get(written.id, 0) + 1
    return {name for name, where in declared_in.items() if where != -1 and name in assigned
            and all(w == where for w in updates.get(name, [])) and len(updates.get(name, [])) == assigned[name]}


def _multiples(interval: Interval, step: int | None) -> Interval:
    """``interval`` shrunk to the multiples of ``step`` it holds (unchanged without a step or unbounded)."""
    lo, hi = interval
    if step is None or lo <= -INF or hi >= INF:
        return interval
    return -(-lo // step) * step, hi // step * step


_FRAGMENT = re.compile(r"fragment\s*<(.*)>")


def _exits(s: A.Stmt) -> bool:
    if isinstance(s, A.Block):
        return len(s.stmts) == 1 and _exits(s.stmts[0])
    return isinstance(s, A.Return)


def guard_limits(fn: A.Function, constants: dict[str, int]) -> dict[int, set[int]]:
    """Per grid axis, the block counts at which a guard of ``fn`` stops the last blocks: for
    ``if (blockIdx.x * 4 + (threadIdx.x >> 8) < 363)`` (the other terms never negative) 91 along x — generated
    code launches exactly as many blocks as its guards let work. Names declared once from such a sum count."""
    assigned = {n.target.id for n in A.walk(fn.body) if isinstance(n, A.Assign) and isinstance(n.target, A.Name)}
    defined = {n.name: n.init for n in A.walk(fn.body) if isinstance(n, A.VarDecl) and n.init is not None
               and n.init_style == "=" and not n.dims and n.name not in assigned}
    probe = _Bounder(fn, constants, None, None)

    def terms(e: A.Expr, depth: int = 0) -> list[A.Expr]:
        while isinstance(e, A.Cast):
            e = e.operand
        if isinstance(e, A.Name) and e.id in defined and depth < 8:
            return terms(defined[e.id], depth + 1)
        if isinstance(e, A.Binary) and e.op == "+":
            return terms(e.left, depth) + terms(e.right, depth)
        return [e]

    def block_factor(e: A.Expr) -> tuple[int, int] | None:
        while isinstance(e, A.Cast):
            e = e.operand
        if isinstance(e, A.Binary) and e.op == "*":
            for index, factor in ((e.left, e.right), (e.right, e.left)):
                while isinstance(index, A.Cast):
                    index = index.operand
                ref = A.builtin_ref(index)
                k = A.const_int(factor, constants)
                if ref is not None and ref[0] == "blockIdx" and k is not None and k > 0:
                    return "xyz".index(ref[1]), k
        ref = A.builtin_ref(e)
        return ("xyz".index(ref[1]), 1) if ref is not None and ref[0] == "blockIdx" else None

    found: dict[int, set[int]] = {}
    for node in A.walk(fn.body):
        if not isinstance(node, A.If):
            continue
        for part in A.walk(node.cond):
            if not (isinstance(part, A.Binary) and part.op in ("<", "<=")):
                continue
            limit = A.const_int(part.right, constants)
            if limit is None or limit <= 0:
                continue
            summed = terms(part.left)
            factors = [f for t in summed if (f := block_factor(t)) is not None]
            others = [t for t in summed if block_factor(t) is None]
            if len(factors) != 1 or any(probe.value(t, {}, {})[0] < 0 for t in others):
                continue
            axis, k = factors[0]
            bound = limit if part.op == "<" else limit + 1
            found.setdefault(axis, set()).add(-(-bound // k))
    return found


THREAD_CHUNKS = 4  # parts the threads of a block are bounded in, along x, when a launch is bounded in parts


def buffer_bounds(fn: A.Function, constants: dict[str, int] | None = None,
                  grid: tuple[int, int, int] | None = None,
                  block: tuple[int, int, int] | None = None, exact_points: int = 0) -> dict[str, BufferBounds]:
    """Per pointer parameter of kernel ``fn``: the elements it reads and writes, for a launch of ``grid`` blocks
    of ``block`` threads (any launch when not given). ``constants``: the file's integer macros and constants.

    A given launch is bounded in parts and the parts joined: the last block along x apart from the others, and
    the threads along x in chunks. Interval arithmetic loses how values relate (a guard on ``bx * 4 + (tx >>
    8)`` says nothing of ``bx * 1024 + tx``), and parts this small make such a guard dead or alive as a whole
    in each, so the last block's store past the guard is not counted."""
    facts = _kernel_facts(fn)
    key = (grid, block, exact_points, tuple(sorted((constants or {}).items())))
    known = facts.bounds.get(key)
    if known is None:
        known = facts.bounds[key] = _launch_bounds(fn, constants, grid, block, exact_points)
    return {name: dataclasses.replace(b) for name, b in known.items()}  # callers may change their copy


def _launch_bounds(fn: A.Function, constants: dict[str, int] | None, grid: tuple[int, int, int] | None,
                   block: tuple[int, int, int] | None, exact_points: int) -> dict[str, BufferBounds]:
    if grid is None or block is None:
        # any launch: bounded once with the largest block and once with a larger one; a buffer whose bounds
        # move with it is bounded only through the block's size, not by the code
        bounds = _bounds_in_parts(fn, constants, None, None, [(None, None)], MAX_BLOCK_THREADS)
        larger = _bounds_in_parts(fn, constants, None, None, [(None, None)], 4 * MAX_BLOCK_THREADS)
        for name, got in bounds.items():
            other = larger[name]
            got.launch_free = (got.read, got.write) == (other.read, other.write)
        return bounds
    if grid[0] * block[0] <= exact_points:
        # a small launch bounded thread by thread: every x index is a known value, so guards and conditional
        # indices (a mirror pad's reflections) are decided as the thread decides them
        return _bounds_in_parts(fn, constants, grid, block, [((b, b), (t, t)) for b in range(grid[0])
                                                             for t in range(block[0])], MAX_BLOCK_THREADS)
    blocks = [(0, grid[0] - 2), (grid[0] - 1, grid[0] - 1)] if grid[0] > 1 else [(0, 0)]
    chunk = max(1, -(-block[0] // THREAD_CHUNKS))
    threads = [(t, min(t + chunk, block[0]) - 1) for t in range(0, block[0], chunk)]
    # a part in which a condition on the launch's indices goes both ways is split in two (blocks first, then
    # threads), until each is decided or REFINED_PARTS parts were bounded: a concatenation's
    # ``bx * 128 + (tx >> 3) >= 1125 ? a[bx * 1024 + tx - 9000] : b[...]`` then reads no element below 0
    pending: list[tuple[Interval, Interval]] = [(b, t) for b in blocks for t in threads]
    done: list[dict[str, BufferBounds]] = []
    bounded = 0
    while pending:
        block_x, thread_x = pending.pop()
        bounder = _bounded_part(fn, constants, grid, block, block_x, thread_x, MAX_BLOCK_THREADS, None)
        bounded += 1
        halves = _halves(block_x, thread_x)
        if bounder.undecided and halves and bounded + len(pending) + len(halves) <= REFINED_PARTS:
            pending += halves
        else:
            done.append(bounder.buffers)
    return _joined(done)


REFINED_PARTS = 256  # the most parts a large launch is bounded in (each costs one pass over the kernel)


def _halves(block_x: Interval, thread_x: Interval) -> list[tuple[Interval, Interval]]:
    """A part split in two: its blocks when it holds several, else its threads; [] when it is one thread."""
    for index, (lo, hi) in enumerate((block_x, thread_x)):
        if hi > lo:
            mid = (lo + hi) // 2
            return [((lo, mid), thread_x), ((mid + 1, hi), thread_x)] if index == 0 else \
                [(block_x, (lo, mid)), (block_x, (mid + 1, hi))]
    return []


def bang_buffer_bounds(fn: A.Function, constants: dict[str, int] | None, tasks: int,
                       cores_per_cluster: int) -> dict[str, BufferBounds]:
    """Per pointer parameter of BANG kernel ``fn``: the elements it reads and writes on a launch of ``tasks``
    tasks, ``cores_per_cluster`` to a cluster (4 for the Union types, 1 for a Block task)."""
    clusters = max(1, tasks // cores_per_cluster)
    per_task: list[dict[str, BufferBounds]] = []
    for task in range(tasks):  # task by task: every index a known value (a core's share of rows, decided)
        names: dict[str, Interval] = {
            "taskId": (task, task), "taskIdX": (task, task), "taskIdY": (0, 0), "taskIdZ": (0, 0),
            "taskDim": (tasks, tasks), "taskDimX": (tasks, tasks), "taskDimY": (1, 1), "taskDimZ": (1, 1),
            "coreId": (task % cores_per_cluster,) * 2, "coreDim": (cores_per_cluster, cores_per_cluster),
            "clusterId": (task // cores_per_cluster,) * 2, "clusterDim": (clusters, clusters),
        }
        per_task.append(_bounds_in_parts(fn, constants, None, None, [(None, None)], MAX_BLOCK_THREADS, names))
    return _joined(per_task)


def _bounds_in_parts(fn: A.Function, constants: dict[str, int] | None, grid: tuple[int, int, int] | None,
                     block: tuple[int, int, int] | None, parts: list[tuple[Interval | None, Interval | None]],
                     max_threads: int, names: dict[str, Interval] | None = None) -> dict[str, BufferBounds]:
    return _joined([_bounded_part(fn, constants, grid, block, block_x, thread_x, max_threads, names).buffers
                    for block_x, thread_x in parts])


def _bounded_part(fn: A.Function, constants: dict[str, int] | None, grid: tuple[int, int, int] | None,
                  block: tuple[int, int, int] | None, block_x: Interval | None, thread_x: Interval | None,
                  max_threads: int, names: dict[str, Interval] | None) -> _Bounder:
    """The kernel bounded over one part of the launch (its blocks and threads along x)."""
    bounder = _Bounder(fn, constants or {}, grid, block, max_threads, names)
    bounder.block_x, bounder.thread_x = block_x, thread_x
    bounder.sequence(fn.body.stmts, {}, {})
    # a buffer used other than through the accesses bounded (passed on, cast, stored) is not claimed
    for name, bounds in bounder.buffers.items():
        if bounder.facts.uses.get(name, 0) > bounder.accounted[name] or name in bounder.assigned:
            bounds.known = False
    return bounder


def _joined(parts: list[dict[str, BufferBounds]]) -> dict[str, BufferBounds]:
    """The bounds of the parts of a launch together."""
    joined = parts[0]
    for part in parts[1:]:
        for name, bounds in part.items():
            into = joined[name]
            into.known = into.known and bounds.known
            if bounds.read is not None:
                into.read = _join(into.read, bounds.read)
            if bounds.write is not None:
                into.write = _join(into.write, bounds.write)
    return joined
