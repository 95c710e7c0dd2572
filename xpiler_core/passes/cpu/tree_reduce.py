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

When the phase before the rounds only stages one bounds-checked value per thread (``a[t] = i < n ? X : 0``,
``i`` a scalar the thread declares as ``P + t``, after declarations of the thread's own scalars, nothing else;
phases between them that do nothing are passed over), the staging and the sum become one loop, ``sum += ...`` per
thread, ``a[0] = sum``, and the check is proven per block at run time (``0 <= P``, ``P + bdx - 1`` within ``i``'s
type and below ``n``, in 128-bit arithmetic): the blocks it holds for sum ``X`` unchecked, ``i`` widened where it
is only a subscript (an unsigned ``i`` could wrap; g++ does not vectorize its loads), the last block keeps the
check (PacktPub's block sums of 4M floats: 2.8 -> 0.32 ms; a checked load staged in the array does not
vectorize). An unchecked staging is left as two loops, which vectorize as they are.

Refuses a function whose rounds are spelled otherwise, combine by another operator, or whose array is read
past the rounds at another index.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave, parse_expr, parse_stmts, side_effect_free
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each
from xpiler_core.passes.support.recovered_threads import is_name as _is
from xpiler_core.passes.support.recovered_threads import read_copies_as_index as _normalized
from xpiler_core.passes.support.recovered_threads import thread_body as _thread_body
from xpiler_core.passes.support.recovered_threads import thread_index_copies as _index_arrays
from xpiler_core.passes.support.recovered_threads import thread_loop as _thread_loop
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


# integer types a staged index may have, with their largest value (the proof of a block's bounds check)
_INDEX_MAX = {
    "int": "2147483647", "signed": "2147483647", "signed int": "2147483647", "int32_t": "2147483647",
    "unsigned": "4294967295", "unsigned int": "4294967295", "uint32_t": "4294967295",
    "long": "9223372036854775807", "long int": "9223372036854775807", "long long": "9223372036854775807",
    "long long int": "9223372036854775807", "int64_t": "9223372036854775807", "ptrdiff_t": "9223372036854775807",
    "unsigned long": "18446744073709551615", "unsigned long long": "18446744073709551615",
    "size_t": "18446744073709551615", "uint64_t": "18446744073709551615",
}
_ARITHMETIC = frozenset(set(_INDEX_MAX) | {"float", "double", "short", "char", "signed char", "unsigned char",
                                           "unsigned short"})
_THREAD_NAMES = frozenset({"xp_tx", "xp_ty", "xp_tz", "xp_t"})


def _tx_statements(loop: A.For) -> list[A.Stmt]:
    body = loop.body.stmts if isinstance(loop.body, A.Block) else (loop.body,)
    return [x for x in body if not isinstance(x, A.Empty | A.Comment)]


def _thread_scalars(stmts: list[A.Stmt]) -> bool:
    """Declarations of scalars with side-effect-free initializers (each thread's own)."""
    return all(isinstance(x, A.DeclStmt) and all(
        not d.dims and d.init_style == "=" and (d.init is None or side_effect_free(d.init)) and d.name != "xp_tree"
        for d in x.decls) for x in stmts)


def _idle(stmt: A.Stmt) -> bool:
    loop = _thread_loop(stmt)
    return loop is not None and _thread_scalars(_tx_statements(loop))


def _staged(stmt: A.Stmt, array: str) -> tuple[A.For, list[A.Stmt], A.Expr] | None:
    """A thread nest that only stages ``array[xp_tx] = E``: (its xp_tx loop, the declarations before, E)."""
    loop = _thread_loop(stmt)
    if loop is None:
        return None
    stmts = _tx_statements(loop)
    if not stmts or not _thread_scalars(stmts[:-1]):
        return None
    last = stmts[-1]
    if not (isinstance(last, A.ExprStmt) and isinstance(last.expr, A.Assign) and last.expr.op == "="):
        return None
    target, value = last.expr.target, last.expr.value
    if not (isinstance(target, A.Index) and _is(target.base, array) and _is(target.index, "xp_tx")):
        return None
    if not side_effect_free(value) or any(_is(n, array) for x in (*stmts[:-1], value) for n in A.walk(x)
                                          if isinstance(n, A.Name)):
        return None
    return loop, list(stmts[:-1]), value


