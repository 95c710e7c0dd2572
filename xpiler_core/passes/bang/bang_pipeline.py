"""BANG pipelining: double buffering of GDRAM→NRAM tile loops with ``__memcpy_async`` + ``__sync_io``.

A loop qualifies when it is a counted loop ``for (o = lo; o < hi; o += T)`` (``T`` loop-invariant) whose body loads tiles with
consecutive ``__memcpy(NAME, SRC, SIZE, GDRAM2NRAM)`` into function-scope ``__nram__`` arrays ``NAME[D]``
(or ``T *NAME = (T *)raw`` views of a raw ``__nram__ char`` array, whose raw array is doubled; only
declarations before them), and which has no asynchronous copy, synchronisation, ``break``,
``return`` or ``goto`` of its own. The rewrite (compute tile i while tile i+1 loads):

* ``NAME[D]`` becomes ``NAME[2 * D]``; inside the loop every use of ``NAME`` is ``NAME + slot * D`` with
  ``slot = ((o - lo) / T) % 2``;
* before the loop: ``if (lo < hi)`` the loads of the first tile are issued with ``__memcpy_async`` into slot 0;
* in the loop, in place of the loads: ``__sync_io()`` (this tile's copies are complete), then
  ``if (o + T < hi)`` the next tile's loads with ``__memcpy_async`` into the other slot.

The next tile's source must not be written by this iteration: when the loop also stores to a loaded array,
the load must be ``P + o`` of at most ``T`` elements (``min(T, …) * size``), so this iteration's stores and
the next tile's range are disjoint. The doubled buffers must fit ``nram_bytes`` minus the stack margin and
``onchip_budget`` (``bang_tensorize`` leaves that room); otherwise the loop stays single-buffered.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, int_param, leave

INFO = PassInfo(
    name="bang_pipeline",
    summary="Double buffering of GDRAM→NRAM tile loops with __memcpy_async + __sync_io",
    kind="ast",
    directions=("cuda->bang",),
    params=(
        ParamSpec("nram_bytes", "int", 768 * 1024, "NRAM capacity of the target generation (bytes)"),
        ParamSpec("stack_margin", "int", 128 * 1024, "NRAM kept free for the stack (bytes)"),
        ParamSpec("onchip_budget", "int", 48 * 1024, "bytes of NRAM the buffers of one function may use"),
    ),
)

SYNC_OR_ASYNC = ("__memcpy_async", "__sync")


def _call_name(s: A.Stmt) -> str:
    if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and isinstance(s.expr.func, A.Name):
        return s.expr.func.id
    return ""


def _nram_arrays(fn: A.Function) -> dict[str, tuple[int, int]]:
    """Function-scope NRAM tiles: ``__nram__`` arrays with one constant extent, and pointers of another
    element type cast from a raw ``__nram__ char`` array (class types such as ``__half``): name → (extent
    in elements, element bytes)."""
    out: dict[str, tuple[int, int]] = {}
    for s in fn.body.stmts:
        if not isinstance(s, A.DeclStmt):
            continue
        for d in s.decls:
            size = A.SCALAR_BYTES.get(d.type.base.replace("const ", "").strip())
            if "__nram__" in d.storage and len(d.dims) == 1 and d.dims[0] is not None and not d.type.pointers:
                extent = A.const_int(d.dims[0])
                if extent is not None and size is not None:
                    out[d.name] = (extent, size)
            elif _raw_source(d) in out and size is not None and len(d.type.pointers) == 1:
                raw_extent, raw_bytes = out[_raw_source(d) or ""]
                out[d.name] = (raw_extent * raw_bytes // size, size)
    return out


def _raw_source(d: A.VarDecl) -> str | None:
    """``raw`` when ``d`` is ``T *p = (T *)raw;`` (an alias of a raw NRAM byte array)."""
    init = d.init
    if not d.storage and not d.dims and isinstance(init, A.Cast) and init.type.pointers \
            and isinstance(init.operand, A.Name):
        return init.operand.id
    return None


def _is_load(s: A.Stmt, arrays: dict[str, tuple[int, int]]) -> bool:
    if _call_name(s) != "__memcpy":
        return False
    assert isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call)
    args = s.expr.args
    return (len(args) == 4 and isinstance(args[0], A.Name) and args[0].id in arrays
            and isinstance(args[3], A.Name) and args[3].id == "GDRAM2NRAM")


def _load_target(s: A.Stmt) -> str:
    assert isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and isinstance(s.expr.args[0], A.Name)
    return s.expr.args[0].id


def _root(e: A.Expr) -> str | None:
    """The array a pointer expression starts from (``P + o`` → ``P``)."""
    while True:
        if isinstance(e, A.Name):
            return e.id
        if isinstance(e, A.Binary) and e.op in ("+", "-"):
            e = e.left
        elif isinstance(e, A.Cast | A.Unary) and not (isinstance(e, A.Unary) and e.op == "*"):
            e = e.operand
        elif isinstance(e, A.Index):
            e = e.base
        else:
            return None


def _stored_roots(body: A.Stmt) -> set[str]:
    roots: set[str] = set()
    for n in A.walk(body):
        if isinstance(n, A.Call) and isinstance(n.func, A.Name) and n.func.id in ("__memcpy", "__memcpy_async") \
                and len(n.args) >= 4 and isinstance(n.args[3], A.Name) and n.args[3].id.endswith("2GDRAM"):
            r = _root(n.args[0])
            roots |= {r} if r else {"?"}
        if isinstance(n, A.Assign):
            r = _root(n.target)
            if isinstance(n.target, A.Index | A.Unary):
                roots |= {r} if r else {"?"}
    return roots


def _bounded_by_step(src: A.Expr, size: A.Expr, var: str, step: A.Expr) -> bool:
    """``src`` is ``P + var`` and ``size`` is ``min(step, …) * c``: one step's elements at most."""
    if not (isinstance(src, A.Binary) and src.op == "+" and src.right == A.name(var)):
        return False
    if not (isinstance(size, A.Binary) and size.op == "*"):
        return False
    for count in (size.left, size.right):
        if isinstance(count, A.Call) and isinstance(count.func, A.Name) and count.func.id in ("xp_min_int", "min") \
                and any(a == step or (A.const_int(a) is not None and A.const_int(a) == A.const_int(step))
                        for a in count.args):
            return True
    return False


