"""BANG pooling: one-output-per-thread window reductions become ``__bang_avgpool``/``sumpool``/``maxpool``.

Input: the output of ``bang_binding``. One symbolic thread is evaluated (``_bang_thread``) and kept only
when its whole effect is one store

    ``Y[o0 + p*so + gy*ldo + gx] = f(X[i0 + p*si + (sy*gy + r)*ld + sx*gx + c] for (r, c) in [0,kh)×[0,kw))``

with ``f`` the sum of the window (``sumpool``), that sum times ``1/(kh*kw)`` (``avgpool``) or its maximum
(``maxpool``), each window element read exactly once, guarded only by ``gy < OH`` / ``gx < OW``
(``gx = xp_bx*Cx + xp_tx``, ``gy = xp_by*Cy + xp_ty``, planes ``p = xp_bz``). That is pooling without
padding over planes (NCHW-style); padded windows (clamps, ternaries) and other layouts are refused.

The intrinsics pool an HWC tile whose channel count is a multiple of 64 bytes, so 16 planes are pooled at
once as the 16 channels of one tile: per (16 planes, RT output rows, CT = 16 output columns) work item, the
input rows the item's outputs read are gathered with strided ``__memcpy`` (one element per 64-byte channel
group) into a zero-filled ``[TH][TW][16]`` NRAM tile, pooled, and the valid outputs scattered back the same
way. Only the input elements the original threads read are loaded; the zero fill only reaches outputs that
are not stored. RT is the largest of 16, 8, 4, 2, 1 whose tiles fit ``onchip_budget``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from math import gcd
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.bang.bang_tensorize import _parse_stmts, _task_loop_index
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, guarded_fast_path, int_param, leave
from xpiler_core.passes.support.bang_thread import (
    RAW_THREAD_ATOMS,
    Add,
    Load,
    Max,
    Poly,
    Scale,
    ThreadEvaluator,
    free_of,
    linear,
    stmts_of,
)
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="bang_pool",
    summary="One-output-per-thread window sums/averages/maxima → __bang_sumpool/avgpool/maxpool on HWC tiles",
    kind="ast",
    directions=("cuda->bang",),
    params=(
        ParamSpec("nram_bytes", "int", 768 * 1024, "NRAM capacity of the target generation (bytes)"),
        ParamSpec("onchip_budget", "int", 48 * 1024, "bytes of NRAM the pooling tiles may use"),
    ),
)

CHANNELS = 16  # 16 float planes = 64 bytes: the intrinsic's channel rule
CT = 16  # output columns per tile
AXES = ["xp_gx", "xp_gy", "xp_bz"]
INTRINSIC = {"avg": "__bang_avgpool", "sum": "__bang_sumpool", "max": "__bang_maxpool"}


@dataclass
class PoolShape:
    kind: str
    src: str
    dst: str
    src_origin: Poly
    src_plane: Poly
    src_ld: Poly
    dst_origin: Poly
    dst_plane: Poly
    dst_ld: Poly
    kh: int
    kw: int
    sy: int
    sx: int
    rows: Poly | None
    cols: Poly | None
    batched: bool
    block_sizes: dict[str, A.Expr]


def _content(p: Poly) -> int:
    g = 0
    for _, c in p.terms:
        g = gcd(g, abs(c))
    return g


def _window(kind: str, terms: tuple[Any, ...], factor: float | None) -> tuple[str, list[Load]]:
    if not terms or not all(isinstance(t, Load) for t in terms):
        raise PassRefused("the window is not made of plain loads")
    loads = [t for t in terms if isinstance(t, Load)]
    if len({t.base for t in loads}) != 1:
        raise PassRefused("the window reads more than one array")
    if factor is not None:
        if abs(factor * len(loads) - 1.0) > 1e-6:
            raise PassRefused(f"the sum is scaled by {factor}, not 1/{len(loads)} (not an average)")
        kind = "avg"
    return kind, loads


def recognize(ev: ThreadEvaluator) -> PoolShape:
    if len(ev.stores) != 1:
        raise PassRefused(f"the thread stores {len(ev.stores)} values (a pooling stores one)")
    st = ev.stores[0]
    v = st.value
    if isinstance(v, Scale) and isinstance(v.value, Add):
        kind, loads = _window("sum", v.value.terms, v.factor)
    elif isinstance(v, Add):
        kind, loads = _window("sum", v.terms, None)
    elif isinstance(v, Max):
        kind, loads = _window("max", v.terms, None)
    else:
        why = f" ({st.source.reason})" if st.source is not None and st.source.reason else ""
        raise PassRefused(f"the stored value is not a window sum, average or maximum{why}")
    if len(loads) < 2:
        raise PassRefused("a one-element window is a copy, not a pooling")
    if set(ev.block_sizes) != {"x", "y"}:
        raise PassRefused("the output is not indexed by both blockIdx.x/threadIdx.x and blockIdx.y/threadIdx.y")
    thread = set(AXES) | RAW_THREAD_ATOMS | ev.index_atoms()
    oc, orest = linear(st.offset, AXES)
    if oc["xp_gx"] != Poly.const(1) or oc["xp_gy"] == Poly():
        raise PassRefused("the output index is not row * ld + column")
    coeffs = [linear(t.offset, AXES) for t in loads]
    lc = coeffs[0][0]
    if any(c != lc for c, _ in coeffs):
        raise PassRefused("the window's loads move differently with the output position")
    sx_value = lc["xp_gx"].as_dict()
    if set(sx_value) != {()} or sx_value[()] <= 0:
        raise PassRefused("the column stride of the window is not a positive constant")
    sx = sx_value[()]
    deltas = [rest - coeffs[0][1] for _, rest in coeffs]
    nonconst = [Poly.of({m: c for m, c in d.terms if m}) for d in deltas]
    step = next((n for n in nonconst if n != Poly()), None)
    if step is None:
        raise PassRefused("a one-row window (the row stride cannot be told from the loads)")
    g = _content(step)
    ld = Poly.of({m: c // g for m, c in step.terms})
    if ld.terms[0][1] < 0:
        ld = -ld
    cells: list[tuple[int, int]] = []
    for d, n in zip(deltas, nonconst, strict=True):
        lead = ld.terms[0]
        i = n.as_dict().get(lead[0], 0) // lead[1]
        if ld * Poly.const(i) != n:
            raise PassRefused("a window offset is not a multiple of the row stride")
        cells.append((i, d.as_dict().get((), 0)))
    i0, j0 = min(c[0] for c in cells), min(c[1] for c in cells)
    kh, kw = max(c[0] for c in cells) - i0 + 1, max(c[1] for c in cells) - j0 + 1
    if sorted((i - i0, j - j0) for i, j in cells) != [(i, j) for i in range(kh) for j in range(kw)]:
        raise PassRefused("the loads are not a full rectangular window, each element once")
    ratio = lc["xp_gy"].as_dict().get(ld.terms[0][0], 0) // ld.terms[0][1]
    if ratio <= 0 or ld * Poly.const(ratio) != lc["xp_gy"]:
        raise PassRefused("the row stride of the window is not a multiple of the input row length")
    origin = coeffs[0][1] + ld * Poly.const(i0) + Poly.const(j0)
    for p, what in ((orest, "output offset"), (oc["xp_gy"], "output row length"), (oc["xp_bz"], "output plane"),
                    (origin, "input offset"), (ld, "input row length"), (lc["xp_bz"], "input plane")):
        free_of(p, thread, what)
    if st.base == loads[0].base:
        raise PassRefused("the output array is also the input")
    rows: Poly | None = None
    cols: Poly | None = None
    for gd in st.guards:
        free_of(gd.bound, thread, "a guard bound")
        if gd.index == Poly.atom("xp_gy") and rows is None:
            rows = gd.bound
        elif gd.index == Poly.atom("xp_gx") and cols is None:
            cols = gd.bound
        else:
            raise PassRefused("a guard bounds something other than the output row or column once")
    return PoolShape(kind, loads[0].base, st.base, origin, lc["xp_bz"], ld, orest, oc["xp_bz"], oc["xp_gy"], kh, kw,
                     ratio, sx, rows, cols, oc["xp_bz"] != Poly() or lc["xp_bz"] != Poly(), dict(ev.block_sizes))


def tile_rows(shape: PoolShape, budget: int) -> int:
    for rt in (16, 8, 4, 2, 1):
        th, tw = (rt - 1) * shape.sy + shape.kh, (CT - 1) * shape.sx + shape.kw
        if 4 * CHANNELS * (th * tw + rt * CT) <= budget:
            return rt
    raise PassRefused("the pooling window does not fit the on-chip budget")


def emit(shape: PoolShape, rt: int) -> tuple[list[str], list[str], list[str]]:
    th, tw = (rt - 1) * shape.sy + shape.kh, (CT - 1) * shape.sx + shape.kw
    carve = [f"__nram__ float xp_pl_in[{th * tw * CHANNELS}];", f"__nram__ float xp_pl_out[{rt * CT * CHANNELS}];"]
    rows = "(long)xp_gdy * xp_bdy" if shape.rows is None else f"xp_pl_min({shape.rows.c_text()}, (long)xp_gdy * xp_bdy)"
    cols = "(long)xp_gdx * xp_bdx" if shape.cols is None else f"xp_pl_min({shape.cols.c_text()}, (long)xp_gdx * xp_bdx)"
    pre = ["xp_bdz == 1"] + [f"({print_expr(c, Dialect.BANG)}) == xp_bd{axis}"
                             for axis, c in sorted(shape.block_sizes.items())]
    pre.append(f"{shape.dst_ld.c_text()} >= {cols}")
    lines = [
        f"const long xp_pl_oh = xp_pl_max(0L, {rows});",
        f"const long xp_pl_ow = xp_pl_max(0L, {cols});",
        f"const long xp_pl_planes = {'(long)xp_gdz' if shape.batched else '1L'};",
        f"const long xp_pl_gt = (xp_pl_planes + {CHANNELS - 1}) / {CHANNELS};",
        f"const long xp_pl_rt = (xp_pl_oh + {rt - 1}) / {rt};",
        f"const long xp_pl_ct = (xp_pl_ow + {CT - 1}) / {CT};",
        "for (long xp_w = taskId; xp_w < xp_pl_gt * xp_pl_rt * xp_pl_ct; xp_w += taskDim) {",
        f"const long xp_pl_p0 = xp_w / (xp_pl_rt * xp_pl_ct) * {CHANNELS};",
        f"const long xp_pl_r0 = xp_w % (xp_pl_rt * xp_pl_ct) / xp_pl_ct * {rt};",
        f"const long xp_pl_c0 = xp_w % xp_pl_ct * {CT};",
        f"const int xp_pl_pv = (int)xp_pl_min({CHANNELS}L, xp_pl_planes - xp_pl_p0);",
        f"const int xp_pl_rv = (int)xp_pl_min({rt}L, xp_pl_oh - xp_pl_r0);",
        f"const int xp_pl_cv = (int)xp_pl_min({CT}L, xp_pl_ow - xp_pl_c0);",
        f"__bang_write_zero(xp_pl_in, {th * tw * CHANNELS});",
        "for (int xp_p = 0; xp_p < xp_pl_pv; ++xp_p)",
        f"for (int xp_r = 0; xp_r < (xp_pl_rv - 1) * {shape.sy} + {shape.kh}; ++xp_r)",
        f"__memcpy(xp_pl_in + xp_r * {tw * CHANNELS} + xp_p, {shape.src} + ({shape.src_origin.c_text()} + "
        f"(xp_pl_p0 + xp_p) * {shape.src_plane.c_text()} + (xp_pl_r0 * {shape.sy} + xp_r) * {shape.src_ld.c_text()}"
        f" + xp_pl_c0 * {shape.sx}), 4, GDRAM2NRAM, {4 * CHANNELS}, 4, (xp_pl_cv - 1) * {shape.sx} + {shape.kw - 1});",
        f"{INTRINSIC[shape.kind]}(xp_pl_out, xp_pl_in, {CHANNELS}, {th}, {tw}, {shape.kh}, {shape.kw}, {shape.sx}, "
        f"{shape.sy});",
        "for (int xp_p = 0; xp_p < xp_pl_pv; ++xp_p)",
        "for (int xp_r = 0; xp_r < xp_pl_rv; ++xp_r)",
        f"__memcpy({shape.dst} + ({shape.dst_origin.c_text()} + (xp_pl_p0 + xp_p) * {shape.dst_plane.c_text()} + "
        f"(xp_pl_r0 + xp_r) * {shape.dst_ld.c_text()} + xp_pl_c0), xp_pl_out + xp_r * {CT * CHANNELS} + xp_p, 4, "
        f"NRAM2GDRAM, 4, {4 * CHANNELS}, xp_pl_cv - 1);",
        "}",
    ]
    return carve, pre, lines


def tensorize_pool(fn: A.Function, helpers: dict[str, A.Function], budget: int) -> tuple[A.Function, str]:
    i = _task_loop_index(fn)
    if i is None:
        raise PassRefused(f"{fn.name}: no task loop (run bang_binding first)")
    loop = fn.body.stmts[i]
    assert isinstance(loop, A.For)
    params = [(p.name, p.type) for p in fn.params if isinstance(p, A.Param) and p.name]
    ptr = {n for n, t in params if len(t.pointers) == 1 and t.base.replace("const", "").strip() == "float"}
    ints = {n for n, t in params if not t.pointers}
    ev = ThreadEvaluator(ints, ptr, helpers)
    ev.run([s for s in stmts_of(loop.body) if not (isinstance(s, A.DeclStmt) and any(
        d.name in ("xp_bx", "xp_by", "xp_bz") for d in s.decls))])
    shape = recognize(ev)
    carve, pre, lines = emit(shape, tile_rows(shape, budget))
    guard = guarded_fast_path(pre, lines, Dialect.BANG)
    stmts = list(fn.body.stmts[:i]) + _parse_stmts(carve) + [guard] + list(fn.body.stmts[i:])
    return A.replace(fn, body=A.replace(fn.body, stmts=tuple(stmts))), INTRINSIC[shape.kind]


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    nram = int_param(params, "nram_bytes", 768 * 1024, 64 * 1024, 1 << 24)
    budget = min(nram - 128 * 1024, int_param(params, "onchip_budget", 48 * 1024, 8 * 1024, 1 << 24))
    helpers = {f.name: f for f in module.functions() if not f.is_kernel and "_blocks" not in f.name}
    def rewrite(fn: A.Function) -> A.Function:
        new_fn, intrinsic = tensorize_pool(fn, helpers, budget)
        ctx.notes.append(f"{fn.name}: window reduction on {intrinsic} (16 planes as HWC channels)")
        return new_fn

    result = rewrite_each(module, is_bound_kernel, rewrite, nothing="no bound kernels",
                          tolerate=(AssertionError, KeyError, ValueError, ZeroDivisionError, RecursionError))
    items = list(result.module.items)
    first_fn = next(k for k, it in enumerate(items) if isinstance(it, A.Function))
    items.insert(first_fn, A.Opaque(
        "__mlu_func__ long xp_pl_min(long a, long b) { return a < b ? a : b; }\n"
        "__mlu_func__ long xp_pl_max(long a, long b) { return a > b ? a : b; }"))
    return leave(unit, dataclasses.replace(module, items=tuple(items)), ctx, Dialect.BANG)
