"""One source file as a translation carries it: its text, parse tree, kernel model and AST, each made once
(on first use) and shared by every step of the plan, the test builder and the hooks."""

from __future__ import annotations

from dataclasses import dataclass, field

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.model import KernelModel, build_model
from xpiler_core.frontend.source import ParsedSource, parse_text


@dataclass
class ParsedUnit:
    text: str
    path: str
    dialect: Dialect
    _parsed: ParsedSource | None = field(default=None, repr=False)
    _model: KernelModel | None = field(default=None, repr=False)
    _module: A.Module | None = field(default=None, repr=False)

    @property
    def parsed(self) -> ParsedSource:
        if self._parsed is None:
            self._parsed = parse_text(self.text, self.path, self.dialect)
        return self._parsed

    @property
    def model(self) -> KernelModel:
        if self._model is None:
            self._model = build_model(self.parsed)
        return self._model

    @property
    def module(self) -> A.Module:
        """The kernel AST (lowered once; AST nodes are immutable, so every plan step may share it)."""
        if self._module is None:
            from xpiler_core.frontend.lower import lower

            self._module = lower(self.parsed)
        return self._module

    def with_text(self, text: str) -> ParsedUnit:
        """The unit of a new text of the same file (after a text pass)."""
        return ParsedUnit(text, self.path, self.dialect)