def pipeline_loop(loop: A.For, arrays: dict[str, tuple[int, int]]) -> tuple[list[A.Stmt], A.For, set[str]]:
    """(statements issued before the loop, the double-buffered loop, the arrays doubled)."""
    view = loop.canonical()
    if view is None or not isinstance(loop.cond, A.Binary) or loop.cond.op != "<":
        raise PassRefused("the tile loop is not a counted loop o < hi")
    step_value = A.const_int(view.step)
    if step_value is not None and step_value <= 0:
        raise PassRefused("the tile loop's step is not positive")
    body = list(loop.body.stmts) if isinstance(loop.body, A.Block) else [loop.body]
    first = next((k for k, s in enumerate(body) if _is_load(s, arrays)), None)
    if first is None:
        raise PassRefused("no GDRAM2NRAM tile load into a function-scope NRAM array")
    last = first
    while last + 1 < len(body) and _is_load(body[last + 1], arrays):
        last += 1
    if not all(isinstance(s, A.DeclStmt) for s in body[:first]):
        raise PassRefused("the loop computes before loading its tiles")
    for n in A.walk(loop.body):
        if isinstance(n, A.Break | A.Return) or (isinstance(n, A.Opaque)):
            raise PassRefused("the loop body leaves early or holds unmodelled text")
        if isinstance(n, A.Call) and isinstance(n.func, A.Name) and n.func.id.startswith(SYNC_OR_ASYNC):
            raise PassRefused("the loop already synchronises or copies asynchronously")
    loads = body[first:last + 1]
    names = [_load_target(s) for s in loads]
    if len(set(names)) != len(names):
        raise PassRefused("two loads into one NRAM array")
    # the loads as functions of the loop variable only: substitute the declarations before them
    written = {n.target.id for n in A.walk(loop.body) if isinstance(n, A.Assign) and isinstance(n.target, A.Name)}
    written |= {n.operand.id for n in A.walk(loop.body) if isinstance(n, A.Unary) and n.op in ("++", "--")
                and isinstance(n.operand, A.Name)}
    mapping: dict[str, A.Expr] = {}
    for s in body[:first]:
        assert isinstance(s, A.DeclStmt)
        for d in s.decls:
            if d.init is not None and not d.dims and d.name not in written:
                mapping[d.name] = A.substitute(d.init, mapping)
    start_names = A.free_names(view.start) | A.free_names(loop.cond.right) | A.free_names(view.step)
    if start_names & (written | {view.var}) or any(isinstance(n, A.Call) for n in A.walk(view.step)):
        raise PassRefused("the loop bounds or step change inside the loop")
    stored = _stored_roots(loop.body)
    issued: list[tuple[str, A.Expr, A.Expr]] = []
    for s, name in zip(loads, names, strict=True):
        assert isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call)
        src = A.substitute(s.expr.args[1], mapping)
        size = A.substitute(s.expr.args[2], mapping)
        if (A.free_names(src) | A.free_names(size)) & ((set(mapping) | written) - {view.var} | set(arrays)):
            raise PassRefused(f"the load into {name} depends on state computed in the loop")
        root = _root(src)
        if root is None or "?" in stored or (root in stored and not _bounded_by_step(src, size, view.var, view.step)):
            raise PassRefused(f"the loop writes {root}, which it also prefetches")
        issued.append((name, src, size))
    hi = loop.cond.right
    slot = A.name("xp_pslot")

    def at(e: A.Expr, o: A.Expr) -> A.Expr:
        return A.substitute(e, {view.var: o})

    def copies(offset_slot: A.Expr, o: A.Expr) -> list[A.Stmt]:
        return [A.expr_stmt(A.call("__memcpy_async", A.Binary("+", A.name(n), A.Binary("*", offset_slot,
                                                                                         A.lit(arrays[n][0]))),
                                   at(src, o), at(size, o), A.name("GDRAM2NRAM"))) for n, src, size in issued]

    before: list[A.Stmt] = [A.If(A.Binary("<", view.start, hi), A.Block(tuple(copies(A.lit(0), view.start))), None)]
    next_o = A.Binary("+", A.name(view.var), view.step)
    refill = [A.expr_stmt(A.call("__sync_io")),
              A.If(A.Binary("<", next_o, hi), A.Block(tuple(copies(A.Binary("-", A.lit(1), slot), next_o))), None)]
    slot_decl = A.decl("xp_pslot", A.Type("int", ("const",)), A.Binary(
        "%", A.Binary("/", A.Binary("-", A.name(view.var), view.start), view.step), A.lit(2)))
    doubled = set(names)

    def offset_uses(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Name) and n.id in doubled:
            return A.Binary("+", n, A.Binary("*", slot, A.lit(arrays[n.id][0])))
        return None

    rest = [A.rewrite(s, offset_uses) for s in body[:first]] + refill + \
        [A.rewrite(s, offset_uses) for s in body[last + 1:]]
    new_body = A.Block((slot_decl, *rest))
    return before, A.replace(loop, body=new_body), doubled


