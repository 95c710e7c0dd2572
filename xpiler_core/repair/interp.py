"""A small SIMT interpreter of the kernel AST, concrete or with z3 holes.

Why: repair needs (a) an instrumented concrete run (which statement wrote each output element) and (b) the
same execution with one sub-expression replaced by a hole whose unknown integer coefficients are z3
variables, so that "the outputs equal the reference" becomes a formula over those coefficients.

Values are concrete Python numbers (``int`` for C integers, ``np.float32`` for ``float``, ``float`` for
``double``) or symbolic: a z3 integer/boolean term (integer values that depend on the hole) or a
:class:`Choice` (a value that depends on the hole through control flow or a hole-dependent load: a list of
mutually exclusive ``(condition, concrete value)`` cases). Branches on symbolic conditions are executed
under a path condition and merged (no forking). Threads of a block run as generators that yield at
``__syncthreads()``. Anything outside the supported C subset raises :class:`Unsupported` (repair refuses).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import z3

from xpiler_core import ast as A

INT_TYPES = frozenset(
    {
        "int", "unsigned", "unsigned int", "long", "unsigned long", "long long", "unsigned long long", "size_t",
        "short", "unsigned short", "char", "unsigned char", "int32_t", "uint32_t", "int64_t", "uint64_t",
        "ptrdiff_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "signed char", "long int",
    }
)
FLOAT_TYPES = frozenset({"float"})
HALF_TYPES = frozenset({"half", "__half"})  # IEEE binary16: stored as numpy float16, math in float
DOUBLE_TYPES = frozenset({"double"})
MAX_CASES = 1024  # cases of one Choice before we refuse (keeps a sketch's formula small)
MAX_UNBOUNDED_CELLS = 256  # elements a hole-dependent address with no known range may reach


class Unsupported(Exception):
    """The kernel uses a construct the interpreter does not model (repair refuses honestly)."""


class Infeasible(Exception):
    """On a path that does not depend on the hole the kernel faults: no hole value can fix it."""


class StepLimit(Exception):
    """The run exceeded its step budget."""


class TimeLimit(StepLimit):
    """The run exceeded its deadline (an encoding too costly for the seconds a suspect gets)."""


BoolLike: TypeAlias = Any  # a Python bool or a z3 boolean term


def and_(a: BoolLike, b: BoolLike) -> BoolLike:
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return z3.And(a, b)


def or_(a: BoolLike, b: BoolLike) -> BoolLike:
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return z3.Or(a, b)


def not_(a: BoolLike) -> BoolLike:
    if isinstance(a, bool):
        return not a
    return z3.Not(a)


@dataclass(frozen=True)
class Case:
    cond: BoolLike
    fixes: tuple[tuple[int, int], ...]  # (z3 term id, value) pairs this case assumes (prunes products)
    value: Any


@dataclass(frozen=True)
class Choice:
    """A hole-dependent concrete value: exactly one case's condition holds."""

    cases: tuple[Case, ...]


@dataclass(frozen=True, eq=False)
class Ite:
    """``cond ? then : else_`` kept lazily (a hole-dependent merge of two values)."""

    cond: Any
    then: Any
    else_: Any


def is_sym(v: Any) -> bool:
    return isinstance(v, (z3.ExprRef, Choice, Ite))


def _merge_fixes(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...] | None:
    if not a:
        return b
    if not b:
        return a
    d = dict(a)
    for k, v in b:
        if d.get(k, v) != v:
            return None
        d[k] = v
    return tuple(sorted(d.items()))


def as_cases(v: Any) -> tuple[Case, ...]:
    if isinstance(v, Choice):
        return v.cases
    if isinstance(v, Ite):
        raise Unsupported("nested hole-dependent value")
    if isinstance(v, z3.ExprRef):
        raise Unsupported("a hole-dependent integer used in floating-point arithmetic")
    return (Case(True, (), v),)


def _paths(v: Any, memo: dict[int, int]) -> int:
    """Leaves an Ite tree unfolds into (counted over its DAG, so sharing does not hide a blowup)."""
    if not isinstance(v, Ite):
        return len(v.cases) if isinstance(v, Choice) else 1
    key = id(v)
    if key not in memo:
        memo[key] = _paths(v.then, memo) + _paths(v.else_, memo)
    return memo[key]


def lift(fn: Callable[..., Any], *vals: Any, deadline: float | None = None) -> Any:
    """Apply a concrete function to values, any of which may be a Choice or an Ite. ``deadline``
    (``time.monotonic()``): a product of many cases stops there (StepLimit) instead of running on."""
    if any(isinstance(v, Ite) for v in vals):
        memo: dict[int, int] = {}
        if math.prod(_paths(v, memo) for v in vals) > MAX_CASES:
            raise Unsupported("too many hole-dependent cases")
    for i, v in enumerate(vals):
        if isinstance(v, Ite):
            a = lift(fn, *vals[:i], v.then, *vals[i + 1 :], deadline=deadline)
            b = lift(fn, *vals[:i], v.else_, *vals[i + 1 :], deadline=deadline)
            return merge(v.cond, a, b)
    combos: list[tuple[BoolLike, tuple[tuple[int, int], ...], list[Any]]] = [(True, (), [])]
    for v in vals:
        nxt: list[tuple[BoolLike, tuple[tuple[int, int], ...], list[Any]]] = []
        for cond, fixes, args in combos:
            for c in as_cases(v):
                f = _merge_fixes(fixes, c.fixes)
                if f is None:
                    continue
                cc = and_(cond, c.cond)
                if cc is False:
                    continue
                nxt.append((cc, f, [*args, c.value]))
                if deadline is not None and len(nxt) & 255 == 0 and time.monotonic() > deadline:
                    raise TimeLimit("interpretation time budget exhausted")
        combos = nxt
        if len(combos) > MAX_CASES:
            raise Unsupported("too many hole-dependent cases")
    out = [Case(c, f, fn(*args)) for c, f, args in combos]
    return simplify_choice(out)


def simplify_choice(cases: list[Case]) -> Any:
    if len(cases) == 1 and cases[0].cond is True:
        return cases[0].value
    if cases and all(_same(c.value, cases[0].value) for c in cases):
        return cases[0].value
    return Choice(tuple(cases))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (z3.ExprRef, Choice, Ptr, Ite)) or isinstance(b, (z3.ExprRef, Choice, Ptr, Ite)):
        return a is b
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - incomparable values are simply different
        return False


def merge(cond: BoolLike, a: Any, b: Any) -> Any:
    """``cond ? a : b`` over possibly symbolic values."""
    if cond is True:
        return a
    if cond is False:
        return b
    if _same(a, b):
        return a
    if isinstance(a, Ptr) or isinstance(b, Ptr):
        if isinstance(a, Ptr) and isinstance(b, Ptr) and a.buf is b.buf and a.inner == b.inner:
            return Ptr(a.buf, merge(cond, a.off, b.off), a.inner)
        raise Unsupported("pointer chosen by a hole-dependent condition")
    if _int_like(a) and _int_like(b):
        return z3.If(cond, _zint(a), _zint(b))
    if _bool_like(a) and _bool_like(b):
        return z3.If(cond, a, b)
    if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
        raise Unsupported("merge of a hole-dependent integer with a non-integer")
    return Ite(cond, a, b)


def _int_like(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, z3.ArithRef) and v.is_int())


def _bool_like(v: Any) -> bool:
    return isinstance(v, (bool, z3.BoolRef))


def _zint(v: Any) -> Any:
    return z3.IntVal(v) if isinstance(v, int) else v


@dataclass
class Buffer:
    name: str
    kind: str  # "int" | "float" | "double" | "bool"
    data: list[Any]
    writers: dict[int, int] | None = None  # element → id of the statement that last wrote it
    # Write-only outputs of a sketch run log their stores (path condition, offset, value) instead of
    # updating cells, so a hole-dependent address costs one constraint per store, not one merge per cell.
    events: list[tuple[Any, Any, Any, int]] | None = None  # (pc, offset, value, global thread id)
    elem_bytes: int = 4  # bytes per element (host copies count elements by it)


class ObservedRead(Exception):
    """A kernel read a buffer whose stores were being logged (it is not write-only): run it plainly."""


@dataclass(frozen=True)
class Ptr:
    buf: Buffer
    off: Any  # int or z3 term
    inner: tuple[int, ...] = ()  # remaining inner dimensions of a multi-dimensional array

    def stride(self) -> int:
        return int(np.prod(self.inner)) if self.inner else 1


@dataclass(frozen=True, eq=False)
class VarRef:
    """``&p`` of a pointer variable (what ``cudaMalloc(&p, bytes)`` assigns through)."""

    slot: list[Any]
    name: str
    ctype: A.Type


def type_bytes(t: A.Type) -> int:
    """``sizeof`` of a type (pointers are 8 bytes)."""
    if t.pointers:
        return 8
    base = " ".join(q for q in t.base.split() if q not in ("const", "volatile", "__restrict__", "struct"))
    size = _ELEMENT_BYTES.get(base)
    if size is None:
        raise Unsupported(f"sizeof({t.base})")
    return size


