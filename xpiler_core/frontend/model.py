"""The kernel model: what a source file contains, with exact source ranges.

Built from a :class:`ParsedSource` by one tree-sitter query (see ``queries.py``) plus short, bounded
walks around the matched nodes — never a recursive walk over the whole tree, so arbitrarily deep input
is safe and a 1,000-line file models in milliseconds. Recognized names live in ``names.py``;
constructs the engine cannot model yet live in ``unsupported.py``.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tree_sitter import Node

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.frontend import names
from xpiler_core.frontend.queries import Matches, run_model_query
from xpiler_core.frontend.source import (
    BANG_KEYWORD_PATTERN,
    MAX_NESTING_DEPTH,
    ParsedSource,
    decode_source,
    parse_file,
    parse_text,
)

# How far the builder walks up or down from a matched node (declarator chains, qualifier lookups).
_MAX_LOCAL_STEPS = 64
_SPACE = re.compile(r"\s+")


@dataclass(slots=True)
class Expr:
    """A source expression kept as text, with its range."""

    text: str
    span: Span


@dataclass(slots=True)
class TemplateParam:
    kind: str  # "type" | "value" | "template" | "type-pack" | "value-pack"
    name: str | None
    type_text: str | None  # the type of a value parameter
    default: str | None
    span: Span


@dataclass(slots=True)
class Param:
    name: str | None
    type_text: str  # the declaration without the name, whitespace collapsed: "const float* __restrict__"
    base_type: str  # the type specifier alone: "float", "T", "unsigned int"
    pointer_depth: int
    is_array: bool
    is_reference: bool
    is_const: bool  # the pointee / value is const (`const T*`, `T const*`)
    is_const_pointer: bool  # the pointer itself is const (`T* const`)
    is_restrict: bool  # any of __restrict__, __restrict, restrict
    default: str | None
    span: Span

    @property
    def is_pointer(self) -> bool:
        """Pointer or array parameter (arrays decay to pointers)."""
        return self.pointer_depth > 0 or self.is_array


@dataclass(slots=True)
class LaunchBounds:
    max_threads: Expr
    min_blocks: Expr | None
    span: Span


@dataclass(slots=True)
class Buffer:
    """A variable in a named memory space: shared / constant / managed / device, or BANG NRAM/WRAM/SRAM."""

    name: str
    memory: str  # "shared" | "constant" | "managed" | "device" | "nram" | "wram" | "sram" | "ldram"
    element_type: str
    sizes: tuple[Expr, ...]  # array extents, outermost first; empty for a scalar
    dynamic: bool  # `extern __shared__ T s[]` (size set at launch)
    function: str | None  # enclosing function, None at file scope
    span: Span

    @property
    def size_text(self) -> str | None:
        """The element count as one expression, or None for a dynamic or scalar buffer."""
        if self.dynamic or not self.sizes:
            return None
        return " * ".join(f"({s.text})" if len(self.sizes) > 1 else s.text for s in self.sizes)


@dataclass(slots=True)
class Use:
    """One occurrence of a recognized name: a barrier, warp intrinsic, atomic, API call…"""

    name: str
    kind: str  # sub-kind from names.py, e.g. "shuffle", "block", "add", "cuda-runtime"
    span: Span


@dataclass(slots=True)
class BuiltinUse:
    name: str  # canonical: threadIdx, blockIdx, blockDim, gridDim, warpSize, taskId, clusterId, ...
    component: str | None  # x / y / z when accessed as a field or spelled into the name
    spelled: str  # as written: "threadIdx", "hipThreadIdx_x"
    span: Span


@dataclass(slots=True)
class InlineAsm:
    text: str  # the assembly template, string pieces joined
    volatile: bool
    tensor_core: bool
    span: Span


@dataclass(slots=True)
class Pragma:
    kind: str  # first word: "omp", "unroll", "once", ...
    text: str  # everything after `#pragma`
    span: Span


@dataclass(slots=True)
class LaunchConfig:
    role: str  # grid / block / smem / stream, BANG: dim / ktype / queue, API: args
    expr: Expr


@dataclass(slots=True)
class LaunchSite:
    kernel: str  # the launched kernel as written (`k`, `ops::k`), without template arguments
    template_args: str | None
    style: str  # "chevron" or the launch API name, e.g. "hipLaunchKernelGGL"
    config: tuple[LaunchConfig, ...]
    args: tuple[Expr, ...]
    caller: str | None
    resolved: bool  # the kernel is defined in this file
    span: Span

    def config_expr(self, role: str) -> Expr | None:
        for item in self.config:
            if item.role == role:
                return item.expr
        return None


class FunctionKind(StrEnum):
    KERNEL = "kernel"  # __global__ / __mlu_global__ / __mlu_entry__
    CPU_KERNEL = "cpu_kernel"  # C dialect: extern "C" function, or any non-static function but main
    DEVICE = "device"  # __device__ / __mlu_func__ (callable from kernels)
    HOST_ENTRY = "host_entry"  # GPU dialects: host function that launches kernels or is extern "C"
    HOST = "host"


@dataclass
class Function:
    name: str
    kind: FunctionKind
    qualifiers: list[str]  # __global__, __device__, __host__, __forceinline__, __mlu_func__, static, inline...
    return_type: str
    params: list[Param]
    template_params: list[TemplateParam] | None  # None when not a template
    launch_bounds: LaunchBounds | None
    extern_c: bool
    span: Span  # the whole definition, including a `template <...>` header
    name_span: Span
    body_span: Span | None
    buffers: list[Buffer] = field(default_factory=list)
    barriers: list[Use] = field(default_factory=list)
    warp_ops: list[Use] = field(default_factory=list)
    atomics: list[Use] = field(default_factory=list)
    tensor_core: list[Use] = field(default_factory=list)
    inline_asm: list[InlineAsm] = field(default_factory=list)
    api_calls: list[Use] = field(default_factory=list)
    intrinsics: list[Use] = field(default_factory=list)
    builtins: list[BuiltinUse] = field(default_factory=list)
    pragmas: list[Pragma] = field(default_factory=list)
    launches: list[LaunchSite] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # functions of this file it calls, first-call order

    @property
    def is_kernel(self) -> bool:
        return self.kind in (FunctionKind.KERNEL, FunctionKind.CPU_KERNEL)

    @property
    def is_template(self) -> bool:
        return self.template_params is not None

    @property
    def shared_buffers(self) -> list[Buffer]:
        return [b for b in self.buffers if b.memory in names.SCRATCHPAD_MEMORIES]

    @property
    def builtin_names(self) -> list[str]:
        """Built-ins used, as ``threadIdx.x`` / ``warpSize`` / ``taskId``, sorted and unique."""
        seen = {f"{b.name}.{b.component}" if b.component else b.name for b in self.builtins}
        return sorted(seen)

    def features(self) -> list[str]:
        """Short tags for what the function uses (the same vocabulary as test-spec features)."""
        tags: set[str] = set()
        if self.is_template:
            tags.add("template")
        if self.launch_bounds is not None:
            tags.add("launch-bounds")
        for buffer in self.shared_buffers:
            tags.add("dynamic-shared" if buffer.dynamic else buffer.memory)
        if self.barriers:
            tags.add("barrier")
        for op in self.warp_ops:
            tags.add("warp-shuffle" if op.kind == "shuffle" else "warp-" + op.kind)
        if self.atomics:
            tags.add("atomics")
        if self.tensor_core or any(a.tensor_core for a in self.inline_asm):
            tags.add("tensor-core")
        if self.inline_asm:
            tags.add("inline-asm")
        if self.launches:
            tags.add("launch")
        if self.api_calls:
            tags.add("api")
        if any(p.kind == "omp" for p in self.pragmas):
            tags.add("openmp")
        if any(b.name == "warpSize" for b in self.builtins):
            tags.add("warp-size")
        return sorted(tags)


@dataclass
class KernelModel:
    path: str
    dialect: Dialect
    functions: list[Function]
    buffers: list[Buffer]  # file-scope buffers (`__constant__`, file-scope `extern __shared__`, NRAM...)
    launches: list[LaunchSite]  # every launch site in the file, document order
    includes: list[str]
    diagnostics: list[Diagnostic]

    @property
    def kernels(self) -> list[Function]:
        return [f for f in self.functions if f.is_kernel]

    @property
    def device_functions(self) -> list[Function]:
        return [f for f in self.functions if f.kind is FunctionKind.DEVICE]

    @property
    def host_functions(self) -> list[Function]:
        return [f for f in self.functions if f.kind in (FunctionKind.HOST, FunctionKind.HOST_ENTRY)]

    @property
    def host_entries(self) -> list[Function]:
        return [f for f in self.functions if f.kind is FunctionKind.HOST_ENTRY]

    def function(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def reachable(self, name: str) -> list[Function]:
        """``name`` and every function of this file it calls, directly or not (iterative)."""
        by_name = {f.name: f for f in self.functions}
        order: list[Function] = []
        seen: set[str] = set()
        stack = [name]
        while stack:
            current = stack.pop()
            if current in seen or current not in by_name:
                continue
            seen.add(current)
            order.append(by_name[current])
            stack.extend(reversed(by_name[current].calls))
        return order

    def reachable_features(self, name: str) -> list[str]:
        """Features of ``name`` and of every function of this file it calls."""
        tags: set[str] = set()
        for f in self.reachable(name):
            tags.update(f.features())
        return sorted(tags)

    def features(self) -> list[str]:
        tags: set[str] = set()
        for f in self.functions:
            tags.update(f.features())
        return sorted(tags)

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)

    def to_dict(self) -> dict[str, Any]:
        out = _to_jsonable(self)
        assert isinstance(out, dict)
        out["features"] = self.features()
        for f_dict, f in zip(out["functions"], self.functions, strict=True):
            f_dict["features"] = f.features()
            f_dict["builtin_names"] = f.builtin_names
            f_dict["reachable_features"] = self.reachable_features(f.name)
        return out


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, Span | Diagnostic):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, Buffer):
            out["size_text"] = value.size_text
        if isinstance(value, Param):
            out["is_pointer"] = value.is_pointer
        return out
    if isinstance(value, list | tuple):
        return [_to_jsonable(v) for v in value]
    return value


# -------------------------------------------------------------------------------------------------
# Building


def build_model(parsed: ParsedSource) -> KernelModel:
    """The kernel model of a parsed file. Never raises on any parse tree.

    A file that ends inside open brackets (a kernel cut off while typing, a truncated file) is modelled
    from a reparse with the missing closers appended, so its kernels still show; the diagnostics then
    name the unclosed brackets instead of one syntax error covering the whole function.
    """
    recovered = _recover_truncated(parsed)
    if recovered is not None:
        return ModelBuilder(recovered[0], recovered[1]).build()
    return ModelBuilder(parsed).build()


# Only files with a few unclosed brackets are recovered; deeper imbalance is not a truncation.
_MAX_UNCLOSED = 64
# A `;` ends a statement cut off inside the block before the block is closed.
_CLOSER = {ord("("): ")", ord("["): "]", ord("{"): ";}"}


def _recover_truncated(parsed: ParsedSource) -> tuple[ParsedSource, Diagnostic] | None:
    if not parsed.root.has_error or not parsed.data or any(d.code == "input.too-large" for d in parsed.diagnostics):
        return None
    codes = np.frombuffer(parsed.data, dtype=np.uint8)
    opener = (codes == ord("(")) | (codes == ord("[")) | (codes == ord("{"))
    closer = (codes == ord(")")) | (codes == ord("]")) | (codes == ord("}"))
    depth = np.cumsum(opener.astype(np.int32) - closer.astype(np.int32))
    final = int(depth[-1])
    if final <= 0 or final > _MAX_UNCLOSED:
        return None
    # An opener is unclosed when the depth never falls back below its level afterwards.
    suffix_min = np.minimum.accumulate(depth[::-1])[::-1]
    unclosed = np.flatnonzero(opener & (suffix_min >= depth))
    if len(unclosed) != final:
        return None
    closers = "".join(_CLOSER[int(codes[i])] for i in reversed(unclosed))
    text = parsed.text + "\n" + closers
    recovered = parse_text(text, parsed.path, parsed.dialect)
    if recovered.root.has_error and len(recovered.diagnostics) >= len(parsed.diagnostics):
        return None
    places = ", ".join(_position(parsed.data, int(i)) for i in unclosed[:4]) + (", ..." if final > 4 else "")
    end = len(parsed.data)
    line = parsed.data.count(b"\n")
    col = end - (parsed.data.rfind(b"\n") + 1)
    brackets = " ".join(f"'{chr(int(codes[i]))}'" for i in unclosed[:4])
    truncated = Diagnostic(
        Severity.ERROR,
        "syntax.unexpected-eof",
        f"unexpected end of file: {final} unclosed bracket(s) {brackets} opened at {places}",
        Span(end, end, line, col, line, col),
        parsed.path,
        data={"closers": closers.replace(";", "")},
    )
    return recovered, truncated


def _clamp(span: Span, eof: Span) -> Span:
    if span.end_byte <= eof.start_byte:
        return span
    return Span(span.start_byte, eof.start_byte, span.start_line, span.start_col, eof.start_line, eof.start_col)


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset)
    col = offset - (data.rfind(b"\n", 0, offset) + 1)
    return f"{line + 1}:{col + 1}"


def load_model(source: str | Path, dialect: Dialect | None = None) -> KernelModel:
    """Model of a file (a :class:`Path`, or a string naming an existing file) or of source text.

    Unreadable, binary or oversized files raise :class:`XpilerError` with a location.
    """
    if isinstance(source, Path) or ("\n" not in source and len(source) < 4096 and Path(source).is_file()):
        path = Path(source)
        return build_model(parse_file(path, dialect))
    return build_model(parse_text(source, "<input>", dialect))


def load_model_bytes(data: bytes, path: str = "<input>", dialect: Dialect | None = None) -> KernelModel:
    """Model of raw file bytes: decoding errors raise :class:`XpilerError` (file:line:col)."""
    return build_model(parse_text(decode_source(data, path), path, dialect))


class ModelBuilder:
    """One build of one file. Detectors in ``unsupported.py`` read its intermediate state."""

    def __init__(self, parsed: ParsedSource, truncation: Diagnostic | None = None) -> None:
        self.parsed = parsed
        self.truncation = truncation
        self.data = parsed.data
        self.matches: Matches = Matches()
        self.functions: list[Function] = []
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.call_names: list[tuple[str, Node]] = []  # every named call, for name-based detectors
        self.file_buffers: list[Buffer] = []
        self.launches: list[LaunchSite] = []
        self.diagnostics: list[Diagnostic] = []
        self._deep_ranges: list[tuple[int, int]] = []
        self._bang_keywords: dict[tuple[int, int], list[tuple[str, int]]] = {}
        self._bang_owners: list[Node] = []
        self.explained_ranges: list[tuple[int, int]] = []  # byte ranges whose ERROR nodes are understood

    # --- helpers ---------------------------------------------------------------------------------

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def flat(self, node: Node) -> str:
        """Node text with whitespace runs collapsed to one space."""
        return _SPACE.sub(" ", self.text(node)).strip()

    def expr(self, node: Node) -> Expr:
        return Expr(self.flat(node), Span.of(node))

    def function_at(self, byte: int) -> Function | None:
        """The innermost function whose definition contains ``byte``."""
        index = bisect.bisect_right(self._starts, byte) - 1
        steps = 0
        while index >= 0 and steps < _MAX_LOCAL_STEPS:
            if self._ends[index] > byte:
                return self.functions[index]
            index -= 1
            steps += 1
        return None

    def _in_deep_region(self, byte: int) -> bool:
        index = bisect.bisect_right(self._deep_ranges, (byte, 1 << 62)) - 1
        return index >= 0 and self._deep_ranges[index][0] <= byte < self._deep_ranges[index][1]

    # --- build -----------------------------------------------------------------------------------

    def build(self) -> KernelModel:
        parsed = self.parsed
        if not self.data.strip():
            self.diagnostics.append(
                Diagnostic(Severity.WARNING, "input.empty", "empty file: no code to model", Span.empty(), parsed.path)
            )
        if any(d.code == "input.too-large" for d in parsed.diagnostics):
            return KernelModel(parsed.path, parsed.dialect, [], [], [], [], list(parsed.diagnostics))
        self._check_nesting()
        self.matches = run_model_query(parsed.root, self.data)
        for region in self.matches.wide_errors:
            self.diagnostics.append(
                Diagnostic(
                    Severity.WARNING,
                    "unsupported.unparseable-region",
                    f"unsupported: a region of {region.child_count} tokens the grammar could not structure "
                    "is not modelled",
                    Span.of(region),
                    parsed.path,
                    data={"construct": "unparseable region"},
                )
            )
        if parsed.dialect is Dialect.BANG:
            self._index_bang_keywords()
        self._collect_functions()
        self._collect_calls()
        self._collect_buffers()
        self._collect_builtins()
        self._collect_asm()
        self._collect_pragmas()
        self._classify_hosts()
        from xpiler_core.frontend.unsupported import find_unsupported

        unsupported, explained = find_unsupported(self)
        syntax = [d for d in parsed.diagnostics if not self._is_explained(d, explained)]
        diagnostics = syntax + unsupported + self.diagnostics
        if self.truncation is not None:
            diagnostics.append(self.truncation)
            self._clamp_to(self.truncation.span)
        diagnostics.sort(key=lambda d: (d.span.start_byte, d.code))
        includes = _includes(self.data)
        return KernelModel(
            parsed.path, parsed.dialect, self.functions, self.file_buffers, self.launches, includes, diagnostics
        )

    def _clamp_to(self, eof: Span) -> None:
        """End function ranges at the real end of a truncated file, not after the appended closers."""
        for function in self.functions:
            function.span = _clamp(function.span, eof)
            if function.body_span is not None:
                function.body_span = _clamp(function.body_span, eof)

    def _is_explained(self, diagnostic: Diagnostic, explained: set[tuple[int, int]]) -> bool:
        if diagnostic.code != "syntax.error":
            return False
        start, end = diagnostic.span.start_byte, diagnostic.span.end_byte
        if (start, end) in explained:
            return True
        return any(lo <= start and end <= hi for lo, hi in self.explained_ranges)

    def _check_nesting(self) -> None:
        # Bracket depth by a vectorized lexical count (comments and strings included: it only decides
        # where the model stops descending). Regions deeper than MAX_NESTING_DEPTH are not modelled.
        if len(self.data) < MAX_NESTING_DEPTH:
            return
        codes = np.frombuffer(self.data, dtype=np.uint8)
        delta = np.zeros(len(codes), dtype=np.int32)
        for opener in b"([{":
            delta += codes == opener
        for closer in b")]}":
            delta -= codes == closer
        depth = np.cumsum(delta)
        deep = depth > MAX_NESTING_DEPTH
        if not deep.any():
            return
        edges = np.flatnonzero(np.diff(np.concatenate(([0], deep.astype(np.int8), [0]))))
        self._deep_ranges = [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2], strict=True)]
        first = self._deep_ranges[0][0]
        line = self.data.count(b"\n", 0, first)
        col = first - (self.data.rfind(b"\n", 0, first) + 1)
        end = self._deep_ranges[-1][1]
        end_line = self.data.count(b"\n", 0, end)
        end_col = end - (self.data.rfind(b"\n", 0, end) + 1)
        self.diagnostics.append(
            Diagnostic(
                Severity.WARNING,
                "unsupported.deep-nesting",
                f"unsupported: brackets nested {int(depth.max())} levels deep (limit {MAX_NESTING_DEPTH}); "
                "code nested deeper is not modelled",
                Span(first, end, line, col, end_line, end_col),
                self.parsed.path,
                data={"construct": "deep nesting", "depth": int(depth.max())},
            )
        )

    def _index_bang_keywords(self) -> None:
        """Map each masked BANG keyword to the declaration or function it qualifies."""
        root = self.parsed.root
        data = self.data
        for match in BANG_KEYWORD_PATTERN.finditer(data):
            position = match.end()
            while position < len(data) and data[position] in b" \t\r\n":
                position += 1
            if position >= len(data):
                continue
            node: Node | None = root.descendant_for_byte_range(position, position)
            steps = 0
            while node is not None and steps < _MAX_LOCAL_STEPS and node.type not in _QUALIFIED_OWNERS:
                node = node.parent
                steps += 1
            if node is not None and node.type in _QUALIFIED_OWNERS:
                key = (node.start_byte, node.end_byte)
                if key not in self._bang_keywords:
                    self._bang_keywords[key] = []
                    self._bang_owners.append(node)
                self._bang_keywords[key].append((match.group(0).decode(), match.start()))

    def _bang_qualifiers(self, node: Node) -> list[str]:
        return [word for word, _ in self._bang_keywords.get((node.start_byte, node.end_byte), [])]

    def span_with_keywords(self, node: Node) -> Span:
        """The node's span, widened to start at a masked BANG keyword that qualifies it."""
        span = Span.of(node)
        keywords = self._bang_keywords.get((node.start_byte, node.end_byte))
        if not keywords:
            return span
        start = min(offset for _, offset in keywords)
        if start >= span.start_byte:
            return span
        line = self.data.count(b"\n", 0, start)
        col = start - (self.data.rfind(b"\n", 0, start) + 1)
        return Span(start, span.end_byte, line, col, span.end_line, span.end_col)

    # --- functions -------------------------------------------------------------------------------

    def _collect_functions(self) -> None:
        for node in self.matches.functions:
            if self._in_deep_region(node.start_byte):
                continue
            function = self._function(node)
            if function is not None:
                self.functions.append(function)
        # Document order by start; nested definitions (methods of local classes) follow their parent.
        self.functions.sort(key=lambda f: f.span.start_byte)
        self._starts = [f.span.start_byte for f in self.functions]
        self._ends = [f.span.end_byte for f in self.functions]

    def _function(self, node: Node) -> Function | None:
        declarator = node.child_by_field_name("declarator")
        steps = 0
        while declarator is not None and declarator.type != "function_declarator" and steps < _MAX_LOCAL_STEPS:
            declarator = declarator.child_by_field_name("declarator")
            steps += 1
        if declarator is None or declarator.type != "function_declarator":
            return None
        name_node = declarator.child_by_field_name("declarator")
        if name_node is None:
            return None
        name = self.flat(name_node)
        if name_node.type == "template_function":
            inner = name_node.child_by_field_name("name")
            name = self.flat(inner) if inner is not None else name
        qualifiers: list[str] = []
        launch_bounds: LaunchBounds | None = None
        for child in node.children:
            if child.type == "launch_bounds":
                launch_bounds = self._launch_bounds(child)
            elif child.type == "storage_class_specifier" or child.type in names.FUNCTION_QUALIFIERS:
                qualifiers.append(self.flat(child))
            elif child.type == "attribute_specifier" or child.type == "type_qualifier":
                qualifiers.append(self.flat(child))
        qualifiers.extend(self._bang_qualifiers(node))
        type_node = node.child_by_field_name("type")
        return_type = self.flat(type_node) if type_node is not None else ""
        outer = node.child_by_field_name("declarator")
        stars = 0
        while outer is not None and outer.type in ("pointer_declarator", "reference_declarator") and stars < 16:
            return_type += "*" if outer.type == "pointer_declarator" else "&"
            outer = outer.child_by_field_name("declarator")
            stars += 1
        params_node = declarator.child_by_field_name("parameters")
        params = self._params(params_node) if params_node is not None else []
        parent = node.parent
        template_params: list[TemplateParam] | None = None
        span_node = node
        if parent is not None and parent.type == "template_declaration":
            template_list = parent.child_by_field_name("parameters")
            template_params = self._template_params(template_list) if template_list is not None else []
            span_node = parent
            qualifiers.extend(self._bang_qualifiers(parent))
        extern_c = _is_extern_c(node, self.data)
        if extern_c and parent is not None and parent.type == "linkage_specification":
            span_node = parent  # `extern "C" void f() {...}`: the definition starts at `extern`
        body = node.child_by_field_name("body")
        kind = self._initial_kind(qualifiers, extern_c, name)
        return Function(
            name=name,
            kind=kind,
            qualifiers=qualifiers,
            return_type=return_type,
            params=params,
            template_params=template_params,
            launch_bounds=launch_bounds,
            extern_c=extern_c,
            span=self.span_with_keywords(span_node) if span_node is node else Span.of(span_node),
            name_span=Span.of(name_node),
            body_span=Span.of(body) if body is not None else None,
        )

    def _initial_kind(self, qualifiers: list[str], extern_c: bool, name: str) -> FunctionKind:
        qualifier_set = set(qualifiers)
        if qualifier_set & names.GPU_KERNEL_QUALIFIERS:
            return FunctionKind.KERNEL
        if qualifier_set & names.DEVICE_QUALIFIERS:
            return FunctionKind.DEVICE
        if self.parsed.dialect is Dialect.C:
            if extern_c or ("static" not in qualifier_set and name != "main" and "::" not in name):
                return FunctionKind.CPU_KERNEL
            return FunctionKind.HOST
        return FunctionKind.HOST_ENTRY if extern_c else FunctionKind.HOST

    def _classify_hosts(self) -> None:
        for function in self.functions:
            if function.kind is FunctionKind.HOST and function.launches:
                function.kind = FunctionKind.HOST_ENTRY

    def _launch_bounds(self, node: Node) -> LaunchBounds | None:
        args = [c for c in node.named_children if c.type != "comment"]
        if not args:
            return None
        return LaunchBounds(self.expr(args[0]), self.expr(args[1]) if len(args) > 1 else None, Span.of(node))

    def _params(self, params_node: Node) -> list[Param]:
        out: list[Param] = []
        for child in params_node.named_children:
            if child.type not in _PARAM_TYPES:
                continue
            param = self._param(child)
            if param is not None:
                out.append(param)
        return out

    def _param(self, node: Node) -> Param | None:
        type_node = node.child_by_field_name("type")
        if node.type == "variadic_parameter" or type_node is None:
            return Param(None, "...", "...", 0, False, False, False, False, False, None, Span.of(node))
        declarator = node.child_by_field_name("declarator")
        if declarator is None and self.data[type_node.start_byte : type_node.end_byte] == b"void":
            return None  # `f(void)`
        declarator_end = declarator.end_byte if declarator is not None else type_node.end_byte
        name_node: Node | None = None
        steps = 0
        while declarator is not None and steps < _MAX_LOCAL_STEPS:
            steps += 1
            if declarator.type in ("identifier", "field_identifier"):
                name_node = declarator
                break
            next_declarator = declarator.child_by_field_name("declarator")
            if next_declarator is None and declarator.type in ("reference_declarator", "parenthesized_declarator"):
                next_declarator = declarator.named_child(declarator.named_child_count - 1)
            declarator = next_declarator
        data = self.data
        if name_node is not None:
            type_bytes = data[node.start_byte : name_node.start_byte] + data[name_node.end_byte : declarator_end]
        else:
            type_bytes = data[node.start_byte : declarator_end]
        type_text = _SPACE.sub(" ", type_bytes.decode("utf-8", errors="replace")).strip()
        shape = _declarator_shape(type_text)
        default_node = node.child_by_field_name("default_value") if node.type.startswith("optional") else None
        return Param(
            name=self.text(name_node) if name_node is not None else None,
            type_text=type_text,
            base_type=self.flat(type_node) if type_node.type != "primitive_type" else self.text(type_node),
            pointer_depth=shape.pointer_depth,
            is_array=shape.is_array,
            is_reference=shape.is_reference,
            is_const=shape.is_const,
            is_const_pointer=shape.is_const_pointer,
            is_restrict=shape.is_restrict,
            default=self.flat(default_node) if default_node is not None else None,
            span=Span.of(node),
        )

    def _template_params(self, node: Node) -> list[TemplateParam]:
        out: list[TemplateParam] = []
        for child in node.named_children:
            kind = _TEMPLATE_PARAM_KINDS.get(child.type)
            if kind is None:
                continue
            name: str | None = None
            type_text: str | None = None
            default: str | None = None
            if kind in ("type", "type-pack"):
                name_node = child.child_by_field_name("name")
                if name_node is None:
                    identifiers = [c for c in child.named_children if c.type == "type_identifier"]
                    name_node = identifiers[0] if identifiers else None
                name = self.text(name_node) if name_node is not None else None
                default_node = child.child_by_field_name("default_type")
                default = self.flat(default_node) if default_node is not None else None
            elif kind in ("value", "value-pack"):
                param = self._param(child)
                if param is not None:
                    name, type_text, default = param.name, param.type_text, param.default
            else:
                names_found = [c for c in child.named_children if c.type in ("type_identifier", "identifier")]
                name = self.text(names_found[-1]) if names_found else None
            out.append(TemplateParam(kind, name, type_text, default, Span.of(child)))
        return out

    # --- calls: barriers, warp ops, atomics, tensor cores, launches, APIs ---------------------------

    def _collect_calls(self) -> None:
        defined = {f.name for f in self.functions}
        kernels = {f.name for f in self.functions if f.kind is FunctionKind.KERNEL}
        for call, callee in self.matches.calls:
            if self._in_deep_region(call.start_byte):
                continue
            function = self.function_at(call.start_byte)
            # A launch `k<<<...>>>(...)` has three children; a plain call has two.
            chevron = _child_of_type(call, "kernel_call_syntax") if call.child_count > 2 else None
            if chevron is not None:
                self._add_chevron_launch(call, callee, chevron, function, kernels)
                continue
            name = _callee_name(callee, self.data)
            if not name:
                continue
            self.call_names.append((name, call))
            if name in names.LAUNCH_FUNCTIONS:
                self._add_api_launch(call, name, function, kernels)
            if function is None:
                continue
            self._classify_call(function, call, callee, name, defined)

    def _classify_call(self, function: Function, call: Node, callee: Node, name: str, defined: set[str]) -> None:
        """Record a call under the first table that knows its name (spans only for recorded calls)."""
        target: list[Use] | None = None
        kind = ""
        if name in names.BARRIERS:
            target, kind = function.barriers, names.BARRIERS[name]
        elif callee.type == "field_expression":
            method = callee.child_by_field_name("field")
            if method is not None and self.text(method) in names.COOPERATIVE_SYNC_METHODS:
                target, kind = function.barriers, "cooperative"
        elif name in names.WARP_INTRINSICS:
            target, kind = function.warp_ops, names.WARP_INTRINSICS[name]
        elif name in names.POPCOUNTS and self._counts_ballot(call):
            target, kind = function.warp_ops, "ballot-count"
        elif name in names.ATOMICS:
            target, kind = function.atomics, names.ATOMICS[name]
        elif (tensor := names.TENSOR_CORE_MATCHER.lookup(name)) is not None:
            target, kind = function.tensor_core, tensor
        elif name in defined or name.rsplit("::", 1)[-1] in defined:
            resolved = name if name in defined else name.rsplit("::", 1)[-1]
            if resolved not in function.calls:
                function.calls.append(resolved)
        elif (library := names.api_library(name)) is not None:
            target, kind = function.api_calls, library
        elif (intrinsic := names.INTRINSIC_NAMES.get(name) or names.INTRINSIC_MATCHER.lookup(name)) is not None:
            target, kind = function.intrinsics, intrinsic
        if target is not None:
            target.append(Use(name, kind, Span.of(call)))

    def _counts_ballot(self, call: Node) -> bool:
        arguments = call.child_by_field_name("arguments")
        if arguments is None or arguments.named_child_count != 1:
            return False
        argument: Node | None = arguments.named_children[0]
        steps = 0
        while argument is not None and argument.type in ("cast_expression", "parenthesized_expression") and steps < 8:
            argument = argument.child_by_field_name("value") or (
                argument.named_children[-1] if argument.named_child_count else None
            )
            steps += 1
        if argument is None or argument.type != "call_expression":
            return False
        inner = argument.child_by_field_name("function")
        return inner is not None and _callee_name(inner, self.data) in names.BALLOTS

    def _add_chevron_launch(
        self, call: Node, callee: Node, chevron: Node, function: Function | None, kernels: set[str]
    ) -> None:
        family = "bang" if self.parsed.dialect is Dialect.BANG else "gpu"
        roles = names.CHEVRON_ROLES[family]
        configs = [c for c in chevron.named_children if c.type != "comment"]
        config = tuple(
            LaunchConfig(roles[i] if i < len(roles) else f"extra{i}", self.expr(c)) for i, c in enumerate(configs)
        )
        arguments = call.child_by_field_name("arguments")
        args = tuple(self.expr(a) for a in arguments.named_children if a.type != "comment") if arguments else ()
        kernel, template_args = self._kernel_name(callee)
        resolved = _defined(kernel, kernels)
        self._add_launch(LaunchSite(kernel, template_args, "chevron", config, args, None, resolved, Span.of(call)), function)

    def _add_api_launch(self, call: Node, api: str, function: Function | None, kernels: set[str]) -> None:
        kernel_index, roles, args_from = names.LAUNCH_FUNCTIONS[api]
        arguments = call.child_by_field_name("arguments")
        values = [a for a in arguments.named_children if a.type != "comment"] if arguments else []
        if len(values) <= kernel_index:
            return
        kernel, template_args = self._kernel_name(values[kernel_index])
        config = tuple(LaunchConfig(role, self.expr(values[i])) for i, role in sorted(roles.items()) if i < len(values))
        args = tuple(self.expr(v) for v in values[args_from:]) if args_from is not None else ()
        resolved = _defined(kernel, kernels)
        self._add_launch(LaunchSite(kernel, template_args, api, config, args, None, resolved, Span.of(call)), function)

    def _add_launch(self, site: LaunchSite, function: Function | None) -> None:
        if function is not None:
            site = dataclasses.replace(site, caller=function.name)
            function.launches.append(site)
        self.launches.append(site)

    def _kernel_name(self, node: Node) -> tuple[str, str | None]:
        """(name, template arguments) of a launched kernel expression."""
        steps = 0
        while steps < 8:
            steps += 1
            if node.type == "parenthesized_expression" and node.named_child_count:
                node = node.named_children[0]
            elif node.type == "call_expression":
                wrapper = node.child_by_field_name("function")
                arguments = node.child_by_field_name("arguments")
                if (
                    wrapper is not None
                    and self.text(wrapper) in names.KERNEL_NAME_WRAPPERS
                    and arguments is not None
                    and arguments.named_child_count
                ):
                    node = arguments.named_children[0]
                else:
                    break
            elif node.type in ("pointer_expression", "unary_expression") and node.named_child_count:
                node = node.named_children[-1]  # `&kernel`
            elif node.type == "cast_expression" and (value := node.child_by_field_name("value")) is not None:
                node = value  # `(void*)kernel`
            else:
                break
        if node.type == "template_function":
            name_node = node.child_by_field_name("name")
            args_node = node.child_by_field_name("arguments")
            name = self.flat(name_node) if name_node is not None else self.flat(node)
            return name, self.flat(args_node) if args_node is not None else None
        return self.flat(node), None

    # --- buffers ---------------------------------------------------------------------------------

    def _collect_buffers(self) -> None:
        seen: set[tuple[int, int]] = set()
        owners: list[tuple[Node, list[str]]] = []
        for qualifier in self.matches.memory_qualifiers:
            owner = qualifier.parent
            if owner is None or owner.type not in ("declaration", "field_declaration"):
                continue
            key = (owner.start_byte, owner.end_byte)
            if key in seen:
                continue
            seen.add(key)
            owners.append((owner, self._memory_words(owner)))
        for node in self._bang_owners:
            if node.type in ("declaration", "field_declaration"):
                key = (node.start_byte, node.end_byte)
                if key not in seen:
                    seen.add(key)
                    owners.append((node, self._memory_words(node)))
        owners.sort(key=lambda item: item[0].start_byte)
        for owner, words in owners:
            if self._in_deep_region(owner.start_byte):
                continue
            self._add_buffers(owner, words)
        self._collect_macro_buffers()

    def _memory_words(self, node: Node) -> list[str]:
        words = [self.text(c) for c in node.children if c.type == "type_qualifier" or c.type == "__device__"]
        words += [self.text(c) for c in node.children if c.type == "storage_class_specifier"]
        words += self._bang_qualifiers(node)
        return words

    def _add_buffers(self, owner: Node, words: list[str]) -> None:
        memory = next((names.MEMORY_QUALIFIERS[w] for w in words if w in names.MEMORY_QUALIFIERS), None)
        if memory is None:
            if "__device__" not in words:
                return
            memory = "device"
        is_extern = "extern" in words
        type_node = owner.child_by_field_name("type")
        element_type = self.flat(type_node) if type_node is not None else ""
        function = self.function_at(owner.start_byte)
        for child in owner.children_by_field_name("declarator"):
            buffer = self._buffer(child, memory, element_type, is_extern, function)
            if buffer is None:
                continue
            if function is None:
                self.file_buffers.append(buffer)
            else:
                function.buffers.append(buffer)

    def _buffer(
        self, declarator: Node, memory: str, element_type: str, is_extern: bool, function: Function | None
    ) -> Buffer | None:
        sizes: list[Expr] = []
        pointer = ""
        dynamic = False
        node: Node | None = declarator
        steps = 0
        while node is not None and steps < _MAX_LOCAL_STEPS:
            steps += 1
            if node.type in ("identifier", "field_identifier"):
                break
            if node.type == "array_declarator":
                size = node.child_by_field_name("size")
                if size is None:
                    dynamic = True
                else:
                    sizes.append(self.expr(size))
            elif node.type == "pointer_declarator":
                pointer += "*"
            node = node.child_by_field_name("declarator")
        if node is None or node.type not in ("identifier", "field_identifier"):
            return None
        sizes.reverse()  # declarators nest innermost-last: `a[2][3]` is array(array(a, 2), 3)
        return Buffer(
            name=self.text(node),
            memory=memory,
            element_type=element_type + pointer,
            sizes=tuple(sizes),
            dynamic=dynamic and is_extern,
            function=function.name if function is not None else None,
            span=self.span_with_keywords(declarator.parent) if declarator.parent is not None else Span.of(declarator),
        )

    def _collect_macro_buffers(self) -> None:
        # `HIP_DYNAMIC_SHARED(float, smem)` passes a type as a macro argument: the grammar gives an
        # ERROR node, so the macro is read from the text and the ERROR it causes is explained.
        if not any(macro.encode() in self.data for macro in names.DYNAMIC_SHARED_MACROS):
            return
        root = self.parsed.root
        for match in _DYNAMIC_SHARED_MACRO.finditer(self.data):
            start, end = match.start(), match.end()
            node = root.descendant_for_byte_range(start, start + 1)
            if node is None or node.type in ("comment", "string_content", "string_literal", "preproc_arg"):
                continue
            type_index, name_index = names.DYNAMIC_SHARED_MACROS[match.group(1).decode()]
            values = [v.strip() for v in match.group(2).decode("utf-8", errors="replace").split(",")]
            if len(values) <= max(type_index, name_index):
                continue
            function = self.function_at(start)
            line = self.data.count(b"\n", 0, start)
            col = start - (self.data.rfind(b"\n", 0, start) + 1)
            buffer = Buffer(
                name=values[name_index],
                memory="shared",
                element_type=_SPACE.sub(" ", values[type_index]),
                sizes=(),
                dynamic=True,
                function=function.name if function is not None else None,
                span=Span(start, end, line, col, line, col + end - start),
            )
            (function.buffers if function is not None else self.file_buffers).append(buffer)
            self.explained_ranges.append((start, end))

    # --- built-ins, asm, pragmas -----------------------------------------------------------------

    def _collect_builtins(self) -> None:
        for node, field_component, end in self.matches.builtins:
            function = self.function_at(node.start_byte)
            if function is None or self._in_deep_region(node.start_byte):
                continue
            spelled = self.text(node)
            name, component = names.BUILTIN_VARIABLES[spelled]
            line, col = node.start_point
            if component is None and field_component is not None:
                component = field_component
            else:
                end = node.end_byte
            span = Span(node.start_byte, end, line, col, line, col + end - node.start_byte)
            function.builtins.append(BuiltinUse(name, component, spelled, span))

    def _collect_asm(self) -> None:
        for node in self.matches.asms:
            function = self.function_at(node.start_byte)
            if function is None:
                continue
            code = node.child_by_field_name("assembly_code")
            text = _string_contents(code, self.data) if code is not None else ""
            volatile = any(c.type == "gnu_asm_qualifier" and b"volatile" in (c.text or b"") for c in node.children)
            tensor = names.TENSOR_CORE_ASM.search(text) is not None
            function.inline_asm.append(InlineAsm(text, volatile, tensor, Span.of(node)))

    def _collect_pragmas(self) -> None:
        for node, directive in self.matches.pragmas:
            if self.text(directive) != "#pragma":
                continue
            argument = node.child_by_field_name("argument")
            text = self.flat(argument) if argument is not None else ""
            kind = text.split(" ", 1)[0].split("(", 1)[0] if text else ""
            function = self.function_at(node.start_byte)
            if function is not None:
                function.pragmas.append(Pragma(kind, text, Span.of(node)))


