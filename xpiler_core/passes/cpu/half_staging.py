"""Half staging: a loop over half-precision arrays works on float tiles converted in bulk.

The CPU ``__half`` converts one value at a time (F16C ``vcvtph2ps``/``vcvtps2ph`` on scalars, or bit
manipulation), which g++ cannot vectorize, so a loop that reads or writes half arrays stays scalar. This pass
strip-mines such a loop into tiles of ``tile`` iterations: the tile of every half array the loop reads is
converted to a float buffer with the vector instructions (``xp_h2f_n``), the loop runs on the buffers (it
vectorizes), and the tile of every half array it writes is converted back once (``xp_f2h_n``, round to
nearest even like ``__float2half``).

Exactness: a staged read is the exact float value of the half. A written value is rounded to half once, at
the store, as before. Half arithmetic (``__hadd/__hsub/__hmul/__hdiv/__hneg`` of two staged reads) is
allowed only as the stored value itself: done in float and rounded once it gives the correctly rounded half
result (float's 24 bits are at least 2 * 11 + 2, so double rounding is innocuous for these operations).

Preconditions (else the pass refuses): a canonical unit-stride loop declaring its variable; every access to
a half array is ``h[e + i]`` with one loop-invariant ``e`` per array, evaluated unconditionally (not under an
``if``, ``?:`` branch, ``&&``/``||`` right side or a nested loop); a written half array is written by one
top-level statement ``h[e + i] = value;`` and not read after it in the body; reads appear only converted to
float (``__half2float``, a float cast, an arithmetic operand) or as a stored value or an operand of a stored
half operation; no other half-valued expression. An OpenMP ``parallel for`` moves to the tile loop.

Every qualifying loop is staged (``loop`` narrows that to loops over one variable). Parameters: ``loop``,
``tile`` (iterations per tile), ``function``.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    conditionally_evaluated,
    enter,
    fresh_namer,
    has_jumps,
    int_param,
    leave,
    map_loops_with_pragmas,
    names_in,
    offset_from,
    scalar_writes,
    split_loop_pragma,
    target_function,
)

INFO = PassInfo(
    name="half_staging",
    summary="Loops over half arrays run on float tiles converted in bulk (vector F16C conversions)",
    kind="ast",
    directions=("cuda->cpu",),
    search_priority=1,
    params=(
        ParamSpec("loop", "str", "", "only loops over this variable (default: every loop over half arrays)"),
        ParamSpec("tile", "int", 64, "iterations per tile (float buffers of this size)", (16, 64, 256)),
        ParamSpec("function", "str", "", "function holding the loop (default: first with loops)"),
    ),
)

HALF_TYPES = frozenset({"__half", "half"})
_HALF_OPS = {"__hadd": "+", "__hsub": "-", "__hmul": "*", "__hdiv": "/"}
_TO_HALF = frozenset({"__float2half", "__float2half_rn", "__half"})
_TO_FLOAT = frozenset({"__half2float"})
_HALF_VALUED = frozenset({*_HALF_OPS, "__hneg", *_TO_HALF, "__hfma", "__habs", "__hmax", "__hmin",
                          "__ushort_as_half", "__short2half_rn", "__int2half_rn", "__ldg"})


def _offset(index: A.Expr, var: str) -> A.Expr | None:
    return offset_from(index.operand if isinstance(index, A.Cast) and not index.type.pointers else index, var)


class _Staging:
    """The rewrite of one loop body: staged reads become float buffer reads, the stores go to float buffers."""

    def __init__(self, halves: set[str], var: str, base: A.Expr, buffers: dict[str, str]) -> None:
        self.halves, self.var, self.base, self.buffers = halves, var, base, buffers

    def is_read(self, e: A.Expr) -> bool:
        return isinstance(e, A.Index) and isinstance(e.base, A.Name) and e.base.id in self.halves

    def buf(self, e: A.Index) -> A.Expr:
        assert isinstance(e.base, A.Name)
        return A.Index(A.Name(self.buffers[e.base.id]), A.binop("-", A.Name(self.var), self.base))

    def floats(self, e: A.Expr) -> A.Expr:
        """A float-valued expression with staged reads as float operands; PassRefused on half values."""
        if self.is_read(e):
            assert isinstance(e, A.Index)
            return self.buf(e)
        if isinstance(e, A.Call) and e.callee in _TO_FLOAT and len(e.args) == 1 and self.is_read(e.args[0]):
            return self.buf(e.args[0])  # type: ignore[arg-type]
        if isinstance(e, A.Cast) and not e.type.pointers and e.type.base in ("float", "double") \
                and self.is_read(e.operand):
            return A.replace(e, operand=self.buf(e.operand))  # type: ignore[arg-type]
        if isinstance(e, A.Call) and (e.callee in _HALF_VALUED or e.callee is None):
            raise PassRefused(f"a half-valued '{e.callee or 'call'}' is used inside an expression")
        if isinstance(e, A.Call):
            if any(self.is_read(a) for a in e.args):
                raise PassRefused(f"a half value is passed to '{e.callee}'")
            return A.replace(e, args=tuple(self.floats(a) for a in e.args))
        if isinstance(e, A.Cast) and not e.type.pointers and e.type.base in HALF_TYPES:
            raise PassRefused("a cast to half inside an expression")
        if isinstance(e, A.Index):
            return A.replace(e, base=self.floats(e.base), index=self.floats(e.index))
        out: A.Expr = e
        if isinstance(e, A.Binary):
            out = A.replace(e, left=self.floats(e.left), right=self.floats(e.right))
        elif isinstance(e, A.Unary):
            out = A.replace(e, operand=self.floats(e.operand))
        elif isinstance(e, A.Ternary):
            out = A.replace(e, cond=self.floats(e.cond), then=self.floats(e.then), else_=self.floats(e.else_))
        elif isinstance(e, A.Cast):
            out = A.replace(e, operand=self.floats(e.operand))
        elif isinstance(e, A.Assign):
            out = A.replace(e, target=self.floats(e.target), value=self.floats(e.value))
        elif isinstance(e, A.Member):
            if any(self.is_read(n) for n in A.walk(e) if isinstance(n, A.Expr)):
                raise PassRefused("a member of a half value is used")
            out = e
        return out

    def stored(self, value: A.Expr) -> A.Expr:
        """The float whose rounding to half is the half the original stores."""
        if self.is_read(value):
            return self.buf(value)  # type: ignore[arg-type]
        if isinstance(value, A.Call) and value.callee in _TO_HALF and len(value.args) == 1:
            return self.floats(value.args[0])
        if isinstance(value, A.Cast) and not value.type.pointers and value.type.base in HALF_TYPES:
            return self.floats(value.operand)
        if isinstance(value, A.Call) and value.callee in _HALF_OPS and len(value.args) == 2 \
                and all(self.is_read(a) for a in value.args):
            return A.binop(_HALF_OPS[value.callee], self.buf(value.args[0]), self.buf(value.args[1]))  # type: ignore[arg-type]
        if isinstance(value, A.Call) and value.callee == "__hneg" and len(value.args) == 1 \
                and self.is_read(value.args[0]):
            return A.Unary("-", self.buf(value.args[0]))  # type: ignore[arg-type]
        return self.floats(value)


def _stage(fn: A.Function, loop: A.For, pragma: A.Pragma | None, halves: set[str], tile: int,
           wanted: str) -> list[A.Stmt] | str | None:
    """The replacement statements, a refusal reason, or None when the loop touches no half array."""
    view = loop.canonical()
    if view is None or (wanted and view.var != wanted):
        return None
    accesses = [n for n in A.walk(loop.body) if isinstance(n, A.Index) and isinstance(n.base, A.Name)
                and n.base.id in halves]
    if not accesses:
        return None
    if any(isinstance(n, A.For) for n in A.walk(loop.body)):
        return None  # an outer loop: the inner one is the candidate
    if A.const_int(view.step) != 1 or view.var_type is None:
        return f"loop '{view.var}' is not a unit-stride loop declaring its variable"
    if has_jumps([loop.body]) or any(isinstance(n, A.Opaque) for n in A.walk(loop.body)):
        return f"loop '{view.var}' jumps out or holds code the AST does not model"
    changing = scalar_writes(loop.body) | {view.var} | {d.name for d in A.walk(loop.body) if isinstance(d, A.VarDecl)}
    offsets: dict[str, A.Expr] = {}
    for a in accesses:
        assert isinstance(a.base, A.Name)
        off = _offset(a.index, view.var)
        if off is None or names_in(off) & changing:
            return f"'{a.base.id}' is not accessed as {a.base.id}[e + {view.var}] with e fixed in the loop"
        if offsets.setdefault(a.base.id, off) != off:
            return f"'{a.base.id}' is accessed at two offsets"
    conditional = conditionally_evaluated(loop.body)
    if any(id(a) in conditional for a in accesses):
        return "a half array is accessed conditionally"
    stmts = A.stmts_of(loop.body)
    written: dict[str, int] = {}
    for pos, s in enumerate(stmts):
        for n in A.walk(s):
            target = n.target if isinstance(n, A.Assign) else (
                n.operand if isinstance(n, A.Unary) and n.op in ("++", "--", "&") else None)
            if isinstance(target, A.Index) and isinstance(target.base, A.Name) and target.base.id in halves:
                top = isinstance(s, A.ExprStmt) and s.expr is n and isinstance(n, A.Assign) and n.op == "="
                if not top or target.base.id in written:
                    return f"'{target.base.id}' is written other than by one statement {target.base.id}[...] = v"
                written[target.base.id] = pos
    for name, pos in written.items():
        for s in stmts[pos + 1:]:
            if any(isinstance(n, A.Index) and n.base == A.Name(name) for n in A.walk(s)):
                return f"'{name}' is read after it is written in the body"
    read = sorted({a.base.id for a in accesses if isinstance(a.base, A.Name)} - set(written) | {
        name for name, pos in written.items()
        if sum(1 for n in A.walk(loop.body) if isinstance(n, A.Index) and n.base == A.Name(name)) > 1})

    # fresh in the function and among themselves (an array named w must not meet the tile width's name)
    fresh = fresh_namer(fn)
    base_name, width_name = fresh("xp_hs_o"), fresh("xp_hs_n")
    buffers = {h: fresh(f"xp_hs_{h}") for h in sorted(offsets)}
    staging = _Staging(set(offsets), view.var, A.Name(base_name), buffers)
    new_stmts: list[A.Stmt] = []
    try:
        for s in stmts:
            if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Assign) and isinstance(s.expr.target, A.Index) \
                    and isinstance(s.expr.target.base, A.Name) and s.expr.target.base.id in written:
                value = staging.stored(s.expr.value)
                new_stmts.append(A.ExprStmt(A.assign(staging.buf(s.expr.target),
                                                     A.Cast(A.ctype("float"), value))))
            elif isinstance(s, A.ExprStmt):
                new_stmts.append(A.replace(s, expr=staging.floats(s.expr)))
            elif isinstance(s, A.DeclStmt):
                if any(d.type.base in HALF_TYPES and not d.type.pointers for d in s.decls):
                    return "the body declares a half scalar"
                new_stmts.append(A.replace(s, decls=tuple(
                    A.replace(d, init=staging.floats(d.init)) if d.init is not None else d for d in s.decls)))
            elif isinstance(s, (A.Comment, A.Empty, A.Pragma)):
                new_stmts.append(s)
            else:
                if any(id(n) in {id(a) for a in accesses} for n in A.walk(s)):
                    return "a half array is used inside a compound statement"
                new_stmts.append(s)
    except PassRefused as exc:
        return str(exc)

    vtype = A.replace(view.var_type, quals=())
    base, width = A.Name(base_name), A.Name(width_name)
    left = A.binop("-", view.stop, base)
    tile_stmts: list[A.Stmt] = [
        A.decl(width_name, "int", A.Ternary(A.binop("<", left, A.lit(tile)), A.Cast(A.ctype("int"), left),
                                            A.lit(tile))),
        A.DeclStmt(tuple(A.VarDecl(buffers[h], A.ctype("float"), (A.lit(tile),)) for h in sorted(buffers))),
    ]

    def address(h: str) -> A.Expr:
        return A.Unary("&", A.Index(A.Name(h), A.binop("+", offsets[h], base)))

    for h in read:
        tile_stmts.append(A.ExprStmt(A.call("xp_h2f_n", A.Name(buffers[h]), address(h), width)))
    outer_pragma, inner_pragma = split_loop_pragma(pragma)
    if inner_pragma is not None:
        tile_stmts.append(inner_pragma)
    tile_stmts.append(A.for_range(view.var, base, A.binop("+", base, width), A.Block(tuple(new_stmts)),
                                  var_type=vtype))
    for h in sorted(written):
        tile_stmts.append(A.ExprStmt(A.call("xp_f2h_n", address(h), A.Name(buffers[h]), width)))
    tiles = A.For(A.decl(base_name, vtype, view.start), A.binop("<", base, view.stop),
                  A.assign(base, A.lit(tile), "+="), A.Block(tuple(tile_stmts)))
    return [*([outer_pragma] if outer_pragma else []), tiles]


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    wanted = str(params.get("loop") or "")
    tile = int_param(params, "tile", 64, 8, 4096)
    types = A.declared_types(fn)
    halves = {name for name, t in types.items() if t.base in HALF_TYPES and t.pointers}
    halves |= {d.name for d in A.walk(fn) if isinstance(d, A.VarDecl) and d.dims and d.type.base in HALF_TYPES}
    if not halves:
        raise PassRefused(f"'{fn.name}' has no half-precision arrays")
    state: dict[str, Any] = {"done": 0, "reason": None}

    def rewrite(loop: A.For, pragma: A.Pragma | None) -> list[A.Stmt] | None:
        result = _stage(fn, loop, pragma, halves, tile, wanted)
        if isinstance(result, str):
            state["reason"] = state["reason"] or result
            return None
        if result is not None:
            state["done"] += 1
        return result

    new_fn = map_loops_with_pragmas(fn, rewrite)
    if not state["done"]:
        raise PassRefused(state["reason"] or f"no loop of '{fn.name}' reads or writes half arrays")
    ctx.notes.append(f"half_staging: {state['done']} loop(s) of {fn.name} in float tiles of {tile}")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
