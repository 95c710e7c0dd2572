"""The kernel AST: a typed C-subset syntax tree that structural passes read and rebuild.

Where it sits
-------------
``frontend/lower.py`` lowers a tree-sitter CST (``frontend.source.parse_text``) into a :class:`Module`;
passes (loop recovery, binding, split/fuse/reorder, ...) transform it; ``printer`` prints it in any
dialect (CUDA, HIP, C, BANG C). ``print_module(lower(parse_text(src)))`` compiles wherever ``src`` does.

Design
------
* **Immutable.** Every node is a frozen dataclass. Change a node with :func:`dataclasses.replace` (re-exported
  here as :func:`replace`); sequences are tuples. Nodes are hashable and compare **structurally**: the
  ``span`` field is excluded from equality, so a re-parsed tree equals the original.
* **Spans.** Every node has ``span: Span | None`` (keyword-only, last): the source range it was lowered from,
  ``None`` for nodes a pass built. Diagnostics about a node use its span (or its nearest ancestor's).
* **Nothing is lost.** Text the AST does not model (switch statements, structs, namespaces, macros,
  lambdas, ``#if`` blocks, anything with a syntax error, nesting deeper than the lowering bound) becomes an
  :class:`Opaque` node holding the exact source text. ``Opaque`` is an expression, a statement and a
  top-level item at once; the printer emits its text verbatim. Comments between statements are kept as
  :class:`Comment`; comments *inside* a modeled expression or declaration are dropped.
* **Qualifiers are strings as spelled in the source** (``"__global__"``, ``"__shared__"``, ``"static"``,
  ``"__restrict__"``, ``"__mlu_global__"``, ``"__nram__"`` ...). Passes that build nodes may use any
  dialect's spelling; the printer maps spellings to the target dialect from a data table
  (``printer/styles.toml``). Use :data:`KERNEL_QUALIFIERS`, :data:`SHARED_QUALIFIERS` etc. to test meaning.

Node families
-------------
Types and declarations: :class:`Type` (base name, qualifiers, pointer levels, reference), :class:`VarDecl`
(one declarator: name, type, array dims, initializer, storage qualifiers), :class:`Param`.

Expressions (:class:`Expr`): :class:`Name` (identifiers, ``std::max``, ``k<T, 4>``, ``this``),
:class:`Literal` (text kept exactly: ``1.0f``, ``0x10u``, ``"s"``), :class:`Unary` (prefix/postfix
``- + ! ~ * & ++ --``), :class:`Binary` (including ``,``), :class:`Assign` (``=`` and compound ops),
:class:`Ternary`, :class:`Call` (barriers are calls: ``__syncthreads()``; see :func:`is_barrier`),
:class:`Launch` (``k<<<grid, block, smem, stream>>>(args)``), :class:`Index` (``a[i]``; ``a[i][j]`` is
nested), :class:`Member` (``threadIdx.x``, ``p->f``), :class:`Cast` (C-style), :class:`SizeOf`,
:class:`InitList` (``{a, b}``), :class:`Opaque`. Parentheses are not nodes: grouping is the tree's shape and
the printer inserts parentheses from operator precedence.

Statements (:class:`Stmt`): :class:`Block`, :class:`DeclStmt` (one declaration statement, one or more
:class:`VarDecl`), :class:`ExprStmt`, :class:`If`, :class:`For` (``init``/``cond``/``step``/``body``;
:meth:`For.canonical` gives a :class:`LoopView` ``(var, start, stop, step)`` when recognizable),
:class:`While`, :class:`DoWhile`, :class:`Return`, :class:`Break`, :class:`Continue`, :class:`Pragma`
(``#pragma unroll``, ``#pragma omp parallel for``), :class:`Comment`, :class:`Empty`, :class:`Opaque`.

Top level: :class:`Module` (items, dialect, path, lowering diagnostics) holding :class:`Function`
(qualifiers, optional ``template`` header text, return type, params, ``launch_bounds``, ``linkage`` for
``extern "C"``, body), :class:`DeclStmt` (globals, ``__constant__``/``__device__`` variables),
:class:`Include`, :class:`Pragma`, :class:`Comment`, :class:`Opaque`.

Utilities for passes
--------------------
* Traversal: :func:`children`, :func:`walk` (iterative pre-order), :class:`Visitor`, :class:`Transformer`
  (``visit_<ClassName>`` methods; in a tuple field a visit may return a list to splice, or ``None`` to
  delete), :func:`rewrite` (top-down replace-by-function), :func:`substitute` (names → expressions).
* Analysis: :func:`read_write` (:class:`ReadWrite`: scalar reads/writes, memory bases read/written, calls),
  :func:`free_names` (names used but not declared inside), :func:`array_accesses`,
  :func:`declared_types`, :func:`builtin_ref` (``threadIdx.x`` → ``("threadIdx", "x")``), :func:`is_barrier`,
  :func:`const_int` (fold constant integer expressions, C division), :func:`fresh_name` (collision-free
  names for new loop variables), :meth:`LoopView.trip_count`.
* Building: :func:`name`, :func:`lit`, :func:`binop`, :func:`assign`, :func:`call`, :func:`index`,
  :func:`member`, :func:`var`, :func:`decl`, :func:`expr_stmt`, :func:`block`, :func:`pragma`,
  :func:`for_range` (``for (int i = start; i < stop; i += step)``), :func:`if_`.

Example::

    from xpiler_core import ast as A
    loop = A.for_range("i", A.lit(0), A.name("n"),
                       A.block(A.expr_stmt(A.assign(A.index(A.name("c"), A.name("i")),
                                                    A.binop("+", A.index(A.name("a"), A.name("i")),
                                                            A.index(A.name("b"), A.name("i")))))))
    body = A.block(A.pragma("omp parallel for"), loop)
    assert loop.canonical().var == "i"
"""