def type_kind(t: A.Type) -> str:
    base = " ".join(q for q in t.base.split() if q not in ("const", "volatile", "__restrict__"))
    if base in INT_TYPES:
        return "int"
    if base in FLOAT_TYPES:
        return "float"
    if base in HALF_TYPES:
        return "half"
    if base in DOUBLE_TYPES:
        return "double"
    if base == "bool":
        return "bool"
    if base == "auto":
        return "auto"
    raise Unsupported(f"type '{t.base}'")


def convert(v: Any, kind: str) -> Any:
    """C conversion of a value to a scalar kind."""
    if kind == "auto" or isinstance(v, Ptr | VarRef):
        return v
    if kind == "dim3" or isinstance(v, tuple):
        if not (kind == "dim3" or len(v) == 3):
            raise Unsupported("a dim3 converted to a scalar")
        return _dim3([v])
    if isinstance(v, (Choice, Ite)):
        return lift(lambda x: convert(x, kind), v)
    if isinstance(v, z3.BoolRef):
        return z3.If(v, 1, 0) if kind == "int" else (v if kind == "bool" else _refuse_float())
    if isinstance(v, z3.ArithRef):
        if kind == "int":
            return v
        if kind == "bool":
            return v != 0
        return _refuse_float()
    if kind == "int":
        if isinstance(v, (float, np.floating)):
            if not math.isfinite(float(v)):
                raise Infeasible("non-finite value converted to an integer")
            return int(float(v))
        return int(v)
    if kind == "float":
        return np.float32(v)
    if kind == "half":
        with np.errstate(all="ignore"):
            return np.float16(v)
    if kind == "double":
        return float(v)
    return bool(v)


def _refuse_float() -> Any:
    raise Unsupported("a hole-dependent integer converted to floating point")


_MACRO = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+\(?\s*([-+]?[0-9.eE+-]+[fFuUlL]*)\s*\)?\s*$")


def macro_values(module: A.Module) -> dict[str, Any]:
    """Object-like ``#define NAME number`` macros (the only macros the interpreter understands)."""
    out: dict[str, Any] = {}
    for item in module.items:
        if isinstance(item, A.Opaque):
            m = _MACRO.match(item.text.strip())
            if m:
                lit = A.Literal(m.group(2))
                try:
                    out[m.group(1)] = literal_value(lit)
                except Unsupported:
                    continue
    return out


def literal_value(lit: A.Literal) -> Any:
    if lit.kind == "bool":
        return lit.text == "true"
    iv = lit.int_value
    if iv is not None:
        return iv
    text = lit.text.lower()
    if lit.kind == "number":
        try:
            if text.endswith("f"):
                return np.float32(float(text[:-1]))
            return float(text)
        except ValueError:
            pass
    raise Unsupported(f"literal {lit.text}")


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise Infeasible("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _z_div(a: Any, b: Any) -> Any:
    if isinstance(b, int):
        if b == 0:
            raise Infeasible("integer division by zero")
        if b > 0:
            return z3.If(a >= 0, a / b, -((-a) / b))
    raise Unsupported("division by a hole-dependent value")


def _z_mod(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > 0:
        return z3.If(a >= 0, a % b, -((-a) % b))
    raise Unsupported("remainder by a hole-dependent value")


def _concrete_binop(op: str, a: Any, b: Any) -> Any:
    if op in ("&&", "||"):
        return (bool(a) and bool(b)) if op == "&&" else (bool(a) or bool(b))
    both_int = isinstance(a, (int, bool)) and isinstance(b, (int, bool))
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]
    if both_int:
        a, b = int(a), int(b)
        if op == "/":
            return _c_div(a, b)
        if op == "%":
            return a - b * _c_div(a, b)
        fn = A._FOLD.get(op)
        if fn is None:
            raise Unsupported(f"operator {op}")
        r = fn(a, b)
        if r is None:
            raise Infeasible(f"invalid shift in {a} {op} {b}")
        return r
    if op in ("+", "-", "*", "/"):
        if isinstance(a, (int, bool)):
            a = type(b)(a)
        if isinstance(b, (int, bool)):
            b = type(a)(b)
        with np.errstate(all="ignore"):
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if float(b) == 0.0:
                return type(a)(math.copysign(math.inf, float(a)) if float(a) else math.nan)
            return a / b
    raise Unsupported(f"operator {op} on floating point")


def binop(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, Ptr) or isinstance(b, Ptr):
        return _ptr_arith(op, a, b)
    if isinstance(a, (Choice, Ite)) or isinstance(b, (Choice, Ite)):
        if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
            if op in ("&&", "||"):
                return (and_ if op == "&&" else or_)(truth(a), truth(b))
            raise Unsupported("mixing hole-dependent integers and values")
        if op in ("&&", "||"):
            return (and_ if op == "&&" else or_)(truth(a), truth(b))
        r = lift(lambda x, y: _concrete_binop(op, x, y), a, b)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            return truth(r)
        return r
    if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
        return _sym_binop(op, a, b)
    return _concrete_binop(op, a, b)


def _sym_binop(op: str, a: Any, b: Any) -> Any:
    if op in ("&&", "||"):
        return (and_ if op == "&&" else or_)(truth(a), truth(b))
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        raise Unsupported("hole-dependent integer in floating-point arithmetic")
    if isinstance(a, z3.BoolRef):
        a = z3.If(a, 1, 0)
    if isinstance(b, z3.BoolRef):
        b = z3.If(b, 1, 0)
    a = _zint(int(a)) if isinstance(a, (int, bool)) else a
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return _z_div(a, b)
    if op == "%":
        return _z_mod(a, b)
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]
    if op == "<<" and isinstance(b, int) and 0 <= b < 31:
        return a * (1 << b)
    if op == ">>" and isinstance(b, int) and 0 <= b < 31:
        return z3.If(a >= 0, a / (1 << b), -((-a + (1 << b) - 1) / (1 << b)))
    if op == "&" and isinstance(b, int) and b >= 0 and (b + 1) & b == 0:
        return a % (b + 1)  # two's-complement mask by 2^k-1 is the Euclidean remainder
    if op in ("&", "|", "^", "<<", ">>"):
        # General bitwise operators through 32-bit vectors (C int semantics, two's complement).
        x, y = z3.Int2BV(_zint(a) if isinstance(a, int) else a, 32), z3.Int2BV(_zint(b) if isinstance(b, int) else b, 32)
        r = {"&": lambda: x & y, "|": lambda: x | y, "^": lambda: x ^ y, "<<": lambda: x << y, ">>": lambda: x >> y}[op]()
        return z3.BV2Int(r, is_signed=True)
    raise Unsupported(f"operator {op} on a hole-dependent integer")


def _ptr_arith(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, Ptr) and not isinstance(b, Ptr) and op in ("+", "-"):
        k = b if op == "+" else binop("-", 0, b)
        return Ptr(a.buf, binop("+", a.off, binop("*", k, a.stride())), a.inner)
    if isinstance(b, Ptr) and not isinstance(a, Ptr) and op == "+":
        return _ptr_arith("+", b, a)
    raise Unsupported(f"pointer operator {op}")


def truth(v: Any) -> BoolLike:
    if isinstance(v, z3.BoolRef):
        return v
    if isinstance(v, z3.ArithRef):
        return v != 0
    if isinstance(v, Choice):
        return _choice_truth(v)
    if isinstance(v, Ite):
        a, b = truth(v.then), truth(v.else_)
        if isinstance(a, bool) and isinstance(b, bool):
            return v.cond if (a and not b) else (not_(v.cond) if (b and not a) else a)
        return z3.If(_zb(v.cond), _zb(a), _zb(b))
    if isinstance(v, Ptr):
        return True
    return bool(v)


def _choice_truth(v: Choice) -> BoolLike:
    out: BoolLike = False
    for c in v.cases:
        if bool(c.value):
            out = or_(out, c.cond)
    return out


# Bytes per element of the types a dynamic shared array may have; its buffer key in a block's shared dict.
_ELEMENT_BYTES = {"float": 4, "double": 8, "int": 4, "unsigned int": 4, "unsigned": 4, "int32_t": 4, "uint32_t": 4,
                  "long long": 8, "int64_t": 8, "uint64_t": 8, "size_t": 8, "short": 2, "char": 1,
                  "unsigned char": 1, "int8_t": 1, "uint8_t": 1, "bool": 1, "long": 8, "unsigned long": 8,
                  "long int": 8, "unsigned long long": 8, "ptrdiff_t": 8, "std::size_t": 8, "int16_t": 2,
                  "uint16_t": 2, "unsigned short": 2, "half": 2, "__half": 2, "__nv_bfloat16": 2, "float2": 8,
                  "float4": 16, "double2": 16, "int2": 8, "int4": 16, "dim3": 12}
