"""Safe evaluation of the spec's integer expressions (shapes, grid, block, scalar values).

Only integer/float literals, case-variable names, + - * // % / ** (small), unary minus, parentheses,
comparisons, and the functions ``ceil_div``, ``min``, ``max``, ``abs``, ``int`` are accepted; everything
else is refused with a message. Parsing uses :mod:`ast` and walks a whitelist, never ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any


class ExprError(ValueError):
    """An expression that is not allowed or cannot be evaluated."""


def ceil_div(a: int, b: int) -> int:
    if b == 0:  # an expression error wherever it is evaluated (interpreted or compiled), not a crash
        raise ExprError("division by zero in ceil_div")
    return -(-a // b)


_FUNCS: dict[str, Callable[..., Any]] = {
    "ceil_div": ceil_div,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "sqrt": math.sqrt,
}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
MAX_LEN = 500


def evaluate(expr: str | int | float, env: Mapping[str, Any]) -> Any:
    """Value of ``expr`` with the case variables ``env``; numbers pass through unchanged."""
    if isinstance(expr, bool):
        return int(expr)
    if isinstance(expr, int | float):
        return expr
    return _eval(_parse(expr), env, expr)


def _parse(expr: object) -> ast.AST:
    """The body of ``expr`` parsed as a Python expression (checked as it is evaluated)."""
    if not isinstance(expr, str) or len(expr) > MAX_LEN:
        raise ExprError(f"not an expression: {expr!r}")
    try:
        return ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {expr!r}: {exc.msg}") from None


def _eval(node: ast.AST, env: Mapping[str, Any], src: str) -> Any:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise ExprError(f"unknown name {node.id!r} in {src!r}")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left, env, src), _eval(node.right, env, src)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 2**32):
            raise ExprError(f"exponent too large in {src!r}")
        if isinstance(node.op, ast.LShift | ast.RShift) and not 0 <= right <= 64:
            raise ExprError(f"shift out of range in {src!r}")
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExprError(f"division by zero in {src!r}") from None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand, env, src)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
        return int(
            _CMPOPS[type(node.ops[0])](_eval(node.left, env, src), _eval(node.comparators[0], env, src))
        )
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, env, src) else node.orelse, env, src)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
    ):
        return _FUNCS[node.func.id](*(_eval(a, env, src) for a in node.args))
    raise ExprError(f"not allowed in a spec expression: {ast.dump(node)[:60]} in {src!r}")


def evaluate_int(expr: str | int | float, env: Mapping[str, Any]) -> int:
    value = evaluate(expr, env)
    if isinstance(value, float):
        if not value.is_integer():
            raise ExprError(f"{expr!r} is {value}, not an integer")
        value = int(value)
    return int(value)


IntFunction = Callable[[Mapping[str, Any]], int]


def compile_int(expr: str) -> IntFunction:
    """``expr`` parsed and checked once, as a function of the case variables giving :func:`evaluate_int`'s
    value (for formulas evaluated at many sizes); the same whitelist, no ``eval``."""
    built = _closure(_parse(expr), expr)

    def value(env: Mapping[str, Any]) -> int:
        got = built(env)
        if isinstance(got, float):
            if not got.is_integer():
                raise ExprError(f"{expr!r} is {got}, not an integer")
            return int(got)
        return int(got)

    return value


def _closure(node: ast.AST, src: str) -> Callable[[Mapping[str, Any]], Any]:
    """A function computing ``node`` as :func:`_eval` does (only the nodes it accepts)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        constant = node.value
        return lambda env: constant
    if isinstance(node, ast.Name):
        name = node.id

        def lookup(env: Mapping[str, Any]) -> Any:
            if name in env:
                return env[name]
            raise ExprError(f"unknown name {name!r} in {src!r}")

        return lookup
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS and not isinstance(node.op, ast.Pow | ast.LShift
                                                                                  | ast.RShift):
        op, left, right = _BINOPS[type(node.op)], _closure(node.left, src), _closure(node.right, src)

        def binary(env: Mapping[str, Any]) -> Any:
            try:
                return op(left(env), right(env))
            except ZeroDivisionError:
                raise ExprError(f"division by zero in {src!r}") from None

        return binary
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand, negate = _closure(node.operand, src), isinstance(node.op, ast.USub)
        return lambda env: -operand(env) if negate else operand(env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS \
            and not node.keywords:
        func, args = _FUNCS[node.func.id], [_closure(a, src) for a in node.args]
        return lambda env: func(*(a(env) for a in args))
    # anything else (powers, shifts, comparisons, conditionals) through the checked interpreter
    ast.fix_missing_locations(node)
    return lambda env: _eval(node, env, src)
