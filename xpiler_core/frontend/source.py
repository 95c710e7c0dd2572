"""Reading and parsing source files with tree-sitter-cuda.

Every dialect is parsed by the CUDA grammar. BANG C keywords the grammar does not know are masked to
blanks of the same length first, so every byte offset in the tree is an offset in the user's file.
Bad input (binary, invalid UTF-8, huge, deeply nested) produces diagnostics, never exceptions.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Point, Query, QueryCursor, Tree

from xpiler_core.diagnostics import Diagnostic, Severity, Span, XpilerError
from xpiler_core.dialect import Dialect, detect_dialect

# Kernel sources are kilobytes; generated ones reach a few megabytes. Beyond this the file is refused
# (parse + model of 7.6 MiB of generated CUDA measured ~6.5 s of CPU; larger inputs would stall the editor).
MAX_SOURCE_BYTES = 8 * 1024 * 1024
# tree-sitter parses pathological nesting fine but recursive walks over it do not; beyond this depth
# the model builder stops descending and reports an "unsupported" diagnostic instead.
MAX_NESTING_DEPTH = 400

_BANG_KEYWORDS = re.compile(
    rb"\b(__mlu_global__|__mlu_func__|__mlu_entry__|__mlu_device__|__mlu_host__|__nram__|__wram__|"
    rb"__ldram__|__mlu_shared__|__mlu_const__)\b"
)

# Public name for the model builder, which reads the masked keywords back from the original bytes.
BANG_KEYWORD_PATTERN = _BANG_KEYWORDS


@lru_cache(maxsize=1)
def cuda_language() -> Language:
    return Language(tree_sitter_cuda.language())


def new_parser() -> Parser:
    return Parser(cuda_language())


def mask_bang_keywords(data: bytes) -> bytes:
    """Replace BANG C qualifiers by spaces of equal length so the CUDA grammar parses the file."""
    return _BANG_KEYWORDS.sub(lambda m: b" " * len(m.group(0)), data)


_ALIAS_ATTRIBUTE = re.compile(rb"\busing\s+\w+\s*=\s*(__attribute__)\s*\(")


def mask_alias_attributes(data: bytes) -> bytes:
    """Blank (equal length, newlines kept) a GNU attribute that opens a type alias's type,
    ``using float4 = __attribute__((__vector_size__(16))) float;`` (valid GNU C++ and HIP, beyond the grammar):
    the alias then parses as ``using float4 = float;``, and its text is still read from the original bytes."""
    out = bytearray(data)
    for match in _ALIAS_ATTRIBUTE.finditer(data):
        start, depth, end = match.start(1), 0, None
        for k in range(match.end(0) - 1, len(data)):
            if data[k] == ord("("):
                depth += 1
            elif data[k] == ord(")"):
                depth -= 1
                if depth == 0:
                    end = k + 1
                    break
        if end is not None:
            out[start:end] = bytes(b if b == ord("\n") else ord(" ") for b in data[start:end])
    return bytes(out)


# Calling-convention macros between a function's return type and its name (``void CUDART_CB done(...)``): empty
# on Linux, unknown to the grammar, which would read a syntax error.
CALLING_CONVENTIONS = re.compile(rb"\bCUDART_CB\b")


# ``__shared__ __align__(16) float s[64];``: the grammar reads the alignment as a parenthesized declarator
# (a syntax error that swallows the statements after it); blanked for the grammar, it stays in the text (the CST
# passes edit the original bytes) and the lowering reads it back from there (``frontend/lower.py``)
GNU_TYPEOF = re.compile(rb"\b__typeof(?:__)?\b(?=\s*\()")
ALIGNMENT = re.compile(rb"\b__align__\s*\([^()\n]*\)")


def parse_input(data: bytes, dialect: Dialect) -> bytes:
    """The bytes the grammar reads: the source with the constructs it cannot parse blanked (same offsets)."""
    masked = mask_bang_keywords(data) if dialect is Dialect.BANG else data
    if b"CUDART_CB" in masked:
        masked = CALLING_CONVENTIONS.sub(lambda m: b" " * len(m.group(0)), masked)
    if b"__align__" in masked:
        masked = ALIGNMENT.sub(lambda m: b" " * len(m.group(0)), masked)
    if b"__typeof" in masked:
        # GNU __typeof__(e) as a declaration's type (our CPU passes write it) is not in the C++ grammar: it reads
        # decltype in its place; the declared type's text still comes from the source, so it stays __typeof__
        masked = GNU_TYPEOF.sub(lambda m: b"decltype" + b" " * (len(m.group(0)) - len(b"decltype")), masked)
    return mask_alias_attributes(masked) if b"__attribute__" in masked else masked


# ``(ih >= 0 && ih < h && iw >= 0)``: the grammar may read ``ih < h && iw >`` as template arguments of ``ih``
# (and the rest as an assignment). A compiler decides by name lookup; here a name declared as a variable or a
# parameter in the file, and never as a function, is not a template.
_MISREAD_TEMPLATE = "(template_function name: (identifier) @name arguments: (template_argument_list) @args)"
_DECLARED = """
[(parameter_declaration declarator: (identifier) @variable)
 (parameter_declaration declarator: (pointer_declarator declarator: (identifier) @variable))
 (parameter_declaration declarator: (reference_declarator (identifier) @variable))
 (init_declarator declarator: (identifier) @variable)
 (init_declarator declarator: (pointer_declarator declarator: (identifier) @variable))
 (declaration declarator: (identifier) @variable)
 (function_declarator declarator: (identifier) @function)]
