"""Lowering: tree-sitter CST (``frontend.source.ParsedSource``) → kernel AST (``xpiler_core.ast.Module``).

Rules that keep the round trip ``print_module(lower(parse_text(src)))`` compiling wherever ``src`` does:

* A construct is modeled only when every one of its children is understood; otherwise the whole construct
  becomes an :class:`~xpiler_core.ast.Opaque` holding its exact source text. Subtrees with syntax errors,
  preprocessor conditionals inside them, or unknown node kinds are therefore kept verbatim.
* Text between the children of a translation unit or block that no child covers (BANG C keywords masked
  for parsing, anything tree-sitter skipped) is kept too: BANG qualifiers in front of a function or
  declaration become its qualifiers/storage, anything else an ``Opaque`` item.
* Recursion is bounded by :data:`MAX_LOWER_DEPTH` CST levels; deeper subtrees become ``Opaque`` with an
  ``ast.nesting`` diagnostic, so 100,000 nested parentheses lower without a ``RecursionError``.
* Lowering never raises on any parse: an unexpected failure in one top-level item turns that item into
  ``Opaque`` with an ``ast.internal`` diagnostic (tests assert there are none on real code).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node as CstNode

from xpiler_core import ast as A
from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import ParsedSource, parse_text

# CST levels the lowering descends before keeping the rest as Opaque text. Each level costs a few Python
# frames here and in printers/visitors, so this stays well below the interpreter's recursion limit.
MAX_LOWER_DEPTH = 120

_BANG_QUALIFIER = re.compile(
    r"__mlu_global__|__mlu_func__|__mlu_entry__|__mlu_device__|__mlu_host__|__nram__|__wram__|__ldram__|"
    r"__mlu_shared__|__mlu_const__"
)
_ALIGNMENT = re.compile(r"\b__align__\s*\([^()\n]*\)")  # blanked for the grammar (frontend/source.py)
# statements whose nested blocks are lowered as blocks (where BANG declaration qualifiers are understood)
_NESTING_STATEMENTS = frozenset({"compound_statement", "if_statement", "for_statement", "while_statement",
                                 "do_statement"})

_NAME_NODES = frozenset(
    {
        "identifier", "field_identifier", "qualified_identifier", "template_function", "this", "nullptr",
        "null", "type_identifier", "primitive_type", "namespace_identifier", "operator_name",
        "destructor_name", "sized_type_specifier",
    }
)
_STRING_NODES = frozenset({"string_literal", "concatenated_string", "raw_string_literal"})
_BINARY_OPS = frozenset(
    {"+", "-", "*", "/", "%", "<<", ">>", "<", ">", "<=", ">=", "==", "!=", "&", "|", "^", "&&", "||"}
)
_ASSIGN_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="})
_UNARY_OPS = frozenset({"-", "+", "!", "~", "*", "&"})
_DECL_EXTRA_KINDS = frozenset({"storage_class_specifier", "attribute_specifier", "ms_declspec_modifier"})


class _Unsupported(Exception):
    """Raised inside the lowering of one construct to fall back to Opaque for it."""


def lower(parsed: ParsedSource) -> A.Module:
    """The AST of a parsed file. Never raises; see the module docstring for what becomes ``Opaque``."""
    return _Lowerer(parsed).module()


def lower_text(text: str, path: str = "<input>", dialect: Dialect | None = None) -> A.Module:
    """Parse and lower in one step (dialect detected from ``path`` and content when not given)."""
    return lower(parse_text(text, path, dialect))


class _Lowerer:
    def __init__(self, parsed: ParsedSource) -> None:
        self.parsed = parsed
        self.data = parsed.data
        self.path = parsed.path
        self.bang = parsed.dialect is Dialect.BANG
        self.diagnostics: list[Diagnostic] = []
        self._depth_reported = False

    # ---------------------------------------------------------------------------- helpers
    def text(self, node: CstNode) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def span_of_bytes(self, start: int, end: int) -> Span:
        def point(offset: int) -> tuple[int, int]:
            line = self.data.count(b"\n", 0, offset)
            return line, offset - (self.data.rfind(b"\n", 0, offset) + 1)

        sl, sc = point(start)
        el, ec = point(end)
        return Span(start, end, sl, sc, el, ec)

    def opaque(self, node: CstNode, reason: str, prefix: tuple[str, ...] = ()) -> A.Opaque:
        text = self.text(node)
        if prefix:
            text = " ".join(prefix) + " " + text
        return A.Opaque(text, reason, span=Span.of(node))

    def opaque_expr(self, node: CstNode, reason: str) -> A.Opaque:
        text = self.text(node)
        if node.type == "comma_expression":
            # Without its parentheses a comma expression would read as two arguments or initializers.
            text = "(" + text + ")"
        return A.Opaque(text, reason, span=Span.of(node))

    def note_depth(self, node: CstNode) -> None:
        if not self._depth_reported:
            self._depth_reported = True
            self.diagnostics.append(
                Diagnostic(
                    Severity.WARNING, "ast.nesting",
                    f"unsupported: nesting deeper than {MAX_LOWER_DEPTH} levels; kept as unmodeled text",
                    Span.of(node), self.path,
                )
            )

    @staticmethod
    def named(node: CstNode) -> list[CstNode]:
        return [c for c in node.named_children if c.type != "comment"]

    @staticmethod
    def has_foreign_child(node: CstNode) -> bool:
        """Children the model cannot place: preprocessor lines, errors, missing tokens."""
        return any(c.type.startswith("preproc") or c.is_error or c.is_missing for c in node.children)

    @staticmethod
    def check_children(node: CstNode, known: set[int], tokens: frozenset[str]) -> None:
        """Refuse a node with a child the lowering would not print (e.g. `static` in `a[static 1]`)."""
        for c in node.children:
            if c.id in known or c.type == "comment" or (not c.is_named and c.type in tokens):
                continue
            if c.type == "type_qualifier" and node.type in ("pointer_declarator", "abstract_pointer_declarator"):
                continue
            raise _Unsupported(f"{node.type.replace('_', ' ')} with {c.type}")

    def bang_prefix(self, start: int, end: int) -> tuple[str, ...] | None:
        """BANG keywords masked out of ``data[start:end]`` when that gap holds nothing else, else None."""
        gap = self.data[start:end].decode("utf-8", errors="replace")
        if not self.bang:
            return None
        words = gap.split()
        if words and all(_BANG_QUALIFIER.fullmatch(w) for w in words):
            return tuple(words)
        return None

    # ------------------------------------------------------------------------- sequences
    def sequence(
        self,
        nodes: list[CstNode],
        start: int,
        end: int,
        lower_one: Callable[[CstNode, tuple[str, ...]], A.Stmt | A.Function],
    ) -> list[A.Stmt | A.Function]:
        """Lower children in order, keeping text in the gaps between them (see module docstring)."""
        out: list[A.Stmt | A.Function] = []
        prev = start
        for node in nodes:
            prefix: tuple[str, ...] = ()
            gap = self.data[prev : node.start_byte]
            if gap.strip():
                bang = self.bang_prefix(prev, node.start_byte)
                if bang is not None:
                    prefix = bang
                else:
                    text = gap.decode("utf-8", errors="replace").strip()
                    out.append(A.Opaque(text, "uncovered text", span=self.span_of_bytes(prev, node.start_byte)))
            if node.type == ";" and not prefix and out and isinstance(out[-1], A.Opaque) and not gap.strip():
                # `struct S {...};` at top level: the ';' is a sibling node; keep it on the struct's line.
                out[-1] = A.replace(out[-1], text=out[-1].text + ";")
            else:
                out.append(lower_one(node, prefix))
            prev = node.end_byte
        tail = self.data[prev:end]
        if tail.strip():
            text = tail.decode("utf-8", errors="replace").strip()
            out.append(A.Opaque(text, "uncovered text", span=self.span_of_bytes(prev, end)))
        return out

    # ------------------------------------------------------------------------------ module
    def module(self) -> A.Module:
        root = self.parsed.root
        items = self.sequence(self.top_level(list(root.children)), 0, len(self.data), self.top_item_guarded)
        return A.Module(
            tuple(items),  # type: ignore[arg-type]
            self.parsed.dialect,
            self.path,
            tuple(self.diagnostics),
            span=Span.of(root),
        )

    def top_level(self, nodes: list[CstNode]) -> list[CstNode]:
        """Top-level items, looking inside ``#if``/``#ifdef``/``#ifndef`` blocks without ``#else``/``#elif``
        (include guards, feature switches): their items are modeled like any other, and the directive lines
        stay in place as text between them (kernels in a guarded header are kernels)."""
        out: list[CstNode] = []
        for node in nodes:
            if (node.type in ("preproc_if", "preproc_ifdef") and not node.has_error
                    and node.child_by_field_name("alternative") is None):
                name = node.child_by_field_name("name") or node.child_by_field_name("condition")
                inner = [c for c in node.named_children if name is None or c.id != name.id]
                out.extend(self.top_level(inner))
            else:
                out.append(node)
        return out

    def top_item_guarded(self, node: CstNode, prefix: tuple[str, ...]) -> A.Stmt | A.Function:
        try:
            return self.top_item(node, prefix)
        except (RecursionError, _Unsupported, ValueError, IndexError, AttributeError, TypeError) as exc:
            if not isinstance(exc, _Unsupported):
                self.diagnostics.append(
                    Diagnostic(
                        Severity.ERROR, "ast.internal",
                        f"internal: could not lower {node.type} ({type(exc).__name__}); kept as text",
                        Span.of(node), self.path,
                    )
                )
            return self.opaque(node, f"unsupported {node.type}", prefix)

    def top_item(self, node: CstNode, prefix: tuple[str, ...]) -> A.Stmt | A.Function:
        kind = node.type
        if node.has_error and not self.error_only_in_body(node):
            return self.opaque(node, "syntax error", prefix)
        if kind == "comment":
            return A.Comment(self.text(node), span=Span.of(node))
        if kind == "preproc_include":
            return self.include(node)
        if kind == "preproc_call":
            return self.pragma(node)
        if kind == "function_definition":
            return self.function_or_opaque(node, prefix)
        if kind == "template_declaration":
            params = node.child_by_field_name("parameters")
            inner = [c for c in self.named(node) if c.type != "template_parameter_list"]
            if params is not None and len(inner) == 1 and inner[0].type == "function_definition":
                if self.data[node.start_byte : inner[0].start_byte].strip().startswith(b"template"):
                    return self.function_or_opaque(inner[0], prefix, template=self.text(params), outer=node)
            return self.opaque(node, "template (not a function template)", prefix)
        if kind == "linkage_specification":
            value = node.child_by_field_name("value")
            body = node.child_by_field_name("body")
            if value is not None and body is not None and body.type == "function_definition" and not prefix:
                lang = self.text(value).strip('"')
                return self.function_or_opaque(body, (), linkage=lang, outer=node)
            return self.opaque(node, "linkage block", prefix)
        if kind == "declaration":
            try:
                return self.declaration(node, prefix, 0)
            except _Unsupported:
                return self.opaque(node, "declaration", prefix)
        return self.opaque(node, kind, prefix)

    def error_only_in_body(self, node: CstNode) -> bool:
        """A function (or function template) whose syntax errors all sit inside its body: the body's
        statements with errors become Opaque one by one, the rest of the function is still modeled."""
        if node.type == "template_declaration":
            inner = [c for c in self.named(node) if c.type == "function_definition"]
            if len(inner) != 1 or any(c.has_error for c in node.children if c.id != inner[0].id):
                return False
            node = inner[0]
        if node.type != "function_definition":
            return False
        body = node.child_by_field_name("body")
        if body is None or body.type != "compound_statement":
            return False
        if any(c.has_error for c in node.children if c.id != body.id):
            return False
        # The braces themselves must be real: a MISSING '}' means the body swallowed what follows.
        return (
            bool(body.children)
            and body.children[0].type == "{"
            and body.children[-1].type == "}"
            and not body.children[-1].is_missing
        )

    def include(self, node: CstNode) -> A.Stmt:
        path = node.child_by_field_name("path")
        if path is None or self.has_foreign_child(node):
            return self.opaque(node, "include")
        text = self.text(path)
        if path.type == "system_lib_string" and text.startswith("<") and text.endswith(">"):
            return A.Include(text[1:-1], True, span=Span.of(node))
        if path.type == "string_literal" and text.startswith('"') and text.endswith('"'):
            return A.Include(text[1:-1], False, span=Span.of(node))
        return self.opaque(node, "include")

    def pragma(self, node: CstNode) -> A.Stmt:
        directive = node.child_by_field_name("directive")
        if directive is not None and self.text(directive) == "#pragma":
            arg = node.child_by_field_name("argument")
            text = self.text(arg).strip() if arg is not None else ""
            if "\\\n" not in text and "/*" not in text:
                return A.Pragma(text, span=Span.of(node))
        return self.opaque(node, "preprocessor directive")

    # --------------------------------------------------------------------------- functions
    def function_or_opaque(
        self,
        node: CstNode,
        prefix: tuple[str, ...],
        template: str | None = None,
        linkage: str | None = None,
        outer: CstNode | None = None,
    ) -> A.Stmt | A.Function:
        try:
            return self.function(node, prefix, template, linkage, outer or node)
        except _Unsupported as exc:
            return self.opaque(outer or node, f"function: {exc}", prefix)

    def function(
        self, node: CstNode, prefix: tuple[str, ...], template: str | None, linkage: str | None, outer: CstNode
    ) -> A.Function:
        if self.has_foreign_child(node):
            raise _Unsupported("preprocessor inside the signature")
        type_node = node.child_by_field_name("type")
        declarator = node.child_by_field_name("declarator")
        body = node.child_by_field_name("body")
        if type_node is None or declarator is None or body is None or body.type != "compound_statement":
            raise _Unsupported("no body or return type")
        qualifiers = list(prefix)
        ret_quals: list[str] = []
        launch_bounds: tuple[A.Expr, ...] = ()
        fixed = {type_node.id, declarator.id, body.id}
        # BANG keywords masked between the specifiers (e.g. `static __mlu_func__ float f()`).
        if self.bang:
            qualifiers.extend(_BANG_QUALIFIER.findall(self.text(node)[: declarator.start_byte - node.start_byte]))
        for child in node.children:
            if child.id in fixed or child.type == "comment":
                continue
            if child.type == "launch_bounds":
                launch_bounds = tuple(self.expr(c, 1) for c in self.named(child))
            elif child.type == "type_qualifier":
                (ret_quals if self.text(child) in A.TYPE_QUALIFIERS else qualifiers).append(self.text(child))
            elif child.type in _DECL_EXTRA_KINDS or child.type == "attribute_declaration" or not child.is_named:
                qualifiers.append(" ".join(self.text(child).split()))
            else:
                raise _Unsupported(f"specifier {child.type}")
        base = self.type_base(type_node)
        pointers, reference, inner = self.pointer_chain(declarator)
        if inner.type != "function_declarator":
            raise _Unsupported("declarator")
        name_node = inner.child_by_field_name("declarator")
        params_node = inner.child_by_field_name("parameters")
        if name_node is None or params_node is None or name_node.type not in _NAME_NODES:
            raise _Unsupported("function name")
        self.check_children(inner, {name_node.id, params_node.id}, frozenset())
        ret = A.Type(base, tuple(ret_quals), pointers, reference, span=Span.of(type_node))
        return A.Function(
            self.text(name_node),
            ret,
            self.parameters(params_node),
            self.block(body, 1),
            tuple(qualifiers),
            template,
            linkage,
            launch_bounds,
            span=Span.of(outer),
        )

    def parameters(self, node: CstNode) -> tuple[A.Param | A.Opaque, ...]:
        if self.has_foreign_child(node):
            raise _Unsupported("preprocessor in parameter list")
        out: list[A.Param | A.Opaque] = []
        for child in self.named(node):
            if child.type == "parameter_declaration":
                try:
                    out.append(self.parameter(child))
                except _Unsupported:
                    out.append(self.opaque(child, "parameter"))
            else:
                out.append(self.opaque(child, child.type))
        return tuple(out)

    def parameter(self, node: CstNode) -> A.Param:
        type_node = node.child_by_field_name("type")
        declarator = node.child_by_field_name("declarator")
        if type_node is None:
            raise _Unsupported("parameter type")
        quals: list[str] = []
        for child in node.children:
            if child.id == type_node.id or (declarator is not None and child.id == declarator.id):
                continue
            if child.type == "comment":
                continue
            if child.type == "type_qualifier" and self.text(child) in A.TYPE_QUALIFIERS:
                quals.append(self.text(child))
            else:
                raise _Unsupported(f"parameter specifier {child.type}")
        base = self.type_base(type_node)
        if declarator is None:
            return A.Param(None, A.Type(base, tuple(quals)), span=Span.of(node))
        name, pointers, reference, dims = self.declarator(declarator, 2)
        return A.Param(name, A.Type(base, tuple(quals), pointers, reference), dims, span=Span.of(node))

    # ---------------------------------------------------------------------- declarators
    def type_base(self, node: CstNode) -> str:
        if node.child_by_field_name("body") is not None or self.has_foreign_child(node):
            raise _Unsupported("type with a body")
        text = self.text(node)
        if "//" in text or "/*" in text:
            raise _Unsupported("comment inside type")
        return " ".join(text.split())

    def pointer_chain(self, node: CstNode) -> tuple[tuple[tuple[str, ...], ...], str, CstNode]:
        """Peel ``*``/``&`` declarators: (pointer levels, reference, the declarator inside)."""
        pointers: list[tuple[str, ...]] = []
        reference = ""
        while node.type in ("pointer_declarator", "abstract_pointer_declarator", "reference_declarator",
                            "abstract_reference_declarator"):
            inner = node.child_by_field_name("declarator")
            if node.type in ("pointer_declarator", "abstract_pointer_declarator"):
                if reference:
                    raise _Unsupported("pointer to reference")
                self.check_children(node, {inner.id} if inner is not None else set(), frozenset({"*"}))
                quals = [self.text(c) for c in node.children if c.type == "type_qualifier"]
                pointers.append(tuple(quals))
            else:
                reference = "&&" if any(c.type == "&&" for c in node.children) else "&"
                named = self.named(node)
                inner = named[-1] if named else None
                self.check_children(node, {inner.id} if inner is not None else set(), frozenset({"&", "&&"}))
            if inner is None:
                return tuple(pointers), reference, node  # abstract: no name inside
            node = inner
        return tuple(pointers), reference, node

    def declarator(
        self, node: CstNode, depth: int
    ) -> tuple[str | None, tuple[tuple[str, ...], ...], str, tuple[A.Expr | None, ...]]:
        """(name, pointer levels, reference, array dims) of a plain, pointer or array declarator."""
        if self.has_foreign_child(node):
            raise _Unsupported("preprocessor inside a declarator")
        pointers, reference, inner = self.pointer_chain(node)
        dims: list[A.Expr | None] = []
        while inner.type in ("array_declarator", "abstract_array_declarator"):
            size = inner.child_by_field_name("size")
            below = inner.child_by_field_name("declarator")
            self.check_children(inner, {getattr(size, "id", -1), getattr(below, "id", -1)}, frozenset({"[", "]"}))
            dims.insert(0, self.expr(size, depth + 1) if size is not None else None)
            if below is None:
                return None, pointers, reference, tuple(dims)
            if below.type not in ("identifier", "field_identifier", "array_declarator"):
                raise _Unsupported(f"array of {below.type}")
            inner = below
        if inner.type in ("pointer_declarator", "abstract_pointer_declarator", "reference_declarator",
                          "abstract_reference_declarator"):
            return None, pointers, reference, tuple(dims)  # abstract declarator: nothing named
        if inner.type not in ("identifier", "field_identifier"):
            raise _Unsupported(f"declarator {inner.type}")
        return self.text(inner), pointers, reference, tuple(dims)

    def type_descriptor(self, node: CstNode, depth: int) -> A.Type:
        type_node = node.child_by_field_name("type")
        declarator = node.child_by_field_name("declarator")
        whole = " ".join(self.text(node).split())
        if type_node is None or self.has_foreign_child(node) or "//" in whole or "/*" in whole:
            raise _Unsupported("type")
        quals: list[str] = []
        for child in self.named(node):
            if child.id == type_node.id or (declarator is not None and child.id == declarator.id):
                continue
            if child.type == "type_qualifier" and self.text(child) in A.TYPE_QUALIFIERS:
                quals.append(self.text(child))
            else:
                return A.Type(whole, span=Span.of(node))
        try:
            base = self.type_base(type_node)
            if declarator is None:
                return A.Type(base, tuple(quals), span=Span.of(node))
            name, pointers, reference, dims = self.declarator(declarator, depth)
        except _Unsupported:
            return A.Type(whole, span=Span.of(node))
        if name is not None or dims:
            return A.Type(whole, span=Span.of(node))
        return A.Type(base, tuple(quals), pointers, reference, span=Span.of(node))

    def declaration(self, node: CstNode, prefix: tuple[str, ...], depth: int) -> A.DeclStmt:
        if self.has_foreign_child(node):
            raise _Unsupported("preprocessor inside a declaration")
        type_node = node.child_by_field_name("type")
        declarators = node.children_by_field_name("declarator")
        if type_node is None or not declarators:
            raise _Unsupported("declaration without declarator")
        storage = list(prefix)
        quals: list[str] = []
        fixed = {type_node.id} | {d.id for d in declarators}
        if self.bang:
            storage.extend(_BANG_QUALIFIER.findall(self.text(node)[: declarators[0].start_byte - node.start_byte]))
        for child in node.children:
            if child.id in fixed or child.type in ("comment", ",", ";"):
                continue
            if child.type == "type_qualifier":
                (quals if self.text(child) in A.TYPE_QUALIFIERS else storage).append(self.text(child))
            elif child.type in _DECL_EXTRA_KINDS or not child.is_named:
                storage.append(" ".join(self.text(child).split()))
            else:
                raise _Unsupported(f"declaration specifier {child.type}")
        # ``__align__(N)``, blanked for the grammar (frontend/source.py): read back from the text
        storage.extend(" ".join(m.split()) for m in _ALIGNMENT.findall(
            self.text(node)[: declarators[0].start_byte - node.start_byte]))
        base = self.type_base(type_node)
        decls: list[A.VarDecl] = []
        for d in declarators:
            init: A.Expr | None = None
            style: str = "="
            target = d
            if d.type == "init_declarator":
                target_node = d.child_by_field_name("declarator")
                value = d.child_by_field_name("value")
                if target_node is None or value is None or self.has_foreign_child(d):
                    raise _Unsupported("initializer")
                target = target_node
                self.check_children(d, {target_node.id, value.id}, frozenset({"="}))
                has_equals = any(c.type == "=" for c in d.children)
                if value.type == "argument_list" and not has_equals:
                    style = "()"
                    init = A.InitList(self.args(value, depth + 1), span=Span.of(value))
                elif value.type == "initializer_list" and not has_equals:
                    style = "{}"
                    init = self.expr(value, depth + 1)
                elif has_equals:
                    init = self.expr(value, depth + 1)
                else:
                    raise _Unsupported("initializer form")
            if target.type == "function_declarator" and depth > 0 and init is None:
                # `dim3 block(TILE, TILE);` inside a function: tree-sitter reads a declaration of a function
                # taking types TILE; inside a body it is (almost always) a constructor call on values.
                init = self.ctor_args(target)
                style = "()"
                target = target.child_by_field_name("declarator") or target
            name, pointers, reference, dims = self.declarator(target, depth + 1)
            if name is None:
                raise _Unsupported("unnamed declarator")
            vtype = A.Type(base, tuple(quals), pointers, reference, span=Span.of(type_node))
            decls.append(
                A.VarDecl(name, vtype, dims, init, tuple(storage), style, span=Span.of(d))  # type: ignore[arg-type]
            )
        return A.DeclStmt(tuple(decls), span=Span.of(node))

    def ctor_args(self, node: CstNode) -> A.InitList:
        """``block(TILE, TILE)`` misread as a function declarator: its 'parameter types' as argument names."""
        params = node.child_by_field_name("parameters")
        if params is None or self.has_foreign_child(params):
            raise _Unsupported("function declaration")
        args: list[A.Expr] = []
        for p in self.named(params):
            type_node = p.child_by_field_name("type")
            if (
                p.type != "parameter_declaration"
                or type_node is None
                or type_node.type != "type_identifier"
                or len(self.named(p)) != 1
            ):
                raise _Unsupported("function declaration")
            args.append(A.Name(self.text(type_node), span=Span.of(type_node)))
        return A.InitList(tuple(args), span=Span.of(params))

    # ---------------------------------------------------------------------------- statements
    def block(self, node: CstNode, depth: int) -> A.Block:
        inner = [c for c in node.children if c.type not in ("{", "}")]
        start = node.children[0].end_byte if node.children and node.children[0].type == "{" else node.start_byte
        end = node.children[-1].start_byte if node.children and node.children[-1].type == "}" else node.end_byte
        stmts = self.sequence(inner, start, end, lambda c, prefix: self.stmt_with_prefix(c, prefix, depth + 1))
        return A.Block(tuple(stmts), span=Span.of(node))  # type: ignore[arg-type]

    def stmt_with_prefix(self, node: CstNode, prefix: tuple[str, ...], depth: int) -> A.Stmt:
        if prefix:
            if node.type == "declaration" and not node.has_error:
                try:
                    return self.declaration(node, prefix, depth)
                except _Unsupported:
                    pass
            return self.opaque(node, "qualified statement", prefix)
        return self.stmt(node, depth)

    def stmt(self, node: CstNode, depth: int) -> A.Stmt:
        if depth > MAX_LOWER_DEPTH:
            self.note_depth(node)
            return self.opaque(node, "nesting too deep")
        if node.has_error:
            return self.opaque(node, "syntax error")
        if self.bang and node.type != "comment" and _BANG_QUALIFIER.search(self.text(node)) and (
                node.type not in _NESTING_STATEMENTS or _BANG_QUALIFIER.search(self.head_text(node))):
            # a qualifier in a nested block is lowered there (blocks take declaration prefixes); one in a
            # statement's own head (a for's init) is not modeled
            return self.opaque(node, "BANG qualifier inside")
        try:
            return self.stmt_inner(node, depth)
        except _Unsupported as exc:
            self.diagnostics.append(
                Diagnostic(
                    Severity.INFO, "ast.opaque", f"unmodeled {node.type}: {exc}; kept as text",
                    Span.of(node), self.path,
                )
            )
            return self.opaque(node, str(exc))

    def head_text(self, node: CstNode) -> str:
        """The text of a statement without its nested blocks (an if's condition, a for's header)."""
        parts: list[str] = []
        for child in node.children:
            if child.type == "compound_statement":
                continue
            parts.append(self.head_text(child) if child.type in _NESTING_STATEMENTS or child.type == "else_clause"
                         else self.text(child))
        return " ".join(parts)

    def body(self, node: CstNode | None, depth: int) -> A.Stmt:
        if node is None:
            raise _Unsupported("missing body")
        return self.stmt(node, depth + 1)

    def stmt_inner(self, node: CstNode, depth: int) -> A.Stmt:
        kind = node.type
        span = Span.of(node)
        if kind == "comment":
            return A.Comment(self.text(node), span=span)
        if kind == "preproc_call":
            return self.pragma(node)
        if kind.startswith("preproc"):
            return self.opaque(node, "preprocessor directive")
        if kind == "compound_statement":
            return self.block(node, depth)
        if kind == "static_assert_declaration" and not node.has_error:
            # compile-time only: passes treat it like a comment (no run-time meaning) and print it verbatim, so
            # the translation is still checked against the assertion the author wrote
            return A.Comment(" ".join(self.text(node).split()), span=span)
        if kind in ("alias_declaration", "type_definition"):
            # a local type alias (``using float4 = __attribute__((vector_size(16))) float;``) stays text that
            # moves like a declaration, but reads and writes no variable (its loop stays analysable)
            return self.opaque(node, A.TYPE_ALIAS)
        if self.has_foreign_child(node):
            raise _Unsupported("preprocessor inside a statement")
        if kind == "expression_statement":
            named = self.named(node)
            if not named:
                return A.Empty(span=span)
            if len(named) != 1:
                raise _Unsupported("expression statement")
            return A.ExprStmt(self.expr(named[0], depth + 1), span=span)
        if kind == "declaration":
            return self.declaration(node, (), depth)
        if kind == "if_statement":
            if any(c.type == "constexpr" for c in node.children):
                raise _Unsupported("if constexpr")
            cond = self.condition(node.child_by_field_name("condition"), depth)
            then = self.body(node.child_by_field_name("consequence"), depth)
            alt = node.child_by_field_name("alternative")
            else_: A.Stmt | None = None
            if alt is not None:
                alt_named = self.named(alt) if alt.type == "else_clause" else [alt]
                if len(alt_named) != 1:
                    raise _Unsupported("else clause")
                else_ = self.body(alt_named[0], depth)
            return A.If(cond, then, else_, span=span)
        if kind == "for_statement":
            return self.for_stmt(node, depth)
        if kind == "while_statement":
            cond = self.condition(node.child_by_field_name("condition"), depth)
            return A.While(cond, self.body(node.child_by_field_name("body"), depth), span=span)
        if kind == "do_statement":
            cond_node = node.child_by_field_name("condition")
            if cond_node is None:
                raise _Unsupported("do without condition")
            body = self.body(node.child_by_field_name("body"), depth)
            return A.DoWhile(body, self.expr(cond_node, depth + 1), span=span)
        if kind == "return_statement":
            named = self.named(node)
            if len(named) > 1:
                raise _Unsupported("return")
            return A.Return(self.expr(named[0], depth + 1) if named else None, span=span)
        if kind == "break_statement":
            return A.Break(span=span)
        if kind == "continue_statement":
            return A.Continue(span=span)
        raise _Unsupported(kind.replace("_", " "))

    def condition(self, node: CstNode | None, depth: int) -> A.Expr:
        if node is None:
            raise _Unsupported("missing condition")
        if node.type == "condition_clause":
            value = node.child_by_field_name("value")
            named = self.named(node)
            if value is None or len(named) != 1 or self.has_foreign_child(node):
                raise _Unsupported("condition with a declaration or initializer")
            return self.expr(value, depth + 1)
        return self.expr(node, depth + 1)

    def for_stmt(self, node: CstNode, depth: int) -> A.For:
        init_node = node.child_by_field_name("initializer")
        cond_node = node.child_by_field_name("condition")
        step_node = node.child_by_field_name("update")
        body_node = node.child_by_field_name("body")
        known = {getattr(n, "id", -1) for n in (init_node, cond_node, step_node, body_node)}
        if [c for c in self.named(node) if c.id not in known]:
            raise _Unsupported("for statement form")
        init: A.Stmt | None = None
        if init_node is not None:
            if init_node.type == "declaration":
                init = self.declaration(init_node, (), depth + 1)
            else:
                init = A.ExprStmt(self.expr(init_node, depth + 1), span=Span.of(init_node))
        cond = self.expr(cond_node, depth + 1) if cond_node is not None else None
        step = self.expr(step_node, depth + 1) if step_node is not None else None
        return A.For(init, cond, step, self.body(body_node, depth), span=Span.of(node))

    # --------------------------------------------------------------------------- expressions
    def args(self, node: CstNode, depth: int) -> tuple[A.Expr, ...]:
        if self.has_foreign_child(node):
            raise _Unsupported("preprocessor inside arguments")
        return tuple(self.expr(c, depth + 1) for c in self.named(node))

    def expr(self, node: CstNode, depth: int) -> A.Expr:
        if depth > MAX_LOWER_DEPTH:
            self.note_depth(node)
            return self.opaque_expr(node, "nesting too deep")
        if self.has_foreign_child(node):
            return self.opaque_expr(node, "preprocessor or error inside")
        try:
            return self.expr_inner(node, depth)
        except _Unsupported as exc:
            return self.opaque_expr(node, str(exc))

    def template_like(self, node: CstNode) -> bool:
        """``A<32> x = ...`` misread as ``(A < 32) > (x = ...)``: an unparenthesized ``<`` on the left spine of
        a ``>``/``>>``/``>=``. C never needs such a chain, so the text is kept as it is."""
        op_node = node.child_by_field_name("operator")
        if op_node is None or op_node.type not in (">", ">>", ">="):
            return False
        left = node.child_by_field_name("left")
        while left is not None and left.type == "binary_expression":
            inner_op = left.child_by_field_name("operator")
            if inner_op is not None and inner_op.type in ("<", "<="):
                return True
            left = left.child_by_field_name("right")
        return False

    def postfix_under_unary(self, node: CstNode, op: str, arg: CstNode, depth: int) -> A.Expr:
        """``-a++``: tree-sitter reads ``(-a)++``; C binds the postfix tighter: ``-(a++)``."""
        prefix_ops: list[tuple[str, CstNode]] = []
        while arg.type == "unary_expression" and not self.has_foreign_child(arg):
            op_node = arg.child_by_field_name("operator")
            inner = arg.child_by_field_name("argument")
            if op_node is None or inner is None or op_node.type not in _UNARY_OPS:
                raise _Unsupported("unary operand")
            prefix_ops.append((op_node.type, arg))
            arg = inner
        out: A.Expr = A.Unary(op, self.expr(arg, depth), True, span=self.span_of_bytes(arg.start_byte, node.end_byte))
        for prefix_op, unary_node in reversed(prefix_ops):
            out = A.Unary(prefix_op, out, span=self.span_of_bytes(unary_node.start_byte, node.end_byte))
        return out

    def expr_inner(self, node: CstNode, depth: int) -> A.Expr:
        kind = node.type
        span = Span.of(node)
        d = depth + 1
        if kind in _NAME_NODES:
            text = self.text(node)
            if "//" in text or "/*" in text:
                raise _Unsupported("comment inside a name")
            return A.Name(" ".join(text.split()) if kind != "template_function" else text, span=span)
        if kind == "number_literal":
            text = self.text(node)
            if text[:1] in ("-", "+"):
                # tree-sitter folds a sign into the literal; C has no signed literals (and passes expect none).
                return A.Unary(text[0], A.Literal(text[1:].lstrip(), "number", span=span), span=span)
            return A.Literal(text, "number", span=span)
        if kind == "char_literal":
            return A.Literal(self.text(node), "char", span=span)
        if kind in _STRING_NODES:
            return A.Literal(self.text(node), "string", span=span)
        if kind in ("true", "false"):
            return A.Literal(self.text(node), "bool", span=span)
        if kind == "parenthesized_expression":
            named = self.named(node)
            if len(named) != 1 or named[0].type == "compound_statement":
                raise _Unsupported("parenthesized form")
            return self.expr(named[0], d)
        if kind in ("binary_expression", "comma_expression"):
            left = node.child_by_field_name("left")
            right = node.child_by_field_name("right")
            if left is None or right is None:
                raise _Unsupported("binary operand")
            if kind == "comma_expression":
                # tree-sitter nests `a, b, c` to the right; C's comma is left-associative.
                items = [left]
                while right.type == "comma_expression" and not self.has_foreign_child(right):
                    nxt_left, nxt_right = right.child_by_field_name("left"), right.child_by_field_name("right")
                    if nxt_left is None or nxt_right is None:
                        break
                    items.append(nxt_left)
                    right = nxt_right
                items.append(right)
                out = self.expr(items[0], d)
                for item in items[1:]:
                    out = A.Binary(",", out, self.expr(item, d), span=span)
                return out
            else:
                op_node = node.child_by_field_name("operator")
                op = op_node.type if op_node is not None else ""
                if op == ">" and op_node is not None and self.text(op_node) == "<":
                    op = "<"  # a comparison the grammar misread as template arguments (source.parse_bytes)
                if op not in _BINARY_OPS:
                    raise _Unsupported(f"operator {op}")
                if self.template_like(node):
                    raise _Unsupported("'<' ... '>' that may be template arguments")
            return A.Binary(op, self.expr(left, d), self.expr(right, d), span=span)
        if kind in ("unary_expression", "pointer_expression", "update_expression"):
            op_node = node.child_by_field_name("operator")
            arg = node.child_by_field_name("argument")
            if op_node is None or arg is None:
                raise _Unsupported("unary operand")
            op = op_node.type
            if kind == "update_expression":
                if op not in ("++", "--"):
                    raise _Unsupported(f"operator {op}")
                postfix = op_node.start_byte > arg.start_byte
                if postfix and arg.type == "unary_expression":
                    return self.postfix_under_unary(node, op, arg, d)
                return A.Unary(op, self.expr(arg, d), postfix, span=span)
            if op not in _UNARY_OPS:
                raise _Unsupported(f"operator {op}")
            return A.Unary(op, self.expr(arg, d), span=span)
        if kind == "assignment_expression":
            left = node.child_by_field_name("left")
            right = node.child_by_field_name("right")
            op_node = node.child_by_field_name("operator")
            if left is None or right is None or op_node is None or op_node.type not in _ASSIGN_OPS:
                raise _Unsupported("assignment form")
            return A.Assign(op_node.type, self.expr(left, d), self.expr(right, d), span=span)
        if kind == "conditional_expression":
            parts = [node.child_by_field_name(f) for f in ("condition", "consequence", "alternative")]
            if any(p is None for p in parts):
                raise _Unsupported("conditional form")
            c, t, e = (self.expr(p, d) for p in parts if p is not None)
            return A.Ternary(c, t, e, span=span)
        if kind == "call_expression":
            func = node.child_by_field_name("function")
            arguments = node.child_by_field_name("arguments")
            if func is None or arguments is None:
                raise _Unsupported("call form")
            launch = [c for c in node.children if c.type == "kernel_call_syntax"]
            args = self.args(arguments, d)
            if launch:
                config = tuple(self.expr(c, d) for c in self.named(launch[0]))
                return A.Launch(self.expr(func, d), config, args, span=span)
            return A.Call(self.expr(func, d), args, span=span)
        if kind == "subscript_expression":
            base = node.child_by_field_name("argument")
            indices = node.child_by_field_name("indices") or node.child_by_field_name("index")
            if base is None or indices is None:
                raise _Unsupported("subscript form")
            if indices.type == "subscript_argument_list":
                items = self.named(indices)
                if len(items) != 1 or self.has_foreign_child(indices):
                    raise _Unsupported("multi-index subscript")
                index_node = items[0]
            else:
                index_node = indices
            return A.Index(self.expr(base, d), self.expr(index_node, d), span=span)
        if kind == "field_expression":
            base = node.child_by_field_name("argument")
            op_node = node.child_by_field_name("operator")
            fld = node.child_by_field_name("field")
            if base is None or op_node is None or fld is None or fld.type != "field_identifier":
                raise _Unsupported("member form")
            return A.Member(self.expr(base, d), self.text(fld), op_node.type == "->", span=span)
        if kind == "cast_expression":
            type_node = node.child_by_field_name("type")
            value = node.child_by_field_name("value")
            if type_node is None or value is None:
                raise _Unsupported("cast form")
            return A.Cast(self.type_descriptor(type_node, d), self.expr(value, d), span=span)
        if kind == "sizeof_expression":
            type_node = node.child_by_field_name("type")
            value = node.child_by_field_name("value")
            if type_node is not None:
                return A.SizeOf(self.type_descriptor(type_node, d), span=span)
            if value is not None:
                return A.SizeOf(self.expr(value, d), span=span)
            raise _Unsupported("sizeof form")
        if kind == "initializer_list":
            return A.InitList(tuple(self.expr(c, d) for c in self.named(node)), span=span)
        raise _Unsupported(kind.replace("_", " "))