_QUALIFIED_OWNERS = frozenset(
    {"declaration", "function_definition", "field_declaration", "parameter_declaration", "template_declaration"}
)
_PARAM_TYPES = frozenset(
    {"parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration", "variadic_parameter"}
)
_TEMPLATE_PARAM_KINDS = {
    "type_parameter_declaration": "type",
    "optional_type_parameter_declaration": "type",
    "variadic_type_parameter_declaration": "type-pack",
    "parameter_declaration": "value",
    "optional_parameter_declaration": "value",
    "variadic_parameter_declaration": "value-pack",
    "template_template_parameter_declaration": "template",
}
_RESTRICT = frozenset({"__restrict__", "__restrict", "restrict"})
_DYNAMIC_SHARED_MACRO = re.compile(
    rb"\b(" + b"|".join(re.escape(m.encode()) for m in names.DYNAMIC_SHARED_MACROS) + rb")[ \t]*\(([^()\n]*)\)"
)
_TYPE_TOKEN = re.compile(r"[A-Za-z_]\w*|[*&\[<>(]")


@dataclass(frozen=True, slots=True)
class _Shape:
    pointer_depth: int
    is_array: bool
    is_reference: bool
    is_const: bool
    is_const_pointer: bool
    is_restrict: bool


@lru_cache(maxsize=4096)
def _declarator_shape(type_text: str) -> _Shape:
    """Pointer depth and qualifiers of a parameter type written as text (name removed).

    `const T* __restrict__` → depth 1, const pointee, restrict. Qualifiers inside template arguments
    (`Array<const float*, 2>`) do not count; `const` after a `*` qualifies the pointer itself.
    """
    depth = 0
    angle = 0
    is_array = is_reference = is_const = is_const_pointer = is_restrict = False
    for token in _TYPE_TOKEN.findall(type_text):
        if token == "<":
            angle += 1
        elif token == ">":
            angle = max(0, angle - 1)
        elif angle:
            continue
        elif token == "*":
            depth += 1
        elif token == "&":
            is_reference = True
        elif token == "[":
            is_array = True
        elif token == "(":
            depth = max(depth, 1) if "*" in type_text else depth  # function pointer `void (*)(int)`
            break
        elif token in _RESTRICT:
            is_restrict = True
        elif token == "const":
            if depth or is_reference:
                is_const_pointer = True
            else:
                is_const = True
    return _Shape(depth, is_array, is_reference, is_const, is_const_pointer, is_restrict)
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"][^>"\n]*[>"])', re.MULTILINE)


def _includes(data: bytes) -> list[str]:
    return [m.group(1).decode("utf-8", errors="replace") for m in _INCLUDE.finditer(data[:1_000_000])]


def _defined(name: str, defined: set[str]) -> bool:
    """Whether ``name`` (possibly namespace-qualified: `ops::k`) names a function of the file."""
    return name in defined or name.rsplit("::", 1)[-1] in defined


def _child_of_type(node: Node, kind: str) -> Node | None:
    for child in node.children:
        if child.type == kind:
            return child
    return None


def _callee_name(callee: Node, data: bytes) -> str:
    """A call's function as a name: `f`, `ns::f`, `f<T>` → `f`, `obj.method` → `obj.method`."""
    if callee.type == "template_function":
        name_node = callee.child_by_field_name("name")
        if name_node is not None:
            callee = name_node
    elif callee.type == "qualified_identifier" and callee.end_byte - callee.start_byte > 256:
        return ""
    if callee.type not in _NAME_NODES:
        return ""
    raw = data[callee.start_byte : callee.end_byte]
    if len(raw) > 256:
        return ""
    text = _SPACE.sub("", raw.decode("utf-8", errors="replace"))
    if "<" in text:  # ns::f<T> → ns::f
        text = text.split("<", 1)[0]
    return text


_NAME_NODES = frozenset({"identifier", "qualified_identifier", "field_expression", "template_function"})


def _string_contents(node: Node, data: bytes) -> str:
    """The joined contents of a string literal or of adjacent literals (`"a" "b"`)."""
    pieces: list[str] = []
    stack = [node]
    steps = 0
    while stack and steps < 4096:
        steps += 1
        current = stack.pop()
        if current.type in ("string_content", "escape_sequence"):
            pieces.append(data[current.start_byte : current.end_byte].decode("utf-8", errors="replace"))
            continue
        stack.extend(reversed(current.children))
    return "".join(pieces)


def _is_extern_c(node: Node, data: bytes) -> bool:
    parent = node.parent
    steps = 0
    while parent is not None and steps < 4:
        if parent.type == "linkage_specification":
            value = parent.child_by_field_name("value")
            return value is not None and data[value.start_byte : value.end_byte] == b'"C"'
        if parent.type not in ("declaration_list", "template_declaration"):
            return False
        parent = parent.parent
        steps += 1
    return False

