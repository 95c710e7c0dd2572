"""Member functions declared in their class without the execution-space qualifiers of their out-of-line
definition (``class Lock { Lock(int *p); };`` then ``__device__ Lock::Lock(int *p) { ... }``).

nvcc takes the definition's qualifiers; clang (hipcc) reads a ``__device__`` definition of a member declared for
the host as a different function and rejects it ("out-of-line definition ... does not match any declaration").
The declaration in the class gets the qualifiers its definition has (the function nvcc compiled), and nothing
else changes.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from xpiler_core.frontend.source import ParsedSource, parse_text
from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit
from xpiler_core.passes.support.cst import Edit, apply_edits, walk

INFO = PassInfo(
    name="member_qualifiers",
    summary="Give a member's in-class declaration the __device__/__host__ of its out-of-line definition",
    kind="cst",
    directions=("cuda->hip",),
)

EXECUTION_SPACES = ("__host__", "__device__")


def _spaces(node: Node) -> set[str]:
    return {c.type for c in node.children if c.type in EXECUTION_SPACES}


def _function_declarator(node: Node) -> Node | None:
    for child in node.children:
        current: Node | None = child
        while current is not None and current.type in ("pointer_declarator", "reference_declarator"):
            current = current.child_by_field_name("declarator")
        if current is not None and current.type == "function_declarator":
            return current
    return None


def _arity(src: ParsedSource, declarator: Node) -> int:
    params = declarator.child_by_field_name("parameters")
    return 0 if params is None else sum(1 for c in params.named_children if c.type in (
        "parameter_declaration", "optional_parameter_declaration"))


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    if "::" not in module.text or not any(space in module.text for space in EXECUTION_SPACES):
        return module
    src = parse_text(module.text, module.path, module.dialect)
    # (class, member, arity) -> the qualifiers of its out-of-line definitions
    defined: dict[tuple[str, str, int], set[str]] = {}
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type != "function_definition":
            continue
        declarator = _function_declarator(node)
        name = declarator.child_by_field_name("declarator") if declarator is not None else None
        if declarator is None or name is None or name.type != "qualified_identifier" or not _spaces(node):
            continue
        scope, member = name.child_by_field_name("scope"), name.child_by_field_name("name")
        if scope is None or member is None:
            continue
        key = (src.node_text(scope), src.node_text(member), _arity(src, declarator))
        defined.setdefault(key, set()).update(_spaces(node))
    if not defined:
        return module
    edits: list[Edit] = []
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type not in ("class_specifier", "struct_specifier"):
            continue
        cls, body = node.child_by_field_name("name"), node.child_by_field_name("body")
        if cls is None or body is None:
            continue
        for member in body.named_children:
            if member.type not in ("field_declaration", "declaration"):
                continue
            declarator = _function_declarator(member)
            name = declarator.child_by_field_name("declarator") if declarator is not None else None
            if declarator is None or name is None:
                continue
            wanted = defined.get((src.node_text(cls), src.node_text(name), _arity(src, declarator)))
            missing = sorted((wanted or set()) - _spaces(member), key=EXECUTION_SPACES.index)
            if missing:
                edits.append(Edit(member.start_byte, member.start_byte, " ".join(missing) + " "))
    if not edits:
        return module
    ctx.notes.append(f"member_qualifiers: {len(edits)} member declaration(s) given their definition's "
                     "execution space (hipcc matches them; nvcc did not need it)")
    data, _ = apply_edits(src.data, edits)
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)