# cudaMemcpyKind / hipMemcpyKind values (only their presence matters: copies go by the pointers' buffers)
# the standard headers' limits (<cfloat>, <climits>, <cmath>) a kernel names as plain identifiers
_STANDARD_CONSTANTS: dict[str, Any] = {
    "FLT_MAX": np.float32(np.finfo(np.float32).max), "FLT_MIN": np.float32(np.finfo(np.float32).tiny),
    "FLT_EPSILON": np.float32(np.finfo(np.float32).eps), "DBL_MAX": float(np.finfo(np.float64).max),
    "DBL_MIN": float(np.finfo(np.float64).tiny), "DBL_EPSILON": float(np.finfo(np.float64).eps),
    "INT_MAX": 2**31 - 1, "INT_MIN": -(2**31), "UINT_MAX": 2**32 - 1,
    "INFINITY": np.float32(np.inf), "M_PI": float(np.pi), "M_E": float(np.e),
}

_COPY_KINDS = {f"{api}Memcpy{k}": i for api in ("cuda", "hip") for i, k in enumerate(
    ("HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"))}
# host runtime calls that change nothing the interpreter models (memory stays valid until the run ends)
_HOST_NOOPS = frozenset({"cudaDeviceSynchronize", "cudaGetLastError", "cudaPeekAtLastError", "cudaFree",
                         "cudaStreamSynchronize", "cudaSetDevice", "cudaDeviceReset", "cudaFuncSetAttribute",
                         "cudaEventSynchronize", "cudaThreadSynchronize"})
_DYNAMIC = "extern "

# ----------------------------------------------------------------------------------------- runtime
@dataclass
class LaunchShape:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0


HoleFn = Callable[["Thread"], Any]


@dataclass
class Program:
    """A module prepared for interpretation: functions by name, macro values, hole evaluators."""

    module: A.Module
    functions: dict[str, A.Function]
    macros: dict[str, Any]
    holes: dict[int, HoleFn] = field(default_factory=dict)
    obligations: list[Any] = field(default_factory=list)  # z3 constraints every model must satisfy
    steps: int = 0
    max_steps: int = 3_000_000
    loop_cap: int = 12  # iterations of a loop whose condition depends on the hole
    loop_caps_hit: int = 0  # times such a loop was cut at its cap (the encoding may then miss the fix)
    # Most iterations each loop (by source position) ran in the concrete runs: a loop whose condition depends
    # on the hole may run that many (plus LOOP_SLACK) before the cap above applies.
    loop_iters: dict[Any, int] = field(default_factory=dict)
    iteration_cap: int | None = None  # iterations any one loop may run (StepLimit beyond: a loop that never ends)
    instrument: bool = False
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)  # hole unknowns' ranges
    deadline: float | None = None  # time.monotonic() after which the run stops (StepLimit)
    last_stmt: int = 0  # id of the statement that faulted last (localization of crashes)
    executed: set[int] = field(default_factory=set)  # ids of statements run (instrumented runs only)
    warp_size: int = 32
    observe: frozenset[str] = frozenset()  # output buffers whose stores are logged (see Buffer.events)
    threads: frozenset[int] | None = None  # global thread ids to run (None: all); independent threads only
    faulted: set[int] | None = None  # when a set: a faulting thread stops alone (ids collected here)
    thread_step_cap: int = 1 << 62  # steps one thread may take
    thread_steps_seen: int = 0  # most steps one thread took (set by run_kernel)
    # file-scope variables (``__constant__``/``__device__`` arrays, ``static const`` tables, ``constexpr``
    # scalars): declarations by name, and their slots for the current run (made on first use)
    global_decls: dict[str, A.VarDecl] = field(default_factory=dict)
    globals: dict[str, list[Any]] = field(default_factory=dict)
    _stepping: frozenset[str] = frozenset()  # device functions that yield (see steps_through)
    # the loop that has run the most iterations in this run (a run that never ends points at it)
    loop_stmts: dict[Any, int] = field(default_factory=dict)  # loop key → id of its statement
    hot_loop: Any = None
    hot_iterations: int = 0

    def steps_through(self, name: str) -> bool:
        """Whether the device function ``name`` has barriers or warp operations (directly or in callees)."""
        if name not in self.functions:
            return False
        if not self._stepping:
            stepping: set[str] = set()
            changed = True
            while changed:
                changed = False
                for fname, f in self.functions.items():
                    if fname in stepping or f.is_kernel:
                        continue
                    if any(isinstance(n, A.Call) and (A.is_barrier(n) or n.callee in WARP_CALLS or n.callee in stepping)
                           for n in A.walk(f.body)):
                        stepping.add(fname)
                        changed = True
            self._stepping = frozenset(stepping) | {"\0"}  # (non-empty: computed)
        return name in self._stepping

    @classmethod
    def of(cls, module: A.Module) -> Program:
        funcs = {f.name: f for f in module.items if isinstance(f, A.Function)}
        decls = {d.name: d for item in module.items if isinstance(item, A.DeclStmt) for d in item.decls}
        return cls(module, funcs, macro_values(module), global_decls=decls)


@dataclass
class _Loop:
    broken: BoolLike = False
    continued: BoolLike = False


@dataclass(frozen=True)
class Hole(A.Expr):
    """Marker node standing for a sketch hole (evaluated by ``Program.holes[hid]``)."""

    hid: int


# name → (kind, value argument, lane/offset argument, width argument); values exchanged at a block step
WARP_CALLS: dict[str, tuple[str, int, int | None, int | None]] = {
    "__shfl_sync": ("idx", 1, 2, 3), "__shfl_down_sync": ("down", 1, 2, 3), "__shfl_up_sync": ("up", 1, 2, 3),
    "__shfl_xor_sync": ("xor", 1, 2, 3), "__shfl": ("idx", 0, 1, 2), "__shfl_down": ("down", 0, 1, 2),
    "__shfl_up": ("up", 0, 1, 2), "__shfl_xor": ("xor", 0, 1, 2), "__ballot_sync": ("ballot", 1, None, None),
    "__any_sync": ("any", 1, None, None), "__all_sync": ("all", 1, None, None), "__ballot": ("ballot", 0, None, None),
    "__any": ("any", 0, None, None), "__all": ("all", 0, None, None), "__activemask": ("active", -1, None, None),
}


@dataclass
class WarpExchange:
    """What each thread of a block contributed to its n-th warp operation (by linear thread index in the block),
    and which threads have finished."""

    values: dict[int, dict[int, Any]] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)