from __future__ import annotations

import dataclasses
import re
import typing as t
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from xpiler_core.diagnostics import Diagnostic, Span
from xpiler_core.dialect import Dialect

N = TypeVar("N", bound="Node")

#: Function qualifiers that make a function a kernel entry (any dialect's spelling).
KERNEL_QUALIFIERS = frozenset({"__global__", "__mlu_global__", "__mlu_entry__"})
#: Function qualifiers for device-side helper functions.
DEVICE_QUALIFIERS = frozenset({"__device__", "__mlu_func__", "__mlu_device__"})
#: Storage qualifiers of block-shared memory.
SHARED_QUALIFIERS = frozenset({"__shared__", "__mlu_shared__"})
#: Storage qualifiers of per-core scratch memories (BANG C).
SCRATCH_QUALIFIERS = frozenset({"__nram__", "__wram__", "__ldram__"})
#: Qualifiers that belong to a type (and to pointer levels) rather than to the declaration.
TYPE_QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict"})
#: Calls that are block-level barriers.
BARRIER_FUNCTIONS = frozenset({"__syncthreads", "__sync_all", "__sync_cluster", "__sync_all_ipu", "__sync"})
#: Builtin index variables that appear as ``X.x``/``X.y``/``X.z``.
BUILTIN_VECTORS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
# bytes of C's scalar types and of the fixed-width names CUDA, HIP and BANG C (``int8`` … ``uint64``) spell them
SCALAR_BYTES = {
    "bool": 1, "char": 1, "signed char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1, "int8": 1, "uint8": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "int16": 2, "uint16": 2,
    "half": 2, "__half": 2, "__nv_bfloat16": 2, "bfloat16_t": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "int32": 4, "uint32": 4, "float": 4,
    "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8,
    "int64": 8, "uint64": 8, "size_t": 8, "double": 8,
}


# --------------------------------------------------------------------------------------------- nodes
@dataclass(frozen=True, kw_only=True)
class Node:
    """Base of every AST node. ``span`` is where it came from (``None`` if built by a pass)."""

    span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class Expr(Node):
    """Base of expressions."""


@dataclass(frozen=True, kw_only=True)
class Stmt(Node):
    """Base of statements (also used for top-level items that are statements: globals, pragmas)."""


@dataclass(frozen=True)
class Opaque(Expr, Stmt):
    """Source text the AST does not model, kept verbatim. ``reason`` says why (not compared)."""

    text: str
    reason: str = field(default="", compare=False)


# the reason of an Opaque local type alias (``using T = ...;``, ``typedef``): compile-time only, it reads and
# writes no variable, so :func:`read_write` does not count it as unmodeled code
TYPE_ALIAS = "type alias"


@dataclass(frozen=True)
class Type(Node):
    """A C type as written: ``const float* __restrict__`` is ``Type("float", ("const",), (("__restrict__",),))``.

    ``base`` is the specifier text (``"unsigned int"``, ``"half2"``, ``"T"``, ``"std::size_t"``; for a cast
    to an unusual abstract declarator it holds the whole type text). ``pointers`` has one entry per ``*``,
    left to right, each holding the qualifiers written after that star. ``reference`` is ``""``, ``"&"`` or
    ``"&&"``.
    """

    base: str
    quals: tuple[str, ...] = ()
    pointers: tuple[tuple[str, ...], ...] = ()
    reference: str = ""

    @property
    def is_pointer(self) -> bool:
        return bool(self.pointers)

    @property
    def is_const(self) -> bool:
        return "const" in self.quals

    @property
    def is_restrict(self) -> bool:
        return any(q in ("__restrict__", "__restrict", "restrict") for q in (self.pointers[-1] if self.pointers else ()))

    def pointee(self) -> Type:
        """The type one ``*`` less (``float*`` → ``float``)."""
        return dataclasses.replace(self, pointers=self.pointers[:-1], span=None)


@dataclass(frozen=True)
class Name(Expr):
    """An identifier or other name-like primary: ``i``, ``std::max``, ``k<float, 4>``, ``this``."""

    id: str


@dataclass(frozen=True)
class Literal(Expr):
    """A literal, its text kept exactly (``1.0f``, ``0x10u``, ``'a'``, ``"s"``, ``true``)."""

    text: str
    kind: t.Literal["number", "char", "string", "bool"] = "number"

    @property
    def int_value(self) -> int | None:
        """The value of an integer literal (suffixes ``u``/``l`` allowed), else ``None``."""
        if self.kind != "number":
            return None
        t = self.text.lower().rstrip("ul").replace("'", "")
        try:
            if t.startswith("0x"):
                return int(t, 16)
            if t.startswith("0b"):
                return int(t, 2)
            if len(t) > 1 and t.startswith("0") and t.isdigit():
                return int(t, 8)
            return int(t, 10)
        except ValueError:
            return None


@dataclass(frozen=True)
class Unary(Expr):
    """Prefix ``- + ! ~ * & ++ --`` or postfix ``++ --`` (``postfix=True``)."""

    op: str
    operand: Expr
    postfix: bool = False


