"""Diagnostics and source spans shared by every room of the core.

A diagnostic is a library object (no LSP types): the server converts it to an LSP Diagnostic, the CLI
prints it as ``file:line:col: severity: message``. Lines and columns are 0-based internally and printed
1-based, as compilers do.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


# Not frozen: the model builds thousands of spans per file and a frozen dataclass's __init__ costs ~5x a
# slotted one's. Treat spans as values all the same (hashable, never assigned to after construction).
@dataclass(slots=True, unsafe_hash=True)
class Span:
    """A half-open source range with byte offsets and 0-based (line, column) points.

    Columns are byte columns within the line, as tree-sitter reports them.
    """

    start_byte: int
    end_byte: int
    start_line: int
    start_col: int
    end_line: int
    end_col: int

    @classmethod
    def of(cls, node: Any) -> Span:
        """The span of a tree-sitter node."""
        return cls(
            node.start_byte,
            node.end_byte,
            node.start_point[0],
            node.start_point[1],
            node.end_point[0],
            node.end_point[1],
        )

    @classmethod
    def empty(cls) -> Span:
        return cls(0, 0, 0, 0, 0, 0)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Diagnostic:
    """One message about a source file, with a stable machine-readable code."""

    severity: Severity
    code: str
    message: str
    span: Span
    file: str = "<input>"
    source: str = "xpiler"
    data: dict[str, Any] = field(default_factory=dict)

    def format(self) -> str:
        """``file:line:col: severity: message [code]`` with 1-based line and column."""
        return (
            f"{self.file}:{self.span.start_line + 1}:{self.span.start_col + 1}: "
            f"{self.severity.value}: {self.message} [{self.code}]"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity.value,
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "source": self.source,
            "span": self.span.to_dict(),
            "data": self.data,
        }


class XpilerError(Exception):
    """An error with a location, reported to users as ``file:line:col: message`` (never a traceback)."""

    def __init__(self, message: str, file: str = "<input>", line: int = 0, col: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col

    def format(self) -> str:
        return f"{self.file}:{self.line + 1}:{self.col + 1}: error: {self.message}"


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def toml_error(exc: Exception, path: str, what: str) -> XpilerError:
    """A ``tomllib.TOMLDecodeError`` as an error at the line and column the parser names (Python 3.11's
    exception carries them only in its message)."""
    text = str(exc)
    line = getattr(exc, "lineno", None)
    col = getattr(exc, "colno", None)
    match = _TOML_AT.search(text)
    if (line is None or col is None) and match:
        line, col = int(match.group(1)), int(match.group(2))
    message = _TOML_AT.sub("", text).strip()
    return XpilerError(f"{what}: {message}", path, max((line or 1) - 1, 0), max((col or 1) - 1, 0))
