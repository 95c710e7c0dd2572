"""BANG matmul tensorization: one-output-per-thread matrix products become ``__bang_matmul`` on NRAM/WRAM tiles.

Input: the output of ``bang_binding``. The pass evaluates one symbolic thread of a bound block function (the
thread loops of loop recovery run for a thread ``(xp_tx, xp_ty)``; per-thread arrays are that thread's
scalars; device helpers are inlined) and keeps it only when its whole effect is one store

    ``P[c0 + b*sc + gy*ldc + gx] = sum_{k in [lo, hi)} X[a0 + b*sa + gy*lda + k] * Y[...]``

guarded by nothing but ``gy < M`` / ``gx < N``, where ``gx = xp_bx*Cx + xp_tx``, ``gy = xp_by*Cy + xp_ty``,
``b = xp_bz`` (optional batch) and ``Y`` is ``Y[b0 + b*sb + k*ldb + gx]`` (row-major) or
``Y[b0 + b*sb + gx*ldb + k]`` (already the WRAM filter layout). The recognition is from this dataflow, so
any spelling (index variables, helpers, pointer offsets, early exits) that computes the same values is found;
shared-memory staging, warp shuffles, other epilogues and other layouts are refused (the scalar form stays).

Emitted before the task loop, behind runtime preconditions (``Cx == blockDim.x``, ``Cy == blockDim.y``,
one thread in z, rows of the output do not overlap): the (batch, row tile, column tile) items are shared
over ``taskId``; per item and per K chunk, the X tile ``[MT][KT]`` and the Y tile are zero-filled and loaded
with strided ``__memcpy`` (so edges are zero padding, which satisfies the intrinsic's ``K*4 % 64 == 0`` and
``N % 64 == 0`` rules), a row-major Y tile is turned into the ``[N][K]`` filter layout with
``__bang_transpose`` and staged NRAM2WRAM, ``__bang_matmul`` multiplies and ``__bang_add`` accumulates; the
valid ``[mv][nv]`` corner is stored with one strided ``__memcpy``. Tile sizes: ``NT = 64`` columns, ``MT``
rows (parameter); ``__bang_reshape_filter`` puts each filter tile in the matrix unit's arrangement before
``NRAM2WRAM`` (the model keeps the logical order); ``KT`` the largest multiple of 16 (≤ 64) whose buffers fit ``onchip_budget`` and the
generation's NRAM/WRAM.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.bang.bang_tensorize import _parse_stmts, _task_loop_index
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, guarded_fast_path, int_param, leave
from xpiler_core.passes.support.bang_thread import ThreadEvaluator, module_int_constants, stmts_of
from xpiler_core.passes.support.matmul_shape import MatmulShape, Operand, recognize
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="bang_matmul",
    summary="One-output-per-thread matrix products → __bang_matmul with WRAM filter tiles (GDRAM→NRAM→WRAM)",
    kind="ast",
    directions=("cuda->bang",),
    params=(
        ParamSpec("nram_bytes", "int", 768 * 1024, "NRAM capacity of the target generation (bytes)"),
        ParamSpec("wram_bytes", "int", 1024 * 1024, "WRAM capacity of the target generation (bytes)"),
        ParamSpec("rows_per_tile", "int", 32, "output rows per tile (MT)"),
        ParamSpec("onchip_budget", "int", 48 * 1024, "bytes of NRAM + WRAM the tiles may use (48 KiB keeps them "
                  "within the static shared memory of the BANG -> CUDA round trip)"),
    ),
)

NT = 64  # __bang_matmul: N a multiple of 64

# ----- code generation ---------------------------------------------------------------------------------
def tile_sizes(rows_per_tile: int, budget: int, nram_bytes: int, wram_bytes: int, products: int) -> tuple[int, int]:
    """(MT, KT): KT the largest multiple of 16 up to 64 whose float buffers fit budget, NRAM and WRAM."""
    mt = max(1, rows_per_tile)
    for kt in (64, 48, 32, 16):
        # a, staging/reshape, filter, out, one accumulator per product
        nram = 4 * (mt * kt + kt * NT + NT * kt + (1 + products) * mt * NT)
        wram = 4 * NT * kt
        if nram + wram <= budget and nram <= nram_bytes and wram <= wram_bytes:
            return mt, kt
    raise PassRefused("the matmul tiles do not fit the on-chip budget")


def emit(shape: MatmulShape, mt: int, kt: int) -> tuple[list[str], list[str], list[str]]:
    """(function-scope buffers, preconditions, tiled body)."""
    accs = [f"xp_mm_acc{i}" for i in range(len(shape.rhs))]
    carve = [f"__nram__ float xp_mm_a[{mt * kt}];", f"__nram__ float xp_mm_bt[{NT * kt}];",
             f"__nram__ float xp_mm_out[{mt * NT}];", f"__wram__ float xp_mm_w[{NT * kt}];",
             f"__nram__ float xp_mm_bs[{kt * NT}];", *(f"__nram__ float {acc}[{mt * NT}];" for acc in accs)]
    pre = ["xp_bdz == 1", *shape.launch.checks] + [f"({c})" for c in shape.preconditions]
    rows = shape.launch.rows
    if shape.rows is not None:
        rows = f"xp_mm_min({shape.rows.c_text()}, {rows})"
    cols = shape.launch.cols
    if shape.cols is not None:
        cols = f"xp_mm_min({shape.cols.c_text()}, {cols})"
    pre.append(f"{shape.out.lead.c_text()} >= {cols}")  # output rows do not overlap
    o, a = shape.out, shape.lhs

    def at(op: Operand, row: str, col: str) -> str:
        return f"{op.base} + ({op.origin.c_text()} + xp_mm_b * {op.batch_stride.c_text()} + (long)({row}) * " \
               f"{op.lead.c_text()} + ({col}))"

    lines = [
        f"const long xp_mm_m = xp_mm_max(0L, {rows});",
        f"const long xp_mm_n = xp_mm_max(0L, {cols});",
        f"const long xp_mm_k0 = {shape.k_lo.c_text()};",
        f"const long xp_mm_k1 = {shape.k_hi.c_text()};",
        f"const long xp_mm_batches = {'(long)xp_gdz' if shape.batched else '1L'};",
        f"const long xp_mm_rt = (xp_mm_m + {mt - 1}) / {mt};",
        f"const long xp_mm_ct = (xp_mm_n + {NT - 1}) / {NT};",
        "for (long xp_w = taskId; xp_w < xp_mm_batches * xp_mm_rt * xp_mm_ct; xp_w += taskDim) {",
        "const long xp_mm_b = xp_w / (xp_mm_rt * xp_mm_ct);",
        f"const long xp_mm_r0 = xp_w % (xp_mm_rt * xp_mm_ct) / xp_mm_ct * {mt};",
        f"const long xp_mm_c0 = xp_w % xp_mm_ct * {NT};",
        f"const int xp_mm_mv = (int)xp_mm_min({mt}L, xp_mm_m - xp_mm_r0);",
        f"const int xp_mm_nv = (int)xp_mm_min({NT}L, xp_mm_n - xp_mm_c0);",
        *(f"__bang_write_zero({acc}, {mt * NT});" for acc in accs),
        f"for (long xp_kk = xp_mm_k0; xp_kk < xp_mm_k1; xp_kk += {kt}) {{",
        f"const int xp_mm_kv = (int)xp_mm_min({kt}L, xp_mm_k1 - xp_kk);",
        f"__bang_write_zero(xp_mm_a, {mt * kt});",
        f"__memcpy(xp_mm_a, {at(a, 'xp_mm_r0', 'xp_kk')}, xp_mm_kv * 4, GDRAM2NRAM, {kt * 4}, "
        f"(int)({a.lead.c_text()} * 4), xp_mm_mv - 1);",
    ]
    for b, acc in zip(shape.rhs, accs, strict=True):
        if shape.rhs_filter_layout:
            lines += [f"__bang_write_zero(xp_mm_bt, {NT * kt});",
                      f"__memcpy(xp_mm_bt, {at(b, 'xp_mm_c0', 'xp_kk')}, xp_mm_kv * 4, GDRAM2NRAM, {kt * 4}, "
                      f"(int)({b.lead.c_text()} * 4), xp_mm_nv - 1);"]
        else:
            lines += [f"__bang_write_zero(xp_mm_bs, {kt * NT});",
                      f"__memcpy(xp_mm_bs, {at(b, 'xp_kk', 'xp_mm_c0')}, xp_mm_nv * 4, GDRAM2NRAM, {NT * 4}, "
                      f"(int)({b.lead.c_text()} * 4), xp_mm_kv - 1);",
                      f"__bang_transpose(xp_mm_bt, xp_mm_bs, {kt}, {NT});"]
        # the matrix unit's own filter arrangement (identity on the model), then the copy into WRAM
        lines += [
            f"__bang_reshape_filter(xp_mm_bs, xp_mm_bt, {NT}, 1, 1, {kt});",
            f"__memcpy(xp_mm_w, xp_mm_bs, {NT * kt * 4}, NRAM2WRAM);",
            f"__bang_matmul(xp_mm_out, xp_mm_a, xp_mm_w, {mt}, {kt}, {NT});",
            f"__bang_add({acc}, {acc}, xp_mm_out, {mt * NT});",
        ]
    lines.append("}")
    result = accs[0]
    if shape.epilogue is not None and any(isinstance(n, A.Name) and n.id == "xp_mm_out" for n in A.walk(shape.epilogue)):
        raise PassRefused("the stored expression reads the element it stores (beta * C): not staged on the MLU")
    if shape.epilogue is not None:
        # the element-wise epilogue of the source, on each valid element of the accumulator tiles
        result = "xp_mm_out"
        lines += ["for (int xp_er = 0; xp_er < xp_mm_mv; ++xp_er)",
                  "for (int xp_ec = 0; xp_ec < xp_mm_nv; ++xp_ec) {",
                  f"const int xp_e = xp_er * {NT} + xp_ec;",
                  f"xp_mm_out[xp_e] = (float)({print_expr(shape.epilogue, Dialect.BANG)});",
                  "}"]
    lines += [
        f"if (xp_mm_mv > 0 && xp_mm_nv > 0) __memcpy({at(o, 'xp_mm_r0', 'xp_mm_c0')}, {result}, xp_mm_nv * 4, "
        f"NRAM2GDRAM, (int)({o.lead.c_text()} * 4), {NT * 4}, xp_mm_mv - 1);",
        "}",
    ]
    return carve, pre, lines


def tensorize_matmul(fn: A.Function, helpers: dict[str, A.Function], mt: int, kt_budget: int, nram: int,
                     wram: int, consts: dict[str, int] | None = None) -> A.Function:
    i = _task_loop_index(fn)
    if i is None:
        raise PassRefused(f"{fn.name}: no task loop (run bang_binding first)")
    loop = fn.body.stmts[i]
    assert isinstance(loop, A.For)
    body = stmts_of(loop.body)
    ptr_params = {p.name for p in fn.params if isinstance(p, A.Param) and p.name and len(p.type.pointers) == 1}
    int_params = {p.name for p in fn.params if isinstance(p, A.Param) and p.name and not p.type.pointers}
    for p in fn.params:
        if isinstance(p, A.Param) and p.name in ptr_params and p.type.base.replace("const", "").strip() != "float":
            ptr_params.discard(p.name)  # only float operands are multiplied by __bang_matmul here
    ev = ThreadEvaluator(int_params, ptr_params, helpers, consts=dict(consts or {}))
    # the block index decls of bang_binding (xp_bx/xp_by/xp_bz) stay symbolic
    ev.run([s for s in body if not (isinstance(s, A.DeclStmt) and any(d.name in ("xp_bx", "xp_by", "xp_bz")
                                                                       for d in s.decls))])
    shape = recognize(ev)
    mt, kt = tile_sizes(mt, kt_budget, nram, wram, len(shape.rhs))
    carve, pre, lines = emit(shape, mt, kt)
    guard = guarded_fast_path(pre, lines, Dialect.BANG)
    stmts = list(fn.body.stmts[:i]) + _parse_stmts(carve) + [guard] + list(fn.body.stmts[i:])
    return A.replace(fn, body=A.replace(fn.body, stmts=tuple(stmts)))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    nram = int_param(params, "nram_bytes", 768 * 1024, 64 * 1024, 1 << 24)
    wram = int_param(params, "wram_bytes", 1024 * 1024, 64 * 1024, 1 << 24)
    mt = int_param(params, "rows_per_tile", 32, 1, 256)
    budget = int_param(params, "onchip_budget", 48 * 1024, 8 * 1024, 1 << 24)
    helpers = {f.name: f for f in module.functions() if not f.is_kernel and "_blocks" not in f.name}
    result = rewrite_each(module, is_bound_kernel, lambda fn: tensorize_matmul(fn, helpers, mt, budget, nram, wram,
                                                                         module_int_constants(module, ctx.defines)),
                          nothing="no bound kernels", tolerate=(AssertionError, KeyError, ValueError, RecursionError))
    ctx.notes.extend(f"{name}: matrix product on __bang_matmul (WRAM filter tiles)" for name in result.done)
    items = list(result.module.items)
    helpers_text = A.Opaque(
        "__mlu_func__ long xp_mm_min(long a, long b) { return a < b ? a : b; }\n"
        "__mlu_func__ long xp_mm_max(long a, long b) { return a > b ? a : b; }")
    first_fn = next(k for k, it in enumerate(items) if isinstance(it, A.Function))
    items.insert(first_fn, helpers_text)
    return leave(unit, dataclasses.replace(module, items=tuple(items)), ctx, Dialect.BANG)