@dataclass(frozen=True)
class Binary(Expr):
    """A binary operator, including ``&&``, ``||`` and the comma operator ``,``."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Assign(Expr):
    """``target op value`` with ``op`` one of ``= += -= *= /= %= &= |= ^= <<= >>=``."""

    op: str
    target: Expr
    value: Expr


@dataclass(frozen=True)
class Ternary(Expr):
    cond: Expr
    then: Expr
    else_: Expr


@dataclass(frozen=True)
class Call(Expr):
    """A call; ``func`` is usually a :class:`Name` (``__syncthreads``, ``atomicAdd``, ``static_cast<int>``)."""

    func: Expr
    args: tuple[Expr, ...] = ()

    @property
    def callee(self) -> str | None:
        return self.func.id if isinstance(self.func, Name) else None


@dataclass(frozen=True)
class Launch(Expr):
    """A kernel launch ``kernel<<<config...>>>(args)``: config is (grid, block[, smem[, stream]])."""

    kernel: Expr
    config: tuple[Expr, ...]
    args: tuple[Expr, ...] = ()


@dataclass(frozen=True)
class Index(Expr):
    """``base[index]``; multi-dimensional access is nested: ``a[i][j]`` = ``Index(Index(a, i), j)``."""

    base: Expr
    index: Expr


@dataclass(frozen=True)
class Member(Expr):
    """``base.field`` or ``base->field`` (``arrow=True``); ``threadIdx.x`` is ``Member(Name("threadIdx"), "x")``."""

    base: Expr
    field: str
    arrow: bool = False


@dataclass(frozen=True)
class Cast(Expr):
    """A C-style cast ``(type)operand``."""

    type: Type
    operand: Expr


@dataclass(frozen=True)
class SizeOf(Expr):
    """``sizeof(type)`` or ``sizeof expr``."""

    arg: Type | Expr


@dataclass(frozen=True)
class InitList(Expr):
    """A braced initializer ``{a, b, c}`` (also the argument list of a ``T x(a, b)`` declaration)."""

    items: tuple[Expr, ...] = ()


@dataclass(frozen=True)
class VarDecl(Node):
    """One declared variable. ``dims`` are array extents left to right (``None`` for ``[]``).

    ``storage`` holds declaration qualifiers in source order (``static``, ``extern``, ``__shared__``,
    ``__constant__``, ``__device__``, ``__nram__`` ...). ``init_style`` is ``"="`` (``int x = e``),
    ``"()"`` (``dim3 g(a, b)``; ``init`` is an :class:`InitList` of the arguments) or ``"{}"``
    (``dim3 g{a}``; ``init`` is an :class:`InitList`).
    """

    name: str
    type: Type
    dims: tuple[Expr | None, ...] = ()
    init: Expr | None = None
    storage: tuple[str, ...] = ()
    init_style: t.Literal["=", "()", "{}"] = "="

    @property
    def is_shared(self) -> bool:
        return any(q in SHARED_QUALIFIERS for q in self.storage)

    @property
    def is_dynamic_shared(self) -> bool:
        """``extern __shared__ T buf[];``"""
        return self.is_shared and "extern" in self.storage


@dataclass(frozen=True)
class Param(Node):
    """A function parameter; ``name`` is ``None`` for unnamed ones (``void f(int)``)."""

    name: str | None
    type: Type
    dims: tuple[Expr | None, ...] = ()


@dataclass(frozen=True)
class Block(Stmt):
    stmts: tuple[Stmt, ...] = ()


@dataclass(frozen=True)
class DeclStmt(Stmt):
    """A declaration statement. Declarators that share base type and storage print as one declaration."""

    decls: tuple[VarDecl, ...]


@dataclass(frozen=True)
class ExprStmt(Stmt):
    expr: Expr


@dataclass(frozen=True)
class Empty(Stmt):
    """The empty statement ``;``."""


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Stmt | None = None


@dataclass(frozen=True)
class LoopView:
    """A ``for`` loop recognized as ``for (var = start; var < stop; var += step)`` (increasing).

    ``stop`` is exclusive (``i <= n`` gives ``n + 1``); ``step`` is an expression (``1``, ``4``,
    ``blockDim.x * gridDim.x``); ``var_type`` is the declared type when the loop declares the variable.
    Only returned when the body neither assigns ``var`` nor any name in ``stop``/``step`` (nor takes their
    address), and contains no :class:`Opaque` text (which might).
    """

    var: str
    start: Expr
    stop: Expr
    step: Expr
    var_type: Type | None = None

    @property
    def step_value(self) -> int | None:
        return const_int(self.step)

    def trip_count(self, env: Mapping[str, int] | None = None) -> int | None:
        """Iterations when start, stop and step are constant (names bound in ``env``), else ``None``."""
        start, stop, step = const_int(self.start, env), const_int(self.stop, env), const_int(self.step, env)
        if start is None or stop is None or step is None or step <= 0:
            return None
        return max(0, -(-(stop - start) // step))


@dataclass(frozen=True)
class For(Stmt):
    """``for (init; cond; step) body``; ``init`` is a :class:`DeclStmt`, an :class:`ExprStmt` or ``None``."""

    init: Stmt | None
    cond: Expr | None
    step: Expr | None
    body: Stmt

    def canonical(self) -> LoopView | None:
        return loop_view(self)


@dataclass(frozen=True)
class While(Stmt):
    cond: Expr
    body: Stmt


@dataclass(frozen=True)
class DoWhile(Stmt):
    body: Stmt
    cond: Expr


@dataclass(frozen=True)
class Return(Stmt):
    value: Expr | None = None


@dataclass(frozen=True)
class Break(Stmt):
    pass


@dataclass(frozen=True)
class Continue(Stmt):
    pass


@dataclass(frozen=True)
class Pragma(Stmt):
    """``#pragma <text>`` (``text`` is e.g. ``"unroll"``, ``"unroll 4"``, ``"omp parallel for"``)."""

    text: str


