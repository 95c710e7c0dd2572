"""Small-period operands → periodic tables (a CPU speed pass after ``delinearize``).

A unit-stride loop that reads ``P[E + i % C]`` — per-channel parameters of an NCHWc or NHWC layout (TVM's
``Scale[h + i % 7]``), a bias ``b[i % 4]`` — with a small constant period ``C`` reads a gather in its vectorized
form: 16-wide AVX-512 gathers where the target has them, slower than the scalar loop on some machines (the
HPCTransEval scale_shift_nchwc item took 2× longer at ``-O3 -march=native`` than at ``-O2``). From ``i = lo`` the
values repeat every ``C`` iterations, so they are copied once into a table of ``L = lcm(C, 16)`` elements
starting at ``lo``'s phase, and the loop runs in chunks of ``L`` iterations that read the table at the offset
within the chunk: contiguous loads. Behind run-time checks (``lo >= 0``, so C's ``%`` is the phase; at least
``C`` iterations, so the table reads only elements the loop reads); else the loop runs as written.

Taken where ``E`` is invariant in the loop, ``P`` is not written in it and cannot be written through another
pointer (``P`` is a local array or a ``__restrict__`` pointer), the loop body has no jump or unmodelled text, and
the loop carries no pragma but ``omp simd`` and GCC's loop pragmas (the chunks keep it) or ``omp parallel for
simd`` with at most a schedule (the chunks are shared out over the threads, each a vector loop; the tables are
filled before, read-only).
"""

from __future__ import annotations

import math
import re
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    enter,
    fresh_namer,
    leave,
    map_loops_with_pragmas,
    parse_expr,
    scalar_writes,
)
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="periodic_operands",
    summary="Loads P[E + i % C] with a small constant period C → a table of one period per chunk of the loop",
    kind="ast",
    directions=("cuda->cpu",),
)

_LOOP_PRAGMAS = re.compile(r"^(omp simd\b.*|GCC (unroll|ivdep|novector)\b.*)$")
# a shared-out vector loop whose clauses are only a schedule: its chunks are shared out instead
_PARALLEL_SIMD = re.compile(r"^omp parallel for simd((?:\s+schedule\(\w+(?:,\s*\d+)?\))?)$")
MAX_PERIOD = 64
LANES = 16  # a chunk is a whole number of periods and of 16-float vectors


def _periodic(index: A.Expr, var: str) -> tuple[A.Expr | None, int] | None:
    """``E + var % C`` (either order) or ``var % C`` → (E or None, C)."""
    def period(e: A.Expr) -> int | None:
        while isinstance(e, A.Cast) and not e.type.pointers:
            e = e.operand
        if isinstance(e, A.Binary) and e.op == "%" and e.left == A.Name(var):
            c = A.const_int(e.right)
            return c if c is not None and 2 <= c <= MAX_PERIOD else None
        return None

    found = period(index)
    if found is not None:
        return None, found
    if isinstance(index, A.Binary) and index.op == "+":
        for mod, rest in ((index.right, index.left), (index.left, index.right)):
            c = period(mod)
            if c is not None and var not in A.free_names(rest):
                return rest, c
    return None


def _element_types(fn: A.Function) -> dict[str, tuple[A.Type, bool]]:
    """Arrays and pointers the function names → (element type, cannot alias a store through another pointer)."""
    out: dict[str, tuple[A.Type, bool]] = {}
    for p in fn.params:
        if isinstance(p, A.Param) and p.name and len(p.type.pointers) == 1:
            out[p.name] = (A.Type(p.type.base), "__restrict__" in p.type.pointers[0])
    for d in A.walk(fn.body):
        if isinstance(d, A.VarDecl) and len(d.dims) == 1 and not d.type.pointers:
            out[d.name] = (A.Type(d.type.base), True)
    return out


