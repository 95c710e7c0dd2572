"""The tree-sitter query the kernel model is built from.

Matching runs inside tree-sitter (C code, no recursion in Python), so the model builder only touches
the few nodes it needs: functions, calls, launches, memory-qualified declarations, built-in variables,
inline assembly, pragmas, lambdas and ERROR nodes. Matches come back in document order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache, lru_cache

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
    "asm": ("(gnu_asm_expression) @asm", re.compile(rb"asm(?:__)?\b")),
    "pragma": (
        "(preproc_call directive: (preproc_directive) @pragma.directive) @pragma",
        re.compile(rb"#[ \t]*pragma\b"),
    ),
    "conditional": ("(preproc_if) @conditional (preproc_ifdef) @conditional", re.compile(rb"#[ \t]*if")),
    "error": ("(ERROR) @error", None),  # run when the tree has errors
}
# Built-in variables are found by a byte search and checked against the tree: cheaper than a query
# predicate over every identifier.
_BUILTIN_NAMES = sorted(BUILTIN_VARIABLES, key=len, reverse=True)  # longest first: `taskIdX` before `taskId`
# The lookahead on first letters lets the regex engine skip most positions (2x faster than without).
_BUILTIN_FIRST = "".join(sorted({name[0] for name in _BUILTIN_NAMES}))
BUILTIN_PATTERN: re.Pattern[bytes] = re.compile(
    rb"(?=[" + _BUILTIN_FIRST.encode() + rb"])\b(" + "|".join(_BUILTIN_NAMES).encode() + rb")\b"
    rb"(?:[ \t]*\.[ \t]*([xyz])\b)?"
)


@lru_cache(maxsize=1)
def model_query() -> Query:
    return Query(cuda_language(), "\n".join(_MAIN_PATTERNS))


@cache
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
    wide_errors: list[Node] = field(default_factory=list)  # ERROR regions too wide to query (not modelled)


def _start(node: Node) -> int:
    return node.start_byte


# tree-sitter's query cursor is quadratic in the width of an ERROR node (a file of 100,000 unclosed
# parentheses is one ERROR with 100,000 children: minutes). Such regions are not queried.
WIDE_ERROR_CHILDREN = 2000


def wide_error_nodes(root: Node, limit: int = WIDE_ERROR_CHILDREN) -> list[Node]:
    """ERROR nodes with more than ``limit`` children (iterative walk along nodes that have errors)."""
    if not root.has_error:
        return []
    if root.is_error and root.child_count > limit:
        return [root]
    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.children:
            if not child.has_error:
                continue
            if child.is_error and child.child_count > limit:
                out.append(child)
            elif child.child_count <= limit:
                stack.append(child)
    return sorted(out, key=_start)


def _query_roots(root: Node, wide: list[Node]) -> list[Node]:
    """Subtrees that together cover the tree except the wide ERROR nodes."""
    if not wide:
        return [root]
    ranges = [(n.start_byte, n.end_byte) for n in wide]

    def contains_wide(node: Node) -> bool:
        return any(node.start_byte <= s and e <= node.end_byte for s, e in ranges)

    def is_wide(node: Node) -> bool:
        return node.is_error and (node.start_byte, node.end_byte) in ranges and node.child_count > WIDE_ERROR_CHILDREN

    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if is_wide(node):
            continue
        if contains_wide(node):
            stack.extend(node.children)
        else:
            out.append(node)
    return sorted(out, key=_start)


def run_model_query(root: Node, data: bytes) -> Matches:
    """All matches of the model queries under ``root``; ``data`` is the text the tree was parsed from."""
    out = Matches()
    wide = wide_error_nodes(root)
    out.wide_errors = wide
    roots = _query_roots(root, wide)
    functions: list[Node] = []
    calls: list[Node] = []
    memory: list[Node] = []
    for query_root in roots:
        # `captures` is faster than `matches` but not in document order: sort by position.
        captures = QueryCursor(model_query()).captures(query_root)
        functions += captures.get("function", [])
        calls += captures.get("call", [])
        memory += captures.get("memory", [])
    out.functions = sorted(functions, key=_start)
    for call in sorted(calls, key=_start):
        callee = call.child_by_field_name("function")
        if callee is not None:
            out.calls.append((call, callee))
    out.memory_qualifiers = sorted(memory, key=_start)
    wide_ranges = [(n.start_byte, n.end_byte) for n in wide]
    for match in BUILTIN_PATTERN.finditer(data):
        if wide_ranges and any(s <= match.start() < e for s, e in wide_ranges):
            continue
        node = root.descendant_for_byte_range(match.start(), match.end(1))
        if node is not None and node.type == "identifier" and node.end_byte == match.end(1):
            component = match.group(2)
            out.builtins.append((node, component.decode() if component else None, match.end()))
    for kind, (_, hint) in _RARE_PATTERNS.items():
        wanted = root.has_error if hint is None else hint.search(data) is not None
        if not wanted:
            continue
        for query_root in roots:
            for _, captures in QueryCursor(_rare_query(kind)).matches(query_root):
                if kind == "asm":
                    out.asms.extend(captures["asm"])
                elif kind == "pragma":
                    out.pragmas.append((captures["pragma"][0], captures["pragma.directive"][0]))
                elif kind == "conditional":
                    out.conditionals.extend(captures["conditional"])
                else:
                    out.errors.extend(captures["error"])
    out.errors = sorted(out.errors + wide, key=_start)
    return out
