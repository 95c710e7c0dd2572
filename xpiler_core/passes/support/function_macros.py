"""Function-like macros of a lowered module (``#define A(i, j) A[(i) + (j) * lda]``, ``#define OFFSET(r, c, ld)
((r) * (ld) + (c))``): the AST keeps their call sites as calls, so a pass that must see what a call computes
expands them in place — the body with the actual arguments (parenthesized) for the formals, parsed as an
expression; a body that is no expression leaves its call as it was."""

from __future__ import annotations

import re
from collections.abc import Callable

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.support.ast_support import parse_expr
from xpiler_core.printer import print_expr

_FUNCTION_MACRO = re.compile(r"\s*#\s*define\s+([A-Za-z_]\w*)\(([^()]*)\)\s+([^\n\\]+)\s*$")

# name -> (formals, body text)
Macros = dict[str, tuple[list[str], str]]


def function_macros(module: A.Module) -> Macros:
    """The module's one-line function-like macros."""
    found: Macros = {}
    for item in module.items:
        m = _FUNCTION_MACRO.match(item.text) if isinstance(item, A.Opaque) else None
        if m is not None:
            found[m.group(1)] = ([p.strip() for p in m.group(2).split(",") if p.strip()], m.group(3).strip())
    return found


def expand_macros(node: A.Function, macros: Macros, wanted: Callable[[str, str], bool] | None = None) -> A.Function:
    """``node`` with its calls of ``macros`` (those ``wanted(name, body)`` selects) expanded in place."""
    chosen = {name: m for name, m in macros.items() if wanted is None or wanted(name, m[1])}
    if not chosen:
        return node

    def expand(n: A.Node) -> A.Node | None:
        if not (isinstance(n, A.Call) and isinstance(n.func, A.Name) and n.func.id in chosen):
            return None
        formals, body = chosen[n.func.id]
        if len(formals) != len(n.args):
            return None
        actuals = {f: "(" + print_expr(A.rewrite(a, expand), Dialect.CUDA) + ")"
                   for f, a in zip(formals, n.args, strict=True)}
        text = re.sub(r"[A-Za-z_]\w*", lambda m: actuals.get(m.group(0), m.group(0)), body)
        try:
            return parse_expr(text, Dialect.CUDA)
        except Exception:  # noqa: BLE001 - a body that is no expression stays a macro call
            return None

    out = A.rewrite(node, expand)
    assert isinstance(out, A.Function)
    return out