def _zero(e: A.Expr) -> bool:
    return isinstance(e, A.Literal) and e.text.rstrip("fFlLuU") in ("0", "0.", "0.0", ".0")


def _unchecked(decls: list[A.Stmt], value: A.Expr) -> tuple[str, list[A.Stmt], A.Expr] | None:
    """For ``i < n ? X : 0`` with ``i`` declared ``T i = P + xp_tx`` (P and n the same in every thread): the run-time
    test that the check holds in every thread of the block, the declarations with ``i`` widened where ``X`` only
    subscripts with it, and X."""
    if not (isinstance(value, A.Ternary) and _zero(value.else_) and isinstance(value.cond, A.Binary)
            and value.cond.op == "<" and isinstance(value.cond.left, A.Name)):
        return None
    index, bound = value.cond.left.id, value.cond.right
    decl = next((d for x in decls if isinstance(x, A.DeclStmt) for d in x.decls if d.name == index), None)
    if decl is None or decl.type.pointers or decl.init is None or not isinstance(decl.init, A.Binary) \
            or decl.init.op != "+":
        return None
    top = _INDEX_MAX.get(" ".join(w for w in decl.type.base.split() if w != "const"))
    if top is None:
        return None
    left, right = decl.init.left, decl.init.right
    start = right if _is(left, "xp_tx") else left if _is(right, "xp_tx") else None
    declared = {d.name for x in decls if isinstance(x, A.DeclStmt) for d in x.decls}
    free = _THREAD_NAMES | declared
    if start is None or any(isinstance(n, A.Name) and n.id in free for e in (start, bound) for n in A.walk(e)) \
            or not side_effect_free(start) or not side_effect_free(bound):
        return None
    lo, hi = f"(__int128)({_c(start)})", f"(__int128)({_c(start)}) + (xp_bdx - 1)"
    test = f"{lo} >= 0 && {hi} <= (__int128){top}ULL && {hi} < (__int128)({_c(bound)})"
    then = value.then
    names = [n for n in A.walk(then) if isinstance(n, A.Name) and n.id == index]
    subscripts = {id(n.index) for n in A.walk(then) if isinstance(n, A.Index)}
    if names and all(id(n) in subscripts for n in names):
        # the same value as i's (no wrap, proven above) in a type g++ sees as contiguous
        wide = A.replace(decl, type=A.Type("long long"), init=A.binop("+", A.Cast(A.Type("long long"), start),
                                                                       A.Name("xp_tx")))
        decls = [A.replace(x, decls=tuple(wide if d is decl else d for d in x.decls))
                 if isinstance(x, A.DeclStmt) else x for x in decls]
    return test, decls, then


def _summing(staging: A.Stmt, loop: A.For, decls: list[A.Stmt], term: A.Expr) -> A.Stmt:
    """``staging`` with its thread loop adding ``term`` (after ``decls``) to ``xp_tree``: one simd reduction loop
    (the plain ``omp simd`` recovery put before the thread loop is dropped)."""
    tx = A.replace(loop, body=A.Block((*decls, A.ExprStmt(A.Assign("+=", A.Name("xp_tree"), term)))))
    pragma = parse_stmts(["#pragma omp simd reduction(+ : xp_tree)"], Dialect.C)[0]
    out = A.rewrite(staging, lambda n: A.Block((pragma, tx)) if n is loop else None)
    return A.rewrite(out, lambda n: A.Block(tuple(x for x in n.stmts if not (
        isinstance(x, A.Pragma) and "reduction" not in x.text))) if isinstance(n, A.Block) else None)


