"""Helpers shared by the CST passes: tree walks, declared names and format-preserving text edits.

A CST pass collects :class:`Edit` objects (byte ranges of the original text and their replacement) and
applies them all at once with :func:`apply_edits`; everything outside the edited ranges — comments, layout,
the user's names — is left byte-for-byte as it was.
"""

from __future__ import annotations

import ast as py_ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from xpiler_core.diagnostics import Span
from xpiler_core.frontend.source import ParsedSource
from xpiler_core.passes.base import PassContext


@dataclass(frozen=True)
class Edit:
    start_byte: int
    end_byte: int
    text: str


def walk(node: Node, skip: frozenset[str] = frozenset()) -> Iterator[Node]:
    """Pre-order walk without recursion (safe on deep trees); subtrees of types in ``skip`` are not entered."""
    for current, _ in walk_fields(node, skip):
        yield current


def walk_fields(node: Node, skip: frozenset[str] = frozenset()) -> Iterator[tuple[Node, str | None]]:
    """:func:`walk` with each node's field name in its parent. A tree cursor moves in C (a list of children
    per node made a 5 MB file's passes take half a minute)."""
    cursor = node.walk()
    depth = 0
    while True:
        current = cursor.node
        assert current is not None
        yield current, (cursor.field_name if depth else None)
        if current.type not in skip and cursor.goto_first_child():
            depth += 1
            continue
        while depth > 0 and not cursor.goto_next_sibling():
            cursor.goto_parent()
            depth -= 1
        if depth == 0:
            return


def apply_edits(data: bytes, edits: list[Edit]) -> tuple[bytes, list[Edit]]:
    """Apply non-overlapping edits; an edit overlapping an earlier-starting one is dropped and returned."""
    dropped: list[Edit] = []
    kept: list[Edit] = []
    last_end = -1
    # sorted by start then end: insertions (empty ranges) at an offset come before a replacement starting there
    for edit in sorted(set(edits), key=lambda e: (e.start_byte, e.end_byte, e.text)):
        if edit.start_byte < last_end:
            dropped.append(edit)
            continue
        kept.append(edit)
        last_end = max(last_end, edit.end_byte)
    out = bytearray()
    cursor = 0
    for edit in kept:
        out += data[cursor : edit.start_byte]
        out += edit.text.encode("utf-8")
        cursor = edit.end_byte
    out += data[cursor:]
    return bytes(out), dropped


def text_of(src: ParsedSource, node: Node | None) -> str:
    return "" if node is None else src.node_text(node)


def span_of(node: Node) -> Span:
    return Span.of(node)


_DECLARATOR_PARENTS = frozenset(
    {
        "function_declarator",
        "init_declarator",
        "declaration",
        "parameter_declaration",
        "pointer_declarator",
        "reference_declarator",
        "array_declarator",
        "field_declaration",
        "preproc_def",
        "preproc_function_def",
        "type_definition",
        "struct_specifier",
        "class_specifier",
        "enum_specifier",
        "enumerator",
        "namespace_definition",
        "alias_declaration",
    }
)


_MACRO_DEFINITION = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)


def defined_macros(*texts: str) -> frozenset[str]:
    """The macros these files ``#define`` anywhere (in any branch)."""
    return frozenset(m.group(1) for text in texts for m in _MACRO_DEFINITION.finditer(text))


def _macro_tested(src: ParsedSource, node: Node) -> tuple[str, bool] | None:
    """(macro, polarity) of a conditional that tests one macro — ``#ifdef X`` / ``#if defined(X)`` (True),
    ``#ifndef X`` / ``#if !defined(X)`` (False) — else None."""
    if node.type == "preproc_ifdef":
        name = node.child_by_field_name("name")
        return (src.node_text(name), node.children[0].type == "#ifdef") if name is not None else None
    condition = node.child_by_field_name("condition")
    polarity = True
    while condition is not None and condition.type in ("unary_expression", "parenthesized_expression"):
        if condition.type == "unary_expression":
            if src.node_text(condition.child_by_field_name("operator") or condition) != "!":
                return None
            polarity = not polarity
            condition = condition.child_by_field_name("argument")
        else:
            condition = condition.named_children[0] if condition.named_child_count == 1 else None
    if condition is None or condition.type != "preproc_defined":
        return None
    names = [c for c in condition.named_children if c.type == "identifier"]
    return (src.node_text(names[0]), polarity) if len(names) == 1 else None


