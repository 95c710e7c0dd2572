"""Vector unpack: component-wise code on CUDA vector types (``float4``, ``int4``, ``float2``, ...) becomes a loop
over the components of the underlying scalar arrays, which the compiler vectorizes (with SIMD math).

Kernels that load four floats at once compute each component by the same expression and store the vector:

    float4 v = reinterpret_cast<const float4*>(x)[i];
    float4 r;
    r.x = sinf(v.x); r.y = sinf(v.y); r.z = sinf(v.z); r.w = sinf(v.w);
    reinterpret_cast<float4*>(y)[i] = r;

On a CPU the four scalar calls stay scalar. The pass rewrites such a run of statements to

    for (int c = 0; c < 4; ++c) y[4 * (size_t)(i) + c] = sinf(x[4 * (size_t)(i) + c]);

(component ``c`` of vector element ``i`` of a ``T*`` viewed as ``T4*`` is scalar ``4 i + c``). Preconditions,
else the run is left alone: every loaded vector comes from a ``reinterpret_cast``/cast of a pointer whose
element type is the vector's component type; the result is declared without initializer, assigned once per
component in ``x, y, z, w`` order by expressions identical up to the component, then stored whole through a
cast pointer of the same kind; the component expressions use vectors only through their components and
have no side effects (side-effect-free math calls only); the vectors are not used after the store.
Parameters: ``function``.
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import PURE_CALLS, enter, leave, names_in, target_function

INFO = PassInfo(
    name="vector_unpack",
    summary="Component-wise float4/int4/float2 code → a loop over the scalar components (vectorizable)",
    kind="ast",
    directions=("cuda->cpu",),
    search_priority=1,
    params=(ParamSpec("function", "str", "", "function holding the code (default: first with loops)"),),
)

_COMPONENTS = ("x", "y", "z", "w")
# vector type → (component type, components)
_VECTORS = {"float2": ("float", 2), "float4": ("float", 4), "double2": ("double", 2), "int2": ("int", 2),
            "int4": ("int", 4), "uint2": ("unsigned int", 2), "uint4": ("unsigned int", 4)}
_CAST = re.compile(r"^(?:reinterpret_cast|static_cast)\s*<\s*(const\s+)?(\w+)\s*\*\s*>$")


def _vector_pointer(e: A.Expr) -> tuple[str, A.Expr] | None:
    """``(vector type, scalar pointer)`` for ``reinterpret_cast<[const] T4*>(p)`` or ``(T4*)p``."""
    if isinstance(e, A.Call) and e.callee and len(e.args) == 1:
        m = _CAST.match(e.callee)
        if m and m.group(2) in _VECTORS:
            return m.group(2), e.args[0]
    if isinstance(e, A.Cast) and len(e.type.pointers) == 1 and e.type.base in _VECTORS:
        return e.type.base, e.operand
    return None


def _element(e: A.Expr | None) -> tuple[str, A.Expr, A.Expr] | None:
    """``(vector type, scalar pointer, vector index)`` for ``VP[i]``."""
    if isinstance(e, A.Index):
        vp = _vector_pointer(e.base)
        if vp is not None:
            return vp[0], vp[1], e.index
    return None


def _rename_component(e: A.Expr, vectors: set[str], comp: str, to: str) -> A.Expr:
    return A.rewrite(e, lambda n: A.Member(n.base, to) if isinstance(n, A.Member) and not n.arrow and
                     isinstance(n.base, A.Name) and n.base.id in vectors and n.field == comp else None)


def _unpack(stmts: tuple[A.Stmt, ...], start: int, fn: A.Function, types: dict[str, A.Type]
            ) -> tuple[int, A.Stmt] | None:
    """The number of statements from ``start`` that form one unpackable run, and its loop."""
    loads: dict[str, tuple[str, A.Expr, A.Expr]] = {}
    k = start
    while k < len(stmts):
        decl_stmt = stmts[k]
        if not isinstance(decl_stmt, A.DeclStmt) or len(decl_stmt.decls) != 1:
            break
        d = decl_stmt.decls[0]
        elem = _element(d.init)
        if elem is None or d.type.base != elem[0] or d.type.pointers or d.dims:
            break
        loads[d.name] = elem
        k += 1
    if k >= len(stmts) or not isinstance(stmts[k], A.DeclStmt):
        return None
    result_decl = stmts[k]
    assert isinstance(result_decl, A.DeclStmt)
    if len(result_decl.decls) != 1 or result_decl.decls[0].init is not None or result_decl.decls[0].dims:
        return None
    result, vtype = result_decl.decls[0].name, result_decl.decls[0].type.base
    if vtype not in _VECTORS or result_decl.decls[0].type.pointers:
        return None
    scalar, width = _VECTORS[vtype]
    if any(v[0] != vtype for v in loads.values()):
        return None
    k += 1
    exprs: list[A.Expr] = []
    for comp in _COMPONENTS[:width]:
        if k >= len(stmts):
            return None
        s = stmts[k]
        if not (isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Assign) and s.expr.op == "=" and
                s.expr.target == A.Member(A.Name(result), comp)):
            return None
        exprs.append(s.expr.value)
        k += 1
    if k >= len(stmts):
        return None
    store = stmts[k]
    if not (isinstance(store, A.ExprStmt) and isinstance(store.expr, A.Assign) and store.expr.op == "=" and
            store.expr.value == A.Name(result)):
        return None
    out = _element(store.expr.target)
    if out is None or out[0] != vtype:
        return None
    vectors = set(loads)
    # every component expression is the first one with the component renamed; vectors only via components
    for comp, e in zip(_COMPONENTS[:width], exprs, strict=True):
        if _rename_component(e, vectors, comp, "x") != exprs[0]:
            return None
        for n in A.walk(e):
            if isinstance(n, A.Name) and n.id in vectors | {result} and not any(
                    isinstance(m, A.Member) and m.base is n for m in A.walk(e)):
                return None
            if isinstance(n, A.Call) and (n.callee is None or n.callee not in PURE_CALLS):
                return None
            if isinstance(n, (A.Assign, A.Opaque)) or isinstance(n, A.Unary) and n.op in ("++", "--", "&"):
                return None
    for pointer in [v[1] for v in loads.values()] + [out[1]]:
        if not isinstance(pointer, A.Name) or pointer.id not in types:
            return None
        ptype = types[pointer.id]
        if len(ptype.pointers) != 1 or ptype.base != scalar:
            return None
    if any((vectors | {result}) & names_in(s) for s in stmts[k + 1:]):
        return None
    c = A.fresh_name(fn, "xp_c")

    def scalar_index(index: A.Expr) -> A.Expr:
        return A.binop("+", A.binop("*", A.lit(width), A.Cast(A.ctype("size_t"), index)), A.Name(c))

    value = A.rewrite(exprs[0], lambda n: A.Index(loads[n.base.id][1], scalar_index(loads[n.base.id][2]))
                      if isinstance(n, A.Member) and isinstance(n.base, A.Name) and n.base.id in loads else None)
    loop = A.for_range(c, A.lit(0), A.lit(width), A.ExprStmt(A.assign(A.Index(out[1], scalar_index(out[2])),
                                                                        value)))
    return k + 1 - start, A.Block((A.Pragma("omp simd"), loop))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    types = A.declared_types(fn)
    state = {"done": 0}

    class _Blocks(A.Transformer):
        def visit_Block(self, block: A.Block) -> Any:  # noqa: N802
            new = self.generic_visit(block)
            stmts = new.stmts
            out: list[A.Stmt] = []
            i = 0
            while i < len(stmts):
                found = _unpack(stmts, i, fn, types)
                if found is not None:
                    count, loop = found
                    out.append(loop)
                    state["done"] += 1
                    i += count
                    continue
                out.append(stmts[i])
                i += 1
            return A.replace(new, stmts=tuple(out)) if state["done"] and tuple(out) != stmts else new

    new_fn = _Blocks().visit(fn)
    if not state["done"]:
        raise PassRefused(f"no component-wise vector-type code in '{fn.name}' to unpack")
    ctx.notes.append(f"vector_unpack: {state['done']} vector computation(s) of {fn.name} as component loops")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
