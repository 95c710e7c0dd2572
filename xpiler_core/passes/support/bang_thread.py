"""One symbolic thread of a bound block function (``bang_binding`` output), for the BANG recognizers.

The thread loops of loop recovery run for one thread ``(xp_tx, xp_ty)``; per-thread arrays (``x[xp_nt]``)
are that thread's scalars; early exits (``xp_done``) become guards; device helpers are inlined; integer
expressions are polynomials over named atoms (parameters, ``xp_gx = xp_bx*C + xp_tx``, ``xp_gy``,
``xp_bz``, summation indices, and divisions of thread-free values as opaque atoms); floating-point values
are trees of loads, sums, products, scalings and maxima. Anything else is refused with a reason.

Block-level tiles (``float As[T][T]`` filled by one thread phase as ``As[ty][tx] = v(tx, ty)`` and read in a
later phase, i.e. after a barrier, as ``As[ty][k]``) are forwarded: the read is the staged value of the
thread that stored that element (``v(k, ty)``); a block-level loop over such tiles (``for (k0 = lo; k0 < hi;
k0 += T)`` around a phase that stages and a phase that sums ``k`` over ``[0, T)``) becomes one sum over
``kk = k0 + k`` in ``[lo, hi)``: a ``kk < hi`` guard of the staged values (zero padding) trims it, else the
run-time precondition ``(hi - lo) % T == 0`` is recorded. Conditional values ``c ? v : 0`` are
``Select`` values (zero where a bound fails).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassRefused
from xpiler_core.printer import print_expr

THREAD_LOOPS = ("xp_tz", "xp_ty", "xp_tx")
PREDICATE_PREFIX = "xp_p"  # loop recovery's per-thread conditions kept across barriers
RAW_THREAD_ATOMS = {"xp_tx", "xp_ty", "xp_tz", "xp_bx", "xp_by", "xp_t"}
BLOCK_ATOMS = {"xp_bx", "xp_by"}
MAX_INLINE_DEPTH = 4
INTEGER_TYPE = re.compile(r"\b(int|unsigned|uint|long|short|size_t|ssize_t|ptrdiff_t|u?int(8|16|32|64)_t)\b")
# atoms of a split global or thread index (``threadIdx.x % 32``, ``threadIdx.x / 32``): digits and quotients
DIGIT = {"xp_gx": "xp_dx", "xp_gy": "xp_dy", "xp_tx": "xp_dtx", "xp_ty": "xp_dty"}
QUOTIENT = {"xp_gx": "xp_qx", "xp_gy": "xp_qy", "xp_tx": "xp_qtx", "xp_ty": "xp_qty"}
THREAD_SPLITS = ("xp_tx", "xp_ty")  # thread indices a block splits into rows and columns
# ----- integer polynomials over named atoms ------------------------------------------------------------
Monomial = tuple[str, ...]


@dataclass(frozen=True)
class Poly:
    terms: tuple[tuple[Monomial, int], ...] = ()

    @staticmethod
    def of(d: dict[Monomial, int]) -> Poly:
        return Poly(tuple(sorted((m, c) for m, c in d.items() if c != 0)))

    @staticmethod
    def const(c: int) -> Poly:
        return Poly.of({(): c})

    @staticmethod
    def atom(name: str) -> Poly:
        return Poly.of({(name,): 1})

    def as_dict(self) -> dict[Monomial, int]:
        return dict(self.terms)

    def __add__(self, other: Poly) -> Poly:
        d = self.as_dict()
        for m, c in other.terms:
            d[m] = d.get(m, 0) + c
        return Poly.of(d)

    def __neg__(self) -> Poly:
        return Poly.of({m: -c for m, c in self.terms})

    def __sub__(self, other: Poly) -> Poly:
        return self + (-other)

    def __mul__(self, other: Poly) -> Poly:
        d: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                d[m] = d.get(m, 0) + c1 * c2
        return Poly.of(d)

    def atoms(self) -> set[str]:
        return {a for m, _ in self.terms for a in m}

    def split(self, atom: str) -> tuple[Poly, Poly]:
        """(coefficient of ``atom``, rest) when the polynomial is linear in ``atom``; refuses otherwise."""
        coeff: dict[Monomial, int] = {}
        rest: dict[Monomial, int] = {}
        for m, c in self.terms:
            n = m.count(atom)
            if n > 1:
                raise PassRefused(f"an index is not linear in {atom}")
            if n == 1:
                reduced = list(m)
                reduced.remove(atom)
                coeff[tuple(reduced)] = c
            else:
                rest[m] = c
        return Poly.of(coeff), Poly.of(rest)

    def c_text(self) -> str:
        if not self.terms:
            return "0L"
        parts = []
        for m, c in self.terms:
            factors = [f"(long)({a})" for a in m]
            if c != 1 or not factors:
                factors.insert(0, f"{c}L")
            parts.append(" * ".join(factors))
        return "(" + " + ".join(parts) + ")"


# ----- symbolic values -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ptr:
    base: str
    offset: Poly


@dataclass(frozen=True)
class Load:
    base: str
    offset: Poly


@dataclass(frozen=True)
class Mul:
    left: Any
    right: Any


@dataclass(frozen=True)
class Sum:
    var: str
    lo: Poly
    hi: Poly
    body: Any


@dataclass(frozen=True)
class Zero:
    pass


@dataclass(frozen=True)
class FConst:
    value: float


@dataclass(frozen=True)
class Add:
    terms: tuple[Any, ...]


@dataclass(frozen=True)
class Scale:
    factor: float
    value: Any


@dataclass(frozen=True)
class Max:
    terms: tuple[Any, ...]


@dataclass(frozen=True)
class Select:
    """``value`` where every guard holds, else zero."""

    guards: tuple[Guard, ...]
    value: Any


@dataclass(frozen=True)
class Staged:
    """A block-level tile element as the thread at ``axes`` stored it: per dimension, the thread atoms of its
    index with their weights (``As[ty][tx]``: ``((ty, 1),), ((tx, 1),)``; ``As[tx / 32 * 32 + tx % 32]``:
    ``((xp_qtx1, 32), (xp_dtx0, 1)),``), a mixed radix that covers the dimension once."""

    axes: tuple[tuple[tuple[str, int], ...], ...]
    value: Any
    phase: int
    needs: tuple[str, ...] = ()  # run-time conditions under which the threads cover the tile so (added when read)


@dataclass(frozen=True)
class Predicate:
    """A thread's condition kept across barriers by loop recovery (``xp_p0[xp_t] = (cond) != 0``): the guards
    it stands for."""

    guards: tuple[Guard, ...]


@dataclass(frozen=True)
class Unset:
    """A variable whose value the symbolic thread does not know (set under a condition): reading it refuses."""

    reason: str


@dataclass(frozen=True)
class RegFn:
    """A thread-local array written by a loop of constant trip count (a lane loop, see ``lanes``) as a function
    of its element: ``x[sum(atom * weight)] = value`` for every value of the lane atoms, a mixed radix of
    ``(atom, weight, radix)`` that covers the array once; an empty layout is one value for every element
    (``memset(&x, 0, ...)``)."""

    layout: tuple[tuple[str, int, int], ...]
    value: Any


@dataclass(frozen=True)
class Vec:
    """A ``float4``/``float2`` value: its components (``.x``, ``.y``, ...), each a value or an epilogue."""

    components: tuple[Any, ...]


VECTOR_TYPES = {"float4": 4, "float2": 2}
COMPONENTS = ("x", "y", "z", "w")
FLOAT_VALUES = (Load, Mul, Sum, Zero, FConst, Add, Scale, Max, Select)
MAX_LANE_TRIP = 256  # a constant-trip loop longer than this is not modelled as lanes
MAX_THREAD_REGISTERS = 1024  # elements of a per-thread array of loop recovery modelled as registers
MAX_CALLS = ("max", "fmaxf", "fmax", "std::max", "__fmaxf")
ROUNDING_CALLS = ("ceil", "ceilf", "floor", "floorf", "std::ceil", "std::floor")


@dataclass(frozen=True)
class Guard:
    """``index < bound`` (both polynomials)."""

    index: Poly
    bound: Poly


@dataclass(frozen=True)
class Epilogue:
    """A stored expression kept as source (``expr``), with the thread's values when it was stored."""

    expr: A.Expr
    env: dict[str, Any] = field(compare=False)
    thread_arrays: frozenset[str] = frozenset()
    reason: str = ""


@dataclass
class Store:
    base: str
    offset: Poly
    value: Any
    guards: tuple[Guard, ...]
    source: Epilogue | None = None  # the stored expression as written, with the thread's values


class _Continue(Exception):
    """The symbolic thread left its thread loop (``xp_done`` set): evaluation of that path ends."""


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