def _constant_condition(src: ParsedSource, node: Node) -> int | None:
    """The value of an ``#if`` whose condition is an integer literal (``#if 0`` around disabled code)."""
    condition = node.child_by_field_name("condition")
    if condition is None or condition.type != "number_literal":
        return None
    try:
        return int(src.node_text(condition).rstrip("uUlL"), 0)
    except ValueError:
        return None


def _project_macro(name: str) -> bool:
    """A macro of the project's own naming: not reserved (a leading underscore), which the compiler and the
    system headers may define behind the project's back."""
    return not name.startswith("_")


def users_own_names(src: ParsedSource, ctx: PassContext) -> set[str]:
    """What a GPU pass leaves alone as the user's: the file's declarations (those of branches its build takes,
    the project's macros and -D deciding) and the project headers'."""
    return declared_names(src, ctx.project_names | frozenset(ctx.defines)) | ctx.project_names


def in_untaken_branch(src: ParsedSource, node: Node, defined: frozenset[str]) -> bool:
    """Whether ``node`` lies in a branch the build does not compile: of ``#if 0`` / ``#if 1`` (an integer
    literal), or of ``#ifdef``/``#ifndef``/``#if [!]defined(X)`` where X is a macro of the project's own naming
    (not reserved: no leading underscore, which the compiler and the system headers may define) that nothing in
    ``defined`` (the project's ``#define``s and -D flags) defines — ``#ifndef NO_CUDA … #else`` stand-ins for the
    CUDA API are not the project's API."""
    child, parent = node, node.parent
    while parent is not None:
        first_taken = _first_branch_taken(src, parent, defined)
        if first_taken is not None:
            alternative = parent.child_by_field_name("alternative")
            in_alternative = alternative is not None and child.id == alternative.id
            # an #elif chain is not decided here
            elif_chain = in_alternative and alternative is not None and alternative.type != "preproc_else"
            if not elif_chain and first_taken == in_alternative:
                return True
        child, parent = parent, parent.parent
    return False


def _first_branch_taken(src: ParsedSource, node: Node, defined: frozenset[str]) -> bool | None:
    """Whether the build compiles the first branch of the conditional ``node`` (None: not decided here)."""
    if node.type == "preproc_if" and (value := _constant_condition(src, node)) is not None:
        return value != 0
    if node.type not in ("preproc_ifdef", "preproc_if"):
        return None
    tested = _macro_tested(src, node)
    if tested is None or not _project_macro(tested[0]):
        return None
    macro, polarity = tested
    return (macro in defined) == polarity


_CONDITIONAL_LINE = re.compile(
    r"^[ \t]*#[ \t]*(?:(?P<kind>ifdef|ifndef)[ \t]+(?P<name>\w+)|if[ \t]+(?P<neg>!?)[ \t]*defined[ \t]*"
    r"(?:\([ \t]*(?P<pname>\w+)[ \t]*\)|[ \t]+(?P<bname>\w+))|(?P<other>if|elif|else|endif)\b)[^\n]*$", re.M)


_LITERAL_CONDITION = re.compile(r"^[\d\s()<>=!&|+\-]+$")


