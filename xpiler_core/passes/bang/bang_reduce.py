"""BANG reduction tensorization: a strided per-thread accumulation becomes NRAM chunks and vector ops.

Input: the output of ``bang_binding`` (block loops over ``taskId``, thread loop nests inside). A thread loop
nest qualifies when its body starts with the first phase of a block reduction::

    float acc = INIT;                                   // INIT uniform
    for (int i = xp_bx * C + xp_tx; i < N; i += S)      // (or i = xp_tx + ...), C, N, S uniform
        acc += e;   |   acc = fmaxf(acc, e);   |   acc = fminf(acc, e);     // e reads only P[i]

Lane ``t`` of the block accumulates the elements ``k0 + t`` of the chunks ``k0 = xp_bx*C, +S, +2S, …`` with
``k0 + t < N``; so one NRAM vector ``xp_acc`` with one lane per thread gets the same values, in the same
order per lane, from ``__memcpy`` of each chunk (``min(blockDim.x, N - k0)`` elements) and one
``__bang_add``/``__bang_maxequal``/``__bang_minequal`` per chunk (``e`` itself as ``__bang_*`` calls, or a
scalar loop on the chunk). The thread loop then starts from ``acc = xp_acc[threadIdx.x]`` and keeps the
rest of its body (the cross-thread combination stays as the source wrote it). Runtime preconditions
(1-D block of ≤ 1024 threads, ``S > 0``) guard the vector path; the original loop is the fallback.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.bang.bang_tensorize import (
    PLAIN_TYPES,
    SIDE_EFFECTS,
    THREAD_NAMES,
    Emitter,
    _element_type,
    _parse_expr,
    _parse_stmts,
    _single,
    _sizeof,
    _stmts,
    _table,
    _task_loop_index,
    _uses,
)
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="bang_reduce",
    summary="Strided per-thread accumulations → NRAM chunks, __memcpy and __bang_add/__bang_maxequal per lane",
    kind="ast",
    directions=("cuda->bang",),
)

MAX_THREADS = 1024


def _start_offset(start: A.Expr) -> A.Expr | None:
    """``C`` when ``start`` is ``xp_bx * C + xp_tx`` (``0`` for a bare ``xp_tx``), else None."""
    from xpiler_core.passes.bang.bang_tensorize import _global_index, _strip_casts

    bare = _strip_casts(start)
    if isinstance(bare, A.Name) and bare.id == "xp_tx":
        return A.lit(0)
    return _global_index(start)


def _accumulation(stmt: A.Stmt, acc: A.Expr, table: dict[str, Any]) -> tuple[str, A.Expr] | None:
    """(intrinsic, e) for ``acc += e`` / ``acc = max(acc, e)`` / ``acc = min(acc, e)``."""
    stmt = _single(stmt)
    if not (isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Assign)):
        return None
    asg = stmt.expr
    if asg.target != acc:
        return None
    if asg.op in table["accumulate"]:
        return str(table["accumulate"][asg.op]), asg.value
    if asg.op == "=" and isinstance(asg.value, A.Call) and isinstance(asg.value.func, A.Name) \
            and len(asg.value.args) == 2:
        name = asg.value.func.id
        intrinsic = ("__bang_maxequal" if name in table["accumulate"]["max_calls"]
                     else "__bang_minequal" if name in table["accumulate"]["min_calls"] else None)
        if intrinsic is None:
            return None
        a, b = asg.value.args
        if a == acc:
            return intrinsic, b
        if b == acc:
            return intrinsic, a
    return None


def _thread_nest_body(stmt: A.Stmt) -> list[A.Stmt] | None:
    node = _single(stmt)
    for var in ("xp_tz", "xp_ty", "xp_tx"):
        view = node.canonical() if isinstance(node, A.For) else None
        if view is None or view.var != var:
            return None
        assert isinstance(node, A.For)
        node = _single(node.body)
    return _stmts(node)


def _with_thread_body(stmt: A.Stmt, body: list[A.Stmt]) -> A.Stmt:
    """The thread loop nest ``stmt`` with the innermost (``xp_tx``) body replaced."""
    node = _single(stmt)
    assert isinstance(node, A.For)
    view = node.canonical()
    if view is not None and view.var == "xp_tx":
        return A.replace(node, body=A.Block(tuple(body)))
    return A.replace(node, body=_with_thread_body(node.body, body))


def _reduce_nest(nest: A.Stmt, params: dict[str, str], expanded_arrays: dict[str, str], table: dict[str, Any],
                 serial: int) -> tuple[list[str], A.Stmt, list[str], set[str]] | None:
    body = _thread_nest_body(nest)
    if body is None:
        return None
    lead = [s for s in body if not (isinstance(s, A.DeclStmt) and s.decls[0].name == "xp_t")]
    keep_xp_t = [s for s in body if isinstance(s, A.DeclStmt) and s.decls[0].name == "xp_t"]
    if len(lead) < 2:
        return None
    first = lead[0]
    expanded: str | None = None  # the block-level per-thread array acc[xp_nt] when loop recovery expanded acc
    if isinstance(first, A.DeclStmt) and len(first.decls) == 1:
        decl = first.decls[0]
        if decl.init is None or decl.dims or decl.type.pointers or _element_type(decl.type) != "float":
            return None
        acc_name, init = decl.name, decl.init
    elif (isinstance(first, A.ExprStmt) and isinstance(first.expr, A.Assign) and first.expr.op == "="
          and isinstance(first.expr.target, A.Index) and isinstance(first.expr.target.base, A.Name)
          and first.expr.target.index == A.name("xp_t") and expanded_arrays.get(first.expr.target.base.id) == "float"):
        expanded = first.expr.target.base.id
        acc_name, init = expanded, first.expr.value
    else:
        return None
    thread_locals = {d.name for s in body if isinstance(s, A.DeclStmt) for d in s.decls}
    if _uses(init, THREAD_NAMES | thread_locals | {"xp_bx"}) or any(isinstance(n, A.Index) for n in A.walk(init)):
        return None
    loop = _single(lead[1])
    if not isinstance(loop, A.For) or loop.canonical() is None:
        return None
    view = loop.canonical()
    assert view is not None
    offset = _start_offset(view.start)
    cond = loop.cond
    if offset is None or not (isinstance(cond, A.Binary) and cond.op == "<" and cond.left == A.name(view.var)):
        return None
    uniform_bad = THREAD_NAMES | thread_locals | {view.var}
    if _uses(cond.right, uniform_bad) or _uses(view.step, uniform_bad) or _uses(offset, uniform_bad):
        return None
    loop_stmts = _stmts(loop.body)
    if not loop_stmts:
        return None
    acc_ref: A.Expr = A.index(A.name(acc_name), A.name("xp_t")) if expanded else A.name(acc_name)
    found = _accumulation(loop_stmts[-1], acc_ref, table)
    if found is None:
        return None
    intrinsic, element = found
    index = A.name(view.var)
    locals_: dict[str, str] = {}
    for st in loop_stmts[:-1]:
        if not isinstance(st, A.DeclStmt) or any(d.init is None or d.dims or d.type.pointers for d in st.decls):
            return None
        for d in st.decls:
            locals_[d.name] = _element_type(d.type)
    checked = [*(d.init for st in loop_stmts[:-1] if isinstance(st, A.DeclStmt) for d in st.decls), element]
    for n in (x for e in checked if e is not None for x in A.walk(e)):
        if isinstance(n, A.Name) and (n.id in uniform_bad - {view.var} or n.id == acc_name):
            return None
        if isinstance(n, A.Call) and isinstance(n.func, A.Name) and n.func.id.startswith(SIDE_EFFECTS):
            return None
    exprs = [e for e in checked if e is not None]
    pointer_uses = sum(1 for e in exprs for n in A.walk(e) if isinstance(n, A.Name) and n.id in params)
    element_uses = [n for e in exprs for n in A.walk(e) if isinstance(n, A.Index)]
    if pointer_uses != len(element_uses) or any(
            not (isinstance(n.base, A.Name) and n.base.id in params and n.index == index) for n in element_uses):
        return None
    if any(isinstance(n, A.Name) and n == index for e in exprs for n in A.walk(A.rewrite(
            e, lambda n: A.name("xp_elem") if isinstance(n, A.Index) else None))):
        return None  # the index as a value
    arrays = dict(params)
    read = sorted({n.base.id for n in element_uses if isinstance(n.base, A.Name)})
    if any(arrays[r] not in PLAIN_TYPES and arrays[r] not in ("__half",) for r in read):
        return None
    em = Emitter(arrays, locals_, table)
    for st in loop_stmts[:-1]:
        assert isinstance(st, A.DeclStmt)
        for d in st.decls:
            assert d.init is not None
            em.statement(em.tile(d.name), locals_[d.name], d.init, index)
    em.statement("xp_red_val", "float", element, index)
    acc = expanded or f"xp_acc{serial}"
    lines_body = [line.replace("xp_tmp", f"xp_r{serial}tmp").replace("xp_tile_", f"xp_r{serial}_")
                  for line in em.lines]
    n_expr = print_expr(cond.right, Dialect.BANG)
    step = print_expr(view.step, Dialect.BANG)
    decls = [] if expanded else [f"__nram__ float {acc}[{MAX_THREADS}];"]
    decls.append(f"__nram__ float xp_r{serial}_val[{MAX_THREADS}];")
    for name, t in [*((r, arrays[r]) for r in read), *locals_.items()]:
        if t in PLAIN_TYPES:
            decls.append(f"__nram__ {t} xp_r{serial}_{name}[{MAX_THREADS}];")
        else:  # a class type (CUDA's __half): raw NRAM bytes and a typed pointer
            decls.append(f"__nram__ char xp_r{serial}_{name}_raw[{MAX_THREADS * _sizeof(t)}];")
            decls.append(f"{t} *xp_r{serial}_{name} = ({t} *)xp_r{serial}_{name}_raw;")
    decls += [f"__nram__ float xp_r{serial}tmp{k}[{MAX_THREADS}];" for k in range(1, em.temps + 1)]
    lines = [f"__bang_write_value({acc}, xp_bdx, (float)({print_expr(init, Dialect.BANG)}));",
             f"for (int xp_k0 = xp_bx * ({print_expr(offset, Dialect.BANG)}); xp_k0 < ({n_expr}); "
             f"xp_k0 += ({step})) {{",
             f"const int xp_n = ({n_expr}) - xp_k0 < xp_bdx ? ({n_expr}) - xp_k0 : xp_bdx;",
             "const int xp_nv = xp_n;",
             "const int xp_o = xp_k0;",
             *(f"__memcpy(xp_r{serial}_{r}, {r} + xp_k0, xp_n * {_sizeof(arrays[r])}, GDRAM2NRAM);" for r in read),
             *(line.replace("xp_red_val", f"xp_r{serial}_val") for line in lines_body),
             f"{intrinsic}({acc}, {acc}, xp_r{serial}_val, xp_n);",
             "}"]
    restart = [] if expanded else _parse_stmts([f"float {acc_name} = {acc}[xp_tx];"])
    new_body = [*keep_xp_t, *restart, *lead[2:]]
    vector_nest = _with_thread_body(nest, new_body)
    pre = f"xp_bdy == 1 && xp_bdz == 1 && xp_bdx <= {MAX_THREADS} && ({step}) > 0"
    guarded = A.If(_parse_expr(pre), A.Block((*_parse_stmts(["{", *lines, "}"]), vector_nest)), nest)
    return decls, guarded, lines, em.intrinsics | {intrinsic, "__bang_write_value"}


def _into_gdram_parameter(init: A.Expr, pointer_params: set[str], scalar_params: set[str]) -> bool:
    """``init`` is a GDRAM pointer parameter plus an offset over parameters and block indices (so the row
    it points to is in GDRAM, never an on-chip block array such as recovered shared memory)."""
    names = A.free_names(init)
    allowed = pointer_params | scalar_params | {"xp_bx", "xp_by", "xp_bz", "xp_gdx", "xp_gdy", "xp_gdz",
                                                "xp_bdx", "xp_bdy", "xp_bdz"}
    return bool(names & pointer_params) and len(names & pointer_params) == 1 and names <= allowed | _TYPE_WORDS


_TYPE_WORDS = {"size_t", "int", "long", "unsigned", "float", "const"}


def _assigned_later(stmts: list[A.Stmt], name: str) -> bool:
    return any(isinstance(n, A.Assign) and isinstance(n.target, A.Name) and n.target.id == name
               for st in stmts for n in A.walk(st))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    table = _table()
    items = list(module.items)
    serial = 0
    done: list[str] = []
    for k, fn in enumerate(items):
        if not (isinstance(fn, A.Function) and any(isinstance(p, A.Param) and p.name == "xp_grid" for p in fn.params)):
            continue
        i = _task_loop_index(fn)
        if i is None:
            continue
        loop = fn.body.stmts[i]
        assert isinstance(loop, A.For)
        pointers = {p.name: _element_type(p.type) for p in fn.params
                    if isinstance(p, A.Param) and p.name and len(p.type.pointers) == 1}
        stmts = _stmts(loop.body)
        scalar_params = {p.name for p in fn.params if isinstance(p, A.Param) and p.name and not p.type.pointers}
        expanded_arrays: dict[str, str] = {}
        for st in stmts:
            if not isinstance(st, A.DeclStmt):
                continue
            for d in st.decls:
                if d.dims == (A.name("xp_nt"),) and not d.type.pointers:
                    expanded_arrays[d.name] = _element_type(d.type)
                elif (len(d.type.pointers) == 1 and not d.dims and d.init is not None
                      and not _uses(d.init, THREAD_NAMES) and not _assigned_later(stmts, d.name)
                      and _into_gdram_parameter(d.init, set(pointers), scalar_params)):
                    pointers[d.name] = _element_type(d.type)  # a block-uniform row pointer (xr = x + row*n)
        decls: list[str] = []
        changed = False
        for j, stmt in enumerate(stmts):
            try:
                result = _reduce_nest(stmt, pointers, expanded_arrays, table, serial + 1)
            except (PassRefused, AssertionError, KeyError, ValueError):
                result = None  # this nest keeps its scalar form
            if result is None:
                continue
            serial += 1
            more_decls, guarded, _, intrinsics = result
            decls += more_decls
            stmts[j] = guarded
            changed = True
            done.append(f"{fn.name}: accumulation on NRAM lanes with {', '.join(sorted(intrinsics))}")
        if changed:
            new_loop = A.replace(loop, body=A.Block(tuple(stmts)))
            body = [*fn.body.stmts[:i], *_parse_stmts(decls), new_loop, *fn.body.stmts[i + 1:]]
            items[k] = A.replace(fn, body=A.replace(fn.body, stmts=tuple(body)))
    if not done:
        raise PassRefused("no strided per-thread accumulation (acc += e / acc = max(acc, e)) in a thread loop")
    ctx.notes.extend(done)
    return leave(unit, dataclasses.replace(module, items=tuple(items)), ctx, Dialect.BANG)