@dataclass(frozen=True)
class Comment(Stmt):
    """A comment between statements or items, text including ``//`` or ``/* */``, or a compile-time-only
    statement (``static_assert(...);``) that passes carry like a comment and print verbatim."""

    text: str


@dataclass(frozen=True)
class Include(Stmt):
    """``#include <path>`` (``system=True``) or ``#include "path"``."""

    path: str
    system: bool = True


@dataclass(frozen=True)
class Function(Node):
    """A function definition (kernel, device function, host function).

    ``qualifiers`` are the specifiers before the return type as spelled (``__global__``, ``static``,
    ``__device__``, ``__forceinline__``, ``inline``, ``__attribute__((...))``); ``template`` is the template
    parameter list text (``"<typename T, int BS>"``) or ``None``; ``linkage`` is ``"C"`` for
    ``extern "C"`` definitions; ``launch_bounds`` are the ``__launch_bounds__`` arguments.
    """

    name: str
    ret: Type
    params: tuple[Param | Opaque, ...]
    body: Block
    qualifiers: tuple[str, ...] = ()
    template: str | None = None
    linkage: str | None = None
    launch_bounds: tuple[Expr, ...] = ()

    @property
    def is_kernel(self) -> bool:
        return any(q in KERNEL_QUALIFIERS for q in self.qualifiers)

    @property
    def is_device(self) -> bool:
        return any(q in DEVICE_QUALIFIERS for q in self.qualifiers) and not self.is_kernel

    def param_names(self) -> list[str]:
        return [p.name for p in self.params if isinstance(p, Param) and p.name]


TopItem = Function | DeclStmt | Include | Pragma | Comment | Opaque


@dataclass(frozen=True)
class Module(Node):
    """A lowered translation unit. ``diagnostics`` are the lowering's (unsupported constructs, depth)."""

    items: tuple[TopItem, ...]
    dialect: Dialect = Dialect.CUDA
    path: str = "<input>"
    diagnostics: tuple[Diagnostic, ...] = field(default=(), compare=False)

    def functions(self) -> list[Function]:
        return [i for i in self.items if isinstance(i, Function)]

    def kernels(self) -> list[Function]:
        return [f for f in self.functions() if f.is_kernel]

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions() if f.name == name), None)

    def replace_function(self, name: str, new: Function) -> Module:
        """A module with the function called ``name`` replaced by ``new``."""
        items = tuple(new if isinstance(i, Function) and i.name == name else i for i in self.items)
        return dataclasses.replace(self, items=items)


replace = dataclasses.replace


# ----------------------------------------------------------------------------------------- traversal
# Derived facts kept on the node they describe: nodes are immutable (frozen; a pass builds new ones with
# ``replace``), so a fact computed once holds for the node's life. Passes walk the same subtree, ask the same
# loop for its view and its body for its read/write sets again and again (nested loops, one pass after another);
# recomputing them was three quarters of the CPU passes' time. Kept in the instance's ``__dict__``, outside the
# dataclass fields: equality, hashing and ``replace`` never see them.
_READ_WRITE = "_xp_read_write"
_SUBTREE = "_xp_subtree"  # the node and every node under it, in pre-order (what walk yields)
_LOOP_VIEW = ("_xp_loop_view", "_xp_loop_view_scoped")
_MISSING = object()


def _memo(node: Node, key: str) -> object:
    return node.__dict__.get(key, _MISSING)


def _remember(node: Node, key: str, value: object) -> None:
    object.__setattr__(node, key, value)


_FIELDS: dict[type, tuple[str, ...]] = {}


def _node_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name != "span")
    return names


def _child_list(node: Node) -> list[Node]:
    out: list[Node] = []
    fields = node.__dict__
    for fname in _node_fields(type(node)):
        value = fields[fname]
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(item for item in value if isinstance(item, Node))
    return out


