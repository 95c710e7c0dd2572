"""Shared-memory tree reductions → one vectorized sum per block (a CPU speed pass after loop recovery).

The textbook block reduction stages one value per thread in a shared array and folds it in ``log2(blockDim)``
barrier-separated rounds: interleaved (``for (s = 1; s < blockDim.x; s *= 2) if (t % (2 * s) == 0)
a[t] += a[t + s];``, the test on the thread index or on the global index ``blockIdx.x * blockDim.x + t``) or
sequential (``for (s = blockDim.x / 2; s > 0; s >>= 1) if (t < s) a[t] += a[t + s];``). After loop recovery
each round is a loop over the block's threads with a test per thread: ``log2(n)`` passes over the block, most
threads idle, a modulo per thread. For a block of ``n`` threads, ``n`` a power of two, both forms leave the sum
of ``a[0..n)`` in ``a[0]`` (and partial sums elsewhere). So, where nothing after the rounds reads the array
but at ``a[0]``, the rounds become ``a[0] = a[0] + a[1] + ... + a[n-1]`` as one ``omp simd`` reduction —
behind the run-time precondition that the block is one-dimensional with a power-of-two size (else the rounds
run as written). The sum is reassociated: the plan verifies the result and drops the pass when it fails.

Refuses a function whose rounds are spelled otherwise, combine by another operator, or whose array is read
past the rounds at another index.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave, parse_expr, parse_stmts
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each
from xpiler_core.passes.support.recovered_threads import is_name as _is
from xpiler_core.passes.support.recovered_threads import read_copies_as_index as _normalized
from xpiler_core.passes.support.recovered_threads import thread_body as _thread_body
from xpiler_core.passes.support.recovered_threads import thread_index_copies as _index_arrays
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="tree_reduce",
    summary="Shared-memory tree reductions (interleaved or sequential rounds) → one vectorized sum per block",
    kind="ast",
    directions=("cuda->cpu",),
)



def _c(e: A.Node) -> str:
    return print_expr(e, Dialect.C) if isinstance(e, A.Expr) else ""


def _thread_index(e: A.Expr, globals_: set[str]) -> bool:
    """``xp_tx`` or a per-thread variable holding the global index (``idx[xp_t]``, or ``idx`` recomputed)."""
    if _is(e, "xp_tx"):
        return True
    if isinstance(e, A.Name):
        return e.id in globals_  # a copy each thread loop declares again
    return (isinstance(e, A.Index) and isinstance(e.base, A.Name) and e.base.id in globals_
            and _is(e.index, "xp_t"))


def _fold(stmt: A.Stmt, stride: str, tx_arrays: set[str]) -> tuple[str, A.Expr] | None:
    """``if (cond) a[xp_tx] += a[xp_tx + stride];`` (or ``a[xp_tx] = a[xp_tx] + a[xp_tx + stride]``) →
    (array, cond)."""
    stmt = _normalized(stmt, tx_arrays)
    if not (isinstance(stmt, A.If) and stmt.else_ is None):
        return None
    then = stmt.then.stmts if isinstance(stmt.then, A.Block) else (stmt.then,)
    if len(then) != 1 or not (isinstance(then[0], A.ExprStmt) and isinstance(then[0].expr, A.Assign)):
        return None
    asg = then[0].expr
    target = asg.target
    if not (isinstance(target, A.Index) and isinstance(target.base, A.Name) and _is(target.index, "xp_tx")):
        return None
    array = target.base.id
    other: A.Expr | None = None
    if asg.op == "+=":
        other = asg.value
    elif asg.op == "=" and isinstance(asg.value, A.Binary) and asg.value.op == "+" and asg.value.left == target:
        other = asg.value.right
    if not (isinstance(other, A.Index) and _is(other.base, array) and isinstance(other.index, A.Binary)
            and other.index.op == "+" and _is(other.index.left, "xp_tx") and _is(other.index.right, stride)):
        return None
    return array, stmt.cond


def _rounds(loop: A.For, globals_: set[str], tx_arrays: set[str]) -> str | None:
    """The shared array a tree reduction's rounds fold, or None when ``loop`` is no such loop."""
    view = loop.canonical()
    init = loop.init
    if view is None and isinstance(init, A.DeclStmt) and len(init.decls) == 1:
        stride = init.decls[0].name
    elif view is not None:
        stride = view.var
    else:
        return None
    body = loop.body.stmts if isinstance(loop.body, A.Block) else (loop.body,)
    body = tuple(s for s in body if not isinstance(s, A.Empty | A.Comment | A.Pragma))
    if len(body) != 1:
        return None
    inner = _thread_body(body[0], tx_arrays | globals_)
    if inner is None or len(inner) != 1:
        return None
    found = _fold(inner[0], stride, tx_arrays)
    if found is None:
        return None
    array, cond = found
    start = init.decls[0].init if isinstance(init, A.DeclStmt) and len(init.decls) == 1 else None
    text = _c(loop.cond) if loop.cond is not None else ""
    step = _c(loop.step) if loop.step is not None else ""
    interleaved = (A.const_int(start) == 1 if start is not None else False) and text == f"{stride} < xp_bdx" and (
        step in (f"{stride} *= 2", f"{stride} = {stride} * 2", f"{stride} <<= 1"))
    sequential = start is not None and _c(start) in ("xp_bdx / 2", "xp_bdx >> 1") and text == f"{stride} > 0" \
        and step in (f"{stride} /= 2", f"{stride} >>= 1", f"{stride} = {stride} / 2", f"{stride} = {stride} >> 1")
    if interleaved and isinstance(cond, A.Binary) and cond.op == "==" and A.const_int(cond.right) == 0:
        mod = cond.left
        if (isinstance(mod, A.Binary) and mod.op == "%" and _thread_index(mod.left, globals_)
                and _c(mod.right) in (f"{stride} * 2", f"2 * {stride}", f"({stride} * 2)", f"({stride} << 1)",
                                             f"{stride} << 1")):
            return array
    if sequential and isinstance(cond, A.Binary) and cond.op == "<" and _is(cond.left, "xp_tx") \
            and _is(cond.right, stride):
        return array
    return None


