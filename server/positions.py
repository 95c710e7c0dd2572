"""Conversions between LSP positions (UTF-16 or UTF-8/32 code units per line) and text offsets.

The core speaks byte offsets and byte columns (tree-sitter); LSP clients speak line + code-unit columns in the
position encoding negotiated at initialize (UTF-16 unless the client offers something else).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from lsprotocol import types

from xpiler_core.diagnostics import Span


def _units(text: str, encoding: str) -> int:
    """Length of ``text`` in the code units of ``encoding``."""
    if text.isascii():
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", errors="surrogatepass"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def _index_of_units(line: str, units: int, encoding: str) -> int:
    """The str index within ``line`` at ``units`` code units (clamped to the line)."""
    if units <= 0:
        return 0
    if line.isascii() or encoding == types.PositionEncodingKind.Utf32:
        return min(units, len(line))
    counted = 0
    for index, ch in enumerate(line):
        if counted >= units:
            return index
        if encoding == types.PositionEncodingKind.Utf8:
            counted += len(ch.encode("utf-8", errors="surrogatepass"))
        else:
            counted += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


@dataclass
class LineIndex:
    """Line starts of one text version, as str indices, for position ↔ offset conversion."""

    text: str
    starts: list[int]

    @classmethod
    def of(cls, text: str) -> LineIndex:
        starts = [0]
        find = text.find
        pos = find("\n")
        while pos >= 0:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        return cls(text, starts)

    def line_text(self, line: int) -> str:
        start = self.starts[line]
        end = self.starts[line + 1] - 1 if line + 1 < len(self.starts) else len(self.text)
        return self.text[start:end]

    def offset(self, position: types.Position, encoding: str) -> int:
        """str index of an LSP position; positions past a line end or the text end are clamped."""
        line = max(0, position.line)
        if line >= len(self.starts):
            return len(self.text)
        return self.starts[line] + _index_of_units(self.line_text(line), position.character, encoding)

    def position(self, offset: int, encoding: str) -> types.Position:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        start = self.starts[line]
        return types.Position(line=line, character=_units(self.text[start:offset], encoding))


def byte_col_to_units(line_bytes: bytes, byte_col: int, encoding: str) -> int:
    """Convert a byte column (tree-sitter) on one line to LSP code units."""
    prefix = line_bytes[:byte_col]
    if encoding == types.PositionEncodingKind.Utf8 or prefix.isascii():
        return len(prefix)
    return _units(prefix.decode("utf-8", errors="replace"), encoding)


class ByteLines:
    """Line starts of a UTF-8 buffer, to turn core spans (byte columns) into LSP ranges."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._starts: list[int] | None = None

    @property
    def starts(self) -> list[int]:
        if self._starts is None:
            starts = [0]
            pos = self.data.find(b"\n")
            while pos >= 0:
                starts.append(pos + 1)
                pos = self.data.find(b"\n", pos + 1)
            self._starts = starts
        return self._starts

    def _line_bytes(self, line: int) -> bytes:
        starts = self.starts
        if line >= len(starts):
            return b""
        end = starts[line + 1] - 1 if line + 1 < len(starts) else len(self.data)
        return self.data[starts[line] : end]

    def point(self, line: int, byte_col: int, encoding: str) -> types.Position:
        """The LSP position of a (line, byte column); columns past the line end are clamped to it."""
        line = max(0, line)
        if line >= len(self.starts):
            line = len(self.starts) - 1
            byte_col = len(self._line_bytes(line))
        byte_col = min(byte_col, len(self._line_bytes(line)))
        return types.Position(line=line, character=byte_col_to_units(self._line_bytes(line), byte_col, encoding))

    def range_of(self, span: Span, encoding: str) -> types.Range:
        return types.Range(
            start=self.point(span.start_line, span.start_col, encoding),
            end=self.point(span.end_line, span.end_col, encoding),
        )

    def byte_offset(self, position: types.Position, encoding: str) -> int:
        """Byte offset of an LSP position in this buffer."""
        starts = self.starts
        if position.line >= len(starts):
            return len(self.data)
        line_bytes = self._line_bytes(position.line)
        if line_bytes.isascii() or encoding == types.PositionEncodingKind.Utf8:
            return starts[position.line] + min(position.character, len(line_bytes))
        text = line_bytes.decode("utf-8", errors="replace")
        index = _index_of_units(text, position.character, encoding)
        return starts[position.line] + len(text[:index].encode("utf-8", errors="surrogatepass"))


def shift_range(rng: types.Range, edited: types.Range, new_text: str, encoding: str) -> types.Range | None:
    """Where ``rng`` lands after ``edited`` is replaced by ``new_text`` (None if the edit touches it).

    Lets diagnostics computed for an earlier version follow the text, as editors move markers, until they
    are recomputed.
    """
    start, end = edited.start, edited.end
    if (rng.end.line, rng.end.character) < (start.line, start.character):
        return rng  # entirely before the edit
    if (rng.start.line, rng.start.character) < (end.line, end.character):
        return None  # overlaps the edit
    new_lines = new_text.split("\n")
    line_delta = len(new_lines) - 1 - (end.line - start.line)
    # Positions on the edit's last line move by the change in that line's prefix.
    last_col = (start.character if len(new_lines) == 1 else 0) + _units(new_lines[-1], encoding)

    def move(pos: types.Position) -> types.Position:
        if pos.line == end.line:
            return types.Position(line=pos.line + line_delta, character=last_col + pos.character - end.character)
        return types.Position(line=pos.line + line_delta, character=pos.character)

    return types.Range(start=move(rng.start), end=move(rng.end))