def children(node: Node) -> Iterator[Node]:
    """The direct child nodes of ``node``, in field order."""
    return iter(_child_list(node))


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself included), pre-order, without recursion."""
    known = node.__dict__.get(_SUBTREE)
    if known is None:
        known = _preorder(node)
        _remember(node, _SUBTREE, known)
    return iter(known)


def _preorder(node: Node) -> tuple[Node, ...]:
    out: list[Node] = []
    stack = [node]
    pop, extend, append = stack.pop, stack.extend, out.append
    while stack:
        current = pop()
        append(current)
        below = _child_list(current)
        if below:
            below.reverse()
            extend(below)
    return tuple(out)


class Visitor:
    """Read-only traversal: define ``visit_<ClassName>(node)``; call :meth:`generic_visit` to descend."""

    def visit(self, node: Node) -> Any:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node: Node) -> None:
        for child in children(node):
            self.visit(child)


class Transformer:
    """Rebuilding traversal: ``visit_<ClassName>(node)`` returns the replacement node.

    The default (:meth:`generic_visit`) transforms the children and rebuilds the node with ``replace`` only
    when something changed. In a tuple field (block statements, arguments, items) a visit may return a
    ``list`` of nodes to splice in its place, or ``None`` to delete the element.

    A transformer whose ``visit_`` methods are all for statements (and that keeps :meth:`visit`) never
    descends into expressions, types or declarators: no statement lies under them, so the default visit would
    only rebuild nothing there. Most passes' transformers are of that kind, and the descent was most of their
    time.
    """

    _statements_only: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        visited = {name.removeprefix("visit_") for name in dir(cls) if name.startswith("visit_")}
        cls._statements_only = cls.visit is Transformer.visit and visited <= _STATEMENT_LEVEL

    def visit(self, node: Node) -> Any:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node: N) -> N:
        changes: dict[str, Any] = {}
        below_only_statements = self._statements_only
        fields = node.__dict__
        for fname in _node_fields(type(node)):
            value = fields[fname]
            if isinstance(value, Node):
                if below_only_statements and not isinstance(value, _HOLDS_STATEMENTS):
                    continue
                new = self.visit(value)
                if new is not value:
                    changes[fname] = new
            elif isinstance(value, tuple) and any(isinstance(v, Node) for v in value):
                out: list[Any] = []
                changed = False
                for item in value:
                    if not isinstance(item, Node) or (below_only_statements
                                                      and not isinstance(item, _HOLDS_STATEMENTS)):
                        out.append(item)
                        continue
                    new = self.visit(item)
                    if new is item:
                        out.append(item)
                        continue
                    changed = True
                    if new is None:
                        continue
                    if isinstance(new, list):
                        out.extend(new)
                    else:
                        out.append(new)
                if changed:
                    changes[fname] = tuple(out)
        return dataclasses.replace(node, **changes) if changes else node


def _statement_classes() -> frozenset[str]:
    found: set[str] = set()
    pending: list[type] = [Stmt]
    while pending:
        cls = pending.pop()
        found.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return frozenset(found | {"Function", "Module"})


# node classes a statement can lie under (the rest are expressions, types, declarators, parameters)
_STATEMENT_LEVEL = _statement_classes()
_HOLDS_STATEMENTS = (Stmt, Function, Module)


def rewrite(node: N, fn: Callable[[Node], Node | None]) -> N:
    """Top-down rewrite: where ``fn(n)`` returns a node it replaces ``n`` (not descended); ``None`` descends."""

    class _Rewriter(Transformer):
        def visit(self, n: Node) -> Any:
            replacement = fn(n)
            if replacement is not None:
                return replacement
            return self.generic_visit(n)

    result: N = _Rewriter().visit(node)
    return result


def substitute(node: N, mapping: Mapping[str, Expr]) -> N:
    """Replace every :class:`Name` whose id is a key of ``mapping`` (member names are not names)."""
    return rewrite(node, lambda n: mapping.get(n.id) if isinstance(n, Name) else None)


# ------------------------------------------------------------------------------------------ analysis
@dataclass(frozen=True)
class ReadWrite:
    """What a piece of code touches, by name.

    ``reads``/``writes``: names whose *value* is read or assigned (``x = ...``, ``x++``). ``mem_reads``/
    ``mem_writes``: base names of memory read or written through ``a[i]``, ``*p``, ``p->f``, ``s.f``.
    ``calls``: names of called functions (a call may read or write anything reachable from its arguments;
    passes decide how conservative to be). ``address_taken``: names whose address escapes (``&x``).
    ``opaque``: the code contains :class:`Opaque` text, which may read or write anything — a pass that
    needs exact sets must refuse when it is set.
    """

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    mem_reads: frozenset[str] = frozenset()
    mem_writes: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()
    address_taken: frozenset[str] = frozenset()
    opaque: bool = False


def _base_name(expr: Expr) -> str | None:
    """The variable at the root of an lvalue path: ``a[i][j]`` → a, ``*(p + 1)`` → p, ``s.f`` → s."""
    while True:
        if isinstance(expr, Name):
            return expr.id
        if isinstance(expr, Index):
            expr = expr.base
        elif isinstance(expr, Member):
            expr = expr.base
        elif isinstance(expr, Unary) and expr.op == "*":
            expr = expr.operand
        elif isinstance(expr, Binary) and expr.op in ("+", "-"):
            expr = expr.left
        elif isinstance(expr, Cast):
            expr = expr.operand
        else:
            return None




def read_write(node: Node) -> ReadWrite:
    """Read/write sets of an expression or statement (declared initializers count as writes)."""
    known = _memo(node, _READ_WRITE)
    if isinstance(known, ReadWrite):
        return known
    found = _read_write(node)
    _remember(node, _READ_WRITE, found)
    return found


def _read_write(node: Node) -> ReadWrite:
    reads: set[str] = set()
    writes: set[str] = set()
    mem_reads: set[str] = set()
    mem_writes: set[str] = set()
    calls: set[str] = set()
    addr: set[str] = set()
    opaque = False

    def target(expr: Expr, also_read: bool) -> None:
        # An assignment target: a plain name is a scalar write; otherwise a memory write to its base,
        # and every sub-expression that computes the address is read.
        if isinstance(expr, Name):
            writes.add(expr.id)
            if also_read:
                reads.add(expr.id)
            return
        base = _base_name(expr)
        if base is not None:
            mem_writes.add(base)
            if also_read:
                mem_reads.add(base)
        stack.extend(_address_parts(expr))

    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Assign):
            target(n.target, n.op != "=")
            stack.append(n.value)
        elif isinstance(n, Unary) and n.op in ("++", "--"):
            target(n.operand, True)
        elif isinstance(n, Unary) and n.op == "&":
            base = _base_name(n.operand)
            if base is not None:
                addr.add(base)
            if isinstance(n.operand, Name):
                continue
            stack.extend(_address_parts(n.operand))
        elif isinstance(n, VarDecl):
            writes.add(n.name)
            stack.extend(children(n))
        elif isinstance(n, (Index, Member)) or (isinstance(n, Unary) and n.op == "*"):
            base = _base_name(n)
            if base is not None:
                mem_reads.add(base)
            stack.extend(_address_parts(n))
        elif isinstance(n, Call):
            if isinstance(n.func, Name):
                calls.add(n.func.id)
            else:
                stack.append(n.func)
            stack.extend(n.args)
        elif isinstance(n, Name):
            reads.add(n.id)
        elif isinstance(n, Opaque):
            opaque = opaque or n.reason != TYPE_ALIAS
        else:
            stack.extend(children(n))
    return ReadWrite(
        frozenset(reads), frozenset(writes), frozenset(mem_reads), frozenset(mem_writes), frozenset(calls),
        frozenset(addr), opaque,
    )


def _address_parts(expr: Expr) -> list[Node]:
    """Sub-expressions evaluated to compute the address of an lvalue path (indices, pointer arithmetic)."""
    out: list[Node] = []
    while True:
        if isinstance(expr, Index):
            out.append(expr.index)
            expr = expr.base
        elif isinstance(expr, Member):
            if expr.arrow and isinstance(expr.base, Name):
                out.append(expr.base)
            expr = expr.base
        elif isinstance(expr, Unary) and expr.op == "*":
            if isinstance(expr.operand, Name):
                out.append(expr.operand)
            expr = expr.operand
        elif isinstance(expr, Binary) and expr.op in ("+", "-"):
            out.append(expr.right)
            expr = expr.left
        elif isinstance(expr, Cast):
            expr = expr.operand
        elif isinstance(expr, Name):
            # Array/pointer bases are read as values only when they are pointers being dereferenced;
            # record the name as read so free_names sees it.
            out.append(expr)
            return out
        else:
            out.append(expr)
            return out


def free_names(node: Node) -> frozenset[str]:
    """Names used in ``node`` that are not declared inside it (variables, functions, builtins)."""
    declared: set[str] = set()
    used: set[str] = set()
    for n in walk(node):
        if isinstance(n, VarDecl):
            declared.add(n.name)
        elif isinstance(n, Param) and n.name:
            declared.add(n.name)
        elif isinstance(n, Name):
            used.add(n.id)
    return frozenset(used - declared)


@dataclass(frozen=True)
class ArrayAccess:
    """One ``base[i][j]...`` access: ``indices`` outermost first; ``write`` if it is an assignment target."""

    base: str
    indices: tuple[Expr, ...]
    write: bool
    node: Index


def array_accesses(node: Node) -> list[ArrayAccess]:
    """Every maximal index chain on a named base, in pre-order (compound assignment yields read + write)."""
    out: list[ArrayAccess] = []
    written: dict[int, bool] = {}  # id(Index) → also read (compound op / ++)
    for n in walk(node):
        if isinstance(n, Assign) and isinstance(n.target, Index):
            written[id(n.target)] = n.op != "="
        elif isinstance(n, Unary) and n.op in ("++", "--") and isinstance(n.operand, Index):
            written[id(n.operand)] = True
    inner: set[int] = set()
    for n in walk(node):
        if not isinstance(n, Index) or id(n) in inner:
            continue
        indices: list[Expr] = []
        cur: Expr = n
        while isinstance(cur, Index):
            inner.add(id(cur))
            indices.append(cur.index)
            cur = cur.base
        if not isinstance(cur, Name):
            continue
        idx = tuple(reversed(indices))
        if id(n) in written:
            if written[id(n)]:
                out.append(ArrayAccess(cur.id, idx, False, n))
            out.append(ArrayAccess(cur.id, idx, True, n))
        else:
            out.append(ArrayAccess(cur.id, idx, False, n))
    return out


def declared_types(node: Node) -> dict[str, Type]:
    """Declared type of every parameter and variable under ``node`` (later declarations win)."""
    out: dict[str, Type] = {}
    for n in walk(node):
        if isinstance(n, (VarDecl, Param)) and n.name:
            out[n.name] = n.type
    return out


def builtin_ref(expr: Node) -> tuple[str, str] | None:
    """``threadIdx.x`` → ``("threadIdx", "x")``; ``None`` for anything else."""
    if (
        isinstance(expr, Member)
        and not expr.arrow
        and isinstance(expr.base, Name)
        and expr.base.id in BUILTIN_VECTORS
        and expr.field in ("x", "y", "z")
    ):
        return expr.base.id, expr.field
    return None


def is_barrier(node: Node) -> bool:
    """A barrier call statement or expression (``__syncthreads()``, BANG ``__sync_all()``...)."""
    if isinstance(node, ExprStmt):
        node = node.expr
    return isinstance(node, Call) and node.callee in BARRIER_FUNCTIONS


_FOLD: dict[str, Callable[[int, int], int | None]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    # C division and remainder truncate toward zero.
    "/": lambda a, b: None if b == 0 else abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1),
    "%": lambda a, b: None if b == 0 else a - b * (abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)),
    "<<": lambda a, b: a << b if 0 <= b < 64 else None,
    ">>": lambda a, b: a >> b if 0 <= b < 64 else None,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
}


def fold_int(op: str, a: int, b: int) -> int | None:
    """``a op b`` as C computes it on integers (truncating ``/`` and ``%``); ``None`` for a zero divisor, a shift
    out of range or an operator it does not fold. Overflow is not modeled."""
    fold = _FOLD.get(op)
    return None if fold is None else fold(a, b)


def const_int(expr: Expr, env: Mapping[str, int] | None = None) -> int | None:
    """The integer value of a constant expression (literals, ``+ - * / % << >> & | ^``, unary ``-``, names
    bound in ``env``), with C's truncating division; ``None`` when not constant. Overflow is not modeled."""
    if isinstance(expr, Literal):
        return expr.int_value
    if isinstance(expr, Name):
        return None if env is None else env.get(expr.id)
    if isinstance(expr, Unary) and not expr.postfix and expr.op in ("-", "+", "~"):
        v = const_int(expr.operand, env)
        if v is None:
            return None
        return -v if expr.op == "-" else (v if expr.op == "+" else ~v)
    if isinstance(expr, Binary) and expr.op in _FOLD:
        a, b = const_int(expr.left, env), const_int(expr.right, env)
        if a is None or b is None:
            return None
        return _FOLD[expr.op](a, b)
    if isinstance(expr, Cast) and expr.type.base in ("int", "unsigned", "unsigned int", "long", "size_t") and not expr.type.pointers:
        return const_int(expr.operand, env)
    return None