BLOCK_LOOPS = ("xp_bz", "xp_by", "xp_bx")


def _later_code(body: A.Stmt, rounds: A.For) -> tuple[list[A.Node], A.Node]:
    """What runs after the rounds and before the block ends: the statements after them in each enclosing block
    up to the block loop, and the whole body of any loop of the kernel's own around them (it comes round
    again); a new block iteration declares its shared arrays anew. Also the block loop (or ``body``)."""
    parent: dict[int, A.Node] = {}
    for n in A.walk(body):
        for c in A.children(n):
            parent[id(c)] = n
    later: list[A.Node] = []
    node: A.Node = rounds
    while id(node) in parent:
        up = parent[id(node)]
        if isinstance(up, A.For) and (view := up.canonical()) is not None and view.var in BLOCK_LOOPS:
            return later, up
        if isinstance(up, A.Block):
            at = next(i for i, c in enumerate(up.stmts) if c is node)
            later.extend(up.stmts[at + 1:])
        elif isinstance(up, A.For | A.While | A.DoWhile):
            later.append(up)
        node = up
    return later, body


def _reads_only_first(body: A.Stmt, array: str, rounds: A.For) -> bool:
    """After the rounds (see :func:`_later_code`) the code reads ``array`` only at ``array[0]`` (writes are
    fine) and never names it otherwise (no alias, no pointer arithmetic); a dynamic shared buffer it points
    into is named once in the block, by its declaration."""
    inside = {id(n) for n in A.walk(rounds)}
    later, block = _later_code(body, rounds)
    nodes = [n for top in later for n in A.walk(top) if id(n) not in inside]
    written = {id(n.target) for n in nodes if isinstance(n, A.Assign) and n.op == "="}
    bases = {id(n.base) for n in nodes if isinstance(n, A.Index)}
    for n in nodes:
        if isinstance(n, A.Index) and _is(n.base, array) and id(n) not in written and A.const_int(n.index) != 0:
            return False
        if isinstance(n, A.Name) and n.id == array and id(n) not in bases:
            return False
    return sum(isinstance(n, A.Name) and n.id == "xp_dsmem" for n in A.walk(block)) <= 1


def _summed(array: str, loop: A.For) -> A.If:
    sum_lines = parse_stmts([
        "{",
        f"auto xp_tree = {array}[0];",  # the array's own element type: an int sum stays exact
        "#pragma omp simd reduction(+ : xp_tree)",
        f"for (int xp_i = 1; xp_i < xp_bdx; ++xp_i) xp_tree += {array}[xp_i];",
        f"{array}[0] = xp_tree;",
        "}",
    ], Dialect.C)
    cond = parse_expr("xp_bdy == 1 && xp_bdz == 1 && xp_bdx > 0 && (xp_bdx & (xp_bdx - 1)) == 0", Dialect.C)
    return A.If(cond, A.Block(tuple(sum_lines)), loop)


def _rewrite(fn: A.Function, counts: list[int]) -> A.Function:
    tx_arrays, globals_ = _index_arrays(fn.body)
    chosen: dict[int, str] = {}
    for n in A.walk(fn.body):
        if isinstance(n, A.For) and _thread_body(n) is None:
            array = _rounds(n, globals_, tx_arrays)
            if array is not None and _reads_only_first(fn.body, array, n):
                chosen[id(n)] = array
    if not chosen:
        raise PassRefused("no shared-memory tree reduction (interleaved or sequential rounds of a[t] += a[t + s]) "
                          "whose array is read elsewhere only at a[0]")
    counts[0] += len(chosen)
    return A.replace(fn, body=A.rewrite(fn.body, lambda n: _summed(chosen[id(n)], n) if isinstance(
        n, A.For) and id(n) in chosen else None))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    counts = [0]
    result = rewrite_each(module, is_bound_kernel, lambda fn: _rewrite(fn, counts), nothing="no bound kernels")
    ctx.notes.append(f"tree_reduce: {counts[0]} shared-memory tree reduction(s) summed in one vectorized loop "
                     f"per block ({', '.join(result.done)})")
    return leave(unit, result.module, ctx)
