"""The tree-sitter query the kernel model is built from.

Matching runs inside tree-sitter (C code, no recursion in Python), so the model builder only touches
the few nodes it needs: functions, calls, launches, memory-qualified declarations, built-in variables,
inline assembly, pragmas, lambdas and ERROR nodes. Matches come back in document order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import re
from functools import lru_cache

from tree_sitter import Node, Query, QueryCursor

from xpiler_core.frontend.names import BUILTIN_VARIABLES, MEMORY_QUALIFIERS
from xpiler_core.frontend.source import cuda_language


def _any_of(capture: str, names: list[str]) -> str:
    quoted = " ".join(f'"{name}"' for name in sorted(names))
    return f"(#any-of? @{capture} {quoted})"


# The main query: every file needs these. Matches come back in document order.
_MAIN_PATTERNS = [
    "(function_definition) @function",
    "(call_expression) @call",
    # `__device__` / `__constant__` at file scope are anonymous tokens or qualifiers of a declaration.
    f"((type_qualifier) @memory {_any_of('memory', list(MEMORY_QUALIFIERS))})",
    '(declaration "__device__" @memory)',
]
# Rarer constructs get their own query, run only when a cheap byte search says the file may have them
# (each extra pattern in one query costs a full traversal's worth of matching).
_RARE_PATTERNS: dict[str, tuple[str, re.Pattern[bytes] | None]] = {
    "asm": ("(gnu_asm_expression) @asm", re.compile(rb"\b(asm|__asm__|__asm)\b")),
    "pragma": (
        "(preproc_call directive: (preproc_directive) @pragma.directive) @pragma",
        re.compile(rb"#[ \t]*pragma\b"),
    ),
    "conditional": ("(preproc_if) @conditional (preproc_ifdef) @conditional", re.compile(rb"#[ \t]*if")),
    "error": ("(ERROR) @error", None),  # run when the tree has errors
}
# Built-in variables are found by a byte search and checked against the tree: cheaper than a query
# predicate over every identifier.
BUILTIN_PATTERN: re.Pattern[bytes] = re.compile(
    rb"\b(" + b"|".join(sorted((n.encode() for n in BUILTIN_VARIABLES), key=len, reverse=True)) + rb")\b"
    rb"(?:[ \t]*\.[ \t]*([xyz])\b)?"
)


@lru_cache(maxsize=1)
def model_query() -> Query:
    return Query(cuda_language(), "\n".join(_MAIN_PATTERNS))


@lru_cache(maxsize=None)
def _rare_query(kind: str) -> Query:
    return Query(cuda_language(), _RARE_PATTERNS[kind][0])


@dataclass
class Matches:
    """Captured nodes by kind, each list in document order."""

    functions: list[Node] = field(default_factory=list)
    calls: list[tuple[Node, Node]] = field(default_factory=list)  # (call_expression, callee)
    # (identifier, component read after a `.`, end byte of the whole access)
    builtins: list[tuple[Node, str | None, int]] = field(default_factory=list)
    memory_qualifiers: list[Node] = field(default_factory=list)
    asms: list[Node] = field(default_factory=list)
    pragmas: list[tuple[Node, Node]] = field(default_factory=list)  # (preproc_call, directive)
    errors: list[Node] = field(default_factory=list)
    conditionals: list[Node] = field(default_factory=list)


def _start(node: Node) -> int:
    return node.start_byte


def run_model_query(root: Node, data: bytes) -> Matches:
    """All matches of the model queries under ``root``; ``data`` is the text the tree was parsed from."""
    out = Matches()
    # `captures` is faster than `matches` but not in document order: sort by position.
    captures = QueryCursor(model_query()).captures(root)
    out.functions = sorted(captures.get("function", []), key=_start)
    for call in sorted(captures.get("call", []), key=_start):
        callee = call.child_by_field_name("function")
        if callee is not None:
            out.calls.append((call, callee))
    out.memory_qualifiers = sorted(captures.get("memory", []), key=_start)
    for match in BUILTIN_PATTERN.finditer(data):
        node = root.descendant_for_byte_range(match.start(), match.end(1))
        if node is not None and node.type == "identifier" and node.end_byte == match.end(1):
            component = match.group(2)
            out.builtins.append((node, component.decode() if component else None, match.end()))
    for kind, (_, hint) in _RARE_PATTERNS.items():
        wanted = root.has_error if hint is None else hint.search(data) is not None
        if not wanted:
            continue
        for _, captures in QueryCursor(_rare_query(kind)).matches(root):
            if kind == "asm":
                out.asms.extend(captures["asm"])
            elif kind == "pragma":
                out.pragmas.append((captures["pragma"][0], captures["pragma.directive"][0]))
            elif kind == "conditional":
                out.conditionals.extend(captures["conditional"])
            else:
                out.errors.extend(captures["error"])
    return out
