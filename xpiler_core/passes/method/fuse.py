"""Fuse two adjacent loops with the same iteration space into one.

``loop=i`` names the first loop; the statement right after it must be a canonical loop with equal start,
stop and step (its variable is renamed to the first one's). Legal when no value flows between different
iterations of the two loops: every array written by one and accessed by the other is accessed at the same
index expressions in both and those mention the loop variable, and neither loop writes a scalar the other
reads. Otherwise refused with the reason.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, has_jumps, leave, scalar_writes, target_function

INFO = PassInfo(
    name="fuse",
    summary="Fuse two adjacent loops over the same range when no dependence crosses iterations",
    kind="ast",
    directions=("cuda->cpu", "c->cuda"),
    params=(
        ParamSpec("loop", "str", "", "variable of the first loop (default: first fusable pair)"),
        ParamSpec("function", "str", "", "function holding the loops"),
    ),
)


def check_fusion(first: A.For, second: A.For) -> str | None:
    a, b = first.canonical(), second.canonical()
    if a is None or b is None:
        return "both loops must be canonical counted loops"
    if (a.start, a.stop, a.step) != (b.start, b.stop, b.step):
        return "the loops do not have the same iteration space"
    if has_jumps([first.body, second.body]):
        return "a loop body jumps out"
    if any(isinstance(n, A.Opaque) for n in (*A.walk(first.body), *A.walk(second.body))):
        return "unmodeled code in a loop body"
    body2 = A.substitute(second.body, {b.var: A.Name(a.var)})
    rw1, rw2 = A.read_write(first.body), A.read_write(body2)
    decl1 = {d.name for d in A.walk(first.body) if isinstance(d, A.VarDecl)}
    decl2 = {d.name for d in A.walk(body2) if isinstance(d, A.VarDecl)}
    w1, w2 = scalar_writes(first.body) - decl1, scalar_writes(body2) - decl2
    if w1 & (rw2.reads | w2) or w2 & rw1.reads:
        return f"scalar(s) {', '.join(sorted((w1 & (rw2.reads | w2)) | (w2 & rw1.reads)))} flow between the loops"
    if rw1.calls - {"sqrtf", "expf", "fmaxf", "fminf", "fabsf", "fmaf", "logf", "tanhf"} or rw2.calls - {
            "sqrtf", "expf", "fmaxf", "fminf", "fabsf", "fmaf", "logf", "tanhf"}:
        return "calls with unknown side effects"
    acc1, acc2 = A.array_accesses(first.body), A.array_accesses(body2)
    for base in (rw1.mem_writes & (rw2.mem_reads | rw2.mem_writes)) | (rw2.mem_writes & rw1.mem_reads):
        shapes = {x.indices for x in (*acc1, *acc2) if x.base == base}
        if len(shapes) != 1 or not any(a.var in {n.id for e in next(iter(shapes)) for n in A.walk(e)
                                                 if isinstance(n, A.Name)} for _ in [0]):
            return f"'{base}' is shared between the loops at different elements"
        if any(base == x for x in rw1.mem_writes | rw2.mem_writes) and any(
                isinstance(n, A.Unary) and n.op == "*" for n in (*A.walk(first.body), *A.walk(body2))):
            return "pointer dereferences"
    return None


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    wanted = str(params.get("loop") or "")
    state: dict[str, Any] = {"done": False, "reason": None}

    class _Fuse(A.Transformer):
        def visit_Block(self, block: A.Block) -> A.Block:  # noqa: N802
            block = self.generic_visit(block)
            stmts = list(block.stmts)
            for i in range(len(stmts) - 1):
                s, t = stmts[i], stmts[i + 1]
                if state["done"] or not isinstance(s, A.For) or not isinstance(t, A.For):
                    continue
                view = s.canonical()
                if view is None or (wanted and view.var != wanted):
                    continue
                reason = check_fusion(s, t)
                if reason:
                    state["reason"] = reason
                    continue
                other = t.canonical()
                assert other is not None
                body2 = A.substitute(t.body, {other.var: A.Name(view.var)})
                fused = A.replace(s, body=A.Block((*A.stmts_of(s.body), *A.stmts_of(body2))))
                stmts[i:i + 2] = [fused]
                state["done"] = True
                return A.replace(block, stmts=tuple(stmts))
            return block

    new_fn = _Fuse().visit(fn)
    if not state["done"]:
        raise PassRefused(state["reason"] or f"no adjacent loop pair to fuse in '{fn.name}'")
    ctx.notes.append(f"fuse: fused loops at '{wanted or 'first pair'}' in {fn.name}")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