def used_names(scope: Node) -> set[str]:
    """Every name used or declared in ``scope`` (variables, parameters, functions)."""
    used = {n.id for n in walk(scope) if isinstance(n, Name)}
    used |= {n.name for n in walk(scope) if isinstance(n, (VarDecl, Param, Function)) and n.name}
    return used


def fresh_name(scope: Node, base: str) -> str:
    """A name not used anywhere in ``scope`` (variables, functions, members): ``base``, ``base_1``, ..."""
    used = used_names(scope)
    candidate, k = base, 0
    while candidate in used:
        k += 1
        candidate = f"{base}_{k}"
    return candidate


def single_value_init(d: VarDecl) -> Expr | None:
    """The one value a non-array declaration starts from: ``e`` of ``T x = e``, ``T x{e}`` or ``T x(e)`` (a brace or
    parenthesis list of one item that is not itself a list); None for arrays and other declarations."""
    if d.init is None or d.dims:
        return None
    if d.init_style == "=":
        return d.init
    if isinstance(d.init, InitList) and len(d.init.items) == 1 and not isinstance(d.init.items[0], InitList):
        return d.init.items[0]
    return None


def _loop_var_and_start(init: Stmt | None) -> tuple[str, Expr, Type | None] | None:
    if isinstance(init, DeclStmt) and len(init.decls) == 1:
        d = init.decls[0]
        start = single_value_init(d)  # `for (size_t i{0}; ...)` starts where `= 0` does
        if start is not None and not d.type.pointers:
            return d.name, start, d.type
    if isinstance(init, ExprStmt) and isinstance(init.expr, Assign) and init.expr.op == "=":
        if isinstance(init.expr.target, Name):
            return init.expr.target.id, init.expr.value, None
    return None


