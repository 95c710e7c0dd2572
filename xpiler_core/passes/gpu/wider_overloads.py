"""A CUDA program's own overloads of device functions HIP declares for more types (``atomicMax`` on
``double``: CUDA has none, so programs define it; HIP has one, so hipcc calls the program's a redefinition).

The program's overloads keep their meaning under a new name (``xpiler_cuda_atomicMax``), every call in the
file goes to that name, and one forwarding template of that name sends the calls on other types (``int``)
to HIP's function. Overload resolution prefers the program's non-template function wherever it matched
before, so each call reaches the function it reached under nvcc. The rows are data
(``tables/hip_wider_overloads.toml``), checked against both compilers.
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core.frontend.source import parse_text
from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit
from xpiler_core.passes.support.cst import Edit, apply_edits, top_insertion_point, walk
from xpiler_core.tables import raw_table

INFO = PassInfo(
    name="wider_overloads",
    summary="A program's own atomicMax(double*)-style overloads renamed where HIP declares the function too",
    kind="cst",
    directions=("cuda->hip",),
)

PREFIX = "xpiler_cuda_"


def table_names() -> frozenset[str]:
    return frozenset(raw_table("hip_wider_overloads")["functions"])


def _forwarder(name: str) -> str:
    return (f"#ifndef XPILER_FORWARD_{name}\n#define XPILER_FORWARD_{name}\n"
            f"// xpiler(wider_overloads): the program defines {name} for types CUDA lacks and HIP declares for\n"
            f"// them too: its own overloads are named {PREFIX}{name}; other calls reach HIP's {name}.\n"
            f"template <class... A> __device__ inline auto {PREFIX}{name}(A... a) -> decltype(::{name}(a...)) {{\n"
            f"  return ::{name}(a...);\n}}\n#endif\n")


def _defined_here(src: Any, names: frozenset[str]) -> set[str]:
    found: set[str] = set()
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type == "function_declarator":
            declarator = node.child_by_field_name("declarator")
            if declarator is not None and declarator.type == "identifier" and src.node_text(declarator) in names:
                found.add(src.node_text(declarator))
    return found


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    wider = table_names()
    if not any(name in module.text for name in wider):
        return module
    src = parse_text(module.text, module.path, module.dialect)
    # the file's own definitions, and those of the project's headers (declared_names of the project)
    names = _defined_here(src, wider) | (wider & ctx.project_names)
    if not names:
        return module
    edits: list[Edit] = []
    pattern = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b(?=\s*\()")
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type == "identifier" and src.node_text(node) in names and node.parent is not None and (
                node.parent.type in ("call_expression", "function_declarator")):
            edits.append(Edit(node.start_byte, node.end_byte, PREFIX + src.node_text(node)))
        elif node.type == "preproc_arg" and pattern.search(src.node_text(node)):  # a macro that calls one
            edits.append(Edit(node.start_byte, node.end_byte, pattern.sub(lambda m: PREFIX + m.group(1),
                                                                          src.node_text(node))))
    if not edits:
        return module
    at = top_insertion_point(src)
    lead = "\n" if at and not src.data[:at].endswith(b"\n") else ""
    edits.append(Edit(at, at, lead + "".join(_forwarder(n) for n in sorted(names))))
    ctx.notes.append(f"wider_overloads: the program's own {', '.join(sorted(names))} renamed {PREFIX}* "
                     "(HIP declares them for these types too)")
    data, _ = apply_edits(src.data, edits)
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)
