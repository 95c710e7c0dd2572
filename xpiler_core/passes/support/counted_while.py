"""Counted ``while`` loops as ``for`` loops: ``T i = s; while (C) { B; i += k; }`` is ``for (T i = s; C; i += k) B``.

Kernels write their grid- and block-stride loops both ways (``while (i < n) { …; i += blockDim.x * gridDim.x; }``);
the passes that read such loops (grid flattening, thread interchange, counted-loop views) read ``for`` loops.
The two forms run the same statements in the same order when

* the declaration stands right before the loop, declares only the counter (a scalar, no array), and nothing after
  the loop in that block names the counter (the ``for`` scope ends with the loop);
* the body's last statement steps the counter (``i += k``, ``i -= k``, ``i++``, ``++i``, ``i--``, ``--i``,
  ``i = i + k``) and nothing else in the body writes it or takes its address;
* no ``continue`` of this loop (one inside a nested loop belongs to that; one inside a ``switch`` is the loop's)
  would skip the step in the ``while`` form and not in the ``for`` form.
"""

from __future__ import annotations

from xpiler_core import ast as A


def _steps(stmt: A.Stmt, var: str) -> bool:
    """Whether ``stmt`` is a step of ``var``: ``var op= e``, ``var = var ± e`` or an increment/decrement."""
    if not isinstance(stmt, A.ExprStmt):
        return False
    e = stmt.expr
    if isinstance(e, A.Unary) and e.op in ("++", "--") and e.operand == A.Name(var):
        return True
    if isinstance(e, A.Assign) and e.target == A.Name(var):
        if e.op in ("+=", "-="):
            return var not in A.free_names(e.value)
        if e.op == "=" and isinstance(e.value, A.Binary) and e.value.op in ("+", "-") \
                and e.value.left == A.Name(var):
            return var not in A.free_names(e.value.right)
    return False


def _writes(node: A.Node, var: str) -> bool:
    for n in A.walk(node):
        if isinstance(n, A.Assign) and n.target == A.Name(var):
            return True
        if isinstance(n, A.Unary) and n.operand == A.Name(var) and n.op not in ("-", "+", "!", "~", "*"):
            return True  # ++, --, and & (an alias could write it)
    return False


def _own_continue(node: A.Stmt) -> bool:
    """Whether ``node`` holds a ``continue`` that belongs to the loop whose body it is."""
    if isinstance(node, A.Continue):
        return True
    if isinstance(node, (A.For, A.While, A.DoWhile)):
        return False
    return any(_own_continue(c) for c in A.children(node) if isinstance(c, A.Stmt))


def _as_for(decl: A.Stmt, loop: A.Stmt, rest: tuple[A.Stmt, ...]) -> A.For | None:
    if not (isinstance(decl, A.DeclStmt) and len(decl.decls) == 1 and isinstance(loop, A.While)):
        return None
    d = decl.decls[0]
    if d.dims or A.single_value_init(d) is None:
        return None
    var = d.name
    body = A.stmts_of(loop.body)
    if not body or not _steps(body[-1], var) or var not in A.free_names(loop.cond):
        return None
    if _writes(A.Block(body[:-1]), var) or _writes(A.ExprStmt(loop.cond), var) or _own_continue(A.Block(body)):
        return None
    if any(var in A.free_names(s) for s in rest):
        return None
    step = body[-1]
    assert isinstance(step, A.ExprStmt)
    return A.For(decl, loop.cond, step.expr, A.Block(body[:-1]), span=loop.span)


def counted_whiles_as_fors(node: A.N) -> A.N:
    """``node`` with every counted ``while`` loop (above) written as the ``for`` loop it is."""

    def block(b: A.Block) -> A.Block | None:
        stmts, i, changed = b.stmts, 0, False
        out: list[A.Stmt] = []
        while i < len(stmts):
            made = _as_for(stmts[i], stmts[i + 1], stmts[i + 2:]) if i + 1 < len(stmts) else None
            if made is not None:
                out.append(made)
                i += 2
                changed = True
            else:
                out.append(stmts[i])
                i += 1
        return A.replace(b, stmts=tuple(out)) if changed else None

    def visit(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Block):
            inner = A.replace(n, stmts=tuple(A.rewrite(s, visit) for s in n.stmts))
            return block(inner) or inner
        return None

    return A.rewrite(node, visit)
