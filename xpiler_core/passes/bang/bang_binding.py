"""BANG binding: the recovered block loops of a kernel are shared out over the MLU tasks (``taskId``).

Input: the output of ``loop_recovery`` — per CUDA kernel ``K`` a block function ``K_blocks(xp_grid,
xp_block, xp_smem, params...)`` whose body holds the nest ``for xp_bz / xp_by / xp_bx`` over the grid.
Output (BANG C):

* ``K_blocks`` becomes a ``__mlu_func__``; its block nest becomes one loop over the linear block index
  ``xp_b = taskId; xp_b < gdx*gdy*gdz; xp_b += taskDim`` (round-robin: any launch of ``taskDim`` tasks,
  cluster × core under Union1, computes every block exactly once because blocks are independent in CUDA);
* the bare-kernel wrapper named ``entry`` becomes the ``extern "C" __mlu_global__`` kernel;
* every other call of ``K_blocks`` (host code) becomes a launch ``K_mlu<<<xp_task_dim(), type, 0>>>`` of a
  generated ``__mlu_global__ K_mlu`` that calls ``K_blocks``.

Refuses when no recovered block nest is found (run ``loop_recovery`` first), or when the source uses
grid-wide synchronisation (``cooperative_groups`` grid sync), which a round-robin binding would break.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave

INFO = PassInfo(
    name="bang_binding",
    summary="Recovered block loops → taskId/taskDim round-robin; kernels → __mlu_global__, launches → <<<dim, type>>>",
    kind="ast",
    directions=("cuda->bang",),
    params=(
        ParamSpec("entry", "str", "", "bare-kernel wrapper to expose as the extern \"C\" __mlu_global__ kernel"),
        ParamSpec("task_type", "str", "cnrtFuncTypeUnion1", "task type of generated host launches",
                  ("cnrtFuncTypeBlock", "cnrtFuncTypeUnion1", "cnrtFuncTypeUnion2", "cnrtFuncTypeUnion4")),
    ),
)

BLOCK_VARS = ("xp_bz", "xp_by", "xp_bx")
GRID_PARAM = "xp_grid"

_TASK_LOOP = """
void xp_template() {
  for (int xp_b = taskId; xp_b < xp_gdx * xp_gdy * xp_gdz; xp_b += taskDim) {
    const int xp_bx = xp_b % xp_gdx, xp_by = (xp_b / xp_gdx) % xp_gdy, xp_bz = xp_b / (xp_gdx * xp_gdy);
    (void)xp_by; (void)xp_bz;
  }
}
"""


def _template_loop() -> A.For:
    module = lower_text(_TASK_LOOP, "<bang_binding>", Dialect.BANG)
    fn = module.function("xp_template")
    assert fn is not None
    loop = fn.body.stmts[0]
    assert isinstance(loop, A.For)
    return loop


def _loop_var(stmt: A.Stmt) -> str | None:
    if isinstance(stmt, A.For):
        view = stmt.canonical()
        return view.var if view is not None else None
    return None


def _inner_body(loop: A.For) -> A.Stmt | None:
    """The body under the three block loops ``xp_bz > xp_by > xp_bx`` (None when the nest differs)."""
    node: A.Stmt = loop
    for var in BLOCK_VARS:
        if isinstance(node, A.Block) and len(node.stmts) == 1:
            node = node.stmts[0]
        if not isinstance(node, A.For) or _loop_var(node) != var:
            return None
        node = node.body
    return node


def _bind_block_function(fn: A.Function) -> A.Function | None:
    stmts = list(fn.body.stmts)
    for i, stmt in enumerate(stmts):
        if not isinstance(stmt, A.For):
            continue
        inner = _inner_body(stmt)
        if inner is None:
            continue
        template = _template_loop()
        assert isinstance(template.body, A.Block)
        header = template.body.stmts
        inner_stmts = inner.stmts if isinstance(inner, A.Block) else (inner,)
        stmts[i] = A.replace(template, body=A.Block(tuple(header) + tuple(inner_stmts)))
        quals = tuple(q for q in fn.qualifiers if q not in ("static", "inline")) + ("__mlu_func__",)
        return A.replace(fn, body=A.replace(fn.body, stmts=tuple(stmts)), qualifiers=quals)
    return None


def _is_block_function(fn: A.Function) -> bool:
    return any(isinstance(p, A.Param) and p.name == GRID_PARAM for p in fn.params)


def _mlu_kernel(block_fn: A.Function) -> A.Function:
    """``__mlu_global__ void K_mlu(<block_fn params>) { K_blocks(<params>); }``."""
    args = tuple(A.name(p.name) for p in block_fn.params if isinstance(p, A.Param) and p.name)
    callee = block_fn.name
    if block_fn.template:
        # "<typename T, int BLOCK = 4>" → "<T, BLOCK>"
        parts = [p.split("=")[0].strip() for p in block_fn.template.strip().strip("<>").split(",")]
        callee += "<" + ", ".join(re.findall(r"[A-Za-z_]\w*", p)[-1] for p in parts if p) + ">"
    body = A.block(A.expr_stmt(A.call(callee, *args)))
    return A.Function(_kernel_name(block_fn.name), A.ctype("void"), block_fn.params, body,
                      qualifiers=("__mlu_global__",), template=block_fn.template)


def _kernel_name(block_name: str) -> str:
    base = block_name[: -len("_blocks")] if block_name.endswith("_blocks") else block_name
    return f"{base}_mlu"


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    entry = str(params.get("entry") or "")
    task_type = str(params.get("task_type") or "cnrtFuncTypeUnion1")
    for node in A.walk(module):
        if isinstance(node, A.Name) and node.id in ("grid_group", "this_grid", "cudaLaunchCooperativeKernel"):
            raise PassRefused("grid-wide synchronisation has no round-robin task binding on the MLU")
    items = list(module.items)
    block_functions: dict[str, A.Function] = {}
    for i, item in enumerate(items):
        if isinstance(item, A.Function) and _is_block_function(item):
            bound = _bind_block_function(item)
            if bound is None:
                raise PassRefused(f"{item.name}: no recovered block loop nest (xp_bz/xp_by/xp_bx) found")
            items[i] = bound
            block_functions[item.name] = bound
    if not block_functions:
        raise PassRefused("no recovered kernels (run loop_recovery first)")
    launched: set[str] = set()

    def to_launch(node: A.Node) -> A.Node | None:
        if isinstance(node, A.Call) and isinstance(node.func, A.Name):
            # a templated kernel is called as name<args>(...): the launch keeps the template arguments
            base, _, targs = node.func.id.partition("<")
            if base.strip() in block_functions:
                launched.add(base.strip())
                config = (A.call("xp_task_dim"), A.name(task_type), A.lit(0))
                kernel = _kernel_name(base.strip()) + (f"<{targs}" if targs else "")
                return A.Launch(A.name(kernel), config, node.args)
        return None

    out: list[A.TopItem] = []
    for item in items:
        if isinstance(item, A.Function) and item.name == entry and not _is_block_function(item):
            quals = tuple(q for q in item.qualifiers if q not in ("static", "inline")) + ("__mlu_global__",)
            out.append(A.replace(item, qualifiers=quals))
            continue
        if isinstance(item, A.Function) and not _is_block_function(item):
            out.append(A.rewrite(item, to_launch))
            continue
        out.append(item)
    # launched kernels go right after their block function
    final: list[A.TopItem] = []
    for item in out:
        final.append(item)
        if isinstance(item, A.Function) and item.name in launched:
            final.append(_mlu_kernel(item))
    ctx.notes.append(f"bound {len(block_functions)} kernel(s) to taskId/taskDim; {len(launched)} host launch(es)")
    result = dataclasses.replace(module, items=tuple(final), dialect=Dialect.BANG)
    return leave(unit, result, ctx, Dialect.BANG)