def _loop_step(step: Expr | None, var: str) -> Expr | None:
    one = Literal("1")
    if isinstance(step, Unary) and step.op == "++" and step.operand == Name(var):
        return one
    if isinstance(step, Assign) and step.target == Name(var):
        if step.op == "+=":
            return step.value
        if step.op == "=" and isinstance(step.value, Binary) and step.value.op == "+":
            if step.value.left == Name(var):
                return step.value.right
            if step.value.right == Name(var):
                return step.value.left
    return None


def loop_view(loop: For, *, scoped: bool = False) -> LoopView | None:
    """Recognize an increasing counted loop; see :class:`LoopView`. ``None`` when not recognizable.

    ``scoped``: a write to a name the body redeclares (``for (int i ...)`` nested in a loop over ``i``) writes
    the inner variable, not the loop's, and does not stop the recognition. Off by default: passes that
    substitute the loop variable through the body do not all respect shadowing, so they see such loops as
    unrecognized; analyses that scope names themselves ask for it."""
    key = _LOOP_VIEW[scoped]
    known = _memo(loop, key)
    if known is _MISSING:
        known = _loop_view(loop, scoped)
        _remember(loop, key, known)
    return known  # type: ignore[return-value]


def _loop_view(loop: For, scoped: bool) -> LoopView | None:
    head = _loop_var_and_start(loop.init)
    if head is None or not isinstance(loop.cond, Binary):
        return None
    var, start, var_type = head
    cond = loop.cond
    if cond.op in ("<", "<=") and cond.left == Name(var):
        bound, inclusive = cond.right, cond.op == "<="
    elif cond.op in (">", ">=") and cond.right == Name(var):
        bound, inclusive = cond.left, cond.op == ">="
    else:
        return None
    step = _loop_step(loop.step, var)
    if step is None:
        return None
    known_step = const_int(step)
    if known_step is not None and known_step <= 0:
        return None
    if var in read_write(bound).reads | read_write(step).reads:
        return None
    body_rw = read_write(loop.body)
    if body_rw.opaque or read_write(bound).opaque or read_write(step).opaque:
        return None  # unmodeled text might assign the loop variable or the bound
    touched = outer_writes(loop.body) if scoped else body_rw.writes | body_rw.address_taken
    if var in touched or (free_names(bound) | free_names(step)) & touched:
        return None
    stop = binop("+", bound, Literal("1")) if inclusive else bound
    return LoopView(var, start, stop, step, var_type)