def pipeline_function(fn: A.Function, capacity: int) -> tuple[A.Function, int]:
    arrays = _nram_arrays(fn)
    if not arrays:
        raise PassRefused(f"{fn.name}: no function-scope NRAM arrays")
    aliases = {d.name: _raw_source(d) or "" for s in fn.body.stmts if isinstance(s, A.DeclStmt) for d in s.decls
               if _raw_source(d) in arrays and d.name in arrays}
    doubled_all: set[str] = set()
    done = [0]
    reasons: list[str] = []

    def visit(node: A.Node) -> A.Node | None:
        if not isinstance(node, A.Block):
            return None
        stmts: list[A.Stmt] = []
        changed = False
        for s in node.stmts:
            s2 = A.rewrite(s, visit) if not isinstance(s, A.For) else s
            if isinstance(s2, A.For) and any(_is_load(x, arrays) for x in A.walk(s2.body) if isinstance(x, A.Stmt)):
                try:
                    before, new_loop, doubled = pipeline_loop(s2, {k: v for k, v in arrays.items()
                                                                   if k not in doubled_all})
                except PassRefused as refusal:
                    reasons.append(refusal.reason)
                    stmts.append(A.rewrite(s2, visit))
                    changed = True
                    continue
                views = {k for k in arrays if k in aliases}
                grown = {aliases.get(k, k) for k in doubled_all | doubled}
                used = sum(e * b * (2 if k in grown else 1) for k, (e, b) in arrays.items() if k not in views)
                if used > capacity:
                    reasons.append(f"double buffers need {used} bytes of NRAM, over {capacity}")
                    stmts.append(s2)
                    continue
                doubled_all.update(doubled)
                stmts += before + [new_loop]
                done[0] += 1
                changed = True
            else:
                stmts.append(s2)
                changed = changed or s2 is not s
        return A.replace(node, stmts=tuple(stmts)) if changed else node

    body = visit(fn.body)
    assert isinstance(body, A.Block)
    if not done[0]:
        raise PassRefused(f"{fn.name}: " + ("; ".join(reasons) or "no tile loop"))

    # an alias of a raw byte array doubles that array
    raw_of = {d.name: _raw_source(d) for s in fn.body.stmts if isinstance(s, A.DeclStmt) for d in s.decls
              if d.name in doubled_all and _raw_source(d)}
    grow = {raw_of.get(name) or name for name in doubled_all}

    def double(n: A.Node) -> A.Node | None:
        if isinstance(n, A.VarDecl) and n.name in grow and "__nram__" in n.storage:
            return A.replace(n, dims=(A.lit(arrays[n.name][0] * 2),))
        return None

    new_stmts = tuple(A.rewrite(s, double) if isinstance(s, A.DeclStmt) else s for s in body.stmts)
    return A.replace(fn, body=A.replace(body, stmts=new_stmts)), done[0]


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    nram = int_param(params, "nram_bytes", 768 * 1024, 64 * 1024, 1 << 24)
    margin = int_param(params, "stack_margin", 128 * 1024, 0, 1 << 24)
    budget = int_param(params, "onchip_budget", 48 * 1024, 4 * 1024, 1 << 24)
    capacity = min(nram - margin, budget)
    items = list(module.items)
    reasons: list[str] = []
    loops = 0
    for k, item in enumerate(items):
        if not isinstance(item, A.Function) or not _nram_arrays(item):
            continue
        try:
            items[k], n = pipeline_function(item, capacity)
        except PassRefused as refusal:
            reasons.append(refusal.reason)
            continue
        loops += n
        ctx.notes.append(f"{item.name}: {n} tile loop(s) double-buffered with __memcpy_async + __sync_io")
    if not loops:
        raise PassRefused("; ".join(reasons) or "no function with NRAM tile loops")
    return leave(unit, dataclasses.replace(module, items=tuple(items)), ctx, Dialect.BANG)
