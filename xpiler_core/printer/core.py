"""The one C-family printer; a :class:`DialectStyle` (from ``styles.toml``) makes it a CUDA, HIP, C or BANG printer.

Dialects differ only in how they spell qualifiers, which runtime headers they include and how a kernel
launch is written, so those are data (``styles.toml``), not code. Parentheses come from operator
precedence (the AST has no parenthesis nodes); extra ones are added where C compilers warn or where
tree-sitter would re-parse differently (``a < b > c``). :class:`~xpiler_core.ast.Opaque` text is printed
verbatim; in an operand position it is parenthesized.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect

# Precedence levels, loosest first.
COMMA, ASSIGN, TERNARY, LOR, LAND, BOR, BXOR, BAND, EQ, REL, SHIFT, ADD, MUL, UNARY, POSTFIX, PRIMARY = range(1, 17)
BINARY_PRECEDENCE: dict[str, int] = {
    ",": COMMA, "||": LOR, "&&": LAND, "|": BOR, "^": BXOR, "&": BAND, "==": EQ, "!=": EQ,
    "<": REL, ">": REL, "<=": REL, ">=": REL, "<<": SHIFT, ">>": SHIFT,
    "+": ADD, "-": ADD, "*": MUL, "/": MUL, "%": MUL,
}
# Operand kinds that get parentheses inside these operators even when precedence does not require them:
# comparisons/shifts nested in comparisons (tree-sitter could read `a < b > c` as a template) and the
# mixes gcc's -Wparentheses warns about.
_CLARIFY = {
    "<": {"<", ">", "<=", ">=", "<<", ">>"}, ">": {"<", ">", "<=", ">=", "<<", ">>"},
    "<=": {"<", ">", "<=", ">=", "<<", ">>"}, ">=": {"<", ">", "<=", ">=", "<<", ">>"},
    "||": {"&&"}, "|": {"&", "^", "+", "-", "==", "!=", "<<", ">>"}, "^": {"&", "+", "-", "==", "!=", "<<", ">>"},
    "&": {"+", "-", "==", "!=", "<<", ">>"}, "<<": {"+", "-"}, ">>": {"+", "-"},
    "==": {"==", "!="}, "!=": {"==", "!="},
}
INDENT = "    "


@dataclass(frozen=True)
class DialectStyle:
    """How one dialect spells things (see ``styles.toml``)."""

    dialect: Dialect
    qualifiers: dict[str, str]
    headers: dict[str, str]
    launch: Literal["chevron", "xpiler"]
    launch_bounds: bool

    def spell(self, words: tuple[str, ...] | list[str]) -> list[str]:
        """Map qualifier spellings to this dialect, dropping empty ones and duplicates, keeping order."""
        out: list[str] = []
        for word in words:
            for part in self.qualifiers.get(word, word).split():
                if part not in out:
                    out.append(part)
        return out


@cache
def style_for(dialect: Dialect) -> DialectStyle:
    raw: dict[str, Any] = tomllib.loads(
        resources.files("xpiler_core.printer").joinpath("styles.toml").read_text(encoding="utf-8")
    )[dialect.value]
    return DialectStyle(
        dialect, dict(raw.get("qualifiers", {})), dict(raw.get("headers", {})), raw["launch"], raw["launch_bounds"]
    )


class Printer:
    """Prints AST nodes as source text in one dialect."""

    def __init__(self, style: DialectStyle) -> None:
        self.style = style

    # ----------------------------------------------------------------------------- module
    def module(self, module: A.Module) -> str:
        lines: list[str] = []
        prev: A.Node | None = None
        for item in module.items:
            is_function = isinstance(item, A.Function)
            if lines and (is_function or isinstance(prev, A.Function)) and lines[-1] != "":
                lines.append("")
            lines.extend(self.item(item))
            prev = item
        return "\n".join(lines) + "\n"

    def item(self, item: A.Node) -> list[str]:
        if isinstance(item, A.Function):
            return self.function(item)
        if isinstance(item, A.Stmt):
            return self.stmt(item, 0)
        raise TypeError(f"not a top-level item: {type(item).__name__}")

    def function(self, fn: A.Function) -> list[str]:
        lines: list[str] = []
        if fn.template is not None:
            lines.append(f"template {fn.template}")
        head: list[str] = []
        if fn.linkage is not None:
            head.append(f'extern "{fn.linkage}"')
        head.extend(self.style.spell(fn.qualifiers))
        head.append(self.type_prefix(fn.ret))
        if fn.launch_bounds and self.style.launch_bounds:
            head.append("__launch_bounds__(" + ", ".join(self.expr(e, ASSIGN) for e in fn.launch_bounds) + ")")
        params = ", ".join(self.param(p) for p in fn.params)
        head.append(self.declarator(fn.ret, fn.name, ()) + f"({params})")
        lines.append(" ".join(h for h in head if h) + " {")
        lines.extend(self.block_inner(fn.body, 1))
        lines.append("}")
        return lines

    def param(self, p: A.Param | A.Opaque) -> str:
        if isinstance(p, A.Opaque):
            return p.text
        declarator = self.declarator(p.type, p.name, p.dims)
        prefix = self.type_prefix(p.type)
        return f"{prefix} {declarator}".rstrip() if declarator else prefix

    # ------------------------------------------------------------------------------ types
    def type_prefix(self, t: A.Type) -> str:
        return " ".join([*self.style.spell(t.quals), t.base])

    def declarator(self, t: A.Type, name: str | None, dims: tuple[A.Expr | None, ...]) -> str:
        out = ""
        for quals in t.pointers:
            spelled = self.style.spell(quals)
            out += "*" + (" ".join(spelled) + " " if spelled else "")
        out += t.reference
        if name:
            out += name
        for d in dims:
            out += "[" + (self.expr(d, COMMA) if d is not None else "") + "]"
        return out

    def type(self, t: A.Type) -> str:
        declarator = self.declarator(t, None, ()).rstrip()
        return self.type_prefix(t) + (" " + declarator if declarator else "")

    def decl_group(self, decls: tuple[A.VarDecl, ...]) -> list[str]:
        """Declarations as text without ``;``: one string per run sharing storage, base and qualifiers."""
        groups: list[list[A.VarDecl]] = []
        for d in decls:
            if groups and _same_specifiers(groups[-1][0], d):
                groups[-1].append(d)
            else:
                groups.append([d])
        out: list[str] = []
        for group in groups:
            first = group[0]
            prefix = " ".join([*self.style.spell(first.storage), self.type_prefix(first.type)])
            out.append(prefix + " " + ", ".join(self.var(d) for d in group))
        return out

    def var(self, d: A.VarDecl) -> str:
        text = self.declarator(d.type, d.name, d.dims)
        if d.init is None:
            return text
        if d.init_style == "()" and isinstance(d.init, A.InitList):
            return text + "(" + ", ".join(self.expr(e, ASSIGN) for e in d.init.items) + ")"
        if d.init_style == "{}" and isinstance(d.init, A.InitList):
            return text + self.expr(d.init, ASSIGN)
        return text + " = " + self.expr(d.init, ASSIGN)

    # ------------------------------------------------------------------------- statements
    def block_inner(self, block: A.Block, level: int) -> list[str]:
        lines: list[str] = []
        for s in block.stmts:
            lines.extend(self.stmt(s, level))
        return lines

    def stmt(self, s: A.Stmt, level: int) -> list[str]:
        ind = INDENT * level
        if isinstance(s, A.Block):
            return [ind + "{", *self.block_inner(s, level + 1), ind + "}"]
        if isinstance(s, A.Opaque):
            return _verbatim(s.text, ind)
        if isinstance(s, A.ExprStmt):
            return _verbatim(self.expr(s.expr, COMMA) + ";", ind)
        if isinstance(s, A.DeclStmt):
            return [ind + text + ";" for text in self.decl_group(s.decls)]
        if isinstance(s, A.Empty):
            return [ind + ";"]
        if isinstance(s, A.If):
            return self.if_stmt(s, level)
        if isinstance(s, A.For):
            init = ""
            if isinstance(s.init, A.DeclStmt):
                init = ", ".join(self.decl_group(s.init.decls))
            elif isinstance(s.init, A.ExprStmt):
                init = self.expr(s.init.expr, COMMA)
            elif s.init is not None:
                raise TypeError(f"for-init cannot be {type(s.init).__name__}")
            cond = self.condition(s.cond) if s.cond is not None else ""
            step = self.expr(s.step, COMMA) if s.step is not None else ""
            head = f"for ({init}; {cond}; {step})".replace("; ;", ";;").replace("; )", ";)")
            return self.with_body(head, s.body, level)
        if isinstance(s, A.While):
            return self.with_body(f"while ({self.condition(s.cond)})", s.body, level)
        if isinstance(s, A.DoWhile):
            tail = f"while ({self.condition(s.cond)});"
            lines = self.with_body("do", s.body, level)
            if lines[-1] == ind + "}":
                lines[-1] += " " + tail
            else:
                lines.append(ind + tail)
            return lines
        if isinstance(s, A.Return):
            return _verbatim("return;" if s.value is None else f"return {self.expr(s.value, COMMA)};", ind)
        if isinstance(s, A.Break):
            return [ind + "break;"]
        if isinstance(s, A.Continue):
            return [ind + "continue;"]
        if isinstance(s, A.Pragma):
            return [ind + ("#pragma " + s.text).rstrip()]
        if isinstance(s, A.Comment):
            return _verbatim(s.text, ind)
        if isinstance(s, A.Include):
            path = self.style.headers.get(s.path, s.path)
            if not path:
                return []
            return [f"#include <{path}>" if s.system else f'#include "{path}"']
        raise TypeError(f"cannot print statement {type(s).__name__}")

    def with_body(self, head: str, body: A.Stmt, level: int, force_braces: bool = False) -> list[str]:
        ind = INDENT * level
        if isinstance(body, A.Block):
            return [ind + head + " {", *self.block_inner(body, level + 1), ind + "}"]
        if force_braces or _needs_braces(body):
            return [ind + head + " {", *self.stmt(body, level + 1), ind + "}"]
        return [ind + head, *self.stmt(body, level + 1)]

    def condition(self, cond: A.Expr) -> str:
        """A condition; an assignment gets the extra parentheses that tell compilers it is meant."""
        text = self.expr(cond, COMMA)
        return f"({text})" if isinstance(cond, A.Assign) else text

    def if_stmt(self, s: A.If, level: int) -> list[str]:
        ind = INDENT * level
        head = f"if ({self.condition(s.cond)})"
        if s.else_ is None:
            return self.with_body(head, s.then, level)
        # Braces around a then-branch that could capture the else (dangling else).
        lines = self.with_body(head, s.then, level, force_braces=_may_capture_else(s.then))
        if isinstance(s.else_, A.If):
            else_lines = self.if_stmt(s.else_, level)
            else_lines[0] = "else " + else_lines[0].lstrip()
        else:
            else_lines = self.with_body("else", s.else_, level)
            else_lines[0] = else_lines[0].lstrip()
        if lines[-1] == ind + "}":
            lines[-1] = ind + "} " + else_lines[0]
        else:
            lines.append(ind + else_lines[0])
        lines.extend(else_lines[1:])
        return lines

    # ------------------------------------------------------------------------ expressions
    def expr(self, e: A.Expr, min_prec: int = COMMA) -> str:
        """``e`` as text, parenthesized if it binds looser than ``min_prec``."""
        text, prec = self.expr_prec(e)
        if prec >= min_prec:
            return text
        if isinstance(e, A.Binary) and e.op == ",":
            # tree-sitter cannot parse `(b = c, a)`; `((b = c), a)` means the same and parses.
            return "(" + ", ".join(self.expr(x, TERNARY) if isinstance(x, A.Assign) else self.expr(x, ASSIGN)
                                   for x in _comma_items(e)) + ")"
        return f"({text})"

    def expr_prec(self, e: A.Expr) -> tuple[str, int]:
        if isinstance(e, A.Name):
            return e.id, PRIMARY
        if isinstance(e, A.Literal):
            return e.text, PRIMARY
        if isinstance(e, A.Opaque):
            text = e.text
            if "//" in text.rsplit("\n", 1)[-1]:
                text += "\n"  # a trailing line comment must not swallow what follows
            return text, ASSIGN
        if isinstance(e, A.Binary):
            prec = BINARY_PRECEDENCE[e.op]
            left = self.operand(e.left, prec, e.op)
            right = self.operand(e.right, prec + 1, e.op)
            return (f"{left}, {right}" if e.op == "," else f"{left} {e.op} {right}"), prec
        if isinstance(e, A.Unary):
            if e.postfix:
                return self.expr(e.operand, POSTFIX) + e.op, POSTFIX
            # `-(a++)`: C needs no parentheses, but tree-sitter would read `-a++` as `(-a)++`.
            postfix_operand = isinstance(e.operand, A.Unary) and e.operand.postfix and e.op in "-+!~"
            operand = self.expr(e.operand, POSTFIX + 1 if postfix_operand else UNARY)
            sep = " " if operand[:1] in ("+", "-", "&") and operand[:1] == e.op[-1] else ""
            return f"{e.op}{sep}{operand}", UNARY
        if isinstance(e, A.Assign):
            # Only a dereference binds loosely and is still an assignable target without parentheses;
            # tree-sitter reads `-b = a` as `-(b = a)`, so other prefix forms get parentheses.
            plain = isinstance(e.target, A.Unary) and e.target.op == "*" and not e.target.postfix
            target = self.expr(e.target, UNARY if plain else POSTFIX + 1 if _is_prefixish(e.target) else UNARY)
            return f"{target} {e.op} {self.expr(e.value, ASSIGN)}", ASSIGN
        if isinstance(e, A.Ternary):
            cond = self.expr(e.cond, LOR)
            return f"{cond} ? {self.expr(e.then, TERNARY)} : {self.expr(e.else_, TERNARY)}", TERNARY
        if isinstance(e, A.Call):
            args = ", ".join(self.expr(a, ASSIGN) for a in e.args)
            return f"{self.expr(e.func, POSTFIX)}({args})", POSTFIX
        if isinstance(e, A.Launch):
            config = ", ".join(self.expr(c, ASSIGN) for c in e.config)
            args = ", ".join(self.expr(a, ASSIGN) for a in e.args)
            if self.style.launch == "xpiler":
                return f"::xpiler::launch({self.expr(e.kernel, ASSIGN)}, {config})({args})", POSTFIX
            return f"{self.expr(e.kernel, POSTFIX)}<<<{config}>>>({args})", POSTFIX
        if isinstance(e, A.Index):
            # `a[b, c]` is a C++23 multi-index; a comma expression as an index needs parentheses.
            return f"{self.expr(e.base, POSTFIX)}[{self.expr(e.index, ASSIGN)}]", POSTFIX
        if isinstance(e, A.Member):
            return f"{self.expr(e.base, POSTFIX)}{'->' if e.arrow else '.'}{e.field}", POSTFIX
        if isinstance(e, A.Cast):
            return f"({self.type(e.type)}){self.expr(e.operand, UNARY)}", UNARY
        if isinstance(e, A.SizeOf):
            if isinstance(e.arg, A.Type):
                return f"sizeof({self.type(e.arg)})", UNARY
            # Always parenthesized: a name may be a type the parser took for a variable (`sizeof(__half)`), and
            # `sizeof (int)x` would read as sizeof(int) followed by x.
            return f"sizeof({self.expr(e.arg, COMMA)})", UNARY
        if isinstance(e, A.InitList):
            return "{" + ", ".join(self.expr(i, ASSIGN) for i in e.items) + "}", PRIMARY
        raise TypeError(f"cannot print expression {type(e).__name__}")

    def operand(self, e: A.Expr, min_prec: int, parent_op: str) -> str:
        if isinstance(e, A.Binary) and e.op in _CLARIFY.get(parent_op, ()):
            return f"({self.expr(e, COMMA)})"
        return self.expr(e, min_prec)


def _comma_items(e: A.Expr) -> list[A.Expr]:
    """The operands of a left-nested comma chain, in order."""
    items: list[A.Expr] = []
    while isinstance(e, A.Binary) and e.op == ",":
        items.append(e.right)
        e = e.left
    items.append(e)
    return items[::-1]


def _is_prefixish(e: A.Expr) -> bool:
    """Expressions printed with a leading operator or cast (or postfix ++/--): not plain assignment targets."""
    return isinstance(e, (A.Unary, A.Cast, A.SizeOf))


def _same_specifiers(a: A.VarDecl, b: A.VarDecl) -> bool:
    return a.storage == b.storage and a.type.base == b.type.base and a.type.quals == b.type.quals


def _verbatim(text: str, ind: str) -> list[str]:
    """Multi-line text: the first line indented, the rest as written (their own indentation kept)."""
    lines = text.split("\n")
    return [ind + lines[0], *lines[1:]]


def _needs_braces(body: A.Stmt) -> bool:
    """Bodies that must not stand alone after ``if (...)``/``for (...)``: declarations, pragmas, comments."""
    if isinstance(body, (A.DeclStmt, A.Pragma, A.Comment, A.Include)):
        return True
    return isinstance(body, A.Opaque) and body.text.lstrip().startswith("#")


def _may_capture_else(s: A.Stmt) -> bool:
    """Whether an unbraced ``s`` ends in an ``if`` without ``else`` that would take a following else."""
    while True:
        if isinstance(s, A.If):
            if s.else_ is None:
                return True
            s = s.else_
        elif isinstance(s, (A.For, A.While)):
            s = s.body
        elif isinstance(s, A.Opaque):
            return True  # unknown text (switch, label...): brace it to be safe
        else:
            return False
