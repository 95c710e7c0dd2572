"""What every pass shares: its description, its context, its refusal, and the unit it works on.

A pass is one module in this package exposing ``INFO: PassInfo`` and
``apply(module, params, ctx) -> module``. CST passes (kind ``"cst"``) take and return a
:class:`SourceUnit` and change text by format-preserving edits; AST passes (kind ``"ast"``) take and return
the kernel AST module (``xpiler_core.ast``). Passes are pure: no filesystem, no subprocesses.
A pass whose preconditions fail raises :class:`PassRefused` with the reason instead of miscompiling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from xpiler_core.diagnostics import Diagnostic, Span
from xpiler_core.dialect import Dialect


class PassRefused(Exception):
    """A pass declined to transform: its preconditions do not hold. The message says why."""

    def __init__(self, reason: str, span: Span | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.span = span


@dataclass(frozen=True)
class ParamSpec:
    """One tunable or configurable parameter of a pass."""

    name: str
    type: Literal["int", "bool", "str", "float"]
    default: Any
    doc: str
    choices: tuple[Any, ...] = ()


@dataclass(frozen=True)
class PassInfo:
    name: str
    summary: str
    kind: Literal["cst", "ast"]
    # Directions the pass takes part in, e.g. ("cuda->hip",) or ("cuda->cpu", "c->cuda").
    directions: tuple[str, ...]
    params: tuple[ParamSpec, ...] = ()
    # For the tuner: passes that remove work wherever they apply (redundant per-element divisions, strided
    # walks) are expanded first when the search budget may not reach every action.
    search_priority: int = 0

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


class PassRecord(TypedDict):
    """What one pass did, as the driver, plans, manifests and clients see it."""

    name: str
    params: dict[str, Any]
    changed: bool
    refused: str | None
    notes: list[str]
    unresolved: int
    seconds: float
    span: NotRequired[dict[str, int]]  # where a refusal points in the source


@dataclass
class Unresolved:
    """A construct a pass could not translate: reported with its location, never silently dropped."""

    reason: str
    span: Span
    construct: str = ""


@dataclass
class PassContext:
    source_dialect: Dialect
    target: Dialect
    warp_size: int = 32
    file: str = "<input>"
    notes: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)
    # names the project's own headers declare (functions, macros, types): user code, never mapped as API
    project_names: frozenset[str] = frozenset()
    # the project's -D macros (NAME → value text), as its build defines them: a pass may read their values
    defines: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceUnit:
    """The unit CST passes transform: source text with its dialect and path."""

    text: str
    dialect: Dialect
    path: str = "<input>"