"""
MAX_COMPARISON_PASSES = 4


@lru_cache(maxsize=1)
def _comparison_queries() -> tuple[Query, Query]:
    return Query(cuda_language(), _MISREAD_TEMPLATE), Query(cuda_language(), _DECLARED)


def mask_misread_comparisons(tree: Tree, grammar_input: bytes) -> bytes:
    """``grammar_input`` with the ``<`` of each misread template argument list turned into ``>`` (the same
    precedence, and never a template opener), or the same object when there is none. The lowering reads the
    operator back from the original bytes."""
    misread, declared = _comparison_queries()
    found = [(m["name"][0], m["args"][0]) for _, m in QueryCursor(misread).matches(tree.root_node)]
    if not found:
        return grammar_input
    names = QueryCursor(declared).captures(tree.root_node)
    variables = {n.text for n in names.get("variable", [])} - {n.text for n in names.get("function", [])}
    out = bytearray(grammar_input)
    for name, args in found:
        if name.text in variables and out[args.start_byte] == ord("<"):
            out[args.start_byte] = ord(">")
    return bytes(out) if out != grammar_input else grammar_input


def parse_bytes(data: bytes, dialect: Dialect, old_tree: Tree | None = None) -> Tree:
    """The tree of ``data``: the grammar reads :func:`parse_input`, re-read with misread comparisons masked."""
    grammar_input = parse_input(data, dialect)
    tree = new_parser().parse(grammar_input, old_tree) if old_tree is not None else new_parser().parse(grammar_input)
    for _ in range(MAX_COMPARISON_PASSES if b"<" in data else 0):
        masked = mask_misread_comparisons(tree, grammar_input)
        if masked is grammar_input:
            break
        grammar_input = masked
        tree = new_parser().parse(grammar_input)
    return tree


@dataclass
class ParsedSource:
    """A parsed file: the text, the tree and the syntax diagnostics of this version."""

    path: str
    text: str
    data: bytes
    dialect: Dialect
    tree: Tree
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def root(self) -> Node:
        return self.tree.root_node

    def node_text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def edit(self, start_byte: int, old_end_byte: int, new_text: str) -> ParsedSource:
        """A new version with ``data[start_byte:old_end_byte]`` replaced, reparsed incrementally."""
        new_bytes = new_text.encode("utf-8")
        data = self.data[:start_byte] + new_bytes + self.data[old_end_byte:]
        new_end_byte = start_byte + len(new_bytes)
        if len(data) > MAX_SOURCE_BYTES or len(self.data) > MAX_SOURCE_BYTES:
            return parse_text(data.decode("utf-8", errors="replace"), self.path, self.dialect)
        old_tree = self.tree.copy()
        old_tree.edit(
            start_byte=start_byte,
            old_end_byte=old_end_byte,
            new_end_byte=new_end_byte,
            start_point=_point_at(self.data, start_byte),
            old_end_point=_point_at(self.data, old_end_byte),
            new_end_point=_point_at(data, new_end_byte),
        )
        tree = parse_bytes(data, self.dialect, old_tree)
        text = data.decode("utf-8", errors="replace")
        return ParsedSource(self.path, text, data, self.dialect, tree, syntax_diagnostics(tree, self.path))


def _point_at(data: bytes, offset: int) -> Point:
    line = data.count(b"\n", 0, offset)
    line_start = data.rfind(b"\n", 0, offset) + 1
    return Point(line, offset - line_start)


def decode_source(data: bytes, path: str = "<input>") -> str:
    """Decode a source file, refusing binary and oversized input with a located error."""
    if len(data) > MAX_SOURCE_BYTES:
        raise XpilerError(f"file is {len(data)} bytes; the limit is {MAX_SOURCE_BYTES} bytes", path)
    nul = data.find(b"\x00", 0, 65536)
    if nul >= 0:
        line = data.count(b"\n", 0, nul)
        col = nul - (data.rfind(b"\n", 0, nul) + 1)
        raise XpilerError("binary file (NUL byte): not a source file", path, line, col)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start)
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        raise XpilerError(f"invalid UTF-8 (byte 0x{data[exc.start]:02x})", path, line, col) from None


#: Called with the text of every fresh parse (tests count parses per translation through it).
PARSE_LISTENERS: list[Callable[[str], None]] = []
_RECENT_PARSES: OrderedDict[tuple[str, Dialect], ParsedSource] = OrderedDict()
_RECENT_LIMIT = 16
_RECENT_LOCK = threading.Lock()


def decode_lenient(data: bytes, path: str = "<input>") -> tuple[str, str | None]:
    """Like :func:`decode_source`, but a file that is not valid UTF-8 (old code with Latin-1 comments) is read
    as Latin-1, every byte a character, with a located warning instead of an error."""
    try:
        return decode_source(data, path), None
    except XpilerError as exc:
        if "UTF-8" not in exc.message:
            raise
        warning = f"{path}:{exc.line + 1}:{exc.col + 1}: warning: {exc.message}: the file is read as Latin-1"
        return data.decode("latin-1"), warning


def parse_text(text: str, path: str = "<input>", dialect: Dialect | None = None) -> ParsedSource:
    """Parse source text; the dialect is detected from suffix and content when not given.

    The same text parsed again soon after (a plan, the test builder and the runtime's launch rewriter all
    read the source) gets the same tree: a translation parses each text once."""
    dialect = dialect or detect_dialect(text, path)
    key = (text, dialect)
    with _RECENT_LOCK:
        recent = _RECENT_PARSES.get(key)
        if recent is not None:
            _RECENT_PARSES.move_to_end(key)
    if recent is not None:
        # the tree does not depend on the path; the diagnostics name it
        diagnostics = list(recent.diagnostics) if recent.path == path else syntax_diagnostics(recent.tree, path)
        return ParsedSource(path, recent.text, recent.data, recent.dialect, recent.tree, diagnostics)
    parsed = _parse(text, path, dialect)
    with _RECENT_LOCK:
        _RECENT_PARSES[key] = parsed
        if len(_RECENT_PARSES) > _RECENT_LIMIT:
            _RECENT_PARSES.popitem(last=False)
    return parsed


def _parse(text: str, path: str, dialect: Dialect) -> ParsedSource:
    for listener in PARSE_LISTENERS:
        listener(text)
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_SOURCE_BYTES:
        # Never raise here (the server parses every document): an empty tree plus one diagnostic.
        message = f"file is {len(data)} bytes; the limit is {MAX_SOURCE_BYTES} bytes: not parsed"
        too_large = Diagnostic(Severity.ERROR, "input.too-large", message, Span.empty(), path)
        return ParsedSource(path, text, data, dialect, new_parser().parse(b""), [too_large])
    tree = parse_bytes(data, dialect)
    return ParsedSource(path, text, data, dialect, tree, syntax_diagnostics(tree, path))


def parse_file(path: str | Path, dialect: Dialect | None = None) -> ParsedSource:
    """Read and parse a file. Raises :class:`XpilerError` (with file:line:col) on unreadable input."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise XpilerError(f"cannot read file: {exc.strerror}", str(path)) from None
    text = decode_source(data, str(path))
    return parse_text(text, str(path), dialect)