class Thread:
    """One thread's execution state."""

    def __init__(self, prog: Program, builtins: dict[tuple[str, str], int], shared: dict[str, Buffer]):
        self.prog = prog
        self.builtins = builtins
        self.shared = shared
        self.dynamic_shared_bytes = 0  # the launch's dynamic shared memory (set by run_kernel)
        self.scopes: list[dict[str, list[Any]]] = [{}]  # name → [value, kind, decl_pc]
        self.pc: BoolLike = True
        self.loops: list[_Loop] = []
        self.ret: Any = None
        self.stmt_id = 0
        self.tid = 0  # global linear thread id (block-major)
        self.steps = 0
        self._facts_pc: Any = None  # the path condition _facts/_negated were computed for (see assume)
        self._facts: set[int] = set()
        self._negated: set[int] = set()
        self.exchange = WarpExchange()  # the block's (set by run_grid)
        self.warp_ops = 0  # warp operations this thread has taken part in
        self.warp_results: dict[int, Any] = {}  # id(call) → its result, for the statement being executed

    # -- variables
    def lookup(self, name: str) -> list[Any] | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return self.global_slot(name)

    def declare(self, name: str, value: Any, kind: str, ctype: A.Type | None = None,
                array_bytes: int | None = None) -> None:
        """``ctype``: the declared type of a variable (``sizeof``, ``&p`` of a pointer); ``array_bytes``: ``sizeof``
        of an array."""
        self.scopes[-1][name] = [value, kind, self.pc, ctype, array_bytes]

    def global_slot(self, name: str) -> list[Any] | None:
        """The slot of a file-scope variable, initialized on first use in this run (its initializer evaluated
        on a thread of its own: constants and tables)."""
        prog = self.prog
        if name in prog.globals:
            return prog.globals[name]
        d = prog.global_decls.get(name)
        if d is None or "extern" in d.storage:
            return None
        scratch = Thread(prog, {}, {})
        scratch._declare(d)
        prog.globals[name] = scratch.scopes[-1][name]
        prog.globals[name][2] = True  # visible on every path
        return prog.globals[name]

    def value_of_name(self, name: str) -> Any:
        slot = self.lookup(name)
        if slot is not None:
            return self.assume(slot[0])
        if name in self.prog.macros:
            return self.prog.macros[name]
        if name == "warpSize":
            return self.prog.warp_size
        if name in ("true", "false"):
            return name == "true"
        if name in _COPY_KINDS:
            return _COPY_KINDS[name]
        if name in ("nullptr", "NULL"):
            return 0  # a null pointer compares and stores as 0; dereferencing it is refused as a non-pointer
        if name in _STANDARD_CONSTANTS:
            return _STANDARD_CONSTANTS[name]
        raise Unsupported(f"unknown name '{name}'")

    def tick(self) -> None:
        prog = self.prog
        prog.steps += 1
        self.steps += 1
        if self.steps > prog.thread_step_cap:
            raise StepLimit("a thread ran far longer than it did concretely (a loop the hole never ends)")
        if prog.steps & 2047 == 0:
            if prog.steps > prog.max_steps:
                raise StepLimit("interpretation step budget exhausted")
            if prog.deadline is not None and time.monotonic() > prog.deadline:
                raise TimeLimit("interpretation time budget exhausted")

    def assume(self, v: Any) -> Any:
        """``v`` as seen under the current path condition: an ``Ite`` whose condition the path condition
        implies (one of its conjuncts, at any depth) is its ``then`` value (its ``else`` value when it implies
        the negation). Why: a variable assigned in every iteration of a loop the hole controls is
        ``Ite(pc_k, new, old)``; read in iteration k+1 (pc_{k+1} = pc_k ∧ c) it is just ``new``, so its
        cases grow with the iterations instead of doubling."""
        if not isinstance(v, Ite) or isinstance(self.pc, bool):
            return v
        if self._facts_pc is not self.pc:
            facts: set[int] = set()
            negated: set[int] = set()
            stack = [self.pc]
            while stack:
                t = stack.pop()
                tid = t.get_id()
                if tid in facts:
                    continue
                facts.add(tid)
                if z3.is_and(t):
                    stack.extend(t.children())
                elif z3.is_not(t):
                    negated.add(t.arg(0).get_id())
            self._facts_pc, self._facts, self._negated = self.pc, facts, negated
        while isinstance(v, Ite) and isinstance(v.cond, z3.ExprRef):
            cid = v.cond.get_id()
            if cid in self._facts:
                v = v.then
            elif cid in self._negated:
                v = v.else_
            else:
                break
        return v

    # -- expressions
    def eval(self, e: A.Expr) -> Any:  # noqa: C901 - one dispatch over the expression kinds
        self.tick()
        if isinstance(e, Hole):
            return self.prog.holes[e.hid](self)
        if isinstance(e, A.Literal):
            return literal_value(e)
        if isinstance(e, A.Name):
            return self.value_of_name(e.id)
        if isinstance(e, A.Member):
            ref = A.builtin_ref(e)
            if ref is None:
                base = self.eval(e.base) if not e.arrow else None
                if isinstance(base, tuple) and e.field in ("x", "y", "z"):  # a dim3
                    return base["xyz".index(e.field)]
                raise Unsupported("struct member access")
            return self.builtins[ref]
        if isinstance(e, A.SizeOf):
            return self.sizeof(e.arg)
        if isinstance(e, A.Launch):
            return self.launch(e)
        if isinstance(e, A.Binary):
            if e.op in ("&&", "||"):
                left = truth(self.eval(e.left))
                if isinstance(left, bool):
                    if (e.op == "&&" and not left) or (e.op == "||" and left):
                        return left
                    return truth(self.eval(e.right))
                saved = self.pc
                self.pc = and_(saved, left if e.op == "&&" else not_(left))
                try:
                    right = truth(self.eval(e.right))
                finally:
                    self.pc = saved
                return and_(left, right) if e.op == "&&" else or_(left, right)
            if e.op == ",":
                self.eval(e.left)
                return self.eval(e.right)
            return binop(e.op, self.eval(e.left), self.eval(e.right))
        if isinstance(e, A.Unary):
            return self._unary(e)
        if isinstance(e, A.Ternary):
            c = truth(self.eval(e.cond))
            if isinstance(c, bool):
                return self.eval(e.then if c else e.else_)
            saved = self.pc
            try:
                self.pc = and_(saved, c)
                a = self.eval(e.then)
                self.pc = and_(saved, not_(c))
                b = self.eval(e.else_)
            finally:
                self.pc = saved
            return merge(c, a, b)
        if isinstance(e, A.Index):
            return self.load(self.address(e))
        if isinstance(e, A.Cast):
            v = self.eval(e.operand)
            if e.type.pointers:
                return v
            return convert(v, type_kind(e.type))
        if isinstance(e, A.Assign):
            return self.assign(e)
        if isinstance(e, A.Call):
            return self.call(e)
        raise Unsupported(f"expression {type(e).__name__}")

    def _unary(self, e: A.Unary) -> Any:
        if e.op in ("++", "--"):
            old = self.eval(e.operand)
            new = binop("+" if e.op == "++" else "-", old, 1)
            self.store_lvalue(e.operand, new)
            return old if e.postfix else new
        if e.op == "&":
            if isinstance(e.operand, A.Index):
                return self.address(e.operand)
            if isinstance(e.operand, A.Name):
                slot = self.lookup(e.operand.id)
                if slot is not None and isinstance(slot[3], A.Type) and slot[3].pointers:
                    return VarRef(slot, e.operand.id, slot[3])
            raise Unsupported("address of a scalar")
        if e.op == "*":
            p = self.eval(e.operand)
            if not isinstance(p, Ptr):
                raise Unsupported("dereference of a non-pointer")
            return self.load(p)
        v = self.eval(e.operand)
        if e.op == "-":
            return binop("-", 0, v) if not isinstance(v, (float, np.floating)) else -v
        if e.op == "+":
            return v
        if e.op == "!":
            return not_(truth(v))
        if e.op == "~":
            if isinstance(v, int):
                return ~v
        raise Unsupported(f"unary {e.op}")

    def address(self, e: A.Expr) -> Ptr:
        if isinstance(e, A.Index):
            base = self.eval(e.base) if not isinstance(e.base, A.Index) else self.address(e.base)
            if not isinstance(base, Ptr):
                raise Unsupported("subscript of a non-pointer")
            i = self.eval(e.index)
            if isinstance(i, (Choice, Ite)):
                i = _choice_to_int(i)
            if isinstance(i, bool):
                i = int(i)
            return Ptr(base.buf, binop("+", base.off, binop("*", i, base.stride())), base.inner[1:])
        v = self.eval(e)
        if not isinstance(v, Ptr):
            raise Unsupported("not an address")
        return v

    def load(self, p: Ptr) -> Any:
        if p.inner:
            return p  # a row of a multi-dimensional array decays to a pointer
        if p.buf.events is not None:
            raise ObservedRead(p.buf.name)
        data = p.buf.data
        if isinstance(p.off, int):
            if not 0 <= p.off < len(data):
                return self._fault(f"out-of-bounds read of {p.buf.name}[{p.off}]", p)
            return self.assume(data[p.off])
        self.prog.obligations.append(z3.Implies(_zb(self.pc), z3.And(p.off >= 0, p.off < len(data))))
        ks = self._cells(p.off, len(data))
        for _ in ks:
            self.tick()
        if not ks:
            return self._fault(f"read of {p.buf.name} out of bounds for every hole value", p)
        if len(ks) > MAX_CASES:
            raise Unsupported("hole-dependent load from a large array")
        if all(_int_like(data[k]) for k in ks):
            out: Any = _zint(data[ks[0]])
            for k in ks[1:]:
                out = z3.If(p.off == k, _zint(data[k]), out)
            return out
        if any(is_sym(data[k]) for k in ks):
            acc: Any = data[ks[0]]
            for k in ks[1:]:
                acc = merge(p.off == k, data[k], acc)
            return acc
        tid = p.off.get_id()
        return simplify_choice([Case(p.off == k, ((tid, k),), data[k]) for k in ks])

    def _cells(self, off: Any, size: int) -> list[int]:
        """Elements a hole-dependent offset can reach, from interval bounds of the hole's unknowns."""
        r = int_range(off, self.prog.bounds, {})
        if r is None and size > MAX_UNBOUNDED_CELLS:
            raise Unsupported("hole-dependent address whose range is unknown")
        lo, hi = (0, size - 1) if r is None else (max(0, r[0]), min(size - 1, r[1]))
        if hi - lo + 1 > MAX_CASES:
            raise Unsupported("hole-dependent address over a large range")
        return list(range(lo, hi + 1))

    def _fault(self, msg: str, p: Ptr) -> Any:
        if self.pc is True:
            self.prog.last_stmt = self.stmt_id
            raise Infeasible(msg)
        self.prog.obligations.append(z3.Not(_zb(self.pc)))
        return _zero_of(p.buf.kind)

    def store(self, p: Ptr, value: Any) -> None:
        if p.inner:
            raise Unsupported("assignment to an array row")
        buf = p.buf
        value = convert(value, buf.kind)
        if buf.events is not None:
            self.tick()
            buf.events.append((self.pc, p.off, value, self.tid))
            if buf.writers is not None and isinstance(p.off, int):
                buf.writers[p.off] = self.stmt_id
            return
        if isinstance(p.off, int):
            if not 0 <= p.off < len(buf.data):
                self._fault(f"out-of-bounds write of {buf.name}[{p.off}]", p)
                return
            buf.data[p.off] = merge(self.pc, value, buf.data[p.off])
            if buf.writers is not None:
                buf.writers[p.off] = self.stmt_id
            return
        self.prog.obligations.append(z3.Implies(_zb(self.pc), z3.And(p.off >= 0, p.off < len(buf.data))))
        for k in self._cells(p.off, len(buf.data)):
            self.tick()
            buf.data[k] = merge(and_(self.pc, p.off == k), value, buf.data[k])

    def store_lvalue(self, target: A.Expr, value: Any) -> None:
        if isinstance(target, A.Name):
            slot = self.lookup(target.id)
            if slot is None:
                raise Unsupported(f"assignment to unknown '{target.id}'")
            new = convert(value, slot[1])
            slot[0] = new if slot[2] is self.pc else merge(self.pc, new, slot[0])
            return
        if isinstance(target, A.Index):
            self.store(self.address(target), value)
            return
        if isinstance(target, A.Unary) and target.op == "*":
            p = self.eval(target.operand)
            if isinstance(p, Ptr):
                self.store(p, value)
                return
        raise Unsupported("assignment target")

    def assign(self, e: A.Assign) -> Any:
        if e.op == "=":
            value = self.eval(e.value)
        else:
            value = binop(e.op[:-1], self.eval(e.target), self.eval(e.value))
        self.store_lvalue(e.target, value)
        return value

    def call(self, e: A.Call) -> Any:
        name = e.callee
        if name is None:
            raise Unsupported("indirect call")
        if name in ("atomicAdd", "atomicMax", "atomicMin", "atomicExch") and len(e.args) == 2:
            p = self.eval(e.args[0])
            if not isinstance(p, Ptr):
                raise Unsupported("atomic on a non-pointer")
            old = self.load(p)
            v = self.eval(e.args[1])
            op = {"atomicAdd": lambda a, b: binop("+", a, b), "atomicExch": lambda a, b: b}.get(name)
            new = op(old, v) if op else _minmax(name == "atomicMax", old, v)
            self.store(p, new)
            return old
        cast = re.fullmatch(r"(?:static|reinterpret|const)_cast\s*<\s*(.+?)\s*>", name)
        if cast is not None and len(e.args) == 1:  # a C++ cast: a conversion, or nothing for pointers
            target = cast.group(1)
            pointers = target.count("*")
            base = target.replace("*", " ").replace("const", " ").strip()
            return self.eval(A.Cast(A.ctype(" ".join(base.split()), pointers), e.args[0]))
        if name in ("__ldg",) and len(e.args) == 1:
            p = self.eval(e.args[0])
            if not isinstance(p, Ptr):
                raise Unsupported("__ldg of a non-pointer")
            return self.load(p)
        if id(e) in self.warp_results:  # a device function that stepped with the block, already run
            return self.warp_results[id(e)]
        if name in WARP_CALLS:
            if id(e) not in self.warp_results:
                raise Unsupported(f"{name} where its operands cannot be exchanged first (a loop condition, a "
                                  "conditional operand)")
            return self.warp_results[id(e)]
        host = "cuda" + name[3:] if name.startswith("hip") else name
        if host in _HOST_NOOPS:
            for a in e.args:
                self.eval(a)
            return 0
        if host in ("cudaMalloc", "cudaMallocManaged", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemset",
                    "cudaMemsetAsync", "cudaMemcpyToSymbol"):
            return self.host_memory(host, [self.eval(a) for a in e.args], e)
        if name == "dim3":
            return _dim3([self.eval(a) for a in e.args])
        if name in self.prog.functions:
            return self.call_function(self.prog.functions[name], [self.eval(a) for a in e.args])
        args = [self.eval(a) for a in e.args]
        fn = MATH.get(name)
        if fn is None:
            raise Unsupported(f"call to '{name}'")
        if name in ("max", "min") and any(isinstance(a, z3.ExprRef) for a in args):
            return _minmax(name == "max", args[0], args[1])
        return lift(fn, *args, deadline=self.prog.deadline)  # many hole-dependent cases take no step

    def warp_prelude(self, e: A.Expr) -> Iterator[None]:
        """Warp operations in ``e``, innermost first: each thread of the block contributes its operand, a block
        step passes (every live thread contributes), then reads its partner's (the result is kept for the
        evaluation of ``e``)."""
        calls = [n for n in _post_order(e) if isinstance(n, A.Call) and n.callee is not None and (
            n.callee in WARP_CALLS or self.prog.steps_through(n.callee))]
        if not calls:
            return
        if _conditional_warp_call(e, self.prog):
            raise Unsupported("a warp operation or barrier evaluated only on one side of a condition")
        for call in calls:
            assert call.callee is not None
            if call.callee not in WARP_CALLS:  # a device function with barriers or warp operations inside
                args = [self.eval(a) for a in call.args]
                self.warp_results[id(call)] = yield from self.call_function_steps(self.prog.functions[call.callee],
                                                                                 args)
                continue
            kind, value_at, lane_at, width_at = WARP_CALLS[call.callee]
            if len(call.args) <= max(value_at, lane_at or 0, 0) and value_at >= 0:
                raise Unsupported(f"{call.callee} with too few arguments")
            value = self.eval(call.args[value_at]) if value_at >= 0 else True
            lane_arg = self.eval(call.args[lane_at]) if lane_at is not None else None
            width = self.eval(call.args[width_at]) if width_at is not None and len(call.args) > width_at else None
            if kind in ("ballot", "any", "all", "active"):
                value = truth(value)
            me = self.block_index()
            slot = self.exchange.values.setdefault(self.warp_ops, {})
            slot[me] = value
            yield  # every live thread of the block contributes to this step
            self.warp_results[id(call)] = self.warp_result(kind, me, slot, value, lane_arg, width)
            self.warp_ops += 1

    def block_index(self) -> int:
        b = self.builtins
        return (b[("threadIdx", "z")] * b[("blockDim", "y")] + b[("threadIdx", "y")]) * b[("blockDim", "x")] + \
            b[("threadIdx", "x")]

    def warp_result(self, kind: str, me: int, slot: dict[int, Any], value: Any, lane_arg: Any, width: Any) -> Any:
        warp = self.prog.warp_size
        base = me - me % warp
        lanes = range(base, base + warp)

        def partner_value(t: int) -> Any:
            if t in slot:
                return slot[t]
            if t in self.exchange.finished or not 0 <= t - base < warp:
                return value  # an exited lane: its own value (what the source gets is undefined)
            raise Unsupported("lanes of a warp reach their warp operations out of step")

        if kind == "active":
            return sum(1 << (t - base) for t in lanes if t in slot)
        if kind in ("any", "all"):
            out: BoolLike = kind == "all"
            for t in lanes:
                if t in slot:
                    out = or_(out, slot[t]) if kind == "any" else and_(out, slot[t])
            return out
        if kind == "ballot":
            if any(not isinstance(slot[t], bool) for t in lanes if t in slot):
                raise Unsupported("a ballot of hole-dependent predicates")
            return sum(1 << (t - base) for t in lanes if t in slot and slot[t])
        w = warp if width is None else width
        if not isinstance(w, int) or w <= 0 or warp % w:
            raise Unsupported("a shuffle width that is not a divisor of the warp")
        lane = me - base
        seg = lane - lane % w

        def source(arg: int) -> int:
            if kind == "idx":
                return base + seg + arg % w
            target = {"down": lane + arg, "up": lane - arg, "xor": lane ^ arg}[kind]
            return base + target if seg <= target < seg + w else me

        if isinstance(lane_arg, int):
            return partner_value(source(lane_arg))
        if not isinstance(lane_arg, z3.ArithRef):
            raise Unsupported("a shuffle lane that is not an integer")
        r = int_range(lane_arg, self.prog.bounds, {})
        lo, hi = (0, 2 * warp) if r is None else (max(r[0], -2 * warp), min(r[1], 2 * warp))
        out_value: Any = partner_value(source(lo))
        for arg in range(lo + 1, hi + 1):
            out_value = merge(lane_arg == arg, partner_value(source(arg)), out_value)
        self.prog.obligations.append(z3.Implies(_zb(self.pc), z3.And(lane_arg >= lo, lane_arg <= hi)))
        return out_value

    def sizeof(self, arg: A.Type | A.Expr) -> int:
        if isinstance(arg, A.Type):
            return type_bytes(arg)
        if isinstance(arg, A.Name):
            slot = self.lookup(arg.id)
            if slot is not None and slot[4] is not None:
                return int(slot[4])  # an array: all of it
            if slot is not None and isinstance(slot[3], A.Type):
                return type_bytes(slot[3])
        if isinstance(arg, A.Index) or (isinstance(arg, A.Unary) and arg.op == "*"):
            p = self.address(arg) if isinstance(arg, A.Index) else self.eval(arg.operand)
            if isinstance(p, Ptr):
                return p.buf.elem_bytes * p.stride()
        raise Unsupported("sizeof of this expression")

    def launch(self, e: A.Launch) -> None:
        """``kernel<<<grid, block[, shared]>>>(args)`` from host code: the grid runs to completion here."""
        name = e.kernel.id if isinstance(e.kernel, A.Name) else None
        fn = self.prog.functions.get(name or "")
        if fn is None or fn.template is not None:
            raise Unsupported(f"launch of {'a template kernel' if fn is not None else 'an unknown kernel'}")
        if self.pc is not True:
            raise Unsupported("a kernel launch under a hole-dependent condition")
        config = [self.eval(c) for c in e.config]
        if len(config) < 2:
            raise Unsupported("a launch without grid and block")
        grid, block = _dim3([config[0]]), _dim3([config[1]])
        shared = config[2] if len(config) > 2 else 0
        if not isinstance(shared, int) or any(not isinstance(v, int) for v in (*grid, *block)):
            raise Unsupported("a launch shape that depends on the hole")
        values = [self.eval(a) for a in e.args]
        if len(values) != len(fn.params):
            raise Unsupported("a launch whose arguments do not match the kernel's parameters")
        params: list[tuple[str, Any, str]] = []
        for p, v in zip(fn.params, values, strict=True):
            if not isinstance(p, A.Param) or p.name is None:
                raise Unsupported("unnamed parameter")
            pk = "auto" if p.type.pointers else type_kind(p.type)
            params.append((p.name, convert(v, pk), pk))
        run_grid(self.prog, fn, params, LaunchShape(grid, block, shared))

    def host_memory(self, name: str, args: list[Any], e: A.Call) -> int:
        """cudaMalloc / cudaMemcpy / cudaMemset / cudaMemcpyToSymbol on the interpreter's buffers."""
        if self.pc is not True:
            raise Unsupported(f"{name} under a hole-dependent condition")
        if name in ("cudaMalloc", "cudaMallocManaged"):
            if len(args) < 2 or not isinstance(args[0], VarRef) or not isinstance(args[1], int):
                raise Unsupported(f"{name} of something other than &pointer and a size")
            ref = args[0]
            elem = A.replace(ref.ctype, pointers=ref.ctype.pointers[:-1], quals=())
            if elem.pointers:
                raise Unsupported(f"{name} of an array of pointers")
            size = type_bytes(elem)
            kind = type_kind(elem)
            n = args[1] // size
            buf = Buffer(ref.name, kind, [_zero_of(kind)] * n, {} if self.prog.instrument else None, elem_bytes=size)
            ref.slot[0] = Ptr(buf, 0)
            return 0
        if name in ("cudaMemset", "cudaMemsetAsync"):
            if len(args) < 3 or not isinstance(args[0], Ptr) or args[1] != 0 or not isinstance(args[2], int):
                raise Unsupported(f"{name} to a value other than zero")
            for k in range(args[2] // args[0].buf.elem_bytes):
                self.store(Ptr(args[0].buf, binop("+", args[0].off, k)), 0)
            return 0
        if len(args) < 3 or not isinstance(args[2], int):
            raise Unsupported(f"{name} of a size that is not known")
        dst, src = args[0], args[1]
        if name == "cudaMemcpyToSymbol" and not isinstance(dst, Ptr):
            symbol = e.args[0]
            slot = self.lookup(symbol.id) if isinstance(symbol, A.Name) else None
            if slot is None or not isinstance(src, Ptr):
                raise Unsupported("cudaMemcpyToSymbol of an unknown symbol")
            slot[0] = convert(self.load(src), slot[1])
            return 0
        if name == "cudaMemcpyToSymbol" and len(args) > 3 and isinstance(args[3], int) and isinstance(dst, Ptr):
            dst = Ptr(dst.buf, binop("+", dst.off, args[3] // dst.buf.elem_bytes))  # the byte offset
        if not isinstance(dst, Ptr) or not isinstance(src, Ptr):
            raise Unsupported(f"{name} between something other than two buffers")
        if dst.buf.elem_bytes != src.buf.elem_bytes:
            raise Unsupported(f"{name} between buffers of different element sizes")
        for k in range(args[2] // dst.buf.elem_bytes):
            at_src = Ptr(src.buf, binop("+", src.off, k))
            at_dst = Ptr(dst.buf, binop("+", dst.off, k))
            self.store(at_dst, self.load(at_src))
            # the copy's elements keep the statements that computed them (localization follows the data)
            if dst.buf.writers is not None and src.buf.writers is not None and isinstance(at_src.off, int) \
                    and isinstance(at_dst.off, int) and at_src.off in src.buf.writers:
                dst.buf.writers[at_dst.off] = src.buf.writers[at_src.off]
        return 0

    def call_function(self, fn: A.Function, args: list[Any]) -> Any:
        steps = self.call_function_steps(fn, args)
        try:
            next(steps)
        except StopIteration as finished:
            return finished.value
        steps.close()
        raise Unsupported("barrier inside a device function")

    def call_function_steps(self, fn: A.Function, args: list[Any]) -> Generator[None, None, Any]:
        """Run a device function (yielding at its barriers and warp operations); returns its value."""
        if fn.template is not None:
            raise Unsupported("template function")
        saved_scopes, saved_loops, saved_ret, saved_pc = self.scopes, self.loops, self.ret, self.pc
        self.scopes, self.loops, self.ret = [{}], [], None
        kind = "void" if fn.ret.base == "void" and not fn.ret.pointers else ("auto" if fn.ret.pointers else type_kind(fn.ret))
        try:
            for p, a in zip(fn.params, args, strict=False):
                if not isinstance(p, A.Param) or p.name is None:
                    raise Unsupported("unnamed parameter")
                pk = "auto" if p.type.pointers else type_kind(p.type)
                self.declare(p.name, convert(a, pk), pk)
            yield from self.exec(fn.body)
            out = self.ret
        finally:
            self.scopes, self.loops, self.ret, self.pc = saved_scopes, saved_loops, saved_ret, saved_pc
        return None if kind == "void" or out is None else convert(out, kind)

    # -- statements (generators: they yield at barriers)
    def exec(self, s: A.Stmt) -> Iterator[None]:  # noqa: C901 - one dispatch over the statement kinds
        if self.pc is False:
            return
        self.tick()
        if self.prog.instrument:
            self.prog.executed.add(id(s))
        if isinstance(s, A.Block):
            self.scopes.append({})
            try:
                for child in s.stmts:
                    if self.pc is False:
                        break
                    yield from self.exec(child)
            finally:
                self.scopes.pop()
        elif isinstance(s, A.ExprStmt):
            if A.is_barrier(s):
                yield
                return
            self.stmt_id = id(s)
            saved, self.warp_results = self.warp_results, dict(self.warp_results)
            yield from self.warp_prelude(s.expr)
            self.stmt_id = id(s)  # (a device function the prelude ran set its own)
            self.eval(s.expr)
            self.warp_results = saved
        elif isinstance(s, A.DeclStmt):
            self.stmt_id = id(s)
            for d in s.decls:
                saved, self.warp_results = self.warp_results, dict(self.warp_results)
                if d.init is not None:
                    yield from self.warp_prelude(d.init)
                    self.stmt_id = id(s)
                self._declare(d)
                self.warp_results = saved
        elif isinstance(s, A.If):
            saved, self.warp_results = self.warp_results, dict(self.warp_results)
            yield from self.warp_prelude(s.cond)
            c = truth(self.eval(s.cond))
            self.warp_results = saved
            if isinstance(c, bool):
                if c:
                    yield from self.exec(s.then)
                elif s.else_ is not None:
                    yield from self.exec(s.else_)
                return
            start = self.pc
            self.pc = and_(start, c)
            yield from self.exec(s.then)
            after_then = self.pc
            self.pc = and_(start, not_(c))
            if s.else_ is not None:
                yield from self.exec(s.else_)
            self.pc = or_(after_then, self.pc)
        elif isinstance(s, A.For):
            yield from self._for(s)
        elif isinstance(s, A.While):
            self.prog.loop_stmts.setdefault(_loop_key(s), id(s))
            yield from self._loop(None, s.cond, None, s.body, None, _loop_key(s))
        elif isinstance(s, A.Return):
            if s.value is not None:
                saved, self.warp_results = self.warp_results, dict(self.warp_results)
                yield from self.warp_prelude(s.value)
                v = self.eval(s.value)
                self.warp_results = saved
                self.ret = v if self.ret is None else merge(self.pc, v, self.ret)
            self.pc = False
        elif isinstance(s, A.Break):
            if not self.loops:
                raise Unsupported("break outside a loop")
            self.loops[-1].broken = or_(self.loops[-1].broken, self.pc)
            self.pc = False
        elif isinstance(s, A.Continue):
            if not self.loops:
                raise Unsupported("continue outside a loop")
            self.loops[-1].continued = or_(self.loops[-1].continued, self.pc)
            self.pc = False
        elif isinstance(s, (A.Pragma, A.Comment, A.Empty)):
            return
        else:
            raise Unsupported(f"statement {type(s).__name__}")

    def _declare(self, d: A.VarDecl) -> None:
        if d.is_shared and "extern" in d.storage:
            buf = self.shared.get(_DYNAMIC + d.name) or self._dynamic_shared(d)
            self.declare(d.name, Ptr(buf, 0, ()), "auto")
            return
        if d.is_shared:
            if d.name not in self.shared:
                self.shared[d.name] = self._array(d)
            buf = self.shared[d.name]
            self.declare(d.name, Ptr(buf, 0, self._dims(d)[1:]), "auto")
            return
        if d.dims:
            buf = self._array(d)
            dims = self._dims(d)
            self.declare(d.name, Ptr(buf, 0, dims[1:]), "auto", None, len(buf.data) * buf.elem_bytes)
            if d.init is not None:
                items = d.init.items if isinstance(d.init, A.InitList) else ()
                if len(dims) != 1 or not isinstance(d.init, A.InitList) or len(items) > len(buf.data) or any(
                        isinstance(x, A.InitList) for x in items):
                    raise Unsupported("array initializer")
                for k, item in enumerate(items):
                    buf.data[k] = convert(self.eval(item), buf.kind)
            return
        if d.type.base == "dim3" and not d.type.pointers:
            items = d.init.items if isinstance(d.init, A.InitList) else (() if d.init is None else (d.init,))
            self.declare(d.name, _dim3([self.eval(x) for x in items]), "dim3")
            return
        kind = "auto" if d.type.pointers else type_kind(d.type)
        if d.init is None:
            value: Any = _zero_of(kind) if kind != "auto" else None
        else:
            if d.init_style != "=":
                raise Unsupported("constructor-style initializer")
            value = convert(self.eval(d.init), kind)
        self.declare(d.name, value, kind, d.type)

    def _dynamic_shared(self, d: A.VarDecl) -> Buffer:
        """``extern __shared__ T x[];``: the launch's dynamic shared bytes as an array of T (one such array per
        kernel: several names would alias one another, which the buffers here do not model)."""
        size = _ELEMENT_BYTES.get(" ".join(q for q in d.type.base.split() if q not in ("const", "volatile")))
        if size is None or d.type.pointers or d.dims[1:]:
            raise Unsupported("dynamic shared memory of this type")
        if any(name != d.name for name in self.shared if name.startswith(_DYNAMIC)):
            raise Unsupported("two dynamic shared arrays (they alias)")
        n = self.dynamic_shared_bytes // size
        if n <= 0:
            raise Unsupported("dynamic shared memory without a size from the launch")
        kind = type_kind(d.type)
        self.shared[_DYNAMIC + d.name] = Buffer(d.name, kind, [_zero_of(kind)] * n, elem_bytes=size)
        return self.shared[_DYNAMIC + d.name]

    def _dims(self, d: A.VarDecl) -> tuple[int, ...]:
        out = []
        for dim in d.dims:
            v = None if dim is None else A.const_int(dim, {k: v for k, v in self.prog.macros.items() if isinstance(v, int)})
            if v is None or v <= 0:
                raise Unsupported("array with a non-constant extent")
            out.append(v)
        return tuple(out)

    def _array(self, d: A.VarDecl) -> Buffer:
        if "extern" in d.storage:
            return self._dynamic_shared(d)
        n = int(np.prod(self._dims(d)))
        kind = type_kind(d.type)
        return Buffer(d.name, kind, [_zero_of(kind)] * n, elem_bytes=type_bytes(d.type))

    def _for(self, s: A.For) -> Iterator[None]:
        self.prog.loop_stmts.setdefault(_loop_key(s), id(s))
        self.scopes.append({})
        try:
            if s.init is not None:
                yield from self.exec(s.init)
            loop_vars = set(self.scopes[-1])
            yield from self._loop(s.init, s.cond, s.step, s.body, loop_vars, _loop_key(s))
        finally:
            self.scopes.pop()

    def _loop(
        self, init: A.Stmt | None, cond: A.Expr | None, step: A.Expr | None, body: A.Stmt,
        loop_vars: set[str] | None = None, key: Any = None,
    ) -> Iterator[None]:
        exits: BoolLike = False
        iterations = 0
        seen = self.prog.loop_iters
        cap = max(self.prog.loop_cap, seen.get(key, 0) + LOOP_SLACK) if key is not None else self.prog.loop_cap
        while True:
            c = True if cond is None else truth(self.eval(cond))
            exits = or_(exits, and_(self.pc, not_(c)))
            self.pc = and_(self.pc, c)
            if self.pc is False:
                break
            iterations += 1
            if self.pc is True and key is not None and iterations > seen.get(key, 0):
                seen[key] = iterations
            if iterations > self.prog.hot_iterations:
                self.prog.hot_loop, self.prog.hot_iterations = key, iterations
            if self.prog.iteration_cap is not None and iterations > self.prog.iteration_cap:
                raise StepLimit("a loop ran far more iterations than any loop did concretely")
            # only a loop whose own condition depends on the hole is capped: one under a hole-dependent branch
            # (``if (row < H) for (i = 0; i < 16; i++)``) runs its concrete count
            if not isinstance(c, bool) and not isinstance(self.pc, bool) and iterations > cap:
                self.prog.loop_caps_hit += 1
                self.prog.obligations.append(z3.Not(_zb(self.pc)))
                break
            ctx = _Loop()
            self.loops.append(ctx)
            try:
                yield from self.exec(body)
            finally:
                self.loops.pop()
            exits = or_(exits, ctx.broken)
            self.pc = or_(self.pc, ctx.continued)
            if self.pc is False:
                break
            if step is not None:
                self.tick()
                if loop_vars and isinstance(step, (A.Assign, A.Unary)):
                    # Threads not in pc have left the loop; its own variables are dead for them.
                    for name in loop_vars:
                        slot = self.lookup(name)
                        if slot is not None:
                            slot[2] = self.pc
                self.eval(step)
        self.pc = exits


def _post_order(e: A.Node) -> list[A.Node]:
    """Nodes of ``e``, children before their parent (the order a call's operands are evaluated in)."""
    out: list[A.Node] = []
    for child in A.children(e):
        out += _post_order(child)
    out.append(e)
    return out


def _conditional_warp_call(e: A.Node, prog: Program) -> bool:
    """A warp operation (or a function that steps with the block) under a ``?:`` branch or the right side of
    ``&&``/``||`` (evaluated on some paths only)."""
    for n in A.walk(e):
        sides: tuple[A.Node, ...] = ()
        if isinstance(n, A.Ternary):
            sides = (n.then, n.else_)
        elif isinstance(n, A.Binary) and n.op in ("&&", "||"):
            sides = (n.right,)
        if any(isinstance(m, A.Call) and m.callee is not None and (m.callee in WARP_CALLS or prog.steps_through(
                m.callee)) for side in sides for m in A.walk(side)):
            return True
    return False


LOOP_SLACK = 4  # iterations beyond the concrete runs' most that a hole-dependent loop may run


def _loop_key(s: A.Stmt) -> Any:
    """A loop's identity that survives installing a hole (the statement is rebuilt, its position is not)."""
    return (s.span.start_byte, s.span.end_byte) if s.span is not None else id(s)


def int_range(t: Any, bounds: Mapping[str, tuple[int, int]], memo: dict[int, Any]) -> tuple[int, int] | None:
    """Interval of a z3 integer term given the unknowns' bounds (None when unbounded)."""
    if isinstance(t, int):
        return (t, t)
    key = t.get_id()
    if key in memo:
        return memo[key]
    out: tuple[int, int] | None = None
    if z3.is_int_value(t):
        v = t.as_long()
        out = (v, v)
    elif z3.is_const(t):
        out = bounds.get(str(t))
    elif z3.is_app(t):
        kind = t.decl().kind()
        kids = t.children()
        if kind == z3.Z3_OP_ITE:
            a, b = int_range(kids[1], bounds, memo), int_range(kids[2], bounds, memo)
            out = None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        else:
            rs = [int_range(k, bounds, memo) for k in kids]
            if all(r is not None for r in rs):
                out = _combine(kind, rs)  # type: ignore[arg-type]
    memo[key] = out
    return out


def _combine(kind: int, rs: list[tuple[int, int]]) -> tuple[int, int] | None:
    if kind == z3.Z3_OP_ADD:
        return (sum(r[0] for r in rs), sum(r[1] for r in rs))
    if kind == z3.Z3_OP_SUB:
        lo, hi = rs[0]
        for r in rs[1:]:
            lo, hi = lo - r[1], hi - r[0]
        return (lo, hi)
    if kind == z3.Z3_OP_UMINUS:
        return (-rs[0][1], -rs[0][0])
    if kind == z3.Z3_OP_MUL:
        lo, hi = rs[0]
        for r in rs[1:]:
            prods = [lo * r[0], lo * r[1], hi * r[0], hi * r[1]]
            lo, hi = min(prods), max(prods)
        return (lo, hi)
    if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_DIV) and len(rs) == 2 and rs[1][0] == rs[1][1] and rs[1][0] > 0:
        d = rs[1][0]
        return (rs[0][0] // d, rs[0][1] // d)
    if kind == z3.Z3_OP_MOD and len(rs) == 2 and rs[1][0] == rs[1][1] and rs[1][0] > 0:
        return (0, rs[1][0] - 1)
    return None


def _zb(c: BoolLike) -> Any:
    return z3.BoolVal(c) if isinstance(c, bool) else c


def _zero_of(kind: str) -> Any:
    return {"int": 0, "float": np.float32(0), "double": 0.0, "bool": False, "half": np.float16(0)}.get(kind, 0)


def _choice_to_int(c: Any) -> Any:
    if isinstance(c, Ite):
        return z3.If(_zb(c.cond), _choice_to_int(c.then), _choice_to_int(c.else_))
    if isinstance(c, z3.ArithRef):
        return c
    if isinstance(c, (int, bool)):
        return z3.IntVal(int(c))
    if not isinstance(c, Choice) or not all(isinstance(x.value, (int, bool)) for x in c.cases):
        raise Unsupported("floating-point subscript")
    out: Any = z3.IntVal(int(c.cases[-1].value))
    for x in c.cases[:-1]:
        out = z3.If(_zb(x.cond), int(x.value), out)
    return out


def _minmax(is_max: bool, a: Any, b: Any) -> Any:
    if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
        if isinstance(a, Choice) or isinstance(b, Choice):
            raise Unsupported("min/max of mixed hole-dependent values")
        a, b = _zint(a) if isinstance(a, int) else a, _zint(b) if isinstance(b, int) else b
        return z3.If(a >= b, a, b) if is_max else z3.If(a <= b, a, b)
    return lift(lambda x, y: _cmax(x, y) if is_max else _cmin(x, y), a, b)


def _cmax(x: Any, y: Any) -> Any:
    if isinstance(x, int) and isinstance(y, int):
        return max(x, y)
    return np.float32(np.fmax(x, y)) if isinstance(x, np.float32) or isinstance(y, np.float32) else float(np.fmax(x, y))


def _cmin(x: Any, y: Any) -> Any:
    if isinstance(x, int) and isinstance(y, int):
        return min(x, y)
    return np.float32(np.fmin(x, y)) if isinstance(x, np.float32) or isinstance(y, np.float32) else float(np.fmin(x, y))


def _f32(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def apply(x: Any) -> Any:
        with np.errstate(all="ignore"):
            return np.float32(fn(np.float32(x)))

    return apply


def _f64(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def apply(x: Any) -> Any:
        with np.errstate(all="ignore"):
            return float(fn(np.float64(x)))

    return apply


MATH: dict[str, Callable[..., Any]] = {
    "max": _cmax, "min": _cmin, "fmaxf": lambda a, b: np.float32(np.fmax(a, b)),
    "fminf": lambda a, b: np.float32(np.fmin(a, b)), "fmax": lambda a, b: float(np.fmax(a, b)),
    "fmin": lambda a, b: float(np.fmin(a, b)), "abs": abs,
    "expf": _f32(np.exp), "__expf": _f32(np.exp), "exp": _f64(np.exp), "tanhf": _f32(np.tanh),
    "tanh": _f64(np.tanh), "sqrtf": _f32(np.sqrt), "sqrt": _f64(np.sqrt), "rsqrtf": _f32(lambda x: 1 / np.sqrt(x)),
    "logf": _f32(np.log), "__logf": _f32(np.log), "log": _f64(np.log), "sinf": _f32(np.sin), "__sinf": _f32(np.sin),
    "cosf": _f32(np.cos), "__cosf": _f32(np.cos), "fabsf": _f32(np.abs), "fabs": _f64(np.abs),
    "floorf": _f32(np.floor), "ceilf": _f32(np.ceil), "erff": _f32(lambda x: np.float32(math.erf(float(x)))),
    "powf": lambda a, b: np.float32(np.power(np.float32(a), np.float32(b))),
    # half precision: conversions round to nearest even; the arithmetic helpers round the float result
    "__half2float": lambda x: np.float32(x), "__float2half": lambda x: np.float16(x),
    "__float2half_rn": lambda x: np.float16(x), "__hadd": lambda a, b: np.float16(np.float32(a) + np.float32(b)),
    "__hsub": lambda a, b: np.float16(np.float32(a) - np.float32(b)),
    "__hmul": lambda a, b: np.float16(np.float32(a) * np.float32(b)),
}


# ------------------------------------------------------------------------------------------ launching
def make_buffer(name: str, array: np.ndarray, instrument: bool) -> Buffer:
    flat = np.asarray(array).reshape(-1)
    data: list[Any]
    if flat.dtype.kind == "f":
        if flat.dtype == np.float32:
            kind, data = "float", [np.float32(x) for x in flat]
        elif flat.dtype == np.float16:
            kind, data = "half", [np.float16(x) for x in flat]
        elif flat.dtype == np.float64:
            kind, data = "double", [float(x) for x in flat]
        else:
            raise Unsupported(f"buffer dtype {flat.dtype}")
    elif flat.dtype.kind in "iu":
        kind, data = "int", [int(x) for x in flat]
    elif flat.dtype.kind == "b":
        kind, data = "bool", [bool(x) for x in flat]
    else:
        raise Unsupported(f"buffer dtype {flat.dtype}")
    return Buffer(name, kind, data, {} if instrument else None, elem_bytes=flat.dtype.itemsize)


def _dim3(values: list[Any]) -> tuple[Any, Any, Any]:
    """A ``dim3`` from an int, a dim3 or up to three components (missing ones are 1)."""
    if len(values) == 1 and isinstance(values[0], tuple):
        return values[0]
    if len(values) > 3:
        raise Unsupported("dim3 of more than three values")
    out = [convert(v, "int") for v in values] + [1] * (3 - len(values))
    return out[0], out[1], out[2]


def run_kernel(
    prog: Program,
    entry: str,
    args: Mapping[str, Any],
    shape: LaunchShape,
    kind: str = "kernel",
) -> dict[str, Buffer]:
    """Run ``entry`` on the given arguments (arrays and scalars, by parameter name, or in order when the spec
    names them otherwise); returns the buffers by argument name. A ``host`` entry runs on one thread: its
    allocations, copies and launches are interpreted (see :meth:`Thread.host_memory`, :meth:`Thread.launch`)."""
    fn = prog.functions.get(entry)
    if fn is None:
        raise Unsupported(f"entry '{entry}' is not a modeled function")
    if fn.template is not None:
        raise Unsupported("template kernel")
    prog.globals = {}  # file-scope variables start from their initializers in every run
    prog.hot_loop, prog.hot_iterations = None, 0
    named = [p.name for p in fn.params if isinstance(p, A.Param) and p.name is not None]
    if len(named) != len(fn.params):
        raise Unsupported("unnamed parameter")
    if all(n in args for n in named):
        pairs = [(n, n) for n in named]
    elif len(args) == len(named):
        pairs = list(zip(named, args, strict=True))  # the spec's arguments are the entry's, in order
    else:
        raise Unsupported("kernel parameter without a matching spec argument")
    buffers: dict[str, Buffer] = {}
    params: list[tuple[str, Any, str]] = []
    for p, (pname, aname) in zip(fn.params, pairs, strict=True):
        assert isinstance(p, A.Param)
        a = args[aname]
        if isinstance(a, np.ndarray):
            if not p.type.pointers:
                raise Unsupported(f"array passed to scalar parameter '{pname}'")
            buffers[aname] = make_buffer(aname, a, prog.instrument)
            if aname in prog.observe:
                buffers[aname].events = []
            params.append((pname, Ptr(buffers[aname], 0), "auto"))
        else:
            pk = type_kind(p.type)
            params.append((pname, convert(a, pk), pk))
    if kind != "kernel":
        shape = LaunchShape(shape.grid, (1, 1, 1), shape.shared_bytes)
    run_grid(prog, fn, params, shape)
    return buffers


def run_grid(prog: Program, fn: A.Function, params: list[tuple[str, Any, str]], shape: LaunchShape) -> None:
    """Every thread of the launch, block by block (threads of a block interleaved at barriers)."""
    gx, gy, gz = shape.grid
    bx, by, bz = shape.block
    for bz_i in range(gz):
        for by_i in range(gy):
            for bx_i in range(gx):
                shared: dict[str, Buffer] = {}
                exchange = WarpExchange()
                gens = []
                for tz in range(bz):
                    for ty in range(by):
                        for tx in range(bx):
                            builtins = {
                                ("threadIdx", "x"): tx, ("threadIdx", "y"): ty, ("threadIdx", "z"): tz,
                                ("blockIdx", "x"): bx_i, ("blockIdx", "y"): by_i, ("blockIdx", "z"): bz_i,
                                ("blockDim", "x"): bx, ("blockDim", "y"): by, ("blockDim", "z"): bz,
                                ("gridDim", "x"): gx, ("gridDim", "y"): gy, ("gridDim", "z"): gz,
                            }
                            tid = (((bz_i * gy + by_i) * gx + bx_i) * bz + tz) * by * bx + ty * bx + tx
                            if prog.threads is not None and tid not in prog.threads:
                                continue
                            th = Thread(prog, builtins, shared)
                            th.dynamic_shared_bytes = shape.shared_bytes
                            th.exchange = exchange
                            th.tid = tid
                            for name, value, k in params:
                                th.declare(name, value, k)
                            gens.append((th, th.exec(fn.body)))
                live = gens
                while live:
                    nxt = []
                    for th, g in live:
                        try:
                            next(g)
                            nxt.append((th, g))
                        except StopIteration:
                            prog.thread_steps_seen = max(prog.thread_steps_seen, th.steps)
                            exchange.finished.add(th.block_index())
                        except Infeasible:
                            # A faulting thread ran this long too (a cap derived from the finished threads
                            # alone would stop a repaired thread that runs as long as it should).
                            prog.thread_steps_seen = max(prog.thread_steps_seen, th.steps)
                            if prog.faulted is None:
                                raise
                            prog.faulted.add(th.tid)  # independent threads: the others still run
                            exchange.finished.add(th.block_index())
                    live = nxt
