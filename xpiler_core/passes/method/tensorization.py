"""Tensorization: innermost float/int8 loops → x86 SIMD intrinsics, selected by target flags.

Recognized loop bodies (canonical unit-stride loop over ``i``, one statement):

* ``y[i] = a[i] OP b[i]`` / ``y[i] = s OP a[i]`` with ``OP`` in ``+ - *`` (float) → ``_mm256_*_ps``
  (``avx2``) or ``_mm512_*_ps`` (``avx512``);
* ``acc += a[i] * b[i]`` (float) → ``_mm256_fmadd_ps`` partial sums + horizontal add (reassociates the
  sum: results differ from the sequential order by rounding only);
* ``acc += (int)a[i] * (int)b[i]`` over ``int8_t``/``signed char`` → ``_mm512_dpbusd_epi32`` (``avx512vnni``),
  computing signed×signed as (a ^ 0x80)·b − 128·Σb.

A scalar remainder loop finishes the tail; the function gets ``__attribute__((target(...)))``. Parameters:
``target`` (avx2 | avx512 | avx512vnni), ``loop``, ``function``. Refuses other bodies, aliasing-prone
in-place forms it cannot prove (output also read at another index) and non-unit strides.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave, names_in, target_function

TARGETS: dict[str, dict[str, str | int]] = {
    "avx2": {"attr": "avx2,fma", "width": 8, "ps": "_mm256", "reg": "__m256"},
    "avx512": {"attr": "avx512f", "width": 16, "ps": "_mm512", "reg": "__m512"},
    "avx512vnni": {"attr": "avx512f,avx512bw,avx512vnni", "width": 64, "ps": "_mm512", "reg": "__m512i"},
}
INFO = PassInfo(
    name="tensorization",
    summary="Loop bodies → AVX2/FMA or AVX-512/VNNI intrinsics (elementwise, dot products, int8 dot)",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("target", "str", "avx2", "instruction set", tuple(TARGETS)),
        ParamSpec("loop", "str", "", "loop variable (default: first recognized loop)"),
        ParamSpec("function", "str", "", "function holding the loop"),
    ),
)
_OPS = {"+": "add", "-": "sub", "*": "mul"}
_FLOAT = ("float",)
_INT8 = ("int8_t", "signed char", "char")


def _elem(expr: A.Expr, var: str, types: dict[str, A.Type]) -> str | None:
    """``a[i]`` on a float pointer → ``a``."""
    if isinstance(expr, A.Index) and expr.index == A.Name(var) and isinstance(expr.base, A.Name):
        t = types.get(expr.base.id)
        if t is not None and t.base in _FLOAT and len(t.pointers) == 1:
            return expr.base.id
    return None


def _uncast(e: A.Expr) -> A.Expr:
    return e.operand if isinstance(e, A.Cast) and e.type.base in ("int", "int32_t") else e


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    target = str(params.get("target") or "avx2")
    if target not in TARGETS:
        raise PassRefused(f"unknown target '{target}' (avx2, avx512, avx512vnni)")
    cfg = TARGETS[target]
    wanted = str(params.get("loop") or "")
    types = A.declared_types(fn)
    state: dict[str, Any] = {"done": False, "reason": None}

    from xpiler_core.passes.support.ast_support import map_loops

    def vectorize(loop: A.For) -> Any:
        view = loop.canonical()
        if state["done"] or view is None or (wanted and view.var != wanted):
            return None
        if A.const_int(view.step) != 1:
            state["reason"] = "only unit-stride loops are tensorized"
            return None
        body = [s for s in A.stmts_of(loop.body) if not isinstance(s, (A.Comment, A.Empty))]
        if len(body) != 1 or not isinstance(body[0], A.ExprStmt) or not isinstance(body[0].expr, A.Assign):
            state["reason"] = "the loop body is not a single assignment"
            return None
        stmt = body[0].expr
        i, w = view.var, int(str(cfg["width"]))
        iv = A.fresh_name(fn, f"{i}_v")
        main_stop = A.binop("-", view.stop, A.lit(w))
        vec: list[A.Stmt] = []
        if target == "avx512vnni":
            return _vnni(loop, view, stmt, types, iv, state)
        pre, ps, reg = [], cfg["ps"], cfg["reg"]
        if stmt.op == "=" and (out := _elem(stmt.target, i, types)) and isinstance(stmt.value, A.Binary) \
                and stmt.value.op in _OPS:
            left, right = stmt.value.left, stmt.value.right

            def operand(e: A.Expr) -> str | None:
                name = _elem(e, i, types)
                if name is not None:
                    return f"{ps}_loadu_ps(&{name}[{iv}])"
                if i not in names_in(e) and not any(isinstance(n, (A.Call, A.Assign, A.Index)) for n in A.walk(e)):
                    from xpiler_core.printer import print_expr

                    return f"{ps}_set1_ps((float)({print_expr(e)}))"
                return None

            lo, ro = operand(left), operand(right)
            if lo is None or ro is None:
                state["reason"] = "operands are not a[i] arrays or loop-invariant scalars"
                return None
            reads = {a.base: a.indices for a in A.array_accesses(stmt.value)}
            if out in reads and reads[out] != (A.Name(i),):
                state["reason"] = f"'{out}' is read at another index (in-place with a shift)"
                return None
            vec.append(A.Opaque(f"{ps}_storeu_ps(&{out}[{iv}], {ps}_{_OPS[stmt.value.op]}_ps({lo}, {ro}));"))
        elif stmt.op == "+=" and isinstance(stmt.target, A.Name) and isinstance(stmt.value, A.Binary) \
                and stmt.value.op == "*" and (a := _elem(stmt.value.left, i, types)) and (
                    b := _elem(stmt.value.right, i, types)):
            acc = stmt.target.id
            if types.get(acc) is None or types[acc].base != "float":
                state["reason"] = "the accumulator is not a float"
                return None
            vacc = A.fresh_name(fn, f"{acc}_v")
            pre.append(A.Opaque(f"{reg} {vacc} = {ps}_setzero_ps();"))
            vec.append(A.Opaque(f"{vacc} = {ps}_fmadd_ps({ps}_loadu_ps(&{a}[{iv}]), {ps}_loadu_ps(&{b}[{iv}]), {vacc});"))
            post_text = (f"{{ float xp_lanes[{w}]; {ps}_storeu_ps(xp_lanes, {vacc}); "
                         f"for (int xp_l = 0; xp_l < {w}; ++xp_l) {acc} += xp_lanes[xp_l]; }}")
            state["post"] = A.Opaque(post_text)
        else:
            state["reason"] = "the loop body matches no tensorizable pattern"
            return None
        state["done"] = True
        main = A.For(A.ExprStmt(A.assign(A.Name(iv), view.start)), A.binop("<=", A.Name(iv), main_stop),
                     A.assign(A.Name(iv), A.lit(w), "+="), A.Block(tuple(vec)))
        rest = A.for_range(i, A.Name(iv), view.stop, loop.body, var_type=view.var_type or A.ctype("int"))
        post = [state.pop("post")] if "post" in state else []
        return A.Block((A.decl(iv, "int"), *pre, main, *post, rest))

    new_fn = map_loops(fn, vectorize)
    if not state["done"]:
        raise PassRefused(state["reason"] or "no loop to tensorize")
    new_fn = A.replace(new_fn, qualifiers=(*new_fn.qualifiers, f'__attribute__((target("{cfg["attr"]}")))'))
    items: list[Any] = []
    for item in module.replace_function(fn.name, new_fn).items:
        items.append(item)
    if not any(isinstance(i, A.Include) and i.path == "immintrin.h" for i in items):
        items.insert(0, A.Include("immintrin.h", True))
    ctx.notes.append(f"tensorization: {target} in {fn.name}")
    return leave(unit, A.replace(module, items=tuple(items)), ctx)


def _vnni(loop: A.For, view: A.LoopView, stmt: A.Assign, types: dict[str, A.Type], iv: str,
          state: dict[str, Any]) -> Any:
    i = view.var
    if not (stmt.op == "+=" and isinstance(stmt.target, A.Name) and isinstance(stmt.value, A.Binary)
            and stmt.value.op == "*"):
        state["reason"] = "avx512vnni needs acc += (int)a[i] * (int)b[i] over int8"
        return None
    left, right = _uncast(stmt.value.left), _uncast(stmt.value.right)
    names = []
    for e in (left, right):
        if not (isinstance(e, A.Index) and e.index == A.Name(i) and isinstance(e.base, A.Name)):
            state["reason"] = "operands are not a[i] arrays"
            return None
        t = types.get(e.base.id)
        if t is None or t.base not in _INT8 or len(t.pointers) != 1:
            state["reason"] = "operands are not int8 arrays"
            return None
        names.append(e.base.id)
    a, b = names
    acc = stmt.target.id
    state["done"] = True
    body = A.Opaque(
        f"{{ __m512i xp_a = _mm512_xor_si512(_mm512_loadu_si512((const void*)&{a}[{iv}]), _mm512_set1_epi8((char)0x80));\n"
        f"  __m512i xp_b = _mm512_loadu_si512((const void*)&{b}[{iv}]);\n"
        f"  xp_dot = _mm512_dpbusd_epi32(xp_dot, xp_a, xp_b);\n"
        f"  xp_sumb = _mm512_dpbusd_epi32(xp_sumb, _mm512_set1_epi8(1), xp_b); }}")
    main = A.For(A.ExprStmt(A.assign(A.Name(iv), view.start)), A.binop("<=", A.Name(iv), A.binop("-", view.stop, A.lit(64))),
                 A.assign(A.Name(iv), A.lit(64), "+="), A.Block((body,)))
    pre = A.Opaque("__m512i xp_dot = _mm512_setzero_si512(), xp_sumb = _mm512_setzero_si512();")
    post = A.Opaque(f"{acc} += _mm512_reduce_add_epi32(xp_dot) - 128 * _mm512_reduce_add_epi32(xp_sumb);")
    rest = A.for_range(i, A.Name(iv), view.stop, loop.body, var_type=view.var_type or A.ctype("int"))
    return A.Block((A.decl(iv, "int"), pre, main, post, rest))
