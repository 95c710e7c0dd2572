"""NaN-free extrema: a running max/min that can never hold NaN → a compare and select (a CPU speed pass, last).

CUDA's ``max``/``fmaxf`` on floats return the other operand when one is NaN; our CPU prelude's ``max`` does the
same with an extra test (``b != b || a > b ? a : b``), which costs a compare per element and keeps pools and
max-reductions from vectorizing at ``-march=native`` (HPCTransEval pool2d: 0.49× the reference C with it,
0.80× without). Where the running value ``X`` of ``X = max(X, E)`` provably never holds NaN, ``fmaxf(X, E)`` is
``E > X ? E : X`` exactly (a NaN ``E`` compares false and keeps ``X``); only the sign of an equal zero may
differ. The statement becomes ``{ T e = E; X = e > X ? e : X; }`` (``<`` for min).

``X`` never holds NaN, by induction over the stores, when it is *safe storage*: the greatest set of

* **locals** (scalars with an initializer, one-dimensional arrays; ``float`` or ``double``) and
* **pointer parameters** ``P`` that nothing else can store to (``__restrict__``, or the function stores only to
  ``P``, local arrays and scalars and calls only pure math functions),

that never have their address taken, are incremented, passed to a call other than a pure math function or (arrays
and parameters) used unsubscripted, and whose every store is ``=`` of a non-NaN constant (a number, ``±FLT_MAX``,
``±INFINITY``, ...), of a read of safe storage, or an update ``X = max(X, E)`` (``max(E, X)``, min, any
spelling) whose read of ``X`` is safe. A read of a local is safe (a scalar has its initializer; an array element
read before any store is indeterminate, which C++ leaves undefined). A read of a parameter's element ``P[I]`` is
safe only in the statement that follows an initializing store ``P[I] = C`` in the same block (pragmas between)
and writes no name ``I`` reads (TVM's ``pool_max[i] = -3.4e38f; for (...) pool_max[i] = max(pool_max[i], ...)``).
Partial accumulators' lanes (``p[l] = acc``, ``acc = p[0]``) are copies of the running value and stay safe.
Another thread (block) that stores to the same element stores a safe value too: every thread runs these stores.

Earlier passes may place one statement object in two places (a fast path and its fallback, a thread loop
interchanged with the loops its threads run alike); they are lowerings of one per-thread statement, so a read
shown safe in one place is safe in all, and every copy is rewritten. A name declared in several scopes is taken
as one variable (every declaration and store of the name must qualify).
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import PURE_CALLS, enter, leave, scalar_writes

INFO = PassInfo(
    name="nan_free_extrema",
    summary="X = max(X, E) where X can never hold NaN → a compare and select (no NaN test per element)",
    kind="ast",
    directions=("cuda->cpu",),
)

_COMPARE = {"max": ">", "fmaxf": ">", "fmax": ">", "min": "<", "fminf": "<", "fmin": "<"}
_FLOATS = frozenset({"float", "double"})
_NOT_NAN_NAMES = frozenset({"FLT_MAX", "DBL_MAX", "FLT_MIN", "DBL_MIN", "INFINITY", "HUGE_VALF", "HUGE_VAL",
                            "CUDART_INF_F", "CUDART_INF", "FLT_EPSILON", "DBL_EPSILON"})


def _not_nan_constant(e: A.Expr) -> bool:
    while True:
        if isinstance(e, A.Cast) and not e.type.pointers:
            e = e.operand
        elif isinstance(e, A.Unary) and e.op in ("-", "+"):
            e = e.operand
        else:
            break
    if isinstance(e, A.Literal):
        return e.kind == "number"
    return isinstance(e, A.Name) and e.id in _NOT_NAN_NAMES


def _update(stmt: A.Node) -> tuple[A.Expr, str, A.Expr] | None:
    """``X = max(X, E)`` / ``X = max(E, X)`` (any spelling of max or min) → (X, comparison, E)."""
    if not (isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Assign) and stmt.expr.op == "="):
        return None
    target, value = stmt.expr.target, stmt.expr.value
    if not (isinstance(value, A.Call) and value.callee in _COMPARE and len(value.args) == 2):
        return None
    first, second = value.args
    if first == target:
        return target, _COMPARE[value.callee or ""], second
    if second == target:
        return target, _COMPARE[value.callee or ""], first
    return None


def _root(e: A.Expr) -> str | None:
    while isinstance(e, A.Index | A.Member | A.Cast):
        e = e.base if isinstance(e, A.Index | A.Member) else e.operand
    return e.id if isinstance(e, A.Name) else None


def _escapes(fn: A.Function, name: str) -> bool:
    """``name`` (or an element of it) has its address taken, is incremented, or is passed to a call that is not
    a pure math function."""
    for n in A.walk(fn.body):
        if isinstance(n, A.Unary) and n.op in ("&", "++", "--") and _root(n.operand) == name:
            return True
        if isinstance(n, A.Call) and n.callee not in PURE_CALLS and any(_root(a) == name for a in n.args):
            return True
        if isinstance(n, A.Opaque) and name in n.text:
            return True
    return False


def _never_nan(e: A.Expr, safe: set[str], covered: set[int], params: set[str]) -> bool:
    """``e`` is a non-NaN constant, a read of a safe local, a covered read of a safe parameter's element, or a
    conditional of such."""
    while isinstance(e, A.Cast) and not e.type.pointers and e.type.base in _FLOATS:
        e = e.operand
    if isinstance(e, A.Ternary):
        return _never_nan(e.then, safe, covered, params) and _never_nan(e.else_, safe, covered, params)
    if isinstance(e, A.Index) and isinstance(e.base, A.Name) and e.base.id in safe:
        return id(e) in covered or e.base.id not in params
    return _not_nan_constant(e) or isinstance(e, A.Name) and e.id in safe


def _covered_reads(fn: A.Function) -> set[int]:
    """Accesses ``P[I]`` (by node) in the statement that follows an initializing store ``P[I] = C`` in the same
    block (pragmas between), where that statement writes no name ``I`` reads."""
    covered: set[int] = set()
    for block in A.walk(fn.body):
        if not isinstance(block, A.Block):
            continue
        stmts = list(block.stmts)
        for i, init in enumerate(stmts):
            if not (isinstance(init, A.ExprStmt) and isinstance(init.expr, A.Assign) and init.expr.op == "="
                    and isinstance(init.expr.target, A.Index) and _not_nan_constant(init.expr.value)):
                continue
            element = init.expr.target
            following = [st for st in stmts[i + 1:] if not isinstance(st, A.Pragma | A.Comment)]
            if not following:
                continue
            nxt = following[0]
            changed = {n.name for n in A.walk(nxt) if isinstance(n, A.VarDecl)} | scalar_writes(nxt)
            if A.free_names(element.index) & changed:
                continue
            covered |= {id(n) for n in A.walk(nxt) if isinstance(n, A.Index) and n == element}
    return covered


def _safe_storage(fn: A.Function, update_reads: dict[int, A.Expr], covered: set[int]) -> set[str]:
    """The storage that never holds NaN: the greatest set of locals (scalars, one-dimensional arrays) and
    pointer parameters of a floating type whose every store is a non-NaN constant, a copy of safe storage
    (partial accumulators' lanes are copies of the running value) or an update ``X = max(X, E)`` whose read
    of ``X`` is safe. A local scalar needs its initializer (an array element read before any store is
    indeterminate, which C++ leaves undefined); a parameter's element is safe only where it is covered (after
    its initializing store) and the parameter cannot be stored to through anything else."""
    decls: dict[str, list[A.VarDecl]] = {}
    for n in A.walk(fn.body):
        if isinstance(n, A.VarDecl):
            decls.setdefault(n.name, []).append(n)
    params = {p.name: p.type for p in fn.params if isinstance(p, A.Param) and p.name}
    local_arrays = {name for name, found in decls.items() if found[0].dims}
    calls = [n for n in A.walk(fn.body) if isinstance(n, A.Call | A.Launch)]
    stores = [n for n in A.walk(fn.body) if isinstance(n, A.Assign)]
    only_pure_calls = all(isinstance(c, A.Call) and c.callee in PURE_CALLS for c in calls)
    safe: set[str] = set()
    for name, found in decls.items():
        # one name declared in several scopes (a fast path and its fallback hold copies of one statement) is
        # taken as one variable: every declaration and every store of the name must qualify
        if name in params or any(d.type.pointers or d.type.base not in _FLOATS or len(d.dims) != len(found[0].dims)
                                 or len(d.dims) > 1 for d in found):
            continue
        if any(not d.dims and (d.init is None or d.init_style != "=") or d.dims and d.init is not None
               for d in found):
            continue
        safe.add(name)
    for name, t in params.items():
        if name in decls or len(t.pointers) != 1 or t.base not in _FLOATS:
            continue
        alone = t.is_restrict or only_pure_calls and all(
            isinstance(st.target, A.Name) or _root(st.target) in (name, *local_arrays) for st in stores)
        if alone:
            safe.add(name)
    for name in list(safe):
        if _escapes(fn, name):
            safe.discard(name)
        elif name in params or name in local_arrays:  # never decays to a pointer
            names = sum(1 for n in A.walk(fn.body) if isinstance(n, A.Name) and n.id == name)
            if names != sum(1 for n in A.walk(fn.body) if isinstance(n, A.Index) and n.base == A.Name(name)):
                safe.discard(name)
    param_names = set(params)
    changed = True
    while changed:
        changed = False
        for name in sorted(safe):
            ok = all(d.dims or d.init is not None and _never_nan(d.init, safe, covered, param_names)
                     for d in decls.get(name, []))
            for st in stores:
                if not ok:
                    break
                if _root(st.target) != name:
                    continue
                if name in decls and not decls[name][0].dims:
                    one_level = isinstance(st.target, A.Name)
                else:
                    one_level = isinstance(st.target, A.Index) and st.target.base == A.Name(name)
                # an update keeps its target safe when what it reads of the target is safe
                value = update_reads.get(id(st), st.value)
                ok = one_level and st.op == "=" and _never_nan(value, safe, covered, param_names)
            if not ok:
                safe.discard(name)
                changed = True
    return safe


def _rewrite(fn: A.Function) -> tuple[A.Function, int]:
    updates = {id(n): u for n in A.walk(fn.body) if (u := _update(n)) is not None}
    if not updates:
        return fn, 0
    # what each update reads of its target: the argument equal to the target (by statement's assignment)
    update_reads: dict[int, A.Expr] = {}
    read_of_statement: dict[int, A.Expr] = {}
    for n in A.walk(fn.body):
        if id(n) in updates and isinstance(n, A.ExprStmt) and isinstance(n.expr, A.Assign) and isinstance(
                n.expr.value, A.Call):
            read = next(a for a in n.expr.value.args if a == n.expr.target)
            update_reads[id(n.expr)] = read
            read_of_statement[id(n)] = read
    covered = _covered_reads(fn)
    safe = _safe_storage(fn, update_reads, covered)
    params = {p.name for p in fn.params if isinstance(p, A.Param) and p.name}
    types = A.declared_types(fn)
    chosen = {sid for sid, (x, _, _) in updates.items()
              if _root(x) in safe and _never_nan(read_of_statement[sid], safe, covered, params)}
    if not chosen:
        return fn, 0

    def select(n: A.Node) -> A.Node | None:
        if id(n) not in chosen:
            return None
        x, compare, e = updates[id(n)]
        root = _root(x) or ""
        element = types[root].pointee() if types[root].pointers else types[root]
        temp = A.fresh_name(fn, "xp_e")
        pick = A.Ternary(A.binop(compare, A.Name(temp), x), A.Name(temp), x)
        return A.Block((A.decl(temp, A.Type(element.base), e), A.ExprStmt(A.assign(x, pick))))

    return A.replace(fn, body=A.rewrite(fn.body, select)), len(chosen)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    new_module = module
    changed: list[str] = []
    for fn in module.functions():
        new_fn, count = _rewrite(fn)
        if count:
            changed.append(f"{fn.name}: {count}")
            new_module = new_module.replace_function(fn.name, new_fn)
    if not changed:
        raise PassRefused("no max/min accumulator that provably never holds NaN")
    ctx.notes.append(f"nan_free_extrema: running max/min without a NaN test ({', '.join(changed)})")
    return leave(unit, new_module, ctx)