def outer_writes(node: Node) -> frozenset[str]:
    """Names ``node`` writes or takes the address of that live outside it: a name declared inside (in a block,
    or a ``for`` header) stands for a new variable from its declaration to the end of its scope, so writes to
    it there are not writes of the outer one. Initializers count as reads, as in C."""
    if isinstance(node, Block):
        found: set[str] = set()
        shadowed: set[str] = set()
        for stmt in node.stmts:
            found |= outer_writes(stmt) - shadowed
            if isinstance(stmt, DeclStmt):
                shadowed |= {d.name for d in stmt.decls}
        return frozenset(found)
    if isinstance(node, DeclStmt):
        return frozenset().union(*(outer_writes(c) for d in node.decls for c in children(d)))
    if isinstance(node, For):
        declared = {d.name for d in node.init.decls} if isinstance(node.init, DeclStmt) else set()
        head = outer_writes(node.init) if node.init is not None else frozenset()
        rest = frozenset().union(*(outer_writes(c) for c in (node.cond, node.step, node.body) if c is not None))
        return head | (rest - declared)
    if isinstance(node, Stmt):
        return frozenset().union(*(outer_writes(c) for c in children(node)))
    rw = read_write(node)
    return rw.writes | rw.address_taken


# ------------------------------------------------------------------------------------------- builders
def name(identifier: str) -> Name:
    return Name(identifier)


def lit(value: int | float | str | bool) -> Expr:
    """A literal from a Python value: ``lit(0)``, ``lit(1.5)`` (``1.5f`` only if you pass ``"1.5f"``).

    Negative numbers become ``Unary("-", ...)`` as C has no negative literals.
    """
    if isinstance(value, bool):
        return Literal("true" if value else "false", "bool")
    if isinstance(value, (int, float)):
        if value < 0:
            return Unary("-", lit(-value))
        text = repr(value) if isinstance(value, float) else str(value)
        return Literal(text)
    return Literal(value)


def binop(op: str, left: Expr, right: Expr) -> Binary:
    return Binary(op, left, right)


def assign(target: Expr, value: Expr, op: str = "=") -> Assign:
    return Assign(op, target, value)


def instance_symbol(entry: str) -> str:
    """The C name of an exported wrapper of a template instantiation (``gemm<128, 8>`` → ``gemm__128_8``): a
    spec may name its entry so; any other name is its own symbol."""
    if "<" not in entry:
        return entry
    base, _, rest = entry.partition("<")
    return base.strip() + "__" + "_".join(t for t in re.split(r"\W+", rest) if t)


def call(func: str | Expr, *args: Expr) -> Call:
    return Call(Name(func) if isinstance(func, str) else func, tuple(args))


def index(base: Expr, *indices: Expr) -> Expr:
    """``index(a, i, j)`` is ``a[i][j]``."""
    out = base
    for i in indices:
        out = Index(out, i)
    return out


def member(base: Expr, field_name: str, arrow: bool = False) -> Member:
    return Member(base, field_name, arrow)


def ctype(text: str, pointers: int = 0, quals: tuple[str, ...] = ()) -> Type:
    """``ctype("float", 1, ("const",))`` is ``const float*``."""
    return Type(text, quals, tuple(() for _ in range(pointers)))


def var(
    var_name: str,
    var_type: Type | str,
    init: Expr | None = None,
    dims: tuple[Expr | None, ...] = (),
    storage: tuple[str, ...] = (),
) -> VarDecl:
    return VarDecl(var_name, ctype(var_type) if isinstance(var_type, str) else var_type, dims, init, storage)


def decl(
    var_name: str,
    var_type: Type | str,
    init: Expr | None = None,
    dims: tuple[Expr | None, ...] = (),
    storage: tuple[str, ...] = (),
) -> DeclStmt:
    """A one-variable declaration statement: ``decl("acc", "float", lit(0))`` is ``float acc = 0;``."""
    return DeclStmt((var(var_name, var_type, init, dims, storage),))


def expr_stmt(expr: Expr) -> ExprStmt:
    return ExprStmt(expr)


def block(*stmts: Stmt) -> Block:
    """A block; nested :class:`Block` arguments are kept as nested blocks (scopes matter)."""
    return Block(tuple(stmts))


def pragma(text: str) -> Pragma:
    return Pragma(text)


def if_(cond: Expr, then: Stmt, else_: Stmt | None = None) -> If:
    return If(cond, then, else_)


def for_range(
    var_name: str,
    start: Expr,
    stop: Expr,
    body: Stmt,
    step: Expr | None = None,
    var_type: Type | str = "int",
) -> For:
    """``for (int var = start; var < stop; ++var / var += step) body``."""
    v = Name(var_name)
    step_expr: Expr = Unary("++", v) if step is None else Assign("+=", v, step)
    return For(decl(var_name, var_type, start), binop("<", v, stop), step_expr, body)


def stmts_of(stmt: Stmt) -> tuple[Stmt, ...]:
    """The statements of a body: a block's list, or the single statement."""
    return stmt.stmts if isinstance(stmt, Block) else (stmt,)
