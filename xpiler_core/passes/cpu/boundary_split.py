"""Boundary split: an element loop whose bounds checks (zero padding, halo tests) hold everywhere except near its
ends runs as head, interior and tail, the checks replaced in the interior by the value they are proven to have
there — so the interior has no data-dependent control flow and vectorizes (g++ does not vectorize a loop whose
inner filter loops skip taps with ``continue``, nor conditional loads, at any optimization level).

A check is a comparison of integers in the loop body, or in a device function it calls (the call's arguments
and template arguments bound to the parameters), that is affine in the loop variable with a constant
coefficient, affine with constant coefficients in the variables of constant-range inner loops, and otherwise
made of names the loop does not write. Its *going-on value* is what lets the code continue: false for the test
of ``if (c) continue;`` (``break``, ``return``), true for ``if (c) S`` without ``else`` and for ``c ? x : 0``,
split through ``&&``, ``||`` and ``!`` where that is unambiguous. The interior is where every check provably has
its going-on value for all values of the inner loop variables: its ends are computed before the loop, at run
time, from each check's coefficient and the extremes of its inner terms (an empty interior sends every
iteration through the original body). Head and tail run the original body; the interior runs a copy whose
proven checks are constants, calling a copy of each device function specialized the same way.

Taken for loops that declare a signed integer variable, step by one, do not have constant bounds (filter loops
are unrolled instead) and carry no pragma but ``omp simd`` and GCC's loop pragmas (a parallel-for pragma would become three parallel regions)
nor stand inside the nest an OpenMP ``collapse`` joins, and only when a proven check is
inside an inner loop or a called function (checked many times per iteration); an enclosing loop of a split
loop is not split again (the code grows at most threefold). Refuses when no loop qualifies.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    declares_prefix,
    enter,
    fresh_namer,
    leave,
    map_loops_with_pragmas,
    value_template_arguments,
)
from xpiler_core.passes.support.bang_thread import Poly
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="boundary_split",
    summary="Element loops with bounds checks → head, check-free interior (vectorizes) and tail",
    kind="ast",
    directions=("cuda->cpu",),
)

# signed types at least as wide as int (a narrower type or a cast to one wraps; unsigned compares differently)
_SIGNED = frozenset({"int", "long", "long int", "long long", "long long int", "signed", "signed int", "int32_t",
                     "int64_t", "ptrdiff_t"})
_LOOP_PRAGMAS = re.compile(r"^(omp simd\b.*|GCC (unroll|ivdep|novector)\b.*)$")
_CMP = ("<", "<=", ">", ">=")
_MAX_CALL_DEPTH = 2


def _signed_scalar(t: A.Type) -> bool:
    base = " ".join(q for q in t.base.split() if q not in ("const", "constexpr", "volatile", "static"))
    return not t.pointers and not t.reference and base in _SIGNED


@dataclass
class Scope:
    """What the names mean at one point: an affine form over atoms (the loop variable, names the loop does not
    write, inner loop variables) or ``None`` (unknown); inner loop variable ranges; template constants."""

    env: dict[str, Poly | None]
    box: dict[str, tuple[int, int]]  # inner loop variable → (lowest, highest) value
    consts: dict[str, int]
    atom_ok: Callable[[str], bool]  # a free name usable as an atom here
    depth: int = 0  # calls entered
    inner: int = 0  # enclosing inner loops within the split loop

    def child(self) -> Scope:
        return Scope(dict(self.env), dict(self.box), self.consts, self.atom_ok, self.depth, self.inner)


@dataclass
class Proofs:
    """The checks proven over one loop: bounds on the loop variable (C text), loop-wide conditions, the check
    nodes to replace (by ``id``) and the device-function copies the interior calls."""

    var: str
    lows: list[str] = field(default_factory=list)
    highs: list[str] = field(default_factory=list)
    whole: list[str] = field(default_factory=list)
    replace: dict[int, A.Expr] = field(default_factory=dict)
    deep: bool = False  # a proven check inside an inner loop or a called function
    calls: dict[int, tuple[A.Function, dict[int, A.Expr]]] = field(default_factory=dict)


def _affine(e: A.Expr, scope: Scope) -> Poly | None:
    if isinstance(e, A.Literal):
        v = e.int_value
        return Poly.const(v) if v is not None and not re.search(r"[uU]", e.text) else None
    if isinstance(e, A.Name):
        if e.id in scope.consts:
            return Poly.const(scope.consts[e.id])
        if e.id in scope.env:
            return scope.env[e.id]
        return Poly.atom(e.id) if scope.atom_ok(e.id) else None
    if isinstance(e, A.Unary) and not e.postfix and e.op in ("-", "+"):
        operand = _affine(e.operand, scope)
        return None if operand is None else (-operand if e.op == "-" else operand)
    if isinstance(e, A.Cast):
        return _affine(e.operand, scope) if _signed_scalar(e.type) else None
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%"):
        a, b = _affine(e.left, scope), _affine(e.right, scope)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        ca, cb = _constant(a), _constant(b)
        folded = A.fold_int(e.op, ca, cb) if ca is not None and cb is not None else None
        return None if folded is None else Poly.const(folded)
    return None


def _constant(p: Poly) -> int | None:
    if not p.terms:
        return 0
    if len(p.terms) == 1 and p.terms[0][0] == ():
        return p.terms[0][1]
    return None


def _floordiv(num: str, den: int) -> str:
    """C text of floor(num / den) for a positive constant ``den``."""
    if den == 1:
        return num
    return f"(({num}) >= 0 ? ({num}) / {den}L : -((-({num}) + {den - 1}L) / {den}L))"


class _Analysis:
    def __init__(self, module: A.Module, proofs: Proofs, unsafe: set[str], signed: set[str]) -> None:
        self.functions = {f.name: f for f in module.functions() if not f.is_kernel}
        self.proofs = proofs
        self.unsafe = unsafe
        self.signed = signed

    # ---- checks -------------------------------------------------------------------------------------
    def mark(self, cond: A.Expr, going_on: bool, scope: Scope, into: dict[int, A.Expr]) -> None:
        if isinstance(cond, A.Unary) and cond.op == "!":
            self.mark(cond.operand, not going_on, scope, into)
        elif isinstance(cond, A.Binary) and cond.op == "&&":
            if going_on:
                self.mark(cond.left, True, scope, into)
                self.mark(cond.right, True, scope, into)
        elif isinstance(cond, A.Binary) and cond.op == "||":
            if not going_on:
                self.mark(cond.left, False, scope, into)
                self.mark(cond.right, False, scope, into)
        elif isinstance(cond, A.Binary) and cond.op in _CMP:
            self.prove(cond, going_on, scope, into)

    def prove(self, cmp: A.Binary, going_on: bool, scope: Scope, into: dict[int, A.Expr]) -> None:
        left, right = _affine(cmp.left, scope), _affine(cmp.right, scope)
        if left is None or right is None:
            return
        p = left - right
        one = Poly.const(1)
        # q < 0 exactly where the comparison has its going-on value
        q = {("<", True): p, ("<", False): -p - one, ("<=", True): p - one, ("<=", False): -p,
             (">", True): -p, (">", False): p - one, (">=", True): -p - one, (">=", False): p}[(cmp.op, going_on)]
        try:
            coeff, rest = q.split(self.proofs.var)
        except PassRefused:
            return
        a = _constant(coeff)
        if a is None:
            return
        worst = 0
        for name, (lo, hi) in scope.box.items():
            try:
                c, rest = rest.split(name)
            except PassRefused:
                return
            c_value = _constant(c)
            if c_value is None:
                return
            worst += max(c_value * lo, c_value * hi)
        if rest.atoms() & (set(scope.box) | {self.proofs.var}):
            return
        total = (rest + Poly.const(worst)).c_text()
        if a > 0:  # a*i + total < 0
            self.proofs.highs.append(f"-{_floordiv(total, a)}")
        elif a < 0:
            self.proofs.lows.append(f"{_floordiv(total, -a)} + 1L")
        else:
            self.proofs.whole.append(f"{total} < 0L")
        into[id(cmp)] = A.Literal("1" if going_on else "0", "number")
        if scope.inner or scope.depth:
            self.proofs.deep = True

    # ---- statements and expressions ------------------------------------------------------------------
    def expr(self, e: A.Expr, scope: Scope, into: dict[int, A.Expr]) -> None:
        for n in A.walk(e):
            if isinstance(n, A.Ternary):
                if _is_zero(n.else_):
                    self.mark(n.cond, True, scope, into)
                elif _is_zero(n.then):
                    self.mark(n.cond, False, scope, into)
            elif isinstance(n, A.Call):
                self.call(n, scope)

    def call(self, call: A.Call, scope: Scope) -> None:
        if call.callee is None or scope.depth >= _MAX_CALL_DEPTH or id(call) in self.proofs.calls:
            return
        fn = self.functions.get(call.callee.split("<")[0].strip())
        if fn is None or any(isinstance(p, A.Opaque) for p in fn.params):
            return
        params = [p for p in fn.params if isinstance(p, A.Param)]
        if len(params) != len(call.args) or any(p.name is None for p in params):
            return
        consts: dict[str, int] = {}
        if fn.template:
            try:
                actuals = value_template_arguments(fn.template, call.callee)
            except ValueError:
                actuals = {}  # its template constants stay unknown: checks using them are not proven
            consts = {name: int(text) for name, text in actuals.items() if re.fullmatch(r"-?\d+", text)}
        changed = _changed_names(fn.body)
        env: dict[str, Poly | None] = {}
        for p, arg in zip(params, call.args, strict=True):
            assert p.name is not None
            env[p.name] = _affine(arg, scope) if _signed_scalar(p.type) and p.name not in changed else None
        callee = Scope(env, dict(scope.box), consts, lambda _n: False, scope.depth + 1, scope.inner)
        into: dict[int, A.Expr] = {}
        saved = self.unsafe, self.signed
        self.unsafe, self.signed = changed, _signed_names(fn)
        try:
            self.stmt(fn.body, callee, into)
        finally:
            self.unsafe, self.signed = saved
        into = _unshared(fn.body, into)
        if into:
            self.proofs.calls[id(call)] = (fn, into)

    def stmt(self, s: A.Stmt, scope: Scope, into: dict[int, A.Expr]) -> None:
        if isinstance(s, A.Block):
            inner = scope.child()
            for child in s.stmts:
                self.stmt(child, inner, into)
        elif isinstance(s, A.DeclStmt):
            for d in s.decls:
                if d.init is not None:
                    self.expr(d.init, scope, into)
                ok = d.name not in self.unsafe and not d.dims and d.init is not None and d.init_style == "="
                typed = _signed_scalar(d.type) or (_typeof(d.type) and d.init is not None
                                                    and _expr_signed(d.init, self.signed))
                scope.env[d.name] = _affine(d.init, scope) if ok and d.init is not None and typed else None
        elif isinstance(s, A.ExprStmt):
            self.expr(s.expr, scope, into)
        elif isinstance(s, A.If):
            self.expr(s.cond, scope, into)
            if s.else_ is None:
                self.mark(s.cond, not _skips(s.then), scope, into)
            self.stmt(s.then, scope.child(), into)
            if s.else_ is not None:
                self.stmt(s.else_, scope.child(), into)
        elif isinstance(s, A.For):
            self.loop(s, scope, into)
        elif isinstance(s, (A.While, A.DoWhile)):
            self.expr(s.cond, scope, into)
            self.stmt(s.body, scope.child(), into)
        elif isinstance(s, A.Return) and s.value is not None:
            self.expr(s.value, scope, into)

    def loop(self, s: A.For, scope: Scope, into: dict[int, A.Expr]) -> None:
        inner = scope.child()
        inner.inner += 1
        view = s.canonical()
        if view is not None and view.step_value == 1 and view.var not in self.unsafe:
            lo, hi = A.const_int(view.start, scope.consts), A.const_int(view.stop, scope.consts)
            if lo is not None and hi is not None:
                if hi <= lo:
                    return  # never runs
                inner.box[view.var] = (lo, hi - 1)
                inner.env[view.var] = Poly.atom(view.var)
            else:
                inner.env[view.var] = None
        else:
            for n in A.walk(s.init) if s.init is not None else ():
                if isinstance(n, A.VarDecl):
                    inner.env[n.name] = None
        self.stmt(s.body, inner, into)


def _is_zero(e: A.Expr) -> bool:
    if isinstance(e, A.Cast):
        return _is_zero(e.operand)
    if not isinstance(e, A.Literal) or e.kind != "number":
        return False
    try:
        return float(e.text.rstrip("fFlLuU")) == 0.0
    except ValueError:
        return False


def _skips(s: A.Stmt) -> bool:
    if isinstance(s, A.Block) and len(s.stmts) == 1:
        return _skips(s.stmts[0])
    return isinstance(s, (A.Continue, A.Break, A.Return))


def _changed_names(node: A.Node) -> set[str]:
    """Names assigned, incremented, address-taken or declared more than once inside ``node`` (a canonical
    loop's own increment does not count: its variable is known over its range)."""
    out: set[str] = set()
    declared: set[str] = set()
    steps = {id(n.step) for n in A.walk(node) if isinstance(n, A.For) and n.step is not None and n.canonical()}
    stack: list[A.Node] = [node]
    while stack:
        n = stack.pop()
        if id(n) in steps:
            continue
        if isinstance(n, A.Assign) and isinstance(n.target, A.Name):
            out.add(n.target.id)
        elif isinstance(n, A.Unary) and n.op in ("++", "--", "&") and isinstance(n.operand, A.Name):
            out.add(n.operand.id)
        elif isinstance(n, A.VarDecl):
            if n.name in declared:
                out.add(n.name)
            declared.add(n.name)
        elif isinstance(n, A.Opaque):
            out.update(re.findall(r"[A-Za-z_]\w*", n.text))
        stack.extend(A.children(n))
    return out


def _typeof(t: A.Type) -> bool:
    return t.base.replace(" ", "").startswith("__typeof__(") and not t.pointers


def _expr_signed(e: A.Expr, signed: set[str]) -> bool:
    """The expression has a signed integer type at least as wide as int (conservative)."""
    if isinstance(e, A.Literal):
        return e.int_value is not None and not re.search(r"[uU]", e.text)
    if isinstance(e, A.Name):
        return e.id in signed
    if isinstance(e, A.Cast):
        return _signed_scalar(e.type)
    if isinstance(e, A.Unary) and e.op in ("-", "+") and not e.postfix:
        return _expr_signed(e.operand, signed)
    if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%"):
        return _expr_signed(e.left, signed) and _expr_signed(e.right, signed)
    return False


def _declared(node: A.Node) -> set[str]:
    return {n.name for n in A.walk(node) if isinstance(n, A.VarDecl)}


def _unshared(root: A.Node, table: dict[int, A.Expr]) -> dict[int, A.Expr]:
    """``table`` without nodes that occur more than once under ``root`` (one object in two places may be in two
    scopes; replacing it by identity would change both)."""
    seen: dict[int, int] = {}
    for n in A.walk(root):
        if id(n) in table:
            seen[id(n)] = seen.get(id(n), 0) + 1
    return {k: v for k, v in table.items() if seen.get(k) == 1}


def _signed_names(fn: A.Function) -> set[str]:
    """Parameters and locals of ``fn`` whose every declaration (a name may be declared in several scopes; the
    loop sees the innermost) has a signed integer type — written, or ``__typeof__`` of a signed initializer —
    and whose address is never taken."""
    decls: dict[str, list[tuple[A.Type, A.Expr | None]]] = {}
    for p in fn.params:
        if isinstance(p, A.Param) and p.name:
            decls.setdefault(p.name, []).append((p.type, None))
    for n in A.walk(fn.body):
        if isinstance(n, A.VarDecl):
            decls.setdefault(n.name, []).append((n.type, n.init))
    taken = {n.operand.id for n in A.walk(fn.body)
             if isinstance(n, A.Unary) and n.op == "&" and isinstance(n.operand, A.Name)}
    signed: set[str] = set()
    for _ in range(4):  # __typeof__ chains: a few rounds reach the fixed point in practice
        signed = {k for k, ds in decls.items() if k not in taken and all(
            _signed_scalar(t) or (_typeof(t) and init is not None and _expr_signed(init, signed)) for t, init in ds)}
    return signed


def _loop_type(loop: A.For) -> A.Type | None:
    if isinstance(loop.init, A.DeclStmt) and len(loop.init.decls) == 1:
        t = loop.init.decls[0].type
        return t if _signed_scalar(t) else None
    return None


def _prove_loop(loop: A.For, module: A.Module, signed: set[str]) -> Proofs | None:
    view = loop.canonical()
    if view is None or view.step_value != 1 or _loop_type(loop) is None:
        return None
    if any(isinstance(n, A.Call) for e in (view.start, view.stop) for n in A.walk(e)):
        return None
    if A.const_int(view.start) is not None and A.const_int(view.stop) is not None:
        return None  # a filter loop of constant length: the element loop around it is the one to split
    changed = _changed_names(loop.body)
    declared = _declared(loop.body)
    proofs = Proofs(view.var)
    analysis = _Analysis(module, proofs, changed, signed)
    scope = Scope({view.var: Poly.atom(view.var)}, {}, {},
                  lambda n: n in signed and n not in changed and n not in declared and n != view.var)
    analysis.stmt(loop.body, scope, proofs.replace)
    proofs.replace = _unshared(loop.body, proofs.replace)
    if not proofs.deep or not (proofs.replace or proofs.calls):
        return None
    return proofs


def _split(loop: A.For, pragma: A.Pragma | None, proofs: Proofs, fresh: Callable[[str], str],
           clones: list[tuple[str, A.Function]]) -> A.Block:
    view = loop.canonical()
    var_type = _loop_type(loop)
    assert view is not None and var_type is not None
    body = loop.body
    # the interior body: proven checks are constants, calls go to specialized copies
    renamed: dict[int, A.Expr] = dict(proofs.replace)
    for call_id, (fn, into) in proofs.calls.items():
        clone_name = fresh(f"{fn.name}_xp_interior")
        clone_body = A.rewrite(fn.body, lambda n, table=into: table.get(id(n)))  # type: ignore[misc]
        clones.append((fn.name, A.replace(fn, name=clone_name, body=clone_body)))
        renamed[call_id] = _renamed_call(body, call_id, fn.name, clone_name, proofs.replace)
    interior = A.rewrite(body, lambda n: renamed.get(id(n)))
    lo_name, hi_name = f"xp_bs_lo_{view.var}", f"xp_bs_hi_{view.var}"
    long_type = A.Type("long")
    start, stop = print_expr(view.start, Dialect.C), print_expr(view.stop, Dialect.C)
    lo_text = f"(long)({start})"
    for bound in proofs.lows:
        lo_text = f"std::max({lo_text}, (long)({bound}))"
    hi_text = f"(long)({stop})"
    for bound in proofs.highs:
        hi_text = f"std::min({hi_text}, (long)({bound}))"
    empty = " || ".join([f"{hi_name} < {lo_name}", *(f"!({w})" for w in proofs.whole)])
    stmts: list[A.Stmt] = [
        A.Comment(f"// boundary split: the bounds checks hold in [{lo_name}, {hi_name}) (proven); head and "
                  "tail keep them"),
        A.DeclStmt((A.VarDecl(lo_name, long_type, init=A.Opaque(lo_text)),
                    A.VarDecl(hi_name, long_type, init=A.Opaque(hi_text)))),
        A.If(A.Opaque(empty), A.ExprStmt(A.Assign("=", A.Name(lo_name), A.Assign("=", A.Name(hi_name),
                                                                                  A.Opaque(f"(long)({stop})"))))),
    ]
    parts = ((view.start, A.Name(lo_name), body), (A.Name(lo_name), A.Name(hi_name), interior),
             (A.Name(hi_name), view.stop, body))
    for first, last, part_body in parts:
        init = A.DeclStmt((A.VarDecl(view.var, var_type, init=first),))
        stmts += [*([pragma] if pragma else []),
                  A.replace(loop, init=init, cond=A.Binary("<", A.Name(view.var), last), body=part_body)]
    return A.Block(tuple(stmts))


def _renamed_call(body: A.Stmt, call_id: int, old: str, new: str, replace: dict[int, A.Expr]) -> A.Expr:
    call = next(n for n in A.walk(body) if id(n) == call_id)
    assert isinstance(call, A.Call) and call.callee is not None
    args = tuple(A.rewrite(a, lambda n: replace.get(id(n))) for a in call.args)
    return A.replace(call, func=A.Name(new + call.callee[len(old):].lstrip()), args=args)


def _stacked_pragmas(fn: A.Function) -> bool:
    """Two pragmas in a row: the loop traversal sees only the one next to the loop."""
    return any(isinstance(a, A.Pragma) and isinstance(b, A.Pragma)
               for n in A.walk(fn) if isinstance(n, A.Block) for a, b in zip(n.stmts, n.stmts[1:], strict=False))


_COLLAPSE = re.compile(r"\bcollapse\s*\(\s*(\d+)\s*\)")


def _collapsed_vars(fn: A.Function) -> set[str]:
    """Variables of the loops an OpenMP ``collapse(n)`` pragma joins to the loop it stands before (the 2nd to
    n-th of the nest): splitting one would leave the nest imperfect, which the compiler rejects."""
    out: set[str] = set()
    for block in A.walk(fn):
        if not isinstance(block, A.Block):
            continue
        for pragma, loop in zip(block.stmts, block.stmts[1:], strict=False):
            found = _COLLAPSE.search(pragma.text) if isinstance(pragma, A.Pragma) else None
            if found is None or not isinstance(loop, A.For):
                continue
            inner: A.Stmt = loop
            for _ in range(int(found.group(1)) - 1):
                body = inner.body if isinstance(inner, A.For) else None
                while isinstance(body, A.Block) and len(body.stmts) == 1:
                    body = body.stmts[0]
                if not isinstance(body, A.For) or (view := body.canonical()) is None:
                    break
                out.add(view.var)
                inner = body
    return out


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fresh = fresh_namer(module)
    clones: list[tuple[str, A.Function]] = []
    splits: list[str] = []  # the split loops' variables
    new_module = module
    for fn in module.functions():
        if _stacked_pragmas(fn):
            continue
        signed = _signed_names(fn)
        collapsed = _collapsed_vars(fn)

        def split(loop: A.For, pragma: A.Pragma | None, signed: set[str] = signed,
                  collapsed: set[str] = collapsed) -> list[A.Stmt] | None:
            if declares_prefix(loop.body, "xp_bs_"):
                return None  # a loop inside was split: this one is not split again (the code grows at most 3x)
            view = loop.canonical()
            if view is None or any(n.startswith("xp_bs_") for e in (view.start, view.stop) for n in A.free_names(e)):
                return None  # not canonical, or a part of a split loop offered again by the traversal
            if view.var in collapsed:
                return None
            if pragma is not None and not _LOOP_PRAGMAS.match(pragma.text.strip()):
                return None
            proofs = _prove_loop(loop, module, signed)
            if proofs is None:
                return None
            splits.append(proofs.var)
            return [_split(loop, pragma, proofs, fresh, clones)]

        body = map_loops_with_pragmas(fn.body, split)
        if body is not fn.body:
            new_module = new_module.replace_function(fn.name, A.replace(fn, body=body))
    if not splits:
        raise PassRefused("no element loop with bounds checks proven constant in an interior")
    items = list(new_module.items)
    for original, clone in clones:
        at = next(k for k, it in enumerate(items) if isinstance(it, A.Function) and it.name == original)
        items.insert(at + 1, clone)
    ctx.notes.append(f"boundary split: {len(splits)} loop(s) as head, check-free interior and tail"
                     + (f"; {len(clones)} device function copies for the interior" if clones else ""))
    return leave(unit, A.replace(new_module, items=tuple(items)), ctx)