@dataclass
class ThreadEvaluator:
    """Evaluates one symbolic thread of a bound block function."""

    int_params: set[str]
    ptr_params: set[str]
    helpers: dict[str, A.Function]
    env: dict[str, Any] = field(default_factory=dict)
    thread_arrays: set[str] = field(default_factory=set)
    guards: list[Guard] = field(default_factory=list)
    stores: list[Store] = field(default_factory=list)
    block_sizes: dict[str, A.Expr] = field(default_factory=dict)  # "x"/"y" → C of gx/gy
    loops: int = 0
    depth: int = 0  # helpers being inlined
    in_thread: bool = False  # inside the thread loops of loop recovery
    cond_depth: int = 0  # conditionals around the statement being evaluated
    consts: dict[str, int] = field(default_factory=dict)  # file-scope integer constants and macros
    tiles: dict[str, tuple[int, ...]] = field(default_factory=dict)  # block-level arrays and their extents
    staged: dict[str, Staged] = field(default_factory=dict)  # the last phase's store into each tile
    phase: int = 0  # thread phases entered (a barrier separates two)
    ranges: dict[str, tuple[Poly, Poly]] = field(default_factory=dict)  # summation indices being evaluated
    preconditions: list[str] = field(default_factory=list)  # C conditions the recognized shape needs at run time
    sum_atoms: set[str] = field(default_factory=set)  # the summation and tile index atoms created so far
    # a global index split into mixed-radix digits by ``/`` and ``%`` (``idx % K``, ``idx / K % W``, ...):
    # base atom (``xp_gx``/``xp_gy``) → the radices, innermost first (see :meth:`delinearize`)
    radices: dict[str, list[Poly]] = field(default_factory=dict)
    registers: dict[str, int] = field(default_factory=dict)  # thread-local arrays of constant extent
    indices: set[str] = field(default_factory=set)  # variables declared as pointers or integers (not values)
    # constant-trip loops (``for (i = 0; i < 8; ++i) regM[i] = ...``) run as lanes: their variable is an atom over
    # the trip count, every statement of the body holds for each value of it (atom → trip count)
    lanes: dict[str, int] = field(default_factory=dict)
    thread_registers: set[str] = field(default_factory=set)  # loop recovery's ``x[xp_nt][E]``: E registers
    register_rows: dict[str, tuple[int, ...]] = field(default_factory=dict)  # their extents (``x[xp_nt][8][8]``)
    # the sum loop being evaluated (see :meth:`lane_sum`): accumulator → (its layout over the lanes, the term)
    accumulating: dict[str, tuple[tuple[tuple[str, int, int], ...], Any]] | None = None
    sum_roots: set[str] = field(default_factory=set)  # what that loop accumulates into
    # that loop's accumulations into elements of a thread-local array at constant indices (``acc[2] += t``)
    accumulated_elements: dict[str, dict[int, Any]] = field(default_factory=dict)
    sum_cond_depth: int = 0  # the conditionals around that loop (an addition under one more is not every term's)
    planned: bool = False  # the thread indices' splits were collected before evaluation (:meth:`plan_splits`)
    divisors: dict[str, set[int]] = field(default_factory=dict)  # each thread index → the constants it was split by
    # the elements each tile was stored in the current phase, one piece per store (``As[4c + 0] = t.x; ...``)
    pieces: dict[str, tuple[int, list[tuple[tuple[Poly, ...], Any]]]] = field(default_factory=dict)

    # statements
    def run(self, stmts: list[A.Stmt] | tuple[A.Stmt, ...]) -> None:
        for s in stmts:
            self.stmt(s)

    def plan_splits(self, stmts: list[A.Stmt] | tuple[A.Stmt, ...],
                    seen: Mapping[str, set[int]] | None = None) -> None:
        """Split each thread index by every constant the code divides it by, before evaluating: a block that
        reads ``tx % 16``, ``tx / 8`` and ``tx / 128`` (one thread's output coordinates and its share of two
        tile loads) writes ``tx`` in the radix 8, 2, 8 and each split over those digits (``tx / 8`` is ``d1 +
        2 d2 + 16 q3``), so all of them compare. Only divisors that divide one another chain. ``seen``: the
        divisors an earlier evaluation met (``divisors``), through copies of the index the text does not show."""
        divisors: dict[str, set[int]] = {base: set(found) for base, found in (seen or {}).items()}
        for stmt in stmts:
            for n in A.walk(stmt):
                if isinstance(n, A.Binary) and n.op in ("/", "%") and isinstance(left := strip_casts(n.left), A.Name) \
                        and left.id in THREAD_SPLITS:
                    try:
                        d = self.value(n.right)
                    except PassRefused:
                        continue
                    if isinstance(d, Poly) and not d.atoms() and dict(d.terms).get((), 0) > 1:
                        divisors.setdefault(left.id, set()).add(dict(d.terms)[()])
        for base, found in divisors.items():
            chain = sorted(found)
            if len(chain) < 2 or any(b % a for a, b in zip(chain, chain[1:], strict=False)):
                continue
            self.radices[base] = [Poly.const(r) for r in [chain[0], *(b // a for a, b in zip(chain, chain[1:],
                                                                                              strict=False))]]
        self.planned = True

    def stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.Block):
            self.run(s.stmts)
        elif isinstance(s, A.Empty | A.Comment | A.Pragma):
            return
        elif isinstance(s, A.DeclStmt):
            for d in s.decls:
                self.decl(d)
        elif isinstance(s, A.ExprStmt):
            self.expr_stmt(s.expr)
        elif isinstance(s, A.For):
            self.loop(s)
        elif isinstance(s, A.If):
            self.branch(s)
        elif isinstance(s, A.Return):
            if self.depth == 0 or self.cond_depth > 0:
                raise PassRefused("the thread returns early (only a helper's final return is modelled)")
            raise _Return(self.value(s.value) if s.value is not None else None)
        elif isinstance(s, A.Continue):
            if self.depth > 0 or not self.in_thread or self.cond_depth > 0:
                raise PassRefused("a continue that does not end the thread")
            raise _Continue()
        else:
            raise PassRefused(f"the thread does {type(s).__name__} (not a straight matrix-product thread)")

    def decl(self, d: A.VarDecl) -> None:
        if d.type.pointers or INTEGER_TYPE.search(d.type.base):
            self.indices.add(d.name)
        if d.dims:
            if len(d.dims) == 1 and isinstance(d.dims[0], A.Name) and d.dims[0].id == "xp_nt" and d.init is None:
                self.thread_arrays.add(d.name)  # a per-thread variable of loop recovery
                return
            if len(d.dims) >= 2 and d.dims[0] == A.name("xp_nt") and None not in d.dims and d.init is None:
                # a per-thread array of loop recovery: this thread's registers, row-major when it has rows
                extents = [self.value(x) for x in d.dims[1:] if x is not None]
                sizes = [dict(x.terms).get((), 0) if isinstance(x, Poly) and not x.atoms() else 0 for x in extents]
                if not all(sizes) or not 0 < math.prod(sizes) <= MAX_THREAD_REGISTERS:
                    raise PassRefused(f"the per-thread array {d.name} has no small constant extent")
                self.registers[d.name] = math.prod(sizes)
                self.register_rows[d.name] = tuple(sizes)
                self.thread_registers.add(d.name)
                return
            extents = [self.value(x) if x is not None else None for x in d.dims]
            if (self.in_thread or self.depth > 0) and d.init is None and len(extents) == 1 and isinstance(
                    extents[0], Poly) and not extents[0].atoms() and 0 < dict(extents[0].terms).get((), 0) <= 64:
                self.registers[d.name] = dict(extents[0].terms)[()]  # `float acc[4];`: four scalars
                for i in range(self.registers[d.name]):
                    self.env[f"{d.name}[{i}]"] = None
                return
            if self.in_thread or self.depth > 0 or d.init is not None or not all(
                    isinstance(x, Poly) and not x.atoms() and x.terms for x in extents):
                raise PassRefused(f"the block declares the array {d.name} (local staging)")
            self.tiles[d.name] = tuple(dict(x.terms).get((), 0) for x in extents if isinstance(x, Poly))
            return
        if set(d.storage) - {"constexpr"}:  # a constant expression is the value it is initialized with
            raise PassRefused(f"{d.name} has storage {' '.join(d.storage)}")
        if d.name == "xp_t":
            return
        init = A.single_value_init(d) or d.init  # `size_t const r{e}` is `= e`
        self.env[d.name] = self.value(init) if init is not None else None

    def expr_stmt(self, e: A.Expr) -> None:
        if isinstance(e, A.Cast) and e.type.base == "void" and not e.type.pointers:
            return  # (void)x
        if isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id == "memset" and e.args \
                and isinstance(e.args[0], A.Name) and e.args[0].id == "xp_done":
            return
        if isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id == "memset" and len(e.args) == 3:
            cleared = self.cleared_registers(e)
            if cleared is not None:
                self.env[cleared] = RegFn((), Zero())  # every element zero (loop recovery's `= {0}`)
                return
        if isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id == "assert":
            return  # the shape computed is the kernel's where its assertions hold (where one fails, it aborts)
        if not isinstance(e, A.Assign):
            raise PassRefused("the thread evaluates an expression statement that is not an assignment")
        target = e.target
        if isinstance(target, A.Index) and isinstance(target.base, A.Name) and target.base.id == "xp_done":
            return  # paired with the continue that follows
        if isinstance(target, A.Index) and _tile_root(target) in self.tiles:
            self.tile_store(target, e)
            return
        if (e.op == "=" and isinstance(target, A.Index) and isinstance(target.base, A.Name)
                and target.base.id in self.thread_arrays and target.base.id.startswith(PREDICATE_PREFIX)):
            cond = e.value
            while isinstance(cond, A.Cast) and not cond.type.pointers:
                cond = cond.operand
            if isinstance(cond, A.Binary) and cond.op == "!=" and A.const_int(cond.right) == 0:
                cond = cond.left
            self.env[target.base.id] = Predicate(tuple(self.conditions(cond, negate=False)))
            return
        if self.accumulating is not None and self.accumulate(target, e):
            return
        if isinstance(target, A.Member) and target.field in COMPONENTS and e.op == "=":
            self.component_write(target, e)
            return
        vector = self.vector_ref(target)
        if vector is not None:
            self.vector_store(vector, e)
            return
        try:
            value = self.value(e.value)
        except PassRefused as refusal:
            if not (e.op == "=" and isinstance(target, A.Index) and not (
                    isinstance(target.base, A.Name) and target.base.id in self.thread_arrays)):
                raise
            # a store of an expression the values do not model: kept as an epilogue over this thread's state
            value = Epilogue(e.value, dict(self.env), frozenset(self.thread_arrays), refusal.reason)
        if e.op != "=":
            old = self.value(target)
            value = self.combine(e.op[:-1], old, value)
        if isinstance(target, A.Name):
            if target.id not in self.env:
                raise PassRefused(f"the thread assigns {target.id}, declared outside it")
            self.env[target.id] = value
            return
        if isinstance(target, A.Index) and self.lane_write(target, e.op, value):
            return
        register = self.register_slot(target)
        if register is not None:
            self.env[register] = value
            return
        if isinstance(target, A.Index) and isinstance(target.base, A.Name) and target.base.id in self.thread_arrays:
            self.env[target.base.id] = value
            return
        if isinstance(target, A.Index):
            base = self.value(target.base)
            index = self.value(target.index)
            if not (isinstance(base, Ptr) and isinstance(index, Poly)):
                raise PassRefused("the thread stores through something other than a global pointer")
            source = value if isinstance(value, Epilogue) else Epilogue(e.value, dict(self.env),
                                                                        frozenset(self.thread_arrays))
            self.stores.append(Store(base.base, base.offset + index, value, tuple(self.guards), source))
            return
        raise PassRefused("the thread assigns through an unsupported target")

    def loop(self, s: A.For) -> None:
        s = self.pointer_counter(self.companions(s))
        view = s.canonical()
        if view is not None and view.var in THREAD_LOOPS:
            if self.depth > 0 or self.cond_depth > 0:
                raise PassRefused("a thread loop under a condition")
            if not self.in_thread:
                self.phase += 1
            outer, self.in_thread = self.in_thread, True
            try:
                self.run(stmts_of(s.body))
            except _Continue:
                pass
            finally:
                self.in_thread = outer
            return
        if view is not None and any(isinstance(n, A.For) and (c := n.canonical()) is not None and c.var in THREAD_LOOPS
                                    for n in A.walk(s.body)):
            self.tile_loop(s, view)
            return
        if view is not None and not (self.plain_sum(s) and not self.accumulation_roots(s.body) & self.sum_roots):
            if self.accumulating is None and self.accumulation_roots(s.body):
                if self.constant_trip(view) is not None and self.selects_accumulators(s, view.var):
                    self.lane_loop(s, view)  # ``for i: for j: for k: acc[i][j] += ...``: the sum is inside
                else:
                    self.lane_sum(s, view)
                return
            if self.constant_trip(view) is not None:
                self.lane_loop(s, view)
                return
        if view is None or A.const_int(view.step) != 1:
            raise PassRefused("a loop in the thread is not a unit-step counted loop")
        body = [x for x in stmts_of(s.body) if not isinstance(x, A.Empty | A.Comment | A.Pragma)]
        # [loop-local declarations] then one or more accumulations acc_i += e_i, each acc_i a distinct zero
        n_decls = 0
        while n_decls < len(body) and isinstance(body[n_decls], A.DeclStmt):
            n_decls += 1
        decls, sums = body[:n_decls], body[n_decls:]
        if not sums:
            raise PassRefused("a loop in the thread accumulates nothing")
        if len(sums) == 1 and isinstance(sums[0], A.For):
            self.nested_sum(view, decls, sums[0])
            return
        accs: list[tuple[str, A.Expr]] = []
        for st in sums:
            if not (isinstance(st, A.ExprStmt) and isinstance(st.expr, A.Assign)):
                raise PassRefused("a loop in the thread is not a list of accumulations acc += e")
            asg = st.expr
            target = asg.target
            acc_slot = self.scalar_slot(target)
            if acc_slot is None:
                raise PassRefused("a loop accumulates into memory, not a scalar")
            acc = acc_slot
            if asg.op == "+=":
                accs.append((acc, asg.value))
            elif asg.op == "=" and isinstance(asg.value, A.Binary) and asg.value.op == "+" and asg.value.left == target:
                accs.append((acc, asg.value.right))
            else:
                raise PassRefused("a loop in the thread is not a sum")
        names = [acc for acc, _ in accs]
        if len(set(names)) != len(names):
            raise PassRefused("a loop accumulates twice into one variable")
        for acc, term in accs:
            if not (isinstance(self.env.get(acc), Zero) or self.env.get(acc) == Poly()):
                raise PassRefused("a sum does not start from zero")
            if any(self.scalar_slot(n) in names for n in A.walk(term) if isinstance(n, A.Name | A.Index)):
                raise PassRefused("an accumulation reads an accumulator")
        var, lo, hi, saved = self.enter_sum(view, decls)
        values = []
        for _, term in accs:
            body_value = self.value(term)
            if isinstance(body_value, Poly | Ptr):
                raise PassRefused("the summed term is not a floating-point product")
            values.append(body_value)
        self.leave_sum(var, saved)
        for acc, body_value in zip(names, values, strict=True):
            self.env[acc] = Sum(var, lo, hi, body_value)

    def vector_ref(self, e: A.Expr) -> tuple[Ptr | str, Poly, int, tuple[Poly, ...]] | None:
        """``reinterpret_cast<float4 *>(&X[i])[j]`` (or a C cast): where (a global pointer, or a tile's
        name), the first element's offset (along a tile's last axis), the width, and a tile's indices along
        its other axes; None for other expressions."""
        cast = _vector_cast(e)
        if cast is None:
            return None
        pointer, width = cast
        assert isinstance(e, A.Index)
        index = self.value(e.index)
        if not isinstance(index, Poly):
            raise PassRefused("a vector is indexed by a non-integer")
        if isinstance(pointer, A.Unary) and pointer.op == "&" and isinstance(pointer.operand, A.Index):
            element = pointer.operand
            name = _tile_root(element)
            if name in self.tiles:
                inner = [self.value(x) for x in _tile_indices(element)]
                if len(inner) != len(self.tiles[name]) or not all(isinstance(x, Poly) for x in inner):
                    raise PassRefused(f"the tile {name} is accessed as vectors through a partial index")
                start = inner[-1] + index * Poly.const(width)
                # along the last axis of a tile of several: the vector stays in its row (the row's extent and
                # every term of where it starts are multiples of its width)
                if len(inner) > 1 and (self.tiles[name][-1] % width or any(c % width for _, c in start.terms)):
                    raise PassRefused(f"a vector of the tile {name} may cross the end of a row")
                return name, start, width, tuple(inner[:-1])
            address = self.combine("+", self.value(element.base), self.value(element.index))
        else:
            address = self.value(pointer)
        if not isinstance(address, Ptr):
            raise PassRefused("a vector is read or written through something other than a global pointer")
        return Ptr(address.base, Poly()), address.offset + index * Poly.const(width), width, ()

    def component_write(self, target: A.Member, e: A.Assign) -> None:
        """``v.x = e`` of a vector variable: that component is ``e`` (kept as source where not modelled)."""
        key = target.base.id if isinstance(target.base, A.Name) else (
            target.base.base.id if isinstance(target.base, A.Index) and isinstance(target.base.base, A.Name)
            and target.base.base.id in self.thread_arrays and target.base.index == A.name("xp_t") else "")
        whole = self.env.get(key)
        slot = COMPONENTS.index(target.field)
        if not isinstance(whole, Vec) or slot >= len(whole.components):
            raise PassRefused(f"the thread sets .{target.field} of something other than a vector")
        try:
            value = self.value(e.value)
        except PassRefused as refusal:
            value = Epilogue(e.value, dict(self.env), frozenset(self.thread_arrays), refusal.reason)
        parts = list(whole.components)
        parts[slot] = value
        self.env[key] = Vec(tuple(parts))

    def vector_store(self, vector: tuple[Ptr | str, Poly, int, tuple[Poly, ...]], e: A.Assign) -> None:
        """A vector stored whole: one store (or tile store) per component."""
        where, offset, width, leading = vector
        value = self.value(e.value) if e.op == "=" else None
        if not isinstance(value, Vec) or len(value.components) != width:
            raise PassRefused("a vector store of something other than a whole vector")
        for c, part in enumerate(value.components):
            if isinstance(where, str):
                self.stage_piece(where, (*leading, offset + Poly.const(c)), part)
            else:
                source = part if isinstance(part, Epilogue) else None
                self.stores.append(Store(where.base, offset + Poly.const(c), part, tuple(self.guards), source))

    def plain_sum(self, s: A.For) -> bool:
        """Whether a loop has the form the plain sum evaluation takes: declarations, then accumulations or
        one loop of that form."""
        body = [x for x in stmts_of(s.body) if not isinstance(x, A.Empty | A.Comment | A.Pragma)]
        while body and isinstance(body[0], A.DeclStmt):
            body = body[1:]
        if len(body) == 1 and isinstance(body[0], A.For):
            return self.plain_sum(body[0])
        return bool(body) and all(isinstance(x, A.ExprStmt) and isinstance(x.expr, A.Assign) and (
            x.expr.op == "+=" or (x.expr.op == "=" and isinstance(x.expr.value, A.Binary) and x.expr.value.op == "+"
                                  and x.expr.value.left == x.expr.target)) and not self.lane_indexed(x.expr.target)
            for x in body)

    def lane_indexed(self, target: A.Expr) -> bool:
        """An element of a thread-local array at an index that is not a constant (``acc[i]`` in a loop over
        ``i``), or of one held as a function of its element: a sum over the lanes of that array, not into one
        scalar."""
        ref = self.register_ref(target)
        return ref is not None and (A.const_int(ref[1], self.consts) is None or isinstance(self.env.get(ref[0]), RegFn))

    def accumulation_roots(self, s: A.Stmt) -> set[str]:
        """Floating-point variables and thread-local arrays a statement adds to (``acc += e``,
        ``acc[i] = acc[i] + e``); pointers and indices advanced, tiles and memory are not among them."""
        out: set[str] = set()
        counters = {c.var for n in A.walk(s) if isinstance(n, A.For) and (c := n.canonical()) is not None}
        for n in A.walk(s):
            if isinstance(n, A.Assign) and isinstance(n.target, A.Name) and n.target.id in counters:
                continue  # a nested loop's own counter
            if isinstance(n, A.Assign) and (n.op == "+=" or (n.op == "=" and isinstance(n.value, A.Binary)
                                                           and n.value.op == "+" and n.value.left == n.target)):
                root = _tile_root(n.target)
                if root and root not in self.indices and root not in self.tiles and root not in self.ptr_params:
                    out.add(root)
        return out

    def selects_accumulators(self, s: A.For, var: str) -> bool:
        """Whether every accumulation in the loop's body sits in an inner loop and adds to an element of a
        thread-local array its counter picks (``for i: for k: acc[i] += a[i][k] * b[k]``): the counter is then
        a lane of the array and the inner loop the sum."""
        roots = self.accumulation_roots(s.body)
        found = False
        for inner in (n for n in A.walk(s.body) if isinstance(n, A.For)):
            for n in A.walk(inner.body):
                if isinstance(n, A.Assign) and _tile_root(n.target) in roots:
                    ref = self.register_ref(n.target)
                    if ref is None or var not in A.free_names(ref[1]):
                        return False
                    found = True
        direct = [n for st in stmts_of(s.body) if not isinstance(st, A.For) for n in A.walk(st)
                  if isinstance(n, A.Assign) and _tile_root(n.target) in roots]
        return found and not direct

    def constant_trip(self, view: A.LoopView) -> tuple[int, int, int] | None:
        """(start, step, trip count) of a loop over constant bounds short enough to run as lanes."""
        values = [self.value(x) for x in (view.start, view.stop, view.step)]
        if not all(isinstance(v, Poly) and not v.atoms() for v in values):
            return None
        start, stop, step = (dict(v.terms).get((), 0) for v in values)
        trip = -(-(stop - start) // step) if step > 0 else 0
        return (start, step, trip) if 0 < trip <= MAX_LANE_TRIP else None

    def lane_loop(self, s: A.For, view: A.LoopView) -> None:
        """A loop of constant trip count whose body is not a sum: its counter is a lane atom over the trip
        count, every statement holds for each lane (a tile or memory stored per lane, a thread-local array
        written as a function of the lanes); a variable left depending on the last iteration is refused."""
        trip = self.constant_trip(view)
        if trip is None:
            raise PassRefused("a loop in the thread does not have a constant trip count")
        start, step, count = trip
        before, staged = dict(self.env), dict(self.staged)
        if count == 1:  # one iteration: its counter is its start (a lane of one would be a coordinate of nothing)
            atom = ""
            self.env[view.var] = Poly.const(start)
        else:
            atom = self.fresh("xp_l")
            self.lanes[atom] = count
            self.env[view.var] = Poly.const(start) + Poly.const(step) * Poly.atom(atom)
        try:
            self.run(stmts_of(s.body))
        except _Continue:
            raise PassRefused("a thread leaves inside a loop of constant trip count") from None
        for name in _declared_names(s.body) | {view.var}:
            if name in before:
                self.env[name] = before[name]
            else:
                self.env.pop(name, None)  # the body's own declarations and the counter
        if not atom:
            return
        for name, new in self.env.items():
            if new is before.get(name):
                continue
            laid = {a for a, _, _ in new.layout} if isinstance(new, RegFn) else set()
            if atom in _atoms_of(new) and atom not in laid:
                raise PassRefused(f"a loop of constant trip count leaves {name} as its last iteration set it")
        for name, tile in self.staged.items():
            if tile is not staged.get(name) and atom in _atoms_of(tile.value) and atom not in {
                    a for axis in tile.axes for a, _ in axis}:
                raise PassRefused(f"a loop of constant trip count stores the tile {name} over itself")

    def lane_sum(self, s: A.For, view: A.LoopView) -> None:
        """A sum loop whose body does more than accumulate (``for k { for i: regM[i] = As[..k..]; ...; for i,
        j: acc[i*TN+j] += regM[i] * regN[j]; }``): the body runs once for a summation atom, its inner loops as
        lanes; each accumulator (a variable or a thread-local array, zero before) becomes the sum of what one
        iteration adds to it, an array as a function of its lanes; what the body sets besides is that
        iteration's and unknown after the loop."""
        if A.const_int(view.step) != 1 and not (isinstance(self.value(view.step), Poly)
                                                  and self.value(view.step) == Poly.const(1)):
            raise PassRefused("a sum loop in the thread is not a unit-step counted loop")
        roots = self.accumulation_roots(s.body)
        for root in roots:
            start = self.env.get(root)
            if not (isinstance(start, Zero) or start == Poly() or (isinstance(start, RegFn) and isinstance(
                    start.value, Zero))):  # a function's layout covers the whole array: zero everywhere
                    raise PassRefused(f"a sum into {root} does not start from zero")
        stores, guards, before = len(self.stores), len(self.guards), dict(self.env)
        var, lo, hi, saved = self.enter_sum(view, [])
        for root in roots:
            self.env[root] = Unset(f"{root} is read while a loop adds to it")
        self.accumulating, self.sum_roots, self.accumulated_elements = {}, roots, {}
        self.sum_cond_depth = self.cond_depth
        try:
            self.run(stmts_of(s.body))
        except _Continue:
            raise PassRefused("a thread leaves inside a sum loop") from None
        finally:
            added, self.accumulating, self.sum_roots = self.accumulating, None, set()
        if len(self.stores) != stores or len(self.guards) != guards:
            raise PassRefused("a sum loop in the thread stores or exits")
        self.leave_sum(var, saved)
        for name in _declared_names(s.body):
            if name in before:
                self.env[name] = before[name]
            else:
                self.env.pop(name, None)
        for root, elements in self.accumulated_elements.items():
            # one sum per element: one function of the element when they are one sum over a lane
            merged = self.lane_of([(Poly.const(i),) for i in sorted(elements)],
                                  [Sum(var, lo, hi, elements[i]) for i in sorted(elements)]) if len(elements) > 1 else None
            if merged is None or sorted(elements) != list(range(self.registers[root])):
                raise PassRefused(f"the sums into the elements of {root} are not one sum over its elements")
            ((_index,), total), lane = merged
            self.env[root] = RegFn(((lane, 1, len(elements)),), total)
        for root in roots:
            if root in self.accumulated_elements:
                continue
            if root not in added:
                self.env[root] = before[root]
                continue
            layout, term = added[root]
            total = Sum(var, lo, hi, term)
            self.env[root] = RegFn(layout, total) if root in self.registers else total
        for name, new in list(self.env.items()):
            if name not in roots and new is not before.get(name) and var in _atoms_of(new):
                self.env[name] = Unset(f"{name} is read after a loop that set it in each iteration")

    def accumulate(self, target: A.Expr, e: A.Assign) -> bool:
        """``acc += term`` inside :meth:`lane_sum`: the term one iteration adds (False for other statements)."""
        root = _tile_root(target)
        if root not in self.sum_roots or self.accumulating is None:
            return False
        if self.cond_depth != self.sum_cond_depth:
            raise PassRefused(f"a sum loop adds to {root} under a condition")
        if e.op == "+=":
            term_expr = e.value
        elif e.op == "=" and isinstance(e.value, A.Binary) and e.value.op == "+" and e.value.left == target:
            term_expr = e.value.right
        else:
            raise PassRefused(f"a sum loop sets {root} other than by adding to it")
        layout: tuple[tuple[str, int, int], ...] = ()
        ref = self.register_ref(target)
        if ref is not None:
            index = self.value(ref[1])
            if not isinstance(index, Poly):
                raise PassRefused(f"the thread-local array {root} is indexed by a non-integer")
            if not index.atoms():  # one element of several the loop adds to (a hand-unrolled register tile)
                term = self.value(term_expr)
                slot = dict(index.terms).get((), 0)
                elements = self.accumulated_elements.setdefault(root, {})
                if not isinstance(term, FLOAT_VALUES) or slot in elements or root in self.accumulating:
                    raise PassRefused(f"a sum loop adds to {root} in a way it does not model")
                elements[slot] = term
                return True
            layout = self.lane_layout(index, self.registers[root], f"the thread-local array {root}")
        elif not (isinstance(target, A.Name) or (isinstance(target, A.Index) and target.base == A.name(root)
                                                 and root in self.thread_arrays and target.index == A.name("xp_t"))):
            raise PassRefused(f"a sum loop adds to {root} through an index it does not model")
        term = self.value(term_expr)
        if not isinstance(term, FLOAT_VALUES):
            raise PassRefused("the summed term is not a floating-point product")
        if root in self.accumulating or root in self.accumulated_elements:
            raise PassRefused(f"a sum loop adds to {root} twice in one iteration")
        self.accumulating[root] = (layout, term)
        return True

    def companions(self, s: A.For) -> A.For:
        """``for (a = a0, b = b0; a < e; a += s, b += t) body`` → ``b = b0;`` here, then ``for (a = a0; a < e; a
        += s) { body; b += t; }`` (the same iterations: the body has no ``continue`` of its own that would skip
        the update); other loops are returned as they are."""
        updates = _comma_items(s.step) if s.step is not None else []
        decls = s.init.decls if isinstance(s.init, A.DeclStmt) else ()
        if len(updates) < 2 or len(decls) != len(updates) or not isinstance(s.cond, A.Binary):
            return s
        counted = next((d for d in decls if A.name(d.name) in (s.cond.left, s.cond.right)), None)
        targets = [u.target.id if isinstance(u, A.Assign) and isinstance(u.target, A.Name) else "" for u in updates]
        if counted is None or sorted(targets) != sorted(d.name for d in decls) or _own_continue(s.body):
            return s
        others = [d for d in decls if d is not counted]
        if any(counted.name in A.free_names(d.init) for d in others if d.init is not None):
            return s
        for d in others:
            self.decl(d)
        own = next(u for u, t in zip(updates, targets, strict=True) if t == counted.name)
        moved = [A.ExprStmt(u) for u, t in zip(updates, targets, strict=True) if t != counted.name]
        body = A.Block((*stmts_of(s.body), *moved))
        return A.replace(s, init=A.DeclStmt((counted,)), step=own, body=body)

    def pointer_counter(self, s: A.For) -> A.For:
        """``for (T *p = b; p < e; p += s) body`` → ``for (long o = 0; o < e - b; o += s) { T *p = b + o; body }``
        (a tile loop that walks a pointer: the same iterations when the body writes neither ``p`` nor what ``b``
        names); other loops are returned as they are."""
        decls = s.init.decls if isinstance(s.init, A.DeclStmt) else ()
        if len(decls) != 1 or not decls[0].type.pointers or decls[0].init is None:
            return s
        pointer = decls[0]
        counter = A.name(pointer.name)
        begin = pointer.init
        if begin is None or not (isinstance(s.cond, A.Binary) and s.cond.op in ("<", "!=") and s.cond.left == counter
                                 and isinstance(s.step, A.Assign) and s.step.op == "+=" and s.step.target == counter):
            return s
        written = A.read_write(s.body).writes
        if pointer.name in written or A.free_names(begin) & written or A.free_names(s.cond.right) & written:
            return s
        offset = self.fresh("xp_po")
        start = A.VarDecl(offset, A.Type("long"), init=A.lit(0))
        walked = A.replace(pointer, init=A.Binary("+", begin, A.name(offset)))
        return A.replace(s, init=A.DeclStmt((start,)), cond=A.Binary(s.cond.op, A.name(offset), A.Binary(
            "-", s.cond.right, begin)), step=A.Assign("+=", A.name(offset), s.step.value),
                         body=A.Block((A.DeclStmt((walked,)), *stmts_of(s.body))))

    def enter_sum(self, view: A.LoopView, decls: list[A.Stmt]) -> tuple[str, Poly, Poly, dict[str, Any]]:
        """A summation atom for the loop variable over the loop's range, the loop's declarations evaluated;
        returns (atom, lo, hi, the names to restore when the sum is left)."""
        lo, hi = self.value(view.start), self.value(view.stop)
        if not (isinstance(lo, Poly) and isinstance(hi, Poly)):
            raise PassRefused("loop bounds are not integers")
        var = self.fresh("xp_k")
        local_names = [d.name for st in decls if isinstance(st, A.DeclStmt) for d in st.decls]
        saved = {n: self.env.get(n) for n in [view.var, *local_names]}
        self.env[view.var] = Poly.atom(var)
        self.ranges[var] = (lo, hi)
        for st in decls:
            self.stmt(st)
        return var, lo, hi, saved

    def leave_sum(self, var: str, saved: dict[str, Any]) -> None:
        del self.ranges[var]
        for n, v in saved.items():
            if v is None:
                self.env.pop(n, None)
            else:
                self.env[n] = v

    def nested_sum(self, view: A.LoopView, decls: list[A.Stmt], inner: A.For) -> None:
        """``for v: [decls] for w: ... acc += e`` → ``acc = sum_v sum_w ... e`` (every accumulator from zero)."""
        before = dict(self.env)
        stores, guards = len(self.stores), len(self.guards)
        var, lo, hi, saved = self.enter_sum(view, decls)
        self.loop(inner)
        if len(self.stores) != stores or len(self.guards) != guards:
            raise PassRefused("a loop nest in the thread stores or exits")
        for name, new in list(self.env.items()):
            if name in saved or new is before.get(name):
                continue
            old = before.get(name)
            if not (isinstance(old, Zero) or old == Poly()) or not isinstance(new, Sum):
                raise PassRefused(f"a loop nest sets {name} to something other than a sum from zero")
            self.env[name] = Sum(var, lo, hi, new)
        self.leave_sum(var, saved)

    def register_ref(self, e: A.Expr) -> tuple[str, A.Expr] | None:
        """(array, index) of an element of a thread-local array of constant extent (``acc[i]``, loop
        recovery's ``acc[xp_t][i]``); None for other expressions."""
        if not isinstance(e, A.Index):
            return None
        base = e.base
        if isinstance(base, A.Name) and base.id in self.registers and base.id not in self.thread_registers:
            return base.id, e.index
        indices = [e.index]
        while isinstance(base, A.Index) and not (base.index == A.name("xp_t") and isinstance(base.base, A.Name)):
            indices.insert(0, base.index)
            base = base.base
        if isinstance(base, A.Index) and isinstance(base.base, A.Name) and base.base.id in self.thread_registers \
                and base.index == A.name("xp_t"):
            name = base.base.id
            rows = self.register_rows.get(name, (self.registers[name],))
            if len(indices) != len(rows):
                return None
            flat = indices[0]
            for extent, index in zip(rows[1:], indices[1:], strict=True):
                flat = A.binop("+", A.binop("*", flat, A.lit(extent)), index)  # row-major
            return name, flat
        return None

    def cleared_registers(self, e: A.Call) -> str | None:
        """The thread-local array ``memset(&x[xp_t], 0, sizeof(x[xp_t]))`` (or ``memset(x, 0, sizeof x)``)
        clears whole; None for another memset."""
        target = e.args[0]
        if isinstance(target, A.Unary) and target.op == "&":
            target = target.operand
        name = target.id if isinstance(target, A.Name) else (
            target.base.id if isinstance(target, A.Index) and isinstance(target.base, A.Name)
            and target.index == A.name("xp_t") else "")
        if name not in self.registers or A.const_int(e.args[1]) != 0:
            return None
        size = e.args[2]
        if not (isinstance(size, A.Call | A.SizeOf) and name in A.free_names(size)):
            return None
        return name

    def register_slot(self, e: A.Expr) -> str | None:
        """``acc[2]`` of a thread-local array of constant extent → its env key; None for other expressions."""
        ref = self.register_ref(e)
        if ref is None or isinstance(self.env.get(ref[0]), RegFn | Unset):
            return None
        name, index_expr = ref
        index = self.value(index_expr)
        if not isinstance(index, Poly) or index.atoms() or not 0 <= dict(index.terms).get((), 0) < self.registers[
                name]:
            raise PassRefused(f"the thread-local array {name} is indexed by a variable")
        return f"{name}[{dict(index.terms).get((), 0)}]"

    # thread-local arrays written by lane loops (functions of their element)
    def lane_layout(self, index: Poly, extent: int, what: str) -> tuple[tuple[str, int, int], ...]:
        """The lanes of an index that covers ``[0, extent)`` once, as a mixed radix ``(atom, weight, radix)``
        (innermost first); refuses another index."""
        terms = sorted(((m[0], c) for m, c in index.terms if len(m) == 1 and m[0] in self.lanes),
                       key=lambda t: t[1])
        if len(terms) != len(index.terms):
            raise PassRefused(f"{what} is written at an index that is not a loop's counter")
        layout: list[tuple[str, int, int]] = []
        weight = 1
        for atom, c in terms:
            if c != weight:
                raise PassRefused(f"{what} is not written once per element by the loops around it")
            layout.append((atom, c, self.lanes[atom]))
            weight *= self.lanes[atom]
        if weight != extent:
            raise PassRefused(f"{what} is written in {weight} of its {extent} elements by the loops around it")
        return tuple(layout)

    def lane_write(self, target: A.Index, op: str, value: Any) -> bool:
        """``x[i] = v`` of a thread-local array inside lane loops (its index a counter of them): the array
        becomes the function ``v``; False for a write this does not take (a constant index, no function)."""
        ref = self.register_ref(target)
        if ref is None:
            return False
        name, index_expr = ref
        index = self.value(index_expr)
        current = self.env.get(name)
        if not isinstance(index, Poly) or not (index.atoms() & set(self.lanes) or isinstance(current, RegFn)):
            return False
        if op != "=":
            raise PassRefused(f"the thread-local array {name} is updated outside a sum")
        if not index.atoms() and isinstance(current, RegFn) and not current.layout and current.value == value:
            return True  # `x[0] = 0` after the memset that cleared it
        if isinstance(value, Epilogue):
            raise PassRefused(value.reason or f"the value written to {name} is not modelled")
        if not isinstance(value, FLOAT_VALUES):
            raise PassRefused(f"the thread-local array {name} holds something other than floating-point values")
        self.env[name] = RegFn(self.lane_layout(index, self.registers[name], f"the thread-local array {name}"),
                               value)
        return True

    def register_read(self, fn: RegFn, index: Poly, name: str) -> Any:
        """An element of a thread-local array that is a function of its element: the index, written in the
        function's radix, gives its lanes."""
        if not fn.layout:
            return fn.value
        return subst_value(fn.value, self.digits(index, [(a, w) for a, w, _ in fn.layout],
                                                  [r for _, _, r in fn.layout], f"the thread-local array {name}"))

    def digits(self, index: Poly, parts: list[tuple[str, int]], radices: list[int], what: str) -> dict[str, Poly]:
        """``index`` written in the mixed radix of ``parts`` (``(atom, weight)``, innermost first, radices
        ``radices``): each part's digit, a polynomial whose range (known for every atom it reads) lies inside
        the part's radix. Refuses an index that does not split so."""
        digits = [Poly() for _ in parts]
        for m, c in index.terms:
            if m == ():
                rest = c
                for i in range(len(parts) - 1, -1, -1):
                    digits[i] = digits[i] + Poly.const(rest // parts[i][1])
                    rest %= parts[i][1]
                if rest or c < 0:
                    raise PassRefused(f"{what} is read at an index that does not split into its layout")
                continue
            place = next((i for i, (_, w) in enumerate(parts) if w <= c < w * radices[i]), None)
            if place is None or c % parts[place][1]:
                raise PassRefused(f"{what} is read at an index that does not split into its layout")
            digits[place] = digits[place] + Poly.of({m: c // parts[place][1]})
        for digit, radix in zip(digits, radices, strict=True):
            bounds = self.poly_bounds(digit)
            if bounds is None or bounds[0] < 0 or bounds[1] >= radix:
                raise PassRefused(f"{what} is read at an index whose parts are not known to stay in range")
        return {a: d for (a, _), d in zip(parts, digits, strict=True)}

    def atom_bounds(self, atom: str) -> tuple[int, int] | None:
        """The least and greatest value of an index atom, where known: a lane, a summation index over constant
        bounds, a digit, or a thread index (or quotient) over a block extent the checks fix."""
        if atom in self.lanes:
            return 0, self.lanes[atom] - 1
        if atom in self.ranges:
            lo, hi = self.ranges[atom]
            if not (lo.atoms() or hi.atoms()):
                return dict(lo.terms).get((), 0), dict(hi.terms).get((), 0) - 1
            return None
        part = self.thread_part(atom)
        if part is None:
            return None
        axis, below, radix = part
        if radix is not None:
            return 0, radix - 1
        for condition in self.preconditions:
            found = re.fullmatch(rf"(\d+) == xp_bd{axis}", condition)
            if found:
                return 0, int(found.group(1)) // below - 1
        return None

    def poly_bounds(self, p: Poly) -> tuple[int, int] | None:
        lo = hi = 0
        for m, c in p.terms:
            if m == ():
                lo, hi = lo + c, hi + c
                continue
            bounds = self.atom_bounds(m[0]) if len(m) == 1 else None
            if bounds is None:
                return None
            a, b = bounds[0] * c, bounds[1] * c
            lo, hi = lo + min(a, b), hi + max(a, b)
        return lo, hi

    def scalar_slot(self, e: A.Expr) -> str | None:
        """The env key of a scalar the thread owns (a variable, a per-thread array element, a register)."""
        if isinstance(e, A.Name):
            return e.id
        if isinstance(e, A.Index) and isinstance(e.base, A.Name) and e.base.id in self.thread_arrays:
            return e.base.id
        return self.register_slot(e)

    def branch(self, s: A.If) -> None:
        cond = s.cond
        if isinstance(cond, A.Index) and isinstance(cond.base, A.Name) and cond.base.id == "xp_done":
            return  # `if (xp_done[xp_t]) continue;`: this thread's earlier exits are in the guards
        then = [x for x in stmts_of(s.then) if not isinstance(x, A.Empty)]
        exits = then and isinstance(then[-1], A.Continue | A.Return)
        if s.else_ is not None:
            # `if (c) x = v; else x = w;` is the select `x = c ? v : w` (a zero-padded tile load)
            other = [x for x in stmts_of(s.else_) if not isinstance(x, A.Empty)]
            if len(then) == len(other) == 1 and isinstance(then[0], A.ExprStmt) and isinstance(other[0], A.ExprStmt):
                a, b = then[0].expr, other[0].expr
                if isinstance(a, A.Assign) and isinstance(b, A.Assign) and a.op == b.op == "=" and a.target == b.target:
                    self.expr_stmt(A.assign(a.target, A.Ternary(cond, a.value, b.value)))
                    return
            raise PassRefused("the thread branches (if/else)")
        if exits:
            if self.depth > 0 or not self.in_thread or self.cond_depth > 0 or not isinstance(then[-1], A.Continue):
                raise PassRefused("an early exit inside a helper or under another condition")
            if any(not (isinstance(x, A.ExprStmt) and isinstance(x.expr, A.Assign)
                        and isinstance(x.expr.target, A.Index) and isinstance(x.expr.target.base, A.Name)
                        and x.expr.target.base.id == "xp_done") for x in then[:-1]):
                raise PassRefused("an early exit does more than leave")
            # a condition kept across barriers is re-checked in every phase: each guard is recorded once
            self.guards += [g for g in self.conditions(cond, negate=True) if g not in self.guards]
            return
        mark = len(self.guards)
        added = self.conditions(cond, negate=False)
        self.guards += added
        before = dict(self.env)
        self.cond_depth += 1
        try:
            self.run(then)
        finally:
            self.cond_depth -= 1
        del self.guards[mark:]
        # a variable set only where the condition holds keeps its value elsewhere: zero, or the thread's value
        # is not one expression (refused; it was wrongly taken as set unconditionally)
        for name, old in before.items():
            new = self.env.get(name)
            if new is old:
                continue
            if isinstance(new, FLOAT_VALUES) and (isinstance(old, Zero) or old == Poly()):
                inner = new.value if isinstance(new, Select) else new
                self.env[name] = Select(_union(tuple(added), new.guards if isinstance(new, Select) else ()), inner)
            else:
                self.env[name] = Unset(f"{name} is read after a condition that may not have set it")

    def conditions(self, cond: A.Expr, negate: bool) -> list[Guard]:
        cond = strip_casts(cond)
        if isinstance(cond, A.Index) and isinstance(cond.base, A.Name) and isinstance(
                self.env.get(cond.base.id), Predicate):
            kept = self.env[cond.base.id].guards
            if not negate:
                return list(kept)
            if len(kept) != 1:
                raise PassRefused("a guard is a disjunction of bounds")
            return [Guard(kept[0].bound, kept[0].index + Poly.const(1))]  # not (i < b): b < i + 1
        if isinstance(cond, A.Unary) and cond.op == "!":
            return self.conditions(cond.operand, not negate)
        if isinstance(cond, A.Binary) and cond.op in ("&&", "||"):
            if (cond.op == "&&") != negate:  # a conjunction of guards
                return self.conditions(cond.left, negate) + self.conditions(cond.right, negate)
            raise PassRefused("a guard is a disjunction of bounds")
        if isinstance(cond, A.Binary) and cond.op in ("<", ">", "<=", ">="):
            left, right = self.value(cond.left), self.value(cond.right)
            if not (isinstance(left, Poly) and isinstance(right, Poly)):
                raise PassRefused("a guard compares non-integers")
            op = {"<": ">=", ">": "<=", "<=": ">", ">=": "<"}[cond.op] if negate else cond.op
            one = Poly.const(1)
            if op == "<":
                return [Guard(left, right)]
            if op == ">":
                return [Guard(right, left)]
            if op == "<=":
                return [Guard(left, right + one)]
            return [Guard(right, left + one)]
        raise PassRefused("a guard is not a comparison of indices")

    # expressions
    def value(self, e: A.Expr) -> Any:
        e = strip_casts(e)
        if isinstance(e, A.Literal):
            v = e.int_value
            if v is not None:
                return Poly.const(v)
            try:
                f = float(e.text.rstrip("fF"))
            except ValueError:
                raise PassRefused(f"the thread uses the constant {e.text}") from None
            return Zero() if f == 0.0 else FConst(f)
        if isinstance(e, A.Name):
            if e.id in self.env:
                if self.env[e.id] is None:
                    raise PassRefused(f"{e.id} is read before it is set")
                if isinstance(self.env[e.id], Unset):
                    raise PassRefused(self.env[e.id].reason)
                return self.env[e.id]
            if e.id in self.ptr_params:
                return Ptr(e.id, Poly())
            if e.id in self.consts:
                return Poly.const(self.consts[e.id])
            if self.planned and e.id in self.radices:
                return self.coordinates()[e.id]
            if e.id in self.int_params or e.id in ("xp_bz",) or e.id in RAW_THREAD_ATOMS \
                    or e.id.startswith(("xp_bd", "xp_gd")):
                return Poly.atom(e.id)
            raise PassRefused(f"the thread reads {e.id}, which is not a parameter")
        if isinstance(e, A.Index) and _tile_root(e) in self.tiles:
            return self.tile_read(e)
        ref = self.register_ref(e)
        if ref is not None and isinstance(self.env.get(ref[0]), RegFn | Unset):
            current = self.env[ref[0]]
            if isinstance(current, Unset):
                raise PassRefused(current.reason)
            index = self.value(ref[1])
            if not isinstance(index, Poly):
                raise PassRefused(f"the thread-local array {ref[0]} is indexed by a non-integer")
            return self.register_read(current, index, ref[0])
        register = self.register_slot(e)
        if register is not None:
            if self.env.get(register) is None:
                raise PassRefused(f"{register} is read before it is set")
            if isinstance(self.env[register], Unset):
                raise PassRefused(self.env[register].reason)
            return self.env[register]
        if isinstance(e, A.Ternary):
            other = self.value(e.else_)
            if not (isinstance(other, Zero) or other == Poly()):  # `c ? A[i] : 0`: the integer zero converts
                raise PassRefused("a conditional value is not zero on its other side")
            then = self.value(e.then)
            if not isinstance(then, FLOAT_VALUES):
                raise PassRefused("a conditional integer value")
            return Select(tuple(self.conditions(e.cond, negate=False)), then)
        cast = _vector_cast(e)
        if cast is not None and isinstance(cast[0], A.Unary) and cast[0].op == "&" and isinstance(e, A.Index) \
                and self.register_ref(cast[0].operand) is not None:
            # a vector of a thread-local array's consecutive elements (``FLOAT4(r_c[i][j])``): each element
            element = cast[0].operand
            assert isinstance(element, A.Index)
            first = A.binop("+", element.index, A.binop("*", e.index, A.lit(cast[1])))
            return Vec(tuple(self.value(A.Index(element.base, A.binop("+", first, A.lit(c))))
                             for c in range(cast[1])))
        vector = self.vector_ref(e)
        if vector is not None:
            where, offset, width, _ = vector
            if isinstance(where, str):
                raise PassRefused(f"the tile {where} is read as vectors")
            return Vec(tuple(Load(where.base, offset + Poly.const(c)) for c in range(width)))
        if isinstance(e, A.Unary) and e.op == "&" and isinstance(e.operand, A.Index) and _tile_root(
                e.operand) not in self.tiles and self.register_ref(e.operand) is None:
            address = self.combine("+", self.value(e.operand.base), self.value(e.operand.index))  # &p[i]: p + i
            if not isinstance(address, Ptr):
                raise PassRefused("the thread takes the address of something other than global memory")
            return address
        if isinstance(e, A.Member) and e.field in COMPONENTS:
            whole = self.value(e.base)
            if not isinstance(whole, Vec) or COMPONENTS.index(e.field) >= len(whole.components):
                raise PassRefused(f"the thread reads .{e.field} of something other than a vector")
            part = whole.components[COMPONENTS.index(e.field)]
            if isinstance(part, Epilogue):
                raise PassRefused(part.reason or "a vector component is not modelled")
            return part
        if isinstance(e, A.Index):
            if isinstance(e.base, A.Name) and e.base.id in self.thread_arrays:
                if not (isinstance(e.index, A.Name) and e.index.id == "xp_t"):
                    raise PassRefused(f"the thread reads another thread's {e.base.id}")
                return self.value(e.base)
            base, index = self.value(e.base), self.value(e.index)
            if not (isinstance(base, Ptr) and isinstance(index, Poly)):
                raise PassRefused("the thread indexes something other than a global pointer")
            return Load(base.base, base.offset + index)
        if isinstance(e, A.Binary):
            gi = self.global_index(e)
            if gi is not None:
                return gi
            result = self.combine(e.op, self.value(e.left), self.value(e.right))
            return self.fold_global(result) if isinstance(result, Poly) else result
        if isinstance(e, A.Call):
            return self.call(e)
        raise PassRefused(f"the thread evaluates {type(e).__name__}")

    def global_index(self, e: A.Binary) -> Poly | None:
        """``xp_b? * C + xp_t?`` → the atom ``xp_g?`` (C recorded, checked at run time against blockDim)."""
        if e.op != "+":
            return None
        for prod, t in ((e.left, e.right), (e.right, e.left)):
            prod, t = strip_casts(prod), strip_casts(t)
            if not (isinstance(t, A.Name) and t.id in ("xp_tx", "xp_ty")) or not isinstance(prod, A.Binary) \
                    or prod.op != "*":
                continue
            axis = t.id[-1]
            for b, c in ((prod.left, prod.right), (prod.right, prod.left)):
                b = strip_casts(b)
                if isinstance(b, A.Name) and b.id == f"xp_b{axis}" and not (A.free_names(c) & RAW_THREAD_ATOMS):
                    if self.value(c) is None or not isinstance(self.value(c), Poly):
                        return None
                    known = self.block_sizes.get(axis)
                    if known is not None and known != c:
                        raise PassRefused(f"two different block sizes along {axis}")
                    self.block_sizes[axis] = c
                    return Poly.atom(f"xp_g{axis}")
        return None

    def combine(self, op: str, a: Any, b: Any) -> Any:
        if isinstance(a, Poly) and isinstance(b, Poly) and op in ("<<", ">>", "&") and not b.atoms():
            # shifts and masks by constants are products, quotients and remainders by powers of two (the
            # quotient and remainder forms only take thread and global indices, which are not negative)
            c = dict(b.terms).get((), 0)
            if not a.atoms():
                x = dict(a.terms).get((), 0)
                return Poly.const(x << c if op == "<<" else x >> c if op == ">>" else x & c)
            if op == "<<" and 0 <= c < 32:
                return a * Poly.const(1 << c)  # a product whatever the sign (what C++20 defines it to be)
            if not a.atoms() & (RAW_THREAD_ATOMS | self.index_atoms()):
                # thread-free (maybe negative): an arithmetic shift right is a floor, not C's quotient
                return Poly.atom(f"({a.c_text()} {op} {c}L)")
            if op == ">>" and 0 <= c < 32:
                return self.combine("/", a, Poly.const(1 << c))
            if op == "&" and c > 0 and c & (c + 1) == 0:
                return self.combine("%", a, Poly.const(c + 1))
        if isinstance(a, Poly) and isinstance(b, Poly):
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op in ("/", "%") and not (a.atoms() or b.atoms()) and b.terms:
                x, y = dict(a.terms).get((), 0), dict(b.terms)[()]
                quotient = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)  # C truncates toward zero
                return Poly.const(quotient if op == "/" else x - quotient * y)
            if op in ("/", "%") and not (a.atoms() | b.atoms()) & (RAW_THREAD_ATOMS | self.index_atoms()):
                return Poly.atom(f"({a.c_text()} {op} {b.c_text()})")  # thread-free: an opaque value
            if op in ("/", "%"):
                return self.delinearize(op, a, b)
            raise PassRefused(f"integer operator {op} in an index")
        if isinstance(a, Ptr) and isinstance(b, Ptr) and op == "-" and a.base == b.base:
            return a.offset - b.offset  # elements between two pointers into one buffer
        if isinstance(a, Ptr) and isinstance(b, Poly) and op in ("+", "-"):
            return Ptr(a.base, a.offset + (b if op == "+" else -b))
        if isinstance(a, Poly) and isinstance(b, Ptr) and op == "+":
            return Ptr(b.base, b.offset + a)
        if not (isinstance(a, FLOAT_VALUES) and isinstance(b, FLOAT_VALUES)):
            raise PassRefused(f"operator {op} mixes integers and floating-point values")
        if op == "*":
            if isinstance(a, Zero) or isinstance(b, Zero):
                return Zero()
            if isinstance(a, Select) or isinstance(b, Select):  # zero where either side is zero
                ga, va = (a.guards, a.value) if isinstance(a, Select) else ((), a)
                gb, vb = (b.guards, b.value) if isinstance(b, Select) else ((), b)
                inner = self.combine("*", va, vb)
                return inner if isinstance(inner, Zero) else Select(_union(ga, gb), inner)
            if isinstance(a, FConst) and isinstance(b, FConst):
                return FConst(a.value * b.value)
            if isinstance(a, FConst):
                return Scale(a.value, b)
            if isinstance(b, FConst):
                return Scale(b.value, a)
            return Mul(a, b)
        if op == "/" and isinstance(b, FConst) and b.value != 0.0:
            return Scale(1.0 / b.value, a)
        if op == "+":
            if isinstance(a, Zero):
                return b
            if isinstance(b, Zero):
                return a
            return Add((*(a.terms if isinstance(a, Add) else (a,)), *(b.terms if isinstance(b, Add) else (b,))))
        raise PassRefused(f"floating-point operator {op}")

    def index_atoms(self) -> set[str]:
        digits = {f"{DIGIT[b]}{i}" for b, rs in self.radices.items() for i in range(len(rs))}
        quotients = {f"{QUOTIENT[b]}{i}" for b, rs in self.radices.items() for i in range(1, len(rs) + 1)}
        return {"xp_gx", "xp_gy", "xp_bz"} | self.sum_atoms | digits | quotients

    # a global index split into digits
    def quotient(self, base: str, level: int) -> str:
        return base if level == 0 else f"{QUOTIENT[base]}{level}"

    def delinearize(self, op: str, a: Poly, b: Poly) -> Poly:
        """``q / D`` and ``q % D`` where ``q`` is a global index (or a quotient of one already taken) and ``D``
        a thread-free size: the index is written in a mixed radix (``idx = d0 + R0*(d1 + R1*(... + q_L))``,
        radices innermost first); ``D`` must be a product of consecutive radices from ``q``'s level (a new
        radix is appended at the end). The digits are atoms over ``[0, R_i)``; radices must be positive (a
        run-time precondition), the index non-negative (a thread's global index is)."""
        if b.atoms() & (RAW_THREAD_ATOMS | self.index_atoms()):
            raise PassRefused(f"integer operator {op} by a thread-dependent value")
        divisor = dict(b.terms).get((), 0) if not b.atoms() else 0
        whole = Poly.of({m: c for m, c in a.terms if len(m) == 1 and (m[0] in self.lanes or m[0] in self.ranges)
                         and c % divisor == 0 and (bounds := self.atom_bounds(m[0])) is not None and bounds[0] >= 0}
                        ) if divisor > 1 else Poly()
        if whole.terms and whole != a:
            # `(t + 256 * l) / 16` of a thread index t and a lane l >= 0: `t / 16 + 16 * l` (and `t % 16`), the
            # index is non-negative
            rest = self.delinearize(op, a - whole, b)
            return rest + Poly.of({m: c // divisor for m, c in whole.terms}) if op == "/" else rest
        split = self.split_digits(op, a, b) if self.planned else None
        if split is not None:
            return split
        level: tuple[str, int] | None = None
        expanded = self.coordinates() if self.planned else {}
        for base in DIGIT:
            for i in range(len(self.radices.get(base, [])) + 1):
                if a in (Poly.atom(self.quotient(base, i)), expanded.get(self.quotient(base, i))):
                    level = (base, i)
        if level is None:
            raise PassRefused(f"integer operator {op} in an index that is not a thread's global or block index")
        base, m = level
        radices = self.radices.setdefault(base, [])
        below = [dict(r.terms).get((), 0) if not r.atoms() else 0 for r in radices[:m]]
        if base in THREAD_SPLITS and not b.atoms() and b.terms and all(below):
            self.divisors.setdefault(base, set()).add(math.prod(below) * dict(b.terms)[()])
        rest, j = b, m
        while rest != Poly.const(1):
            if j == len(radices):
                radices.append(rest)
                self.need(f"{rest.c_text()} > 0")
                j += 1
                break
            q = exact_div(rest, radices[j])
            if q is None:
                raise PassRefused(f"a thread index is split by {b.c_text()}, which does not match its earlier split")
            rest, j = q, j + 1
        if op == "/":
            if self.planned and j < len(radices):
                return self.coordinates()[self.quotient(base, j)]  # over the digits, as every split of it
            return Poly.atom(self.quotient(base, j))
        out, weight = Poly(), Poly.const(1)
        for i in range(m, j):
            out = out + Poly.atom(f"{DIGIT[base]}{i}") * weight
            weight = weight * radices[i]
        return out

    def split_digits(self, op: str, a: Poly, b: Poly) -> Poly | None:
        """``a / D`` or ``a % D`` where ``a`` is consecutive digits of a planned thread index in their own radix
        (``tx % 32`` is ``d0 + 2 d1 + 16 d2`` over the radices 2, 8, 2) and ``D`` the product of the first
        few of their radices: the digits below ``D`` (``%``) or those above it, rescaled (``/``); None for
        other operands."""
        if b.atoms() or not b.terms:
            return None
        divisor = dict(b.terms)[()]
        for base, radices in self.radices.items():
            if any(r.atoms() or not r.terms for r in radices):
                continue
            sizes = [dict(r.terms)[()] for r in radices]
            names = [f"{DIGIT[base]}{i}" for i in range(len(sizes))] + [self.quotient(base, len(sizes))]
            terms = dict(a.terms)
            levels = [i for i, n in enumerate(names) if (n,) in terms]
            if not levels or len(terms) != len(levels) or levels != list(range(levels[0], levels[-1] + 1)):
                continue
            if any(terms[(names[i],)] != math.prod(sizes[levels[0]:i]) for i in levels):
                continue  # not the digits in their own radix
            cut = next((i for i in levels if math.prod(sizes[levels[0]:i]) == divisor), None)
            if cut is None:
                bounded = levels[-1] < len(sizes)  # without the last quotient, a < the product of its radices
                if not (bounded and math.prod(sizes[levels[0]:levels[-1] + 1]) == divisor):
                    continue
                return a if op == "%" else Poly()
            low = sum((Poly.atom(names[i]) * Poly.const(terms[(names[i],)]) for i in levels if i < cut), Poly())
            high = sum((Poly.atom(names[i]) * Poly.const(terms[(names[i],)] // divisor) for i in levels if i >= cut),
                       Poly())
            return low if op == "%" else high
        return None

    def coordinates(self) -> dict[str, Poly]:
        """Each split global index and its intermediate quotients in terms of the digits and the last
        quotient (the coordinates a thread is identified by)."""
        mapping: dict[str, Poly] = {}
        for base, radices in self.radices.items():
            top = len(radices)
            value = Poly.atom(self.quotient(base, top))
            for i in range(top - 1, -1, -1):
                value = Poly.atom(f"{DIGIT[base]}{i}") + radices[i] * value
                mapping[self.quotient(base, i)] = value
        return mapping

    def fresh(self, prefix: str) -> str:
        """A new summation (``xp_k``) or tile (``xp_q``) index atom."""
        self.loops += 1
        atom = f"{prefix}{self.loops}"
        self.sum_atoms.add(atom)
        return atom

    def fold_global(self, p: Poly) -> Poly:
        """``xp_b? * C + xp_t? + rest`` → ``xp_g? + rest`` however the index was spelled (C a constant or a
        block-size name, recorded like :meth:`global_index` does)."""
        for axis in "xy":
            t, b = f"xp_t{axis}", f"xp_b{axis}"
            d = p.as_dict()
            block_terms = [(m, c) for m, c in d.items() if b in m]
            if d.get((t,)) != 1 or len(block_terms) != 1:
                continue
            m, c = block_terms[0]
            others = [a for a in m if a != b]
            size: A.Expr
            if not others and c > 0:
                size = A.Literal(str(c), "number")
            elif len(others) == 1 and c == 1 and (others[0].startswith("xp_bd") or others[0] in self.int_params):
                size = A.name(others[0])
            else:
                continue
            known = self.block_sizes.get(axis)
            if known is not None and self.value(known) != self.value(size):
                raise PassRefused(f"two different block sizes along {axis}")
            self.block_sizes.setdefault(axis, size)
            del d[(t,)], d[m]
            d[(f"xp_g{axis}",)] = d.get((f"xp_g{axis}",), 0) + 1
            p = Poly.of(d)
        return p

    # block-level tiles
    def need(self, condition: str) -> None:
        if condition not in self.preconditions:
            self.preconditions.append(condition)

    def tile_store(self, target: A.Index, e: A.Assign) -> None:
        name = _tile_root(target)
        if e.op != "=" or not self.in_thread or self.cond_depth > 0 or self.depth > 0:
            raise PassRefused(f"the tile {name} is not stored by every thread of the block, once")
        for g in self.guards:
            # the threads that stage a tile under an early exit: every thread of the launch passes it (checked at
            # run time), else a tile element would hold what no thread stored
            self.need(self.every_thread_passes(g, name))
        extents = self.tiles[name]
        indices = [self.value(x) for x in _tile_indices(target)]
        if len(indices) != len(extents) or not all(isinstance(x, Poly) for x in indices):
            raise PassRefused(f"the tile {name} is stored through a partial index")
        self.stage_piece(name, tuple(indices), self.value(e.value))

    def stage_piece(self, name: str, indices: tuple[Poly, ...], value: Any) -> None:
        """One store into a tile; the stores of one phase (``As[(4 c + i) * 128 + r] = t.<i>`` for each
        component ``i``) are one store over a lane their indices and values are linear in, which must cover
        the tile one element per thread and lane."""
        if not isinstance(value, FLOAT_VALUES):
            raise PassRefused(f"the tile {name} stages something other than floating-point values")
        phase, pieces = self.pieces.get(name, (self.phase, []))
        pieces = [*pieces, (indices, value)] if phase == self.phase else [(indices, value)]
        if all(q == indices for q, _ in pieces):
            pieces = [(indices, value)]  # stored over the same elements again: the last store is what they hold
        self.pieces[name] = (self.phase, pieces)
        try:
            lane = None
            if len(pieces) > 1:
                merged = self.lane_of([p[0] for p in pieces], [p[1] for p in pieces])
                if merged is None:
                    raise PassRefused(f"the tile {name} is stored by several statements that are not one store")
                (indices, value), lane = merged
            needs: list[str] = []
            layouts = [self.radix_layout(q, extent, name, needs)
                       for q, extent in zip(indices, self.tiles[name], strict=True)]
            atoms = [a for layout in layouts for a, _ in layout]
            if len(set(atoms)) != len(atoms) or (lane is not None and lane not in atoms):
                raise PassRefused(f"the tile {name} is not stored one element per thread")
            self.staged[name] = Staged(tuple(layouts), value, self.phase, tuple(needs))
        except PassRefused as refusal:
            # a read refuses with the reason (more stores of this phase may still complete the tile)
            self.staged[name] = Staged((), Unset(refusal.reason), self.phase)

    def lane_of(self, polys: list[tuple[Poly, ...]], values: list[Any]) -> tuple[tuple[tuple[Poly, ...], Any], str] | None:
        """The ``n`` items (index polynomials and a value each) as one over a new lane ``v`` in ``[0, n)``:
        every polynomial ``p0 + v * (p1 - p0)`` and the value likewise, checked to give item ``c`` at ``v =
        c``, and the lane; None where the items are not so."""
        atom = self.fresh("xp_l")
        shape = [a + Poly.atom(atom) * (b - a) for a, b in zip(polys[0], polys[1], strict=True)]
        value = _lane_form(values[0], values[1], atom)
        if value is None:
            return None
        for c, (ps, v) in enumerate(zip(polys, values, strict=True)):
            at = {atom: Poly.const(c)}
            if [subst_poly(q, at) for q in shape] != list(ps) or subst_value(value, at) != v:
                return None
        self.lanes[atom] = len(values)
        return (tuple(shape), value), atom

    def radix_layout(self, index: Poly, extent: int, tile: str, needs: list[str]) -> tuple[tuple[str, int], ...]:
        """The thread atoms of one dimension's store index with their weights, outermost first: a mixed radix
        (weights 1, r0, r0*r1, ...; the last atom's range times its weight is the extent) in which every element
        of the dimension is stored by one thread. The atoms' ranges are the launch's (checked at run time) or
        the digits' radices."""
        terms = sorted(((m[0], c) for m, c in index.terms if len(m) == 1), key=lambda t: t[1])
        if len(terms) != len(index.terms) or not terms:
            raise PassRefused(f"the tile {tile} is not stored one element per thread")
        weight = 1
        for k, (atom, c) in enumerate(terms):
            if self.thread_part(atom) is None or c != weight:
                raise PassRefused(f"the tile {tile} is not stored one element per thread")
            following = terms[k + 1][1] if k + 1 < len(terms) else extent
            if following % weight:
                raise PassRefused(f"the tile {tile} is not stored one element per thread")
            condition = self.part_range(atom, following // weight, f"the tile {tile}")
            if condition is not None and condition not in needs:
                needs.append(condition)
            weight = following
        return tuple(reversed(terms))

    def thread_part(self, atom: str) -> tuple[str, int, int | None] | None:
        """A thread index's own atom, a digit or a quotient of it: (axis, product of the radices below it, its
        radix when it is a digit); None for anything else (or a split by a value that is not a constant). A
        lane is a digit of its own axis (named after it) whose radix is its trip count."""
        if atom in self.lanes:
            return atom, 1, self.lanes[atom]
        for axis in "xyz":
            base = f"xp_t{axis}"
            if atom == base:
                return axis, 1, None
            radices = self.radices.get(base, [])
            if not radices:
                continue
            product = 1
            for i, r in enumerate(radices):
                if atom in (f"{DIGIT[base]}{i}", self.quotient(base, i + 1)):
                    if r.atoms() or not r.terms:
                        return None
                    radix = dict(r.terms)[()]
                    return (axis, product, radix) if atom.startswith(DIGIT[base]) else (axis, product * radix, None)
                product *= dict(r.terms).get((), 0) if not r.atoms() else 0
        return None

    def part_range(self, atom: str, extent: int, what: str) -> str | None:
        """The run-time condition under which a thread part ranges over ``[0, extent)`` (None: it always does):
        a digit's radix is known; a thread index or its last quotient ranges over the block's extent divided by
        the radices below it. Refuses a digit of another radix."""
        part = self.thread_part(atom)
        if part is None:
            raise PassRefused(f"{what} is indexed by {atom}, not a thread's index")
        axis, below, radix = part
        if radix is not None:
            if radix != extent:
                raise PassRefused(f"{what} is indexed by a digit of radix {radix} over {extent} elements")
            return None
        return f"{extent * below} == xp_bd{axis}"

    def depends(self, atom: str, part: str) -> bool:
        """Whether ``atom`` (read in a staged value) varies with the thread part ``part`` (a thread index, or a
        digit or quotient of one): the flat thread number and a global index vary with every part of their
        axis, a thread index with its digits; digits of one index are independent of each other."""
        if atom == part:
            return True
        if atom == "xp_t":
            return True
        mine = self.thread_part(part)
        if mine is None:
            return True
        axis = mine[0]
        if axis in "xy" and (atom == f"xp_g{axis}" or atom.startswith((DIGIT[f"xp_g{axis}"], QUOTIENT[f"xp_g{axis}"]))):
            return True  # the global index (or a digit of it) the thread's index is part of
        other = self.thread_part(atom)
        if other is None or other[0] != axis:
            return False
        (_, p_mine, r_mine), (_, p_other, r_other) = mine, other
        if r_mine is not None and r_other is not None:
            return False  # two different digits
        if r_mine is None and r_other is None:
            return True  # the index and a quotient, or two quotients
        digit_below, quotient_below = (p_mine, p_other) if r_mine is not None else (p_other, p_mine)
        return quotient_below <= digit_below  # a quotient varies with the digits above its level

    def thread_free_text(self, e: A.Expr) -> str | None:
        """``e`` as C text over the function's integer parameters and literals (constants written as their
        values), or None when it reads anything else (a thread's value, a local, memory)."""
        names = {n.id for n in A.walk(e) if isinstance(n, A.Name)}
        calls = {n.func.id for n in A.walk(e) if isinstance(n, A.Call) and isinstance(n.func, A.Name)}
        if any(isinstance(n, A.Index | A.Assign) or (isinstance(n, A.Unary) and n.op in ("++", "--", "*", "&"))
               for n in A.walk(e)):
            return None
        if not (names - calls) <= (self.int_params - set(self.env)) | set(self.consts) or not calls <= set(
                ROUNDING_CALLS):
            return None
        literal = A.substitute(e, {c: A.lit(v) for c, v in self.consts.items() if c in names})
        return "(" + print_expr(literal, Dialect.C) + ")"

    def every_thread_passes(self, g: Guard, tile: str) -> str:
        """The C condition under which every thread of the launch satisfies ``g``: its index is a global thread
        index (or a sum of one along each axis) plus a thread-free rest, its bound thread-free."""
        index = g.index
        largest = Poly()
        for axis in "xy":
            coeff, index = index.split(f"xp_g{axis}")
            if coeff == Poly():
                continue
            if coeff != Poly.const(1):
                raise PassRefused(f"the tile {tile} is stored under a guard scaled along {axis}")
            largest = largest + Poly.atom(f"xp_gd{axis}") * Poly.atom(f"xp_bd{axis}") - Poly.const(1)
        if (index.atoms() | g.bound.atoms()) & (RAW_THREAD_ATOMS | self.index_atoms()):
            raise PassRefused(f"the tile {tile} is stored under a guard that is not on a global thread index")
        return f"{(largest + index).c_text()} < {g.bound.c_text()}"

    def tile_read(self, e: A.Index) -> Any:
        name = _tile_root(e)
        staged = self.staged.get(name)
        if staged is None or staged.phase >= self.phase or not self.in_thread:
            raise PassRefused(f"the tile {name} is read without a barrier after a phase that stores it")
        if isinstance(staged.value, Unset):
            raise PassRefused(staged.value.reason)
        for condition in staged.needs:
            self.need(condition)
        indices = [self.value(x) for x in _tile_indices(e)]
        if len(indices) != len(staged.axes):
            raise PassRefused(f"the tile {name} is read through a partial index")
        mapping: dict[str, Poly] = {}
        value = staged.value
        for layout, p, extent in zip(staged.axes, indices, self.tiles[name], strict=True):
            try:
                mapping.update(self.storing_parts(layout, p, extent, name))
            except PassRefused:
                value = self.unfolded(value)
                mapping.update(self.storing_groups(layout, value, p, extent, name))
        for part in mapping:
            if any(a not in mapping and self.depends(a, part) for a in _atoms_of(value)):
                raise PassRefused(f"the staged value of {name} depends on the index of the thread that stored it")
        return subst_value(value, mapping)

    def unfolded(self, value: Any) -> Any:
        """``value`` with each global index the evaluator formed (``xp_gy = 64 * by + ty``) written as its
        block and thread parts again (where the block's extent is a constant), so that a tile's staged value
        shows the thread parts it depends on."""
        mapping: dict[str, Poly] = {}
        for axis, size in self.block_sizes.items():
            extent = self.value(size)
            if isinstance(extent, Poly) and not extent.atoms():
                thread = self.value(A.name(f"xp_t{axis}"))
                mapping[f"xp_g{axis}"] = Poly.atom(f"xp_b{axis}") * extent + thread
        return subst_value(value, mapping)

    def storing_parts(self, layout: tuple[tuple[str, int], ...], p: Poly, extent: int, name: str) -> dict[str, Poly]:
        """The storing thread's parts of a read at ``p`` whose every weight is the reading thread's own part
        or a summation index over that part's range."""
        # the read index in the store's radix: each weight's coefficient is the storing thread's part
        by_weight = {w: a for a, w in layout}
        read = {c: m for m, c in p.terms}
        if len(read) != len(p.terms) or set(read) != set(by_weight) or any(len(m) != 1 for m in read.values()):
            raise PassRefused(f"the tile {name} is read at an index that is not a thread's or a sum over it")
        mapping: dict[str, Poly] = {}
        for (part, weight), upper in zip(layout, (extent, *(w for _, w in layout[:-1])), strict=True):
            var = read[weight][0]
            if var == part:
                continue  # this thread's own coordinate
            if var not in self.ranges or self.ranges[var] != (Poly(), Poly.const(upper // weight)):
                raise PassRefused(f"the tile {name} is read at an index that is not a thread's or a sum over it")
            mapping[part] = Poly.atom(var)
        return mapping

    def storing_groups(self, layout: tuple[tuple[str, int], ...], value: Any, p: Poly, extent: int,
                       name: str) -> dict[str, Poly]:
        """The storing thread's parts of a read at ``p``, where parts the staged value reads only together are
        one digit (a tile row stored by ``tx / 8`` in four lanes of 32 rows each is read as row ``8 * (tx /
        16) + i``): consecutive parts whose coefficients in every index of the value are in the ratio of their
        weights form a group; ``p`` split in the radix of the groups (every digit's range known inside its
        group's) gives each group's value, set on its innermost part (the others zero)."""
        parts = sorted(layout, key=lambda t: t[1])
        radices = [(parts[i + 1][1] if i + 1 < len(parts) else extent) // w for i, (_, w) in enumerate(parts)]
        polys = _index_polys(value)
        groups: list[list[tuple[str, int]]] = []
        group_radices: list[int] = []
        for (atom, weight), radix in zip(parts, radices, strict=True):
            if groups:
                first, first_weight = groups[-1][0]
                ratio = Poly.const(weight // first_weight)
                if all(q.split(atom)[0] == q.split(first)[0] * ratio and not q.split(first)[0].atoms() & {
                        a for a, _ in layout} for q in polys):
                    groups[-1].append((atom, weight))
                    group_radices[-1] *= radix
                    continue
            groups.append([(atom, weight)])
            group_radices.append(radix)
        digits = self.digits(p, [g[0] for g in groups], group_radices, f"the tile {name}")
        mapping: dict[str, Poly] = {}
        for group in groups:
            mapping[group[0][0]] = digits[group[0][0]]
            mapping.update({atom: Poly() for atom, _ in group[1:]})
        return mapping

    def tile_loop(self, s: A.For, view: A.LoopView) -> None:
        """A block-level loop over tiles: its per-tile sums become one sum over ``k0 + k``."""
        if self.in_thread or self.depth > 0 or self.cond_depth > 0:
            raise PassRefused("a loop around thread phases inside a thread")
        step, lo, hi = self.value(view.step), self.value(view.start), self.value(view.stop)
        if not (isinstance(step, Poly) and not step.atoms() and isinstance(lo, Poly) and isinstance(hi, Poly)):
            raise PassRefused("a tile loop whose step is not a constant")
        tile = dict(step.terms).get((), 0)
        # bounds the block's threads share: a block index may set them (``aBegin = wA * T * blockIdx.y``)
        if tile <= 0 or (lo.atoms() | hi.atoms()) & ((RAW_THREAD_ATOMS - BLOCK_ATOMS) | self.index_atoms()):
            raise PassRefused("a tile loop that does not step forward over thread-free bounds")
        before, stores, guards, staged = dict(self.env), len(self.stores), len(self.guards), dict(self.staged)
        q = self.fresh("xp_q")
        self.env[view.var] = lo + Poly.atom(q) * step
        # pointers and indices the loop advances (``A += T;``): each enters an iteration at its value before the
        # loop plus an unknown offset (an atom); what one iteration adds to it, free of that atom, is its step,
        # so the offset in the q-th iteration is q times the step
        entries: dict[str, str] = {}
        for name in sorted((_assigned_names(s.body) & self.indices) - {view.var}):
            if isinstance(before.get(name), Poly | Ptr):
                entries[name] = self.fresh("xp_iv")
                self.env[name] = self.combine("+", before[name], Poly.atom(entries[name]))
        marks = len(self.preconditions)
        self.run(stmts_of(s.body))
        if len(self.stores) != stores or len(self.guards) != guards:
            raise PassRefused("a tile loop stores results or exits")
        if any(iv in c for c in self.preconditions[marks:] for iv in entries.values()):
            raise PassRefused("a tile loop's checks depend on what it advances")
        after, self.env, self.staged = self.env, before, staged
        steps: dict[str, Poly] = {}
        for name, iv in entries.items():
            new, entry = after.get(name), self.combine("+", before[name], Poly.atom(iv))
            if isinstance(new, Ptr) and isinstance(entry, Ptr) and new.base == entry.base:
                delta = new.offset - entry.offset
            elif isinstance(new, Poly) and isinstance(entry, Poly):
                delta = new - entry
            else:
                raise PassRefused(f"a tile loop sets {name} to something other than itself plus a step")
            if delta.atoms() & ({q, *entries.values()} | self.sum_atoms):
                raise PassRefused(f"a tile loop advances {name} by a step that changes from tile to tile")
            steps[iv] = Poly.atom(q) * delta
            self.env[name] = None  # its value after the loop (the trip count times the step) is not modelled
        for name, new in after.items():
            # a value declared again in the tile loop as it was before it (loop recovery recomputes a thread's
            # index in each thread loop) carries nothing across tiles
            if name not in before or name == view.var or name in entries or new is before[name] or (
                    isinstance(new, Poly | Ptr) and new == before[name]):
                continue
            if isinstance(new, Unset):
                self.env[name] = new  # a register of one tile's computation (``regM``): unknown after the loop
                continue
            if isinstance(new, RegFn):
                old = before[name]
                if not (isinstance(old, RegFn) and isinstance(old.value, Zero)) or not isinstance(new.value, Sum):
                    raise PassRefused(f"{name} carries a value across tiles that is not a sum from zero")
                self.env[name] = RegFn(new.layout, self.merge_tiles(subst_value(new.value, steps), q, tile, lo, hi))
                continue
            if steps and isinstance(new, Sum):
                new = subst_value(new, steps)
            if not (isinstance(before[name], Zero) or before[name] == Poly()) or not isinstance(new, Sum):
                raise PassRefused(f"{name} carries a value across tiles that is not a sum from zero")
            self.env[name] = self.merge_tiles(new, q, tile, lo, hi)

    def merge_tiles(self, inner: Sum, q: str, step: int, lo: Poly, hi: Poly) -> Sum:
        """Sum over the tiles (``q``-th iteration of ``for (v = lo; v < hi; v += step)``) of a sum over ``k`` in
        ``[0, E)`` → one sum over ``kk = E*q + k``: ``[0, E*(hi - lo))`` when the loop counts tiles (step 1),
        ``[0, hi - lo)`` when it steps by the tile (guarded at the end, or ``(hi - lo) % E == 0`` at run time)."""
        extent = dict(inner.hi.terms).get((), 0) if not inner.hi.atoms() else 0
        if inner.lo != Poly() or extent <= 0 or step not in (1, extent):
            raise PassRefused("the sum inside a tile does not cover the tile the loop steps over")
        kk = self.fresh("xp_k")
        shift = Poly.atom(kk) - Poly.atom(q) * Poly.const(extent)
        body = subst_value(inner.body, {inner.var: shift})
        if q in _atoms_of(body):
            raise PassRefused("the tiles are not read at the tile start plus the index within it")
        limit = (hi - lo) * Poly.const(extent) if step == 1 else hi - lo
        end_guarded = False
        if isinstance(body, Select):
            keep: list[Guard] = []
            trims: set[Poly] = set()
            for g in body.guards:
                coeff, rest = g.index.split(kk)
                if coeff == Poly():
                    keep.append(g)
                elif coeff == Poly.const(1) and g.bound - rest == limit:
                    end_guarded = True  # zero padding past the end: the sum stops at the limit
                elif coeff == Poly.const(1) and not (g.bound - rest).atoms() & (
                        RAW_THREAD_ATOMS | self.index_atoms() | self.sum_atoms):
                    trims.add(g.bound - rest)  # zero padding past another thread-free end (`kk < K`)
                else:
                    raise PassRefused("a staged value is guarded on the summation index by another bound")
            if len(trims) > 1:
                raise PassRefused("the staged values are zero-padded past two different ends")
            if trims:
                # the tiles cover [0, limit) (a step of the tile covers at least that); the padding stops the
                # sum at the guard's end where that end lies inside what the tiles cover, checked at run time
                end = trims.pop()
                self.need(f"{end.c_text()} <= {limit.c_text()}")
                limit, end_guarded = end, True
            body = Select(tuple(keep), body.value) if keep else body.value
        if step != 1 and not end_guarded:
            self.need(f"{limit.c_text()} % {extent}L == 0")
        return Sum(kk, Poly(), limit, body)

    def call(self, e: A.Call) -> Any:
        name = print_expr(e.func, Dialect.BANG).split("<")[0].strip() if isinstance(e.func, A.Name) else ""
        fn = self.helpers.get(name)
        if fn is None and name in MAX_CALLS and len(e.args) == 2:
            a, b = self.value(e.args[0]), self.value(e.args[1])
            if not (isinstance(a, FLOAT_VALUES) and isinstance(b, FLOAT_VALUES)):
                raise PassRefused(f"{name} of integers")
            return Max((*(a.terms if isinstance(a, Max) else (a,)), *(b.terms if isinstance(b, Max) else (b,))))
        if fn is None and name in ("__ldg", "__ldcg", "__ldca", "__ldcs") and len(e.args) == 1:
            ptr = self.value(e.args[0])
            if not isinstance(ptr, Ptr):
                raise PassRefused(f"{name} of something other than a global pointer")
            return Load(ptr.base, ptr.offset)
        if fn is None and name in ROUNDING_CALLS and len(e.args) == 1:
            opaque = self.thread_free_text(e)
            if opaque is not None:
                return Poly.atom(f"(long){opaque}")  # ceil((float)K / T): a thread-free integer, opaque
        if fn is None and name == "static_cast" and len(e.args) == 1 and isinstance(e.func, A.Name):
            target = e.func.id[len("static_cast<"):-1].strip()
            v = self.value(e.args[0])
            if INTEGER_TYPE.search(target) and isinstance(v, Poly):
                return v
            if target in ("float", "double") and (isinstance(v, FLOAT_VALUES) or v == Poly()):
                return Zero() if v == Poly() else v
            raise PassRefused(f"the thread converts to {target}")
        if fn is None:
            if len(e.args) == 1 and isinstance(strip_casts(e.args[0]), A.Literal) and name in (
                    "float", "T", "double", "int") and isinstance(self.value(e.args[0]), Zero | Poly):
                v = self.value(e.args[0])
                return Zero() if isinstance(v, Zero) or v == Poly() else v  # functional cast T(0)
            raise PassRefused(f"the thread calls {name or 'a function'}")
        if self.depth >= MAX_INLINE_DEPTH or len(fn.params) != len(e.args):
            raise PassRefused(f"{name} cannot be inlined")
        args = [self.value(a) for a in e.args]
        saved_env, saved_guards, saved_arrays = self.env, list(self.guards), self.thread_arrays
        saved_flags = (self.cond_depth, self.in_thread)
        self.cond_depth, self.in_thread = 0, False  # the helper's own control flow
        self.env = {p.name: v for p, v in zip(fn.params, args, strict=True) if isinstance(p, A.Param) and p.name}
        self.thread_arrays = set()
        self.depth += 1
        try:
            self.run(fn.body.stmts)
            raise PassRefused(f"{name} ends without returning a value")
        except _Return as ret:
            return ret.value
        finally:
            self.env, self.guards, self.thread_arrays = saved_env, saved_guards, saved_arrays
            self.cond_depth, self.in_thread = saved_flags
            self.depth -= 1


def _comma_items(e: A.Expr) -> list[A.Expr]:
    if isinstance(e, A.Binary) and e.op == ",":
        return _comma_items(e.left) + _comma_items(e.right)
    return [e]


def _own_continue(s: A.Stmt) -> bool:
    """Whether ``s`` holds a ``continue`` of the loop it is the body of (not one of a nested loop)."""
    if isinstance(s, A.Continue):
        return True
    if isinstance(s, A.For | A.While | A.DoWhile):
        return False
    if isinstance(s, A.Block):
        return any(_own_continue(x) for x in s.stmts)
    if isinstance(s, A.If):
        return _own_continue(s.then) or (s.else_ is not None and _own_continue(s.else_))
    return isinstance(s, A.Opaque)  # text the AST does not model might hold one


def _assigned_names(s: A.Stmt) -> set[str]:
    """Variables (and loop recovery's per-thread arrays, by name) a statement assigns or increments."""
    out: set[str] = set()
    for n in A.walk(s):
        target: A.Expr | None = None
        if isinstance(n, A.Assign):
            target = n.target
        elif isinstance(n, A.Unary) and n.op in ("++", "--"):
            target = n.operand
        if isinstance(target, A.Index) and isinstance(target.base, A.Name) and target.index == A.name("xp_t"):
            target = target.base
        if isinstance(target, A.Name):
            out.add(target.id)
    return out


def _polys(v: Any) -> list[Poly]:
    if isinstance(v, Poly):
        return [v]
    if isinstance(v, Ptr | Load):
        return [v.offset]
    if isinstance(v, Mul):
        return _polys(v.left) + _polys(v.right)
    if isinstance(v, Sum):
        return [v.lo, v.hi, *_polys(v.body)]
    return []


def _lane_form(a: Any, b: Any, atom: str) -> Any:
    """The value whose every index polynomial is ``pa + atom * (pb - pa)`` for the matching ones of two values
    of one shape; None where their shapes differ."""
    if type(a) is not type(b):
        return None
    if isinstance(a, Poly):
        return a + Poly.atom(atom) * (b - a)
    if isinstance(a, Load | Ptr):
        return type(a)(a.base, a.offset + Poly.atom(atom) * (b.offset - a.offset)) if a.base == b.base else None
    if isinstance(a, Mul):
        left, right = _lane_form(a.left, b.left, atom), _lane_form(a.right, b.right, atom)
        return None if left is None or right is None else Mul(left, right)
    if isinstance(a, Sum):
        body = _lane_form(a.body, b.body, atom)
        return None if a.var != b.var or body is None else Sum(a.var, _lane_form(a.lo, b.lo, atom),
                                                               _lane_form(a.hi, b.hi, atom), body)
    if isinstance(a, Add | Max):
        terms = [_lane_form(x, y, atom) for x, y in zip(a.terms, b.terms, strict=False)]
        return None if len(a.terms) != len(b.terms) or None in terms else type(a)(tuple(terms))
    if isinstance(a, Scale):
        inner = _lane_form(a.value, b.value, atom)
        return None if a.factor != b.factor or inner is None else Scale(a.factor, inner)
    if isinstance(a, Select):
        inner = _lane_form(a.value, b.value, atom)
        if inner is None or len(a.guards) != len(b.guards):
            return None
        return Select(tuple(Guard(_lane_form(g.index, h.index, atom), _lane_form(g.bound, h.bound, atom))
                            for g, h in zip(a.guards, b.guards, strict=True)), inner)
    return a if a == b else None


def _declared_names(s: A.Stmt) -> set[str]:
    """Variables a loop body declares at its top level (its own, gone after each iteration)."""
    return {d.name for x in stmts_of(s) if isinstance(x, A.DeclStmt) for d in x.decls}


def _index_polys(v: Any) -> list[Poly]:
    """Every integer index a value reads: load offsets, sum bounds, guards."""
    if isinstance(v, Poly):
        return [v]
    if isinstance(v, Load | Ptr):
        return [v.offset]
    if isinstance(v, Mul):
        return _index_polys(v.left) + _index_polys(v.right)
    if isinstance(v, Sum):
        return [v.lo, v.hi, *_index_polys(v.body)]
    if isinstance(v, Add | Max):
        return [q for t in v.terms for q in _index_polys(t)]
    if isinstance(v, Scale):
        return _index_polys(v.value)
    if isinstance(v, Select):
        return [q for g in v.guards for q in (g.index, g.bound)] + _index_polys(v.value)
    return []


def _union(a: tuple[Guard, ...], b: tuple[Guard, ...]) -> tuple[Guard, ...]:
    return a + tuple(g for g in b if g not in a)


def _tile_root(e: A.Expr) -> str:
    while isinstance(e, A.Index):
        e = e.base
    return e.id if isinstance(e, A.Name) else ""


def _vector_cast(e: A.Expr) -> tuple[A.Expr, int] | None:
    """``reinterpret_cast<float4 *>(P)[j]`` (or a C cast): ``P`` and the vector's width; None for other
    expressions."""
    if not isinstance(e, A.Index):
        return None
    base = e.base
    if isinstance(base, A.Call) and isinstance(base.func, A.Name) and len(base.args) == 1:
        found = re.fullmatch(r"reinterpret_cast<\s*(?:const\s+)?(\w+)\s*\*\s*>", base.func.id)
        width = VECTOR_TYPES.get(found.group(1), 0) if found else 0
        return (base.args[0], width) if width else None
    if isinstance(base, A.Cast) and len(base.type.pointers) == 1:
        width = VECTOR_TYPES.get(base.type.base.replace("const", "").strip(), 0)
        return (base.operand, width) if width else None
    return None


def _tile_indices(e: A.Index) -> list[A.Expr]:
    out: list[A.Expr] = []
    node: A.Expr = e
    while isinstance(node, A.Index):
        out.insert(0, node.index)
        node = node.base
    return out


def subst_poly(p: Poly, mapping: dict[str, Poly]) -> Poly:
    out = Poly()
    for m, c in p.terms:
        term = Poly.const(c)
        for a in m:
            term = term * mapping.get(a, Poly.atom(a))
        out = out + term
    return out


def subst_value(v: Any, mapping: dict[str, Poly]) -> Any:
    """``v`` with index atoms replaced by polynomials."""
    if not mapping:
        return v
    if isinstance(v, Poly):
        return subst_poly(v, mapping)
    if isinstance(v, Load | Ptr):
        return type(v)(v.base, subst_poly(v.offset, mapping))
    if isinstance(v, Mul):
        return Mul(subst_value(v.left, mapping), subst_value(v.right, mapping))
    if isinstance(v, Sum):
        inner = {k: p for k, p in mapping.items() if k != v.var}
        return Sum(v.var, subst_poly(v.lo, inner), subst_poly(v.hi, inner), subst_value(v.body, inner))
    if isinstance(v, Add | Max):
        return type(v)(tuple(subst_value(t, mapping) for t in v.terms))
    if isinstance(v, Scale):
        return Scale(v.factor, subst_value(v.value, mapping))
    if isinstance(v, Select):
        return Select(tuple(Guard(subst_poly(g.index, mapping), subst_poly(g.bound, mapping)) for g in v.guards),
                      subst_value(v.value, mapping))
    if isinstance(v, Zero | FConst):
        return v
    raise PassRefused(f"cannot substitute into {type(v).__name__}")


def _atoms_of(v: Any) -> set[str]:
    if isinstance(v, RegFn):
        return _atoms_of(v.value)
    if isinstance(v, Poly):
        return v.atoms()
    if isinstance(v, Load | Ptr):
        return v.offset.atoms()
    if isinstance(v, Mul):
        return _atoms_of(v.left) | _atoms_of(v.right)
    if isinstance(v, Sum):
        return v.lo.atoms() | v.hi.atoms() | _atoms_of(v.body)
    if isinstance(v, Add | Max):
        return set().union(*(_atoms_of(t) for t in v.terms))
    if isinstance(v, Scale):
        return _atoms_of(v.value)
    if isinstance(v, Select):
        return set().union(*(g.index.atoms() | g.bound.atoms() for g in v.guards)) | _atoms_of(v.value)
    return set()


def module_int_constants(module: A.Module, defines: Mapping[str, str] | None = None) -> dict[str, int]:
    """File-scope integer constants: ``#define NAME <int>``, ``const``/``constexpr`` integer variables, and the
    project's integer ``-D`` macros (``defines``; the file's own definitions win, as a later ``#define``)."""
    out: dict[str, int] = {name: int(v) for name, v in (defines or {}).items() if v.strip().lstrip("-").isdigit()}
    for item in module.items:
        if isinstance(item, A.Opaque) and item.text.startswith("#define"):
            parts = item.text.split()
            if len(parts) == 3 and parts[2].lstrip("-").isdigit():
                out[parts[1]] = int(parts[2])
        elif isinstance(item, A.DeclStmt):
            for d in item.decls:
                const = "const" in d.type.quals or "constexpr" in d.storage
                if const and not d.dims and not d.type.pointers and isinstance(d.init, A.Literal) \
                        and d.init.int_value is not None and d.type.base in ("int", "unsigned", "long", "size_t"):
                    out[d.name] = d.init.int_value
    return out


def strip_casts(e: A.Expr) -> A.Expr:
    while isinstance(e, A.Cast) and not e.type.pointers and e.type.base in (
            "int", "unsigned", "unsigned int", "size_t", "long", "long long", "int64_t", "float", "const int"):
        e = e.operand
    return e


def stmts_of(s: A.Stmt) -> list[A.Stmt]:
    return list(s.stmts) if isinstance(s, A.Block) else [s]




def exact_div(p: Poly, d: Poly) -> Poly | None:
    """``p / d`` when ``d`` divides ``p`` exactly as a polynomial (``d`` one term, or ``p == d``), else None."""
    if p == d:
        return Poly.const(1)
    if len(d.terms) != 1:
        return None
    (dm, dc), = d.terms
    if dc == 0:
        return None
    out: dict[Monomial, int] = {}
    for m, c in p.terms:
        rest = list(m)
        for a in dm:
            if a not in rest:
                return None
            rest.remove(a)
        if c % dc:
            return None
        out[tuple(rest)] = c // dc
    return Poly.of(out)


def linear(p: Poly, atoms: list[str]) -> tuple[dict[str, Poly], Poly]:
    """Coefficients of ``p`` in each atom (linear in each) and the rest."""
    coeffs: dict[str, Poly] = {}
    rest = p
    for a in atoms:
        c, rest = rest.split(a)
        coeffs[a] = c
    return coeffs, rest


def free_of(p: Poly, atoms: set[str], what: str) -> Poly:
    if p.atoms() & atoms:
        raise PassRefused(f"{what} depends on the thread or the summation index")
    return p
