"""Open documents: incremental text sync, incremental reparse and one analysis (parse + kernel model) per
version.

Edits arrive on the event loop and are applied to the document text at once (cheap string slicing); the
reparse happens later on the analysis thread, which replays the queued edits into the previous tree with
``ParsedSource.edit`` so tree-sitter only reparses what changed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path
from xpiler_server.positions import ByteLines, LineIndex

from xpiler_core import api as core_api
from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect

log = logging.getLogger(__name__)

# tree-sitter holds the GIL while it parses (~0.35 s per MB here), so bigger files are not analysed live:
# the server would stop answering while it parses. They get one diagnostic saying so.
MAX_LIVE_ANALYSIS_BYTES = 2 * 1024 * 1024
# Beyond this many queued edits a full parse is cheaper than replaying them one by one.
MAX_REPLAYED_EDITS = 200


@dataclass(frozen=True)
class TextEditOp:
    """One replacement of ``[start, end)`` (str indices in the text it applied to) by ``new_text``."""

    start: int
    end: int
    new_text: str


@dataclass
class Analysis:
    """Everything derived from one version of a document."""

    version: int
    text: str
    parsed: core_api.ParsedSource | None
    model: Any
    kernels: list[core_api.KernelInfo]
    diagnostics: list[Diagnostic]
    lines: ByteLines
    seconds: float = 0.0

    def kernel_at(self, byte_offset: int) -> core_api.KernelInfo | None:
        """The kernel whose definition contains ``byte_offset`` (the innermost if nested)."""
        found = [k for k in self.kernels if k.span.start_byte <= byte_offset <= k.span.end_byte]
        return min(found, key=lambda k: k.span.end_byte - k.span.start_byte) if found else None

    def kernel_named_at(self, byte_offset: int) -> core_api.KernelInfo | None:
        """The kernel whose *name* is at ``byte_offset``, in its definition or any launch/reference."""
        for kernel in self.kernels:
            for span in (kernel.name_span, *kernel.reference_spans):
                if span.start_byte <= byte_offset <= span.end_byte:
                    return kernel
        return None


@dataclass
class Document:
    uri: str
    path: str
    language_id: str
    version: int
    text: str
    pending: list[TextEditOp] = field(default_factory=list)
    full_reparse: bool = True
    analysis: Analysis | None = None
    # (version, edit) since the stored analysis (None: a whole-document replacement), so a position in the
    # current text can be mapped back into the last analysis without waiting for a new one.
    history: list[tuple[int, TextEditOp | None]] = field(default_factory=list)
    _parsed: core_api.ParsedSource | None = None
    _line_index: LineIndex | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Serialises analyses: each one replays the edits queued since the tree the previous one left.
    analyze_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def line_index(self) -> LineIndex:
        if self._line_index is None or self._line_index.text is not self.text:
            self._line_index = LineIndex.of(self.text)
        return self._line_index

    @property
    def dialect(self) -> Dialect:
        return core_api.detect_dialect(self.text[:200_000], self.path)

    def apply_changes(self, changes: list[Any], version: int, encoding: str) -> None:
        """Apply ``TextDocumentContentChangeEvent``s in order and move to ``version``."""
        with self.lock:
            for change in changes:
                self._apply_change(change, encoding, version)
            self.version = version

    def _apply_change(self, change: Any, encoding: str, version: int) -> None:
        rng = getattr(change, "range", None)
        if rng is None:
            self.text = change.text
            self.pending.clear()
            self.full_reparse = True
            self.history.append((version, None))
            return
        index = self.line_index
        start = index.offset(rng.start, encoding)
        end = max(start, index.offset(rng.end, encoding))
        self.text = self.text[:start] + change.text + self.text[end:]
        self.history.append((version, TextEditOp(start, end, change.text)))
        if len(self.pending) >= MAX_REPLAYED_EDITS:
            self.full_reparse = True
            self.pending.clear()
        elif not self.full_reparse:
            self.pending.append(TextEditOp(start, end, change.text))

    def analyze(self) -> Analysis:
        """Bring the analysis up to the current version (runs off the event loop)."""
        with self.analyze_lock:
            return self._analyze()

    def _analyze(self) -> Analysis:
        with self.lock:
            version, text = self.version, self.text
            edits, full = list(self.pending), self.full_reparse
            self.pending.clear()
            self.full_reparse = False
            previous = self._parsed
        if self.analysis is not None and self.analysis.version == version and not edits and not full:
            return self.analysis
        started = time.perf_counter()
        size = len(text.encode("utf-8", errors="surrogatepass")) if not text.isascii() else len(text)
        if size > MAX_LIVE_ANALYSIS_BYTES:
            analysis = self._too_large(version, text, size)
            with self.lock:
                self._parsed = None  # the next analysis parses from scratch
        else:
            parsed = self._reparse(previous, text, edits, full)
            model, kernels, model_diagnostics = core_api.analyze_model(parsed)
            # The model's diagnostics already carry the syntax errors it could not explain otherwise;
            # adding the parse's own would report every syntax error twice.
            diagnostics = model_diagnostics if model is not None else parsed.diagnostics + model_diagnostics
            analysis = Analysis(version, text, parsed, model, kernels, diagnostics, ByteLines(parsed.data))
            with self.lock:
                self._parsed = parsed
        analysis.seconds = time.perf_counter() - started
        with self.lock:
            # A slower run must not replace a newer analysis that finished first.
            if self.analysis is None or self.analysis.version <= version:
                self.analysis = analysis
                self.history = [entry for entry in self.history if entry[0] > version]
        return analysis

    def map_to_last_analysis(self, offset: int) -> tuple[Analysis, int] | None:
        """The last stored analysis and the byte offset in its text of ``offset`` (a str index in the current
        text), undoing the edits made since; None when there is no analysis or a whole-text replacement
        intervened. A position inside an edited region maps to the region's start."""
        with self.lock:
            analysis = self.analysis
            if analysis is None:
                return None
            ops = [op for version, op in self.history if version > analysis.version]
        if any(op is None for op in ops):
            return None
        for op in reversed(ops):
            assert op is not None
            if offset >= op.start + len(op.new_text):
                offset -= len(op.new_text) - (op.end - op.start)
            elif offset > op.start:
                offset = op.start
        old = analysis.text
        offset = max(0, min(offset, len(old)))
        return analysis, offset if old.isascii() else _utf8_len(old[:offset])

    def _reparse(
        self, previous: core_api.ParsedSource | None, text: str, edits: list[TextEditOp], full: bool
    ) -> core_api.ParsedSource:
        dialect = core_api.detect_dialect(text[:200_000], self.path)
        if previous is None or full or previous.dialect is not dialect:
            return core_api.parse_text(text, self.path, dialect)
        parsed = previous
        try:
            for op in edits:
                current = parsed.text
                same_offsets = current.isascii()  # str index == byte offset
                start = op.start if same_offsets else _utf8_len(current[: op.start])
                end = op.end if same_offsets else _utf8_len(current[: op.end])
                parsed = parsed.edit(start, end, op.new_text)
        except Exception:  # an edit that does not line up: start again from the text
            log.exception("incremental reparse failed for %s; reparsing fully", self.uri)
            return core_api.parse_text(text, self.path, dialect)
        if parsed.text != text:
            log.warning("incremental reparse of %s diverged from the text; reparsing fully", self.uri)
            return core_api.parse_text(text, self.path, dialect)
        return parsed

    def _too_large(self, version: int, text: str, size: int) -> Analysis:
        message = (
            f"file is {size / 1e6:.1f} MB; live analysis stops at {MAX_LIVE_ANALYSIS_BYTES / 1e6:.1f} MB "
            "(use the xpiler CLI for files this large)"
        )
        diagnostic = Diagnostic(Severity.INFO, "server.too-large", message, Span.empty(), self.path)
        return Analysis(version, text, None, None, [], [diagnostic], ByteLines(b""))


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


class DocumentStore:
    """The open documents by URI."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}

    def open(self, item: types.TextDocumentItem) -> Document:
        path = to_fs_path(item.uri) or item.uri
        doc = Document(item.uri, path, item.language_id, item.version, item.text)
        self._docs[item.uri] = doc
        return doc

    def change(self, params: types.DidChangeTextDocumentParams, encoding: str) -> Document | None:
        doc = self._docs.get(params.text_document.uri)
        if doc is None:
            return None
        doc.apply_changes(list(params.content_changes), params.text_document.version, encoding)
        return doc

    def close(self, uri: str) -> Document | None:
        return self._docs.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def __iter__(self) -> Iterator[Document]:
        return iter(list(self._docs.values()))
