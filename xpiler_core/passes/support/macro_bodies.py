"""Function-like macros that wrap intrinsics (``#define __shfl(v, d) __shfl_sync(0xffffffff, v, d)``): their
bodies are raw text in the CST, so a pass rewrites each one as a code fragment with the same rules it applies
to the file (wrapped in a throw-away function, rewritten, unwrapped), and leaves the macro's call sites alone:
a macro is handled once, in its body, never a second time where it is used."""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from xpiler_core.frontend.source import ParsedSource
from xpiler_core.passes.support.cst import Edit

_OPEN = "void xpiler_macro_fragment__(void) {\n"
_CLOSE = "\n}\n"


def macro_bodies(src: ParsedSource) -> list[Node]:
    """The ``preproc_arg`` bodies of the file's function-like macros."""
    out: list[Node] = []
    stack = [src.root]
    while stack:
        node = stack.pop()
        if node.type == "preproc_function_def":
            body = node.child_by_field_name("value")
            if body is not None:
                out.append(body)
            continue
        stack.extend(node.children)
    return out


def rewrite_bodies(src: ParsedSource, rewrite: Callable[[str], str], wanted: Callable[[str], bool]) -> list[Edit]:
    """An edit per macro body that ``wanted`` selects, replacing it with ``rewrite`` applied to it as a
    fragment of code (the wrapper added and removed here; a fragment that does not come back whole is kept
    as it was)."""
    edits: list[Edit] = []
    for body in macro_bodies(src):
        text = src.node_text(body)
        if not wanted(text) or "\\\n" in text and text.count("\\\n") > 40:
            continue
        joined = text.replace("\\\n", "\n")  # continuation lines become plain lines inside the fragment
        out = rewrite(_OPEN + joined + ";" + _CLOSE)
        start, end = out.find(_OPEN), out.rfind(";" + _CLOSE)
        if start < 0 or end < start:
            continue
        new = out[start + len(_OPEN):end]
        if new != joined:
            edits.append(Edit(body.start_byte, body.end_byte, new.replace("\n", "\\\n")))
    return edits