def syntax_diagnostics(tree: Tree, path: str, limit: int = 100) -> list[Diagnostic]:
    """ERROR and MISSING nodes as diagnostics (iterative walk: safe on arbitrarily deep trees)."""
    out: list[Diagnostic] = []
    if not tree.root_node.has_error:
        return out
    cursor = tree.walk()
    visited_children = False
    while len(out) < limit:
        node = cursor.node
        if node is None:
            break
        if not visited_children:
            if node.is_missing:
                out.append(
                    Diagnostic(Severity.ERROR, "syntax.missing", f"missing '{node.type}'", Span.of(node), path)
                )
            elif node.is_error:
                snippet = (node.text or b"")[:40].decode("utf-8", errors="replace").split("\n")[0]
                out.append(
                    Diagnostic(
                        Severity.ERROR, "syntax.error", f"syntax error near '{snippet}'", Span.of(node), path
                    )
                )
                # Do not descend into an ERROR node: one message per broken region.
                visited_children = True
                continue
            if node.has_error and cursor.goto_first_child():
                continue
            visited_children = True
        if cursor.goto_next_sibling():
            visited_children = False
        elif not cursor.goto_parent():
            break
    if len(out) >= limit:
        out.append(
            Diagnostic(Severity.INFO, "syntax.truncated", f"more than {limit} syntax errors; stopped", Span.empty(), path)
        )
    return out
