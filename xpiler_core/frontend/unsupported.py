"""Constructs the engine cannot model yet, as data, and the detectors that find them.

Each entry names the construct in words a user recognizes. The list is meant to stay honest: a
construct is here when the frontend cannot read it (the grammar gives an ERROR node or misparses it)
or when a later stage has no model of it (device-side launches, textures). Remove an
entry when support lands.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tree_sitter import Node

from xpiler_core.diagnostics import Diagnostic, Severity, Span

if TYPE_CHECKING:
    from xpiler_core.frontend.model import ModelBuilder


@dataclass(frozen=True)
class Unsupported:
    code: str  # diagnostic code, "unsupported.<id>"
    construct: str  # what the user wrote, in words
    severity: Severity
    detector: str  # key into DETECTORS
    pattern: str = ""  # detector parameter (a regex over source text or names)
    consequence: str = ""  # what the engine does about it


UNSUPPORTED: Final[tuple[Unsupported, ...]] = (
    Unsupported(
        "unsupported.extended-lambda",
        "extended lambda ([=] __device__ ...)",
        Severity.ERROR,
        "error_text",
        r"\[[^\[\]]*\]\s*(?:__host__\s*)?__device__|\[[^\[\]]*\]\s*__host__",
        "the grammar cannot read it; write a __device__ functor or function instead",
    ),
    Unsupported(
        "unsupported.complex-type",
        "C99 _Complex type",
        Severity.ERROR,
        "error_text",
        r"\b_Complex\b",
        "the grammar cannot read it; use a struct of two reals",
    ),
    Unsupported(
        "unsupported.kr-definition",
        "K&R-style function definition (parameter types declared after the parameter list)",
        Severity.ERROR,
        "kr_definition",
        "",
        "the grammar cannot read it; use a prototype-style definition",
    ),
    Unsupported(
        "unsupported.device-launch",
        "kernel launch from device code (dynamic parallelism)",
        Severity.WARNING,
        "device_launch",
        "",
        "the CPU runtime launches kernels from host code only",
    ),
    Unsupported(
        "unsupported.texture",
        "texture or surface access",
        Severity.WARNING,
        "call_regex",
        r"^(tex|surf)(1D|2D|3D|Cubemap)\w*$|^tex1Dfetch$",
        "no runtime model of texture memory; translation and testing will fail",
    ),
    Unsupported(
        "unsupported.conditional-in-kernel",
        "preprocessor conditional inside a kernel body",
        Severity.INFO,
        "conditional_in_kernel",
        "",
        "both branches are read: the model lists features of every branch",
    ),
)

# Bytes of context read around an ERROR node when matching an error_text pattern.
_ERROR_CONTEXT_BYTES = 64


def _message(entry: Unsupported) -> str:
    return f"unsupported: {entry.construct}" + (f" ({entry.consequence})" if entry.consequence else "")


def _diagnostic(builder: ModelBuilder, entry: Unsupported, span: Span) -> Diagnostic:
    return Diagnostic(
        entry.severity, entry.code, _message(entry), span, builder.parsed.path, data={"construct": entry.construct}
    )


def _error_text(builder: ModelBuilder, entry: Unsupported) -> Iterator[tuple[Diagnostic, Node | None]]:
    pattern = re.compile(entry.pattern.encode())
    data = builder.parsed.data
    for node in builder.matches.errors:
        window = data[max(0, node.start_byte - _ERROR_CONTEXT_BYTES) : node.end_byte + _ERROR_CONTEXT_BYTES]
        if pattern.search(window[:4096]):
            yield _diagnostic(builder, entry, Span.of(node)), node


def _kr_definition(builder: ModelBuilder, entry: Unsupported) -> Iterator[tuple[Diagnostic, Node | None]]:
    # Without K&R support the grammar reads `int f(a, b) int a; { ... }` as a declaration with a
    # missing ';', parameter declarations, and a brace block at file scope (never valid C).
    root = builder.parsed.root
    if root.type != "translation_unit":
        return
    for block in root.named_children:
        if block.type != "compound_statement":
            continue
        sibling = block.prev_named_sibling
        steps = 0
        while sibling is not None and sibling.type == "declaration" and steps < 64:
            declarator = sibling.child_by_field_name("declarator")
            value = declarator.child_by_field_name("value") if declarator is not None else None
            if declarator is not None and declarator.type == "init_declarator" and value is not None:
                if value.type == "argument_list":
                    span = Span(
                        sibling.start_byte,
                        block.end_byte,
                        sibling.start_point[0],
                        sibling.start_point[1],
                        block.end_point[0],
                        block.end_point[1],
                    )
                    yield _diagnostic(builder, entry, span), None
                break
            sibling = sibling.prev_named_sibling
            steps += 1


def _device_launch(builder: ModelBuilder, entry: Unsupported) -> Iterator[tuple[Diagnostic, Node | None]]:
    for function in builder.functions:
        if function.kind in ("kernel", "device"):
            for launch in function.launches:
                yield _diagnostic(builder, entry, launch.span), None


def _call_regex(builder: ModelBuilder, entry: Unsupported) -> Iterator[tuple[Diagnostic, Node | None]]:
    pattern = re.compile(entry.pattern)
    for name, call in builder.call_names:
        if pattern.search(name):
            yield _diagnostic(builder, entry, Span.of(call)), None


def _conditional_in_kernel(
    builder: ModelBuilder, entry: Unsupported
) -> Iterator[tuple[Diagnostic, Node | None]]:
    for node in builder.matches.conditionals:
        function = builder.function_at(node.start_byte)
        if function is not None and function.is_kernel:
            yield _diagnostic(builder, entry, Span.of(node)), None


Detector = Callable[["ModelBuilder", Unsupported], Iterator[tuple[Diagnostic, "Node | None"]]]

DETECTORS: Final[dict[str, Detector]] = {
    "error_text": _error_text,
    "kr_definition": _kr_definition,
    "device_launch": _device_launch,
    "call_regex": _call_regex,
    "conditional_in_kernel": _conditional_in_kernel,
}


def find_unsupported(builder: ModelBuilder) -> tuple[list[Diagnostic], set[tuple[int, int]]]:
    """Unsupported-construct diagnostics, and the (start, end) bytes of ERROR nodes they explain."""
    out: list[Diagnostic] = []
    explained: set[tuple[int, int]] = set()
    for entry in UNSUPPORTED:
        for diagnostic, error_node in DETECTORS[entry.detector](builder, entry):
            out.append(diagnostic)
            if error_node is not None:
                explained.add((error_node.start_byte, error_node.end_byte))
    return out, explained
