"""Printers of the kernel AST, one per dialect (CUDA, HIP, C, BANG C), driven by ``styles.toml``.

``print_module(module)`` prints in the module's own dialect; ``print_module(module, Dialect.HIP)`` in
another one (only spellings of qualifiers, runtime headers and launches change: translating semantics is
the passes' job). ``printer_for(dialect)`` gives the :class:`Printer` for finer use (``expr``, ``stmt``).
"""

from __future__ import annotations

from functools import cache

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.printer.core import DialectStyle, Printer, style_for

__all__ = ["DialectStyle", "Printer", "print_expr", "print_module", "print_node", "printer_for", "style_for"]


@cache
def printer_for(dialect: Dialect) -> Printer:
    return Printer(style_for(dialect))


def print_module(module: A.Module, dialect: Dialect | None = None) -> str:
    """Source text of a module in ``dialect`` (default: the module's own)."""
    return printer_for(dialect or module.dialect).module(module)


def print_expr(expr: A.Expr, dialect: Dialect = Dialect.CUDA) -> str:
    return printer_for(dialect).expr(expr)


def print_node(node: A.Node, dialect: Dialect = Dialect.CUDA, level: int = 0) -> str:
    """Any node: an expression, a statement (indented ``level`` steps), a function or a module."""
    p = printer_for(dialect)
    if isinstance(node, A.Module):
        return p.module(node)
    if isinstance(node, A.Function):
        return "\n".join(p.function(node))
    if isinstance(node, A.Expr) and not isinstance(node, A.Opaque):
        return p.expr(node)
    if isinstance(node, A.Stmt):
        return "\n".join(p.stmt(node, level))
    if isinstance(node, A.Type):
        return p.type(node)
    if isinstance(node, A.VarDecl):
        return p.decl_group((node,))[0]
    if isinstance(node, A.Param):
        return p.param(node)
    raise TypeError(f"cannot print {type(node).__name__}")