def _rewrite_loop(loop: A.For, pragma: A.Pragma | None, types: dict[str, tuple[A.Type, bool]],
                  fresh: Any) -> list[A.Stmt] | None:
    original_pragma = pragma
    outer_pragma: A.Pragma | None = None  # the chunks' loop: shared out over threads as the loop was
    parallel = _PARALLEL_SIMD.match(pragma.text.strip()) if pragma is not None else None
    if parallel is not None:
        outer_pragma, pragma = A.Pragma(f"omp parallel for{parallel.group(1)}"), A.Pragma("omp simd")
    elif pragma is not None and not _LOOP_PRAGMAS.match(pragma.text.strip()):
        return None
    view = loop.canonical()
    if view is None or A.const_int(view.step) != 1 or view.var_type is None:
        return None
    body = loop.body
    if any(isinstance(n, A.Continue | A.Break | A.Return | A.Opaque) for n in A.walk(body)):
        return None
    declared = {n.name for n in A.walk(body) if isinstance(n, A.VarDecl)}
    changing = declared | scalar_writes(body) | {view.var}
    written = {n.target.base.id for n in A.walk(body) if isinstance(n, A.Assign) and isinstance(
        n.target, A.Index) and isinstance(n.target.base, A.Name)}
    tables: dict[tuple[str, str, int], tuple[str, A.Index]] = {}
    for n in A.walk(body):
        if not (isinstance(n, A.Index) and isinstance(n.base, A.Name) and n.base.id in types):
            continue
        found = _periodic(n.index, view.var)
        if found is None:
            continue
        offset, period = found
        base = n.base.id
        # the offset reads nothing the loop changes: no scalar it sets, no array it stores into
        if base in written or not types[base][1] or (offset is not None and A.free_names(offset) & (
                changing | written)):
            continue
        key = (base, _text(offset), period)
        if key not in tables:
            tables[key] = (fresh("xp_pt"), n)
    if not tables:
        return None
    length = max(math.lcm(p, LANES) for _, _, p in tables)
    lo, hi, i0, count, j = (fresh(x) for x in ("xp_pt_lo", "xp_pt_hi", "xp_pt_i0", "xp_pt_n", "xp_pt_j"))
    longest = max(p for _, _, p in tables)

    def expr(text: str) -> A.Expr:
        return parse_expr(text, Dialect.C)

    fills: list[A.Stmt] = []
    for (base, offset_text, period), (table, node) in tables.items():
        element = types[base][0]
        fills.append(A.DeclStmt((A.VarDecl(table, element, (A.lit(length),), None),)))
        phase = f"({lo} + {j}) % {period}"
        source = A.Index(node.base, expr(f"{offset_text} + {phase}" if offset_text else phase))
        fills.append(A.For(A.decl(j, "long", A.lit(0)), expr(f"{j} < {length}"), A.Unary("++", A.Name(j)),
                           A.ExprStmt(A.assign(A.Index(A.Name(table), A.Name(j)), source))))

    def replace(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Index) and isinstance(n.base, A.Name):
            found = _periodic(n.index, view.var)
            chosen = tables.get((n.base.id, _text(found[0]), found[1])) if found is not None else None
            if chosen is not None:
                return A.Index(A.Name(chosen[0]), expr(f"{view.var} - {i0}"))
        return None

    chunk = A.For(A.decl(view.var, view.var_type, A.Name(i0)), expr(f"{view.var} < {i0} + {count}"),
                  A.Unary("++", A.Name(view.var)), A.rewrite(body, replace))
    walk = A.For(A.decl(i0, "long", A.Name(lo)), expr(f"{i0} < {hi}"), A.assign(A.Name(i0), A.lit(length), "+="),
                 A.Block((A.DeclStmt((A.VarDecl(count, A.Type("long"), (), expr(
                     f"{hi} - {i0} < {length} ? {hi} - {i0} : {length}")),)), *([pragma] if pragma else []), chunk)))
    original = A.Block((*([original_pragma] if original_pragma else []), loop))
    bounds = A.DeclStmt((A.VarDecl(lo, A.Type("long", ("const",)), (), A.Cast(A.ctype("long"), view.start)),
                         A.VarDecl(hi, A.Type("long", ("const",)), (), A.Cast(A.ctype("long"), view.stop))))
    check = expr(f"{lo} >= 0 && {hi} - {lo} >= {longest}")
    chunks = (*([outer_pragma] if outer_pragma else []), walk)
    return [A.Block((bounds, A.If(check, A.Block((*fills, *chunks)), original)))]


def _text(e: A.Expr | None) -> str:
    return print_expr(e, Dialect.C) if e is not None else ""


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fresh = fresh_namer(module)
    changed: list[str] = []
    new_module = module
    for fn in module.functions():
        types = _element_types(fn)
        body = map_loops_with_pragmas(fn.body, lambda loop, pragma, types=types: _rewrite_loop(
            loop, pragma, types, fresh))
        if body is not fn.body:
            changed.append(fn.name)
            new_module = new_module.replace_function(fn.name, A.replace(fn, body=body))
    if not changed:
        raise PassRefused("no unit-stride loop reads P[E + i % C] with a small constant period")
    ctx.notes.append(f"periodic_operands: small-period loads read from a table per chunk ({', '.join(changed)})")
    return leave(unit, new_module, ctx)