def _fused(array: str, staging: A.Stmt, loop: A.For, decls: list[A.Stmt], value: A.Expr,
           split: tuple[str, list[A.Stmt], A.Expr]) -> A.Block:
    """Staging and sum as one loop, unchecked in the blocks that provably pass the staged bounds check."""
    head = parse_stmts([f"__typeof__({array}[0]) xp_tree = 0;"], Dialect.C)
    tail = parse_stmts([f"{array}[0] = xp_tree;"], Dialect.C)
    test, wide_decls, unchecked = split
    return A.Block((*head, A.If(parse_expr(test, Dialect.C),
                                A.Block((_summing(staging, loop, wide_decls, unchecked),)),
                                A.Block((_summing(staging, loop, decls, value),))), *tail))


def _element_type(fn: A.Function, array: str) -> str | None:
    types = [n.type for n in A.walk(fn.body) if isinstance(n, A.VarDecl) and n.name == array]
    if len(types) != 1 or len(types[0].pointers) > 1:
        return None
    return " ".join(w for w in types[0].base.split() if w not in ("const", "volatile"))


def _staging_before(fn: A.Function, stmts: list[A.Stmt], j: int, array: str) -> tuple[int, A.Block] | None:
    """Where the rounds ``stmts[j]`` fold a staging with a bounds check (phases doing nothing between them
    passed over): its index and staging and sum as one loop."""
    i = j - 1
    while i >= 0 and (isinstance(stmts[i], A.Empty | A.Comment) or _idle(stmts[i])):
        i -= 1
    if i < 0 or _element_type(fn, array) not in _ARITHMETIC or (found := _staged(stmts[i], array)) is None:
        return None
    loop, decls, value = found
    # an unchecked staging already vectorizes as two loops; g++ 12 leaves a fused simd reduction scalar in a
    # function it does not outline (CoffeeBeforeArch's int sums: 0.69 -> 1.3 ms)
    split = _unchecked(decls, value)
    return None if split is None else (i, _fused(array, stmts[i], loop, decls, value, split))


def _with_staging(fn: A.Function, chosen: dict[int, str], counts: list[int]) -> A.Function:
    """Each chosen rounds loop whose block stages its array just before: staging and sum as one loop, the
    original phases kept for blocks that are not one-dimensional powers of two. Those keep their rounds in the
    summed form too, although its test cannot pass there: without it g++ 12 left PacktPub's fused loop scalar
    (0.31 -> 2.7-3.2 ms, measured twice)."""
    cond = "xp_bdy == 1 && xp_bdz == 1 && xp_bdx > 0 && (xp_bdx & (xp_bdx - 1)) == 0"

    def visit(n: A.Node) -> A.Node | None:
        if not isinstance(n, A.Block) or not any(id(x) in chosen for x in n.stmts):
            return None
        stmts = list(n.stmts)
        j = len(stmts) - 1
        while j >= 0:
            fusion = _staging_before(fn, stmts, j, chosen[id(stmts[j])]) if id(stmts[j]) in chosen else None
            if fusion is None:
                j -= 1
                continue
            i, fused = fusion
            stmts[i:j + 1] = [A.If(parse_expr(cond, Dialect.C), fused, A.Block(tuple(stmts[i:j + 1])))]
            counts[1] += 1
            j = i - 1
        return A.replace(n, stmts=tuple(stmts))

    return A.replace(fn, body=A.rewrite(fn.body, visit))


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
    fn = _with_staging(fn, chosen, counts)
    return A.replace(fn, body=A.rewrite(fn.body, lambda n: _summed(chosen[id(n)], n) if isinstance(
        n, A.For) and id(n) in chosen else None))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    counts = [0, 0]
    result = rewrite_each(module, is_bound_kernel, lambda fn: _rewrite(fn, counts), nothing="no bound kernels")
    ctx.notes.append(f"tree_reduce: {counts[0]} shared-memory tree reduction(s) summed in one vectorized loop "
                     f"per block, {counts[1]} of them with their staging ({', '.join(result.done)})")
    return leave(unit, result.module, ctx)
