"""Loops the loop recovery writes for a block's threads, and the per-thread copies of the thread index in them
(shared by the CPU passes that read recovered blocks: ``tree_reduce``, ``thread_zero``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.support.ast_support import scalar_writes
from xpiler_core.printer import print_expr

THREAD_VARS = ("xp_tz", "xp_ty", "xp_tx")
N = TypeVar("N", bound=A.Node)


def is_name(e: A.Expr, name: str) -> bool:
    return isinstance(e, A.Name) and e.id == name


def thread_loop(s: A.Stmt) -> A.For | None:
    """The ``xp_tx`` loop of a recovered ``xp_tz``/``xp_ty``/``xp_tx`` loop nest (the outer two hold nothing else
    but comments and pragmas), or None when ``s`` is no such nest."""
    for var in THREAD_VARS:
        if not isinstance(s, A.For):
            return None
        view = s.canonical()
        if view is None or view.var != var:
            return None
        if var == "xp_tx":
            return s
        body = s.body
        stmts = [x for x in (body.stmts if isinstance(body, A.Block) else (body,))
                 if not isinstance(x, A.Empty | A.Comment | A.Pragma)]
        if len(stmts) != 1:
            return None
        s = stmts[0]
    return None


def thread_body(s: A.Stmt, copies: set[str] | frozenset[str] = frozenset()) -> list[A.Stmt] | None:
    """The statements inside a recovered ``xp_tz``/``xp_ty``/``xp_tx`` loop nest (its ``xp_t`` declaration
    left out, and the declarations of the thread-index ``copies`` its body reads through
    :func:`read_copies_as_index`), or None when ``s`` is no such nest."""
    loop = thread_loop(s)
    if loop is None:
        return None
    body = loop.body
    stmts = [x for x in (body.stmts if isinstance(body, A.Block) else (body,))
             if not isinstance(x, A.Empty | A.Comment | A.Pragma)]
    return [x for x in stmts if not (isinstance(x, A.DeclStmt) and (
        [d.name for d in x.decls] == ["xp_t"] or all(d.name in copies for d in x.decls)))]


def read_copies_as_index(node: N, copies: set[str]) -> N:
    """``node`` with per-thread copies of the thread index (``t[xp_t]`` after ``int t = threadIdx.x;``, or ``t``
    where each thread loop declares it again) read as ``xp_tx``."""
    def visit(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Index) and isinstance(n.base, A.Name) and n.base.id in copies and is_name(
                n.index, "xp_t"):
            return A.Name("xp_tx")
        if isinstance(n, A.Name) and n.id in copies:
            return A.Name("xp_tx")
        return None

    return A.rewrite(node, visit)


def thread_index_copies(body: A.Stmt) -> tuple[set[str], set[str]]:
    """Per-thread variables set to the thread index ``xp_tx``, and those set to the block's global index
    ``xp_bx * xp_bdx + xp_tx`` (either order, through the former too), each written once in the function."""
    assigned: list[tuple[str, A.Expr]] = []
    counts: dict[str, int] = {}
    for n in A.walk(body):
        if isinstance(n, A.For):
            for st in thread_body(n) or []:
                if isinstance(st, A.ExprStmt) and isinstance(st.expr, A.Assign) and st.expr.op == "=":
                    t = st.expr.target
                    if isinstance(t, A.Index) and isinstance(t.base, A.Name) and is_name(t.index, "xp_t"):
                        assigned.append((t.base.id, st.expr.value))
        # every write of a per-thread variable, whatever its form (a copy must be written once)
        target = n.target if isinstance(n, A.Assign) else (
            n.operand if isinstance(n, A.Unary) and n.op in ("++", "--") else None)
        if isinstance(target, A.Index) and isinstance(target.base, A.Name):
            counts[target.base.id] = counts.get(target.base.id, 0) + 1
    tx = {name for name, value in assigned if counts[name] == 1 and is_name(value, "xp_tx")}
    # scalars each thread loop declares again with the same value (loop recovery recomputes a pure value read
    # across a barrier), never written
    inits: dict[str, list[A.Expr | None]] = {}
    for n in A.walk(body):
        if isinstance(n, A.VarDecl):
            inits.setdefault(n.name, []).append(None if n.dims or n.type.pointers or n.init_style != "=" else n.init)
    written = scalar_writes(body)

    def scalar_copies(test: Callable[[A.Expr], bool]) -> set[str]:
        return {name for name, values in inits.items() if name not in written and name not in counts
                and all(v is not None and test(v) for v in values)}

    tx |= scalar_copies(lambda v: is_name(v, "xp_tx"))
    forms = ("xp_bx * xp_bdx + xp_tx", "xp_tx + xp_bx * xp_bdx", "xp_bdx * xp_bx + xp_tx", "xp_tx + xp_bdx * xp_bx")

    def global_form(value: A.Expr) -> bool:
        return print_expr(read_copies_as_index(value, tx), Dialect.C) in forms

    globals_ = {name for name, value in assigned if counts[name] == 1 and global_form(value)}
    return tx, globals_ | scalar_copies(global_form)