def _literal_condition(condition: str) -> bool | None:
    """The value of an ``#if`` condition made of integer literals, comparisons, ``&&``, ``||``, ``!``, ``+`` and
    ``-`` alone (``800 >= 700``, as the device-code ``__CUDA_ARCH__`` tests read once given their value), else
    None. Read as Python's expression tree, evaluated node by node (nothing is executed)."""
    condition = condition.split("//")[0].split("/*")[0].strip()
    if not condition or not _LITERAL_CONDITION.match(condition) or re.search(r"\d\s+\d|<<|>>", condition):
        return None
    expression = re.sub(r"!(?!=)", " not ", condition.replace("&&", " and ").replace("||", " or "))
    try:
        tree = py_ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None
    comparisons = {py_ast.Lt: int.__lt__, py_ast.LtE: int.__le__, py_ast.Gt: int.__gt__, py_ast.GtE: int.__ge__,
                   py_ast.Eq: int.__eq__, py_ast.NotEq: int.__ne__}

    def value(node: py_ast.expr) -> int:
        if isinstance(node, py_ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, py_ast.UnaryOp) and isinstance(node.op, py_ast.Not | py_ast.USub | py_ast.UAdd):
            v = value(node.operand)
            return int(not v) if isinstance(node.op, py_ast.Not) else -v if isinstance(node.op, py_ast.USub) else v
        if isinstance(node, py_ast.BinOp) and isinstance(node.op, py_ast.Add | py_ast.Sub):
            left, right = value(node.left), value(node.right)
            return left + right if isinstance(node.op, py_ast.Add) else left - right
        if isinstance(node, py_ast.BoolOp):
            values = [value(v) for v in node.values]
            return int(all(values) if isinstance(node.op, py_ast.And) else any(values))
        if isinstance(node, py_ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in comparisons:
            return int(comparisons[type(node.ops[0])](value(node.left), value(node.comparators[0])))
        raise ValueError("not a constant condition")

    try:
        return bool(value(tree))
    except ValueError:
        return None


def fold_decided_branches_in_functions(src: ParsedSource, defined: frozenset[str]) -> str:
    """The text with each ``#ifdef``/``#ifndef``/``#if [!]defined(X)`` inside a function body resolved as the
    build resolves it, where X is a macro of the project's own naming (no leading underscore) and ``defined``
    (the project's headers, other units and -D) or a ``#define`` of this file above it says whether it is
    defined: its directive lines and its untaken branch blanked (newlines kept, so every offset and line stays
    where it was). ``#ifndef NO_BOUND_CHECK`` in a kernel, or in the arguments of a launch, is then code the
    AST models; so is an ``#if`` whose condition is a constant (:func:`_literal_condition`); an ``#elif``
    chain, a reserved macro, or any other ``#if`` stays as written."""
    bodies = [(body.start_byte, body.end_byte) for n in walk(src.root, skip=NOT_CODE)
              if n.type == "function_definition" and (body := n.child_by_field_name("body")) is not None]
    if not bodies:
        return src.text
    text = src.text
    # the matches are over the decoded text, the bodies over its bytes: character offset -> byte offset where the
    # text is not ASCII (a header with comments in Chinese put an include guard "inside" a function body)
    offsets: list[int] | None = None
    if len(src.data) != len(text):
        offsets = [0]
        for ch in text:
            offsets.append(offsets[-1] + len(ch.encode("utf-8")))
    own = [(m.start(), m.group(1)) for m in _MACRO_DEFINITION.finditer(text)]
    blank: list[tuple[int, int]] = []
    # one frame per open conditional: whether its first branch is taken (None: not decided here), the spans
    # to blank once its #endif shows it was decidable (no #elif), and where an untaken branch started
    stack: list[tuple[bool | None, list[tuple[int, int]], list[int | None]]] = []
    for m in _CONDITIONAL_LINE.finditer(text):
        at = m.start()
        name = m.group("name") or m.group("pname") or m.group("bname")
        other = m.group("other")
        if name is not None or other == "if":
            decided: bool | None = None
            at_byte = offsets[at] if offsets is not None else at
            if name is not None and _project_macro(name) and any(a <= at_byte < b for a, b in bodies):
                is_defined = name in defined or any(pos < at and n == name for pos, n in own)
                wanted = m.group("kind") != "ifndef" and not m.group("neg")
                decided = is_defined == wanted
            elif other == "if" and any(a <= at_byte < b for a, b in bodies):
                decided = _literal_condition(m.group(0).split("if", 1)[1])
            stack.append((decided, [(m.start(), m.end())], [None if decided else m.end()]))
            continue
        if not stack:
            continue
        decided, spans, skipping = stack[-1]
        if decided is None:
            if other == "endif":
                stack.pop()
            continue
        if other == "elif":  # an #elif chain: not decided here after all
            stack[-1] = (None, spans, skipping)
        elif other == "else":
            spans.append((m.start(), m.end()))
            if skipping[0] is not None:
                spans.append((skipping[0], m.start()))
                skipping[0] = None
            else:
                skipping[0] = m.end()
        elif other == "endif":
            stack.pop()
            if skipping[0] is not None:
                spans.append((skipping[0], m.start()))
            spans.append((m.start(), m.end()))
            blank.extend(spans)
    if not blank:
        return text
    data = bytearray(text.encode("utf-8"))
    if offsets is not None:
        blank = [(offsets[a], offsets[b]) for a, b in blank]
    for start, end in blank:
        for k in range(start, end):
            if data[k] != ord("\n"):
                data[k] = ord(" ")
    return data.decode("utf-8", errors="replace")


def declared_names(src: ParsedSource, defined: frozenset[str] = frozenset()) -> set[str]:
    """Names the file itself declares (functions, variables, macros, types): passes never rename these.
    Declarations in a branch the build does not compile (:func:`in_untaken_branch`; ``defined``: the macros
    the rest of the project and its flags define, the file's own are added) are not the file's."""
    names: set[str] = set()
    defined = defined | defined_macros(src.text)
    for node, field in walk_fields(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type not in ("identifier", "type_identifier", "field_identifier", "namespace_identifier"):
            continue
        parent = node.parent
        if parent is None or parent.type not in _DECLARATOR_PARENTS:
            continue
        # In `declaration` the declared name is the `declarator` field, never the type.
        if parent.type in ("declaration", "parameter_declaration", "field_declaration") and field != "declarator":
            continue
        if parent.type == "init_declarator" and field != "declarator":
            continue
        if parent.type in ("struct_specifier", "class_specifier", "enum_specifier") and (
                field != "name" or parent.child_by_field_name("body") is None):
            continue  # `struct cudaResourceDesc r;` names a type declared elsewhere (an elaborated type)
        if parent.type == "type_definition" and field != "declarator":
            continue
        if in_untaken_branch(src, node, defined):
            continue
        names.add(src.node_text(node))
    return names


# subtrees that hold no names of the code: comments, string and character literals, <system> include paths
NOT_CODE = frozenset({"comment", "string_literal", "char_literal", "raw_string_literal", "system_lib_string"})


def rename_identifiers(src: ParsedSource, renaming: dict[str, str]) -> str:
    """The text with every identifier (and every token of a macro body) named in ``renaming`` renamed; member
    names, strings and comments are left as they are."""
    if not renaming:
        return src.text
    token = re.compile(r"\b(" + "|".join(map(re.escape, renaming)) + r")\b")
    edits: list[Edit] = []
    for node in walk(src.root, skip=NOT_CODE):
        if node.type in ("identifier", "type_identifier") and src.node_text(node) in renaming:
            edits.append(Edit(node.start_byte, node.end_byte, renaming[src.node_text(node)]))
        elif node.type == "preproc_arg":
            body = src.node_text(node)
            renamed = token.sub(lambda m: renaming[m.group(1)], body)
            if renamed != body:
                edits.append(Edit(node.start_byte, node.end_byte, renamed))
    data, _ = apply_edits(src.data, edits)
    return data.decode("utf-8")


def call_arguments(call: Node) -> list[Node]:
    """The argument expressions of a call_expression (comments excluded)."""
    args = call.child_by_field_name("arguments")
    if args is None:
        return []
    return [c for c in args.named_children if c.type != "comment"]


def call_name(src: ParsedSource, call: Node) -> str | None:
    func = call.child_by_field_name("function")
    if func is None or func.type not in ("identifier", "qualified_identifier", "template_function"):
        return None
    return src.node_text(func)


def is_launch(call: Node) -> bool:
    return any(c.type == "kernel_call_syntax" for c in call.children)


def top_insertion_point(src: ParsedSource) -> int:
    """Where passes insert helper code: after the last top-level #include, else after the leading comments."""
    offset = -1
    for child in src.root.children:
        if child.type == "preproc_include":
            offset = child.end_byte
    if offset >= 0:
        return offset
    for child in src.root.children:
        if child.type != "comment":
            return child.start_byte
    return len(src.data)


def marked_region(text: str, begin_mark: str, end_mark: str) -> tuple[int, int] | None:
    """[start, end) of the helper block a pass inserted between its begin and end marks, or None."""
    start = text.find(begin_mark)
    if start < 0:
        return None
    end = text.find(end_mark, start)
    return (start, end + len(end_mark)) if end >= 0 else None


def remove_marked_region(text: str, begin_mark: str, end_mark: str) -> str:
    """``text`` without the marked helper block and the newline after it (unchanged when there is none)."""
    region = marked_region(text, begin_mark, end_mark)
    if region is None:
        return text
    start, end = region
    if text[end : end + 1] == "\n":
        end += 1
    return text[:start] + text[end:]


def line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset)
    return line, offset - (data.rfind(b"\n", 0, offset) + 1)


def span_at(data: bytes, start: int, end: int) -> Span:
    sl, sc = line_col(data, start)
    el, ec = line_col(data, end)
    return Span(start, end, sl, sc, el, ec)
