"""Recognize a device helper that is an atomic add, max or min written as an ``atomicCAS`` retry loop.

Hand-written CUDA builds float atomics (and old-architecture double adds) from ``atomicCAS`` on the value's
bit pattern. :func:`cas_atomic` proves from the helper's structure and data flow, never from its name, that
one call ``h(address, value)`` has the sequential effect ``*address = f(*address, value)`` with ``f`` a sum,
max or min, so the grid-reduce pass can treat it like ``atomicAdd``/``atomicMax``/``atomicMin``.

Accepted (``T`` the pointee of ``address``, ``value`` a ``T``; for float/double ``U`` is an integer type of
the same width and ``enc``/``dec`` the matching bit casts ``__float_as_int``/``__float_as_uint``/
``__double_as_longlong`` and ``__int_as_float``/``__uint_as_float``/``__longlong_as_double``; for an
integer ``T`` the helper works on the values themselves, ``U`` = ``T``, no bit casts)::

    [U* p = (U*)address;  |  U* p = reinterpret_cast<U*>(address);]       // aliases of address
    U old = *p;  |  U old = p[0];  |  U old = enc(*address);  [U assumed;]
    while (G) { [const] U assumed = old;  |  assumed = old;                // (W)
                old = atomicCAS(p, assumed, enc(X));
                if (old == assumed) break; }
    do { assumed = old;  [if (C) break;]                                   // (D)
         old = atomicCAS(p, assumed, enc(X)); } while (assumed != old);
    [return R;]                                    // R: old/assumed/value through bit casts only

With ``o`` the value read (``dec(old)``, or ``dec(assumed)`` inside the loop) and ``v`` = ``value``: the
new value ``X`` is ``v``, ``o + v``, ``fmaxf(o, v)``/``fmax``/``max`` (or ``fminf``...) in either argument
order, or a select ``o < v ? v : o`` in any spelling; the guard ``G`` (``true`` or a comparison ``o < v``,
``o <= v``, ``v > o`` ... and ``C`` its negation) says when the helper writes at all. The helper is

- a **max** when the guard writes only if ``v`` is above ``o`` and ``X`` is ``v`` or a max of ``o`` and ``v``
  (or there is no guard and ``X`` is a max),
- a **min** likewise,
- an **add** when there is no guard and ``X`` is ``o + v``.

Everything else is refused with a reason: other statements (stores, other atomics, calls, prints), a loop
without the exact retry exit (``old == assumed`` compares bits; a float compare would loop or stop wrongly on
−0.0 and NaN), a new value that is not ``v``/(+)/max/min of ``o`` and ``v`` (e.g. ``v * 2`` or ``o * v``), an
exchange (``X`` = ``v`` without a guard), a guard whose direction does not match ``X``, mixed widths or bit
casts, overloaded or template helpers.

NaN and signed zero: a guarded helper (``while (dec(old) < v) ... enc(v)``) never writes a NaN ``v`` and never
replaces a NaN already at ``*address`` (every comparison with NaN is false), where ``fmaxf`` would drop the NaN
operand either way; with ``<`` it keeps ``-0.0`` against ``+0.0`` (and ``<=`` overwrites equal values), where
``fmaxf`` may return either zero. A ``fmaxf``-style helper replaces a NaN at ``*address``. The pass calls the
helper itself, once, with the fold's result, so how ``*address`` is treated is the helper's own; only the
values passed differ (one combined value instead of one per block), which is the same for NaN-free inputs up
to the order of signed zeros, which the original's racing atomics leave open anyway. The plan verifies every
step against the reference and retries without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpiler_core import ast as A

#: bit casts: name → (float type, width in bytes)
_ENC = {"__float_as_int": ("float", 4), "__float_as_uint": ("float", 4), "__double_as_longlong": ("double", 8)}
_DEC = {"__int_as_float": ("float", 4), "__uint_as_float": ("float", 4), "__longlong_as_double": ("double", 8)}
_INT_WIDTH = {"int": 4, "signed": 4, "signed int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4,
              "uint32_t": 4, "long long": 8, "long long int": 8, "signed long long": 8, "signed long long int": 8,
              "unsigned long long": 8, "unsigned long long int": 8, "int64_t": 8, "uint64_t": 8}
_FLOAT_WIDTH = {"float": 4, "double": 8}
_OPS = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class CasAtomic:
    """A proven CAS-loop atomic: ``op`` ("+", "max", "min") and the positions of its two parameters."""

    op: str
    address: int
    value: int


class _Refused(Exception):
    pass


def _plain(name: str | None) -> str:
    name = name or ""
    for prefix in ("::", "std::"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def _callee(e: A.Expr) -> str:
    return _plain(e.callee) if isinstance(e, A.Call) else ""


def _base(t: A.Type) -> str:
    return " ".join(w for w in t.base.split() if w not in ("const", "volatile"))


def _stmts(s: A.Stmt | tuple[A.Stmt, ...]) -> tuple[A.Stmt, ...]:
    """The statements of a block (or one statement), without comments and empty statements."""
    items = s if isinstance(s, tuple) else s.stmts if isinstance(s, A.Block) else (s,)
    return tuple(x for x in items if not isinstance(x, (A.Comment, A.Empty)))


class _Helper:
    def __init__(self, fn: A.Function) -> None:
        params = [p for p in fn.params if isinstance(p, A.Param)]
        if fn.template is not None:
            raise _Refused("a template helper (its types are unknown)")
        if len(params) != 2 or len(fn.params) != 2 or any(p.name is None or p.dims or p.type.reference
                                                          for p in params):
            raise _Refused("not a helper of an address and a value")
        ptr = [k for k, p in enumerate(params) if len(p.type.pointers) == 1]
        val = [k for k, p in enumerate(params) if not p.type.pointers]
        if len(ptr) != 1 or len(val) != 1:
            raise _Refused("not a helper of an address and a value")
        self.address_pos, self.value_pos = ptr[0], val[0]
        self.address = params[ptr[0]].name or ""
        self.value = params[val[0]].name or ""
        self.t = _base(params[ptr[0]].type)
        if _base(params[val[0]].type) != self.t:
            raise _Refused("the value's type is not the address's element type")
        if self.t in _FLOAT_WIDTH:
            self.width = _FLOAT_WIDTH[self.t]
            self.is_float = True
        elif self.t in _INT_WIDTH:
            self.width = _INT_WIDTH[self.t]
            self.is_float = False
        else:
            raise _Refused(f"element type {self.t} is not a float or integer type")
        self.aliases: set[str] = set()  # U* views of address
        self.old = ""
        self.assumed = ""

    # ------------------------------------------------------------------ types and bit casts
    def bits_type(self, t: A.Type) -> bool:
        """U: same-width integer (float T) or T itself (integer T)."""
        b = _base(t)
        if t.pointers or t.reference:
            return False
        return _INT_WIDTH.get(b) == self.width if self.is_float else b == self.t

    def strip_int_casts(self, e: A.Expr) -> A.Expr:
        while isinstance(e, A.Cast) and self.bits_type(e.type):
            e = e.operand
        return e

    def alias_expr(self, e: A.Expr) -> bool:
        """``p`` (an alias), ``(U*)address`` or ``reinterpret_cast<U*>(address)``; for an integer T also address."""
        if isinstance(e, A.Name):
            return e.id in self.aliases or (not self.is_float and e.id == self.address)
        target: A.Type | None = None
        operand: A.Expr | None = None
        if isinstance(e, A.Cast):
            target, operand = e.type, e.operand
        elif isinstance(e, A.Call) and len(e.args) == 1 and (e.callee or "").replace(" ", "").startswith(
                "reinterpret_cast<") and (e.callee or "").endswith(">"):
            text = (e.callee or "").strip()[len("reinterpret_cast<"):-1].strip()
            stars = len(text) - len(text.rstrip("* "))
            if text.count("*") != 1 or stars == 0:
                return False
            target = A.ctype(text.rstrip("* ").strip(), 1)
            operand = e.args[0]
        if target is None or operand is None or len(target.pointers) != 1:
            return False
        return isinstance(operand, A.Name) and operand.id == self.address and self.bits_type(A.ctype(
            _base(target), 0))

    def enc(self, e: A.Expr) -> A.Expr:
        """The value whose bits ``e`` is (``__float_as_int(x)`` → x), refusing anything else."""
        e = self.strip_int_casts(e)
        if not self.is_float:
            return e
        name = _callee(e)
        if name in _ENC and _ENC[name] == (self.t, self.width) and isinstance(e, A.Call) and len(e.args) == 1:
            return e.args[0]
        raise _Refused("the CAS's new bits are not a bit cast of a value")

    def is_read(self, e: A.Expr, names: set[str]) -> bool:
        """``dec(x)`` (float T) or ``x`` (integer T) with x one of ``names`` (the bits last read)."""
        if isinstance(e, A.Cast) and not e.type.pointers and _base(e.type) == self.t:
            e = e.operand
        if self.is_float:
            if not (_callee(e) in _DEC and _DEC[_callee(e)] == (self.t, self.width) and isinstance(e, A.Call)
                    and len(e.args) == 1):
                return False
            e = e.args[0]
        e = self.strip_int_casts(e)
        return isinstance(e, A.Name) and e.id in names

    def is_value(self, e: A.Expr) -> bool:
        if isinstance(e, A.Cast) and not e.type.pointers and _base(e.type) == self.t:
            e = e.operand
        return isinstance(e, A.Name) and e.id == self.value

    # ------------------------------------------------------------------ the update function
    def compare(self, e: A.Expr, read: set[str]) -> str | None:
        """A comparison of o and v as ``o REL v`` (REL returned), or ``None``."""
        if not (isinstance(e, A.Binary) and e.op in _FLIP):
            return None
        if self.is_read(e.left, read) and self.is_value(e.right):
            return e.op
        if self.is_value(e.left) and self.is_read(e.right, read):
            return _FLIP[e.op]
        return None

    def new_value(self, x: A.Expr, read: set[str]) -> str:
        """"store" (x is v), "+", "max" or "min" for the CAS's new value in terms of o and v."""
        if self.is_value(x):
            return "store"
        if isinstance(x, A.Binary) and x.op == "+" and (
                (self.is_read(x.left, read) and self.is_value(x.right))
                or (self.is_value(x.left) and self.is_read(x.right, read))):
            return "+"
        name = _callee(x)
        if isinstance(x, A.Call) and name in _OPS and len(x.args) == 2:
            a, b = x.args
            if (self.is_read(a, read) and self.is_value(b)) or (self.is_value(a) and self.is_read(b, read)):
                if self.is_float and name in ("fmaxf", "fminf") and self.t != "float":
                    raise _Refused(f"{name} on a {self.t}")
                return _OPS[name]
        if isinstance(x, A.Ternary):
            rel = self.compare(x.cond, read)
            if rel is not None:
                if self.is_value(x.then) and self.is_read(x.else_, read):
                    return "max" if rel in ("<", "<=") else "min"
                if self.is_read(x.then, read) and self.is_value(x.else_):
                    return "max" if rel in (">", ">=") else "min"
        raise _Refused("the CAS's new value is not the value, a sum, a max or a min of the old value and the value")

    def guard(self, e: A.Expr, read: set[str]) -> str:
        """The direction a write guard allows: "max" (writes when v is above o) or "min"."""
        rel = self.compare(e, read)
        if rel is None:
            raise _Refused("the loop's guard is not a comparison of the old value and the value")
        return "max" if rel in ("<", "<=") else "min"

    # ------------------------------------------------------------------ the statements
    def prologue(self, stmts: tuple[A.Stmt, ...]) -> int:
        """Aliases, ``old`` and ``assumed`` declarations; returns the index of the loop."""
        k = 0
        while k < len(stmts) and isinstance(stmts[k], A.DeclStmt):
            s = stmts[k]
            assert isinstance(s, A.DeclStmt)
            for d in s.decls:
                if d.dims or d.storage or d.init_style != "=":
                    raise _Refused(f"an unexpected declaration of {d.name}")
                if len(d.type.pointers) == 1 and d.init is not None and self.alias_expr(d.init) \
                        and self.bits_type(A.replace(d.type, pointers=())):
                    self.aliases.add(d.name)
                elif not self.old and d.init is not None and self.bits_type(d.type) and self.load(d.init):
                    self.old = d.name
                elif self.old and not self.assumed and d.init is None and self.bits_type(d.type):
                    self.assumed = d.name
                else:
                    raise _Refused(f"an unexpected declaration of {d.name}")
            k += 1
        if not self.old:
            raise _Refused("no load of the current bits before the loop")
        if k >= len(stmts):
            raise _Refused("no CAS retry loop")
        return k

    def load(self, e: A.Expr) -> bool:
        """``*p`` / ``p[0]`` (p an alias) or ``enc(*address)``."""
        def deref(x: A.Expr, ok: set[str]) -> bool:
            if isinstance(x, A.Unary) and x.op == "*":
                return isinstance(x.operand, A.Name) and x.operand.id in ok
            return isinstance(x, A.Index) and isinstance(x.base, A.Name) and x.base.id in ok \
                and A.const_int(x.index) == 0
        if deref(self.strip_int_casts(e), self.aliases | ({self.address} if not self.is_float else set())):
            return True
        if self.is_float:
            try:
                return deref(self.enc(e), {self.address})
            except _Refused:
                return False
        return False

    def assume(self, s: A.Stmt) -> bool:
        """``assumed = old`` (declared before) or ``[const] U assumed = old`` (declares it)."""
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Assign) and s.expr.op == "=" \
                and isinstance(s.expr.target, A.Name) and s.expr.target.id == self.assumed and self.assumed \
                and s.expr.value == A.Name(self.old):
            return True
        if isinstance(s, A.DeclStmt) and len(s.decls) == 1 and not self.assumed:
            d = s.decls[0]
            if not d.dims and not d.storage and d.init == A.Name(self.old) and self.bits_type(d.type):
                self.assumed = d.name
                return True
        return False

    def cas(self, s: A.Stmt) -> str:
        """``old = atomicCAS(p, assumed, enc(X))``: the kind of X."""
        if not (isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Assign) and s.expr.op == "="
                and s.expr.target == A.Name(self.old)):
            raise _Refused("the loop does not store the CAS's result in the bits it compares")
        call = self.strip_int_casts(s.expr.value)
        if _callee(call) != "atomicCAS" or not isinstance(call, A.Call) or len(call.args) != 3:
            raise _Refused("the loop does not update the address with atomicCAS")
        where, expected, new = call.args
        if not self.alias_expr(where):
            raise _Refused("the CAS does not update the helper's address")
        if self.strip_int_casts(expected) != A.Name(self.assumed):
            raise _Refused("the CAS does not expect the bits it read")
        return self.new_value(self.enc(new), {self.old, self.assumed})

    def retry_exit(self, e: A.Expr, equal: bool) -> bool:
        """``old == assumed`` (``equal``) / ``old != assumed`` in either order, on the bits."""
        if not (isinstance(e, A.Binary) and e.op == ("==" if equal else "!=")):
            return False
        sides = {self.strip_int_casts(e.left), self.strip_int_casts(e.right)}
        return sides == {A.Name(self.old), A.Name(self.assumed)}

    def loop(self, s: A.Stmt) -> str:
        if isinstance(s, A.While):
            body = _stmts(s.body)
            if len(body) != 3 or not self.assume(body[0]):
                raise _Refused("the loop body is not: take the bits, CAS, stop when it took")
            kind = self.cas(body[1])
            b = body[2]
            if not (isinstance(b, A.If) and b.else_ is None and self.retry_exit(b.cond, True)
                    and _stmts(b.then) == (A.Break(),)):
                raise _Refused("the loop does not stop exactly when the CAS took (old == assumed)")
            const = A.const_int(s.cond) if not (isinstance(s.cond, A.Literal) and s.cond.text == "true") else 1
            guard = None if const is not None and const != 0 else self.guard(s.cond, {self.old})
            if const == 0:
                raise _Refused("the loop never runs")
            return self.combine(kind, guard)
        if isinstance(s, A.DoWhile):
            body = _stmts(s.body)
            if not self.retry_exit(s.cond, False) or len(body) not in (2, 3) or not self.assume(body[0]):
                raise _Refused("the loop is not: take the bits, CAS, repeat while it did not take")
            guard = None
            if len(body) == 3:
                b = body[1]
                if not (isinstance(b, A.If) and b.else_ is None and _stmts(b.then) == (A.Break(),)
                        and isinstance(b.cond, A.Binary) and b.cond.op in _NEGATE):
                    raise _Refused("an unexpected statement in the CAS loop")
                guard = self.guard(A.replace(b.cond, op=_NEGATE[b.cond.op]), {self.old, self.assumed})
            return self.combine(self.cas(body[-1]), guard)
        raise _Refused("no CAS retry loop after the load")

    @staticmethod
    def combine(kind: str, guard: str | None) -> str:
        if guard is None:
            if kind == "store":
                raise _Refused("an exchange (stores the value unconditionally), not a fold")
            return kind
        if kind == "+":
            raise _Refused("a guarded sum")
        if kind not in ("store", guard):
            raise _Refused(f"a {guard} guard around a {kind} update")
        return guard

    def epilogue(self, stmts: tuple[A.Stmt, ...], returns_value: bool) -> None:
        if not stmts:
            if returns_value:
                raise _Refused("falls off the end without a return")
            return
        if len(stmts) != 1 or not isinstance(stmts[0], A.Return):
            raise _Refused("statements after the CAS loop")
        r = stmts[0].value
        if r is None:
            return
        ok_names = {self.old, self.assumed, self.value}
        callees = {id(n.func) for n in A.walk(r) if isinstance(n, A.Call)}
        for n in A.walk(r):
            if isinstance(n, A.Name) and id(n) not in callees and n.id not in ok_names:
                raise _Refused("the return value is not built from the bits read")
            if isinstance(n, A.Call) and _callee(n) not in _DEC:
                raise _Refused("the return value calls a function")
            if isinstance(n, (A.Assign, A.Index, A.Member)) or (isinstance(n, A.Unary) and n.op in ("*", "++",
                                                                                                  "--", "&")):
                raise _Refused("the return value reads memory or has effects")


def cas_atomic(fn: A.Function) -> CasAtomic | str:
    """The atomic ``fn`` is (see the module docstring), or the reason it is not one."""
    if not fn.is_device or fn.is_kernel:
        return "not a device function"
    if any(isinstance(n, A.Opaque) for n in A.walk(fn)):
        return "unmodeled code"
    try:
        h = _Helper(fn)
        stmts = _stmts(fn.body)
        k = h.prologue(stmts)
        op = h.loop(stmts[k])
        h.epilogue(stmts[k + 1:], _base(fn.ret) != "void" or bool(fn.ret.pointers))
    except _Refused as e:
        return str(e)
    return CasAtomic(op, h.address_pos, h.value_pos)
