"""Detensorization: tensor-core and packed-SIMD intrinsics become scalar loops.

* ``nvcuda::wmma`` fragments become ``float name[rows * cols]`` arrays (every lane of the warp holds the
  whole tile; the collective operations are idempotent, so running them per lane is exact), and
  ``fill_fragment``/``load_matrix_sync``/``mma_sync``/``store_matrix_sync`` become loop nests honoring
  the row/column-major layouts; a fragment's ``num_elements`` and ``x[i]`` are the array's size and elements
  (the runtime's fragment holds the tile row-major too, so code that reads its elements computes alike).
* ``__dp4a(a, b, c)`` becomes the sum of four sign-extended byte products (``unsigned`` operands are not
  rewritten: the prelude's unsigned overload keeps them exact).

Refuses when a fragment's shape is not a compile-time constant (literals or ``#define`` integers) or an
operation is used as a value. Parameter: ``dp4a`` (expand ``__dp4a`` too; default true).
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import bool_param, enter, leave

INFO = PassInfo(
    name="detensorization",
    summary="wmma fragments and __dp4a → scalar loops and expressions",
    kind="ast",
    directions=("cuda->cpu", "cuda->bang"),
    params=(ParamSpec("dp4a", "bool", True, "expand __dp4a into byte products", (True, False)),),
)

_FRAGMENT = re.compile(r"^(?:nvcuda::)?wmma::fragment\s*<(.*)>$", re.S)
_WMMA_OPS = ("fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync")


def _defines(module: A.Module) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in module.items:
        if isinstance(item, A.Opaque):
            m = re.match(r"\s*#\s*define\s+(\w+)\s+\(?\s*(-?\d+)\s*\)?\s*$", item.text)
            if m:
                out[m.group(1)] = int(m.group(2))
    return out


def _value(text: str, defines: dict[str, int]) -> int:
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    if text in defines:
        return defines[text]
    raise PassRefused(f"fragment dimension '{text}' is not a compile-time integer")


def _loop(var: str, stop: int, body: A.Stmt) -> A.For:
    return A.for_range(var, A.lit(0), A.lit(stop), body)


def _wmma_name(call: A.Call) -> str | None:
    callee = call.callee or ""
    short = callee.split("::")[-1]
    return short if short in _WMMA_OPS and ("wmma" in callee or callee == short) else None


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    defines = _defines(module)
    fragments: dict[str, tuple[str, int, int, int, str]] = {}  # name -> (kind, M, N, K, layout)
    for n in A.walk(module):
        if isinstance(n, A.VarDecl):
            m = _FRAGMENT.match(n.type.base.strip())
            if m:
                parts = [p.strip() for p in m.group(1).split(",")]
                kind = parts[0].split("::")[-1]
                mm, nn, kk = (_value(p, defines) for p in parts[1:4])
                layout = parts[5].split("::")[-1] if len(parts) > 5 else "row_major"
                fragments[n.name] = (kind, mm, nn, kk, layout)
    expand_dp4a = bool_param(params, "dp4a", True)
    counter = [0]

    def shape(name: str) -> tuple[int, int]:
        kind, mm, nn, kk, _ = fragments[name]
        return {"matrix_a": (mm, kk), "matrix_b": (kk, nn)}.get(kind, (mm, nn))

    def frag(expr: A.Expr) -> str:
        if isinstance(expr, A.Name) and expr.id in fragments:
            return expr.id
        raise PassRefused("a wmma operation on something that is not a declared fragment", expr.span)

    def rewrite_stmt(s: A.Node) -> A.Node | None:
        if isinstance(s, A.DeclStmt) and any(d.name in fragments for d in s.decls):
            decls = []
            for d in s.decls:
                if d.name in fragments:
                    rows, cols = shape(d.name)
                    decls.append(A.VarDecl(d.name, A.ctype("float"), (A.lit(rows * cols),)))
                else:
                    decls.append(d)
            return A.DeclStmt(tuple(decls))
        if isinstance(s, A.Member) and isinstance(s.base, A.Name) and s.base.id in fragments:
            # the fragment's own elements, as the runtime holds them: the whole tile, row-major
            rows, cols = shape(s.base.id)
            if s.field == "num_elements":
                return A.lit(rows * cols)
            if s.field == "x":
                return A.Name(s.base.id)
            raise PassRefused(f"fragment member '{s.field}'", s.span)
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and _wmma_name(s.expr):
            return _expand(s.expr)
        if isinstance(s, A.Call) and _wmma_name(s):
            raise PassRefused("a wmma operation used as a value", s.span)
        if expand_dp4a and isinstance(s, A.Call) and s.callee == "__dp4a" and len(s.args) == 3:
            return _dp4a(s)
        return None

    def _expand(call: A.Call) -> A.Stmt:
        op = _wmma_name(call)
        counter[0] += 1
        r, c, k = f"xp_r{counter[0]}", f"xp_c{counter[0]}", f"xp_k{counter[0]}"
        if op == "fill_fragment":
            name = frag(call.args[0])
            rows, cols = shape(name)
            return _loop(r, rows * cols, A.ExprStmt(A.assign(A.index(A.Name(name), A.Name(r)), call.args[1])))
        if op == "load_matrix_sync":
            name = frag(call.args[0])
            rows, cols = shape(name)
            kind, *_rest, layout = fragments[name]
            col_major = layout == "col_major"
            if kind == "accumulator" and len(call.args) > 3:
                col_major = "col" in _text(call.args[3])
            ptr, ld = call.args[1], call.args[2]
            offset = (A.binop("+", A.binop("*", A.Name(c), ld), A.Name(r)) if col_major
                      else A.binop("+", A.binop("*", A.Name(r), ld), A.Name(c)))
            value = A.Cast(A.ctype("float"), A.Index(ptr, offset))
            cell = A.index(A.Name(name), A.binop("+", A.binop("*", A.Name(r), A.lit(cols)), A.Name(c)))
            return _loop(r, rows, _loop(c, cols, A.ExprStmt(A.assign(cell, value))))
        if op == "mma_sync":
            d, a, b, cc = (frag(x) for x in call.args[:4])
            _, mm, nn, kk, _ = fragments[a]
            acc = f"xp_acc{counter[0]}"
            inner = A.Block((
                A.decl(acc, "float", A.index(A.Name(cc), A.binop("+", A.binop("*", A.Name(r), A.lit(nn)), A.Name(c)))),
                _loop(k, kk, A.ExprStmt(A.assign(A.Name(acc), A.binop(
                    "*", A.index(A.Name(a), A.binop("+", A.binop("*", A.Name(r), A.lit(kk)), A.Name(k))),
                    A.index(A.Name(b), A.binop("+", A.binop("*", A.Name(k), A.lit(nn)), A.Name(c)))), "+="))),
                A.ExprStmt(A.assign(A.index(A.Name(d), A.binop("+", A.binop("*", A.Name(r), A.lit(nn)), A.Name(c))),
                                    A.Name(acc))),
            ))
            if d in (a, b):
                raise PassRefused("mma_sync writing into one of its A/B operands", call.span)
            return _loop(r, mm, _loop(c, nn, inner))
        # store_matrix_sync(ptr, frag, ld, layout)
        name = frag(call.args[1])
        rows, cols = shape(name)
        ptr, ld = call.args[0], call.args[2]
        col_major = len(call.args) > 3 and "col" in _text(call.args[3])
        offset = (A.binop("+", A.binop("*", A.Name(c), ld), A.Name(r)) if col_major
                  else A.binop("+", A.binop("*", A.Name(r), ld), A.Name(c)))
        cell = A.index(A.Name(name), A.binop("+", A.binop("*", A.Name(r), A.lit(cols)), A.Name(c)))
        return _loop(r, rows, _loop(c, cols, A.ExprStmt(A.assign(A.Index(ptr, offset), cell))))

    uses_dp4a = any(isinstance(n, A.Call) and n.callee == "__dp4a" for n in A.walk(module))
    if not fragments and not (expand_dp4a and uses_dp4a):
        raise PassRefused("no wmma fragments or __dp4a to detensorize")
    out = A.rewrite(module, rewrite_stmt)
    items = tuple(i for i in out.items if not (isinstance(i, A.Opaque) and re.match(r"\s*using\s+namespace\s+nvcuda", i.text))
                  and not (isinstance(i, A.Include) and i.path == "mma.h"))
    out = A.replace(out, items=items)
    ctx.notes.append(f"detensorization: {len(fragments)} fragment(s)" + (", __dp4a expanded" if uses_dp4a else ""))
    return leave(unit, out, ctx)


def _text(expr: A.Expr) -> str:
    if isinstance(expr, A.Name):
        return expr.id
    if isinstance(expr, A.Member):
        return _text(expr.base) + "." + expr.field
    return ""


def _dp4a(call: A.Call) -> A.Expr:
    a, b, c = call.args
    total: A.Expr = A.Cast(A.ctype("int"), c)
    for k in range(4):
        def byte(x: A.Expr, k: int = k) -> A.Expr:
            shifted = A.binop(">>", A.Cast(A.ctype("int"), x), A.lit(8 * k)) if k else A.Cast(A.ctype("int"), x)
            return A.Cast(A.ctype("int"), A.Cast(A.ctype("signed char"), shifted))
        total = A.binop("+", total, A.binop("*", byte(a), byte(b)))
    return total
