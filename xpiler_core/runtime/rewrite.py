"""The mechanical source rewrite that lets g++ compile CUDA/HIP source against the runtime headers.

Five constructs need it, because g++ cannot compile them (or the runtime's scheduling needs them):

* ``K<<<c0, c1[, c2[, c3]]>>>(args)`` becomes ``::xpiler::launch(K, c0, c1[, c2[, c3]])(args)``;
* ``extern __shared__ T name[];`` becomes a pointer to the launch's dynamic shared memory (a local
  ``T* const name`` inside functions, a macro at file scope);
* a static ``__shared__`` declaration is followed, on the same line, by a hook that fills the arrays with
  the runtime's poison pattern once per block (uninitialised shared memory is garbage on a GPU, and
  ``static thread_local`` storage would otherwise read as zero);
* a device statement through a name declared ``volatile`` is followed by ``::xpiler::lockstep``, where the
  warp's lanes running it meet (the warp-synchronous idiom relies on a warp taking each statement in step);
* a braced list assigned to a variable of a GNU vector type (``v = {0};``, HIP's MFMA accumulators declared
  with a ``using float4 = __attribute__((__vector_size__(16))) float`` or an ``ext_vector_type`` typedef)
  becomes ``v = __typeof__(v){0};``: clang (hipcc) accepts the braced assignment, g++ only a braced
  initialization. Variables of other types are left as written.

Inside the body of a ``__global__`` or ``__device__`` function, a conditional on ``__CUDA_ARCH__`` sees the
runtime's device (sm_80), as nvcc's device pass would; elsewhere the macro stays undefined, as in nvcc's host pass.

Launches are found on the tree-sitter CST (``call_expression`` with a ``kernel_call_syntax`` child), so
strings, comments and ``<<``/``>>`` operators are never touched. Every replacement keeps the number of
newlines of the text it replaces, so compiler diagnostics keep the user's line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import parse_text

_EXTERN_SHARED = re.compile(
    r"^extern\s+(?P<quals>(?:(?:__shared__|volatile|const|__align__\s*\(\s*\d+\s*\)|"
    r"__attribute__\s*\(\(.*?\)\)|HIP_DYNAMIC_SHARED_ATTRIBUTE)\s*)*)"
    r"(?P<type>[\w:<>,\s*]+?)\s*(?P<name>\w+)\s*\[\s*\]\s*(?P<dims>(?:\[[^\]]*\]\s*)*);$",
    re.S,
)


# A launch inside a macro body (tree-sitter leaves macro bodies as raw text): kernel name, optionally with
# template arguments, then the configuration up to the first `>>>`.
_MACRO_LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:\s*<[^<>;]*>)?)\s*<<<(.*?)>>>", re.S)


@dataclass(frozen=True)
class Launch:
    """One ``<<<...>>>`` launch site (0-based line) and the text of its kernel expression."""

    kernel: str
    line: int
    config: tuple[str, ...]


@dataclass
class RewriteResult:
    text: str
    launches: list[Launch] = field(default_factory=list)
    dynamic_shared: list[str] = field(default_factory=list)
    static_shared: list[str] = field(default_factory=list)


def _same_lines(replacement: str, original: str) -> str:
    """Pad a replacement with newlines so it spans as many lines as the original text."""
    missing = original.count("\n") - replacement.count("\n")
    return replacement + "\n" * missing if missing > 0 else replacement


def _walk(node: Node) -> list[Node]:
    """All nodes, iteratively (deeply nested input must not hit Python's recursion limit)."""
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children))
    return out


def _inside_function(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in ("compound_statement", "function_definition"):
            return True
        parent = parent.parent
    return False


def _function_template_names(nodes: list[Node]) -> set[str]:
    """Names of function templates defined or declared in the file (unqualified)."""
    names: set[str] = set()
    for node in nodes:
        if node.type != "template_declaration":
            continue
        for child in node.children:
            if child.type not in ("function_definition", "declaration"):
                continue
            declarator = child.child_by_field_name("declarator")
            while declarator is not None and declarator.type != "function_declarator":
                declarator = declarator.child_by_field_name("declarator")
            if declarator is None:
                continue
            name = declarator.child_by_field_name("declarator")
            if name is not None and name.type == "identifier" and name.text is not None:
                names.add(name.text.decode("utf-8", "replace"))
    return names


_DECLARATOR_TYPES = (
    "array_declarator",
    "parenthesized_declarator",
    "pointer_declarator",
    "reference_declarator",
    "init_declarator",
)


def _declared_name(declarator: Node) -> str | None:
    """The identifier a declarator declares (``s`` in ``s[2][3]``, ``*p``, ``(a[4])``), if it has one."""
    node: Node | None = declarator
    while node is not None:
        if node.type == "identifier":
            return node.text.decode("utf-8", "replace") if node.text is not None else None
        inner = node.child_by_field_name("declarator")
        if inner is None:
            inner = next(
                (c for c in node.named_children if c.type == "identifier" or c.type in _DECLARATOR_TYPES), None
            )
        node = inner
    return None


def _alignas_first(node: Node, decl: str) -> list[tuple[int, int, str]]:
    """``__shared__ alignas(16) float t[...]`` (nvcc's order): g++ takes a standard attribute only before the
    specifiers, and ``__shared__`` expands to some (``static thread_local``), so the ``alignas`` moves in front."""
    m = re.search(r"\balignas\s*\(", decl)
    if m is None or not re.search(r"\b__shared__\b", decl[: m.start()]):
        return []
    depth, end = 0, m.end() - 1
    for end in range(m.end() - 1, len(decl)):
        depth += {"(": 1, ")": -1}.get(decl[end], 0)
        if depth == 0:
            break
    else:
        return []
    start_byte = node.start_byte + len(decl[: m.start()].encode("utf-8"))
    end_byte = node.start_byte + len(decl[: end + 1].encode("utf-8"))
    spec = decl[m.start(): end + 1]
    return [(node.start_byte, node.start_byte, spec + " "), (start_byte, end_byte, "")]


def _shared_fill_hook(node: Node, names: list[str]) -> str:
    """Code appended after a static ``__shared__`` declaration so each block starts on poisoned arrays."""
    objs = ", ".join(names)
    if _inside_function(node):
        stamp = f"xpiler_smem_stamp_{node.start_byte}"
        return f" static thread_local unsigned long long {stamp}; ::xpiler::fresh_shared({stamp}, {objs});"
    fills = " ".join(f"::xpiler::poison_shared({n});" for n in names)
    return f" static const bool xpiler_smem_filler_{node.start_byte} = ::xpiler::register_shared([] {{ {fills} }});"


def _overloaded_names(nodes: list[Node]) -> set[str]:
    """Names of functions defined with two or more parameter lists in the file (overloaded kernels)."""
    seen: dict[str, set[bytes]] = {}
    for node in nodes:
        if node.type != "function_declarator":
            continue
        name = node.child_by_field_name("declarator")
        params = node.child_by_field_name("parameters")
        if name is not None and name.type == "identifier" and name.text is not None and params is not None:
            seen.setdefault(name.text.decode("utf-8", "replace"), set()).add(
                b" ".join((params.text or b"").split()))
    return {name for name, lists in seen.items() if len(lists) > 1}


def _kernel_expression(function: Node, kernel: str, templates: set[str], deduce_plain: bool) -> str:
    """The first argument of ``::xpiler::launch``: a generic lambda that calls the kernel, so that the call
    arguments deduce template arguments or pick the overload, as nvcc does — for every kernel named by a plain
    identifier (``deduce_plain``: the CUDA/HIP runtime; the BANG model launches the kernel itself), since the
    name may be an overload set the file does not show (a kernel named ``sin`` next to <cmath>'s ``sin``); a
    qualified name stays the kernel itself unless it names a template or an overload. The lambda captures by
    reference: the name may be a local function pointer (``auto kernel = &copy; kernel<<<g, b>>>(…)``), and
    the launch completes before the statement ends."""
    last = function
    if function.type == "qualified_identifier":
        name = function.child_by_field_name("name")
        last = name if name is not None else function
    if last.type == "identifier" and last.text is not None and (
        (deduce_plain and function.type == "identifier") or last.text.decode("utf-8", "replace") in templates
    ):
        quoted = kernel.replace('"', '\\"')
        return (
            f'::xpiler::deduced_kernel("{quoted}", [&](auto... xpiler_args) {{ {kernel}(xpiler_args...); }})'
        )
    return kernel


_DEVICE_QUALIFIERS = (b"__global__", b"__device__")


def _volatile_names(function: Node) -> set[str]:
    """Names a device function declares volatile (parameters and locals: `volatile float* v = s;`)."""
    names: set[str] = set()
    for node in _walk(function):
        if node.type not in ("parameter_declaration", "declaration"):
            continue
        if not any(c.type == "type_qualifier" and c.text == b"volatile" for c in node.children):
            continue
        for declarator in node.children_by_field_name("declarator"):
            name = _declared_name(declarator)
            if name is not None:
                names.add(name)
    return names


# nvcc defines __CUDA_ARCH__ only while it compiles device code; one g++ pass compiles both sides, so the
# macro is given its value where code can only be device code: the conditionals inside the body of a
# __global__ or __device__ (not __host__ __device__) function. The runtime models an sm_80 device.
RUNTIME_CUDA_ARCH = 800
_ARCH_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(if|elif|ifdef|ifndef)\b[^\n]*\b__CUDA_ARCH__\b[^\n]*", re.MULTILINE)


def _device_only(head: bytes) -> bool:
    """Whether a function's head (what precedes its body) makes it device code only: no ``__host__``."""
    return any(q in head for q in _DEVICE_QUALIFIERS) and b"__host__" not in head


def _applied(data: bytes, edits: list[tuple[int, int, str]]) -> str:
    out = bytearray(data)
    for start, end, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        out[start:end] = replacement.encode("utf-8")
    return out.decode("utf-8", "replace")


def _is_device_function(node: Node, data: bytes) -> bool:
    if node.type == "template_declaration":
        inner = next((c for c in node.named_children if c.type in ("function_definition", "declaration")), None)
        return inner is not None and _is_device_function(inner, data)
    if node.type not in ("function_definition", "declaration"):
        return False
    body = node.child_by_field_name("body")
    head = data[node.start_byte:(body.start_byte if body is not None else node.end_byte)]
    return _device_only(head) and b"(" in head


def _device_region_arch_edits(region: Node, data: bytes, dialect: Dialect) -> list[tuple[int, int, str]]:
    """A file-scope ``#if __CUDA_ARCH__ ...`` with no ``#else`` that holds only device functions (NVIDIA's samples
    guard a kernel's device helpers so): device code, read as the runtime's device reads it."""
    condition = region.child_by_field_name("condition")
    if dialect is not Dialect.CUDA or condition is None or b"__CUDA_ARCH__" not in (condition.text or b"") \
            or region.child_by_field_name("alternative") is not None:
        return []
    items = [c for c in region.named_children if c.start_byte != condition.start_byte and c.type != "comment"]
    if not items or not all(_is_device_function(c, data) for c in items):
        return []
    line_start = data.rfind(b"\n", 0, region.start_byte) + 1
    line_end = data.find(b"\n", condition.end_byte)
    line = data[line_start:line_end if line_end >= 0 else len(data)]
    return [(line_start + m.start(), line_start + m.end(), new)
            for m, new in _arch_directive_rewrites(line)]


def _arch_directive_rewrites(text: bytes) -> list[tuple[re.Match[bytes], str]]:
    """Each ``#if``/``#elif``/``#ifdef``/``#ifndef`` line of ``text`` that tests ``__CUDA_ARCH__``, as the
    runtime's device reads it."""
    out: list[tuple[re.Match[bytes], str]] = []
    for m in _ARCH_DIRECTIVE.finditer(text):
        line = m.group(0).decode("utf-8", "replace")
        kind = m.group(1).decode()
        if kind in ("ifdef", "ifndef"):
            value = "1" if kind == "ifdef" else "0"
            new = re.sub(r"#(\s*)ifn?def\s+__CUDA_ARCH__\b", rf"#\1if {value}", line)
        else:
            new = re.sub(r"\bdefined\s*\(\s*__CUDA_ARCH__\s*\)|\bdefined\s+__CUDA_ARCH__\b", "1", line)
            new = re.sub(r"\b__CUDA_ARCH__\b", str(RUNTIME_CUDA_ARCH), new)
        out.append((m, new))
    return out


def _device_arch_edits(function: Node, data: bytes, dialect: Dialect) -> list[tuple[int, int, str]]:
    body = function.child_by_field_name("body")
    if body is None or dialect is not Dialect.CUDA or b"__CUDA_ARCH__" not in data[body.start_byte:body.end_byte]:
        return []
    if not _device_only(data[function.start_byte:body.start_byte]):
        return []
    return [(body.start_byte + m.start(), body.start_byte + m.end(), new)
            for m, new in _arch_directive_rewrites(data[body.start_byte:body.end_byte])]


def device_arch_resolved(text: str, dialect: Dialect) -> str:
    """``text`` with only the device-code ``__CUDA_ARCH__`` conditionals given their value (see above): what the
    CPU plan translates, so that its output and the runtime's run of the source read each one alike."""
    if dialect is not Dialect.CUDA or "__CUDA_ARCH__" not in text:
        return text
    parsed = parse_text(text, "<rewrite>", dialect)
    data = parsed.data
    edits = [e for node in _walk(parsed.root) if node.type == "function_definition"
             for e in _device_arch_edits(node, data, dialect)]
    edits += [e for node in _walk(parsed.root) if node.type == "preproc_if" and not _inside_function(node)
              for e in _device_region_arch_edits(node, data, dialect)]
    return _applied(data, edits)


def _lockstep_edits(function: Node) -> list[tuple[int, int, str]]:
    """Each statement of a device function that touches memory through a name it declares volatile, wrapped
    so that the warp meets after it (``::xpiler::lockstep``): the warp-synchronous idiom computes on the
    runtime what it computes on a GPU. The braces keep an unbraced loop or branch body one statement."""
    names = _volatile_names(function)
    if not names:
        return []
    edits: list[tuple[int, int, str]] = []
    for node in _walk(function):
        if node.type != "expression_statement":
            continue
        if any(n.type == "identifier" and n.text is not None and n.text.decode("utf-8", "replace") in names
               for n in _walk(node)):
            edits.append((node.start_byte, node.start_byte, "{ "))
            edits.append((node.end_byte, node.end_byte, f" ::xpiler::lockstep({node.start_point[0] + 1}); }}"))
    return edits


_VECTOR_ATTRIBUTES = (b"vector_size", b"ext_vector_type")


def _gnu_vector_names(nodes: list[Node], data: bytes) -> set[str]:
    """Names the file declares with a GNU vector type: its vector type aliases (``using``/``typedef`` with a
    ``vector_size``/``ext_vector_type`` attribute) and the variables declared with one of them or with the
    attribute itself (scopes are not told apart: a same-named variable of another type only gets the same
    assignment spelled with its own type)."""
    def text(n: Node) -> bytes:
        return data[n.start_byte:n.end_byte]

    types: set[bytes] = set()
    for node in nodes:
        if node.type in ("alias_declaration", "type_definition") and any(a in text(node) for a in _VECTOR_ATTRIBUTES):
            types.update(text(c) for c in node.children if c.type == "type_identifier")
            for declarator in node.children_by_field_name("declarator"):
                types.update(text(n) for n in _walk(declarator) if n.type == "type_identifier")
    names: set[str] = set()
    for node in nodes:
        if node.type not in ("declaration", "parameter_declaration", "field_declaration"):
            continue
        kind = node.child_by_field_name("type")
        if (kind is not None and text(kind) in types) or any(a in text(node) for a in _VECTOR_ATTRIBUTES):
            names.update(n for d in node.children_by_field_name("declarator")
                         if (n := _declared_name(d)) is not None)
    return names


def _root_name(node: Node) -> str | None:
    """The variable an lvalue ``v``, ``v[i]`` or ``v.x`` designates."""
    while node.type in ("subscript_expression", "field_expression"):
        inner = node.child_by_field_name("argument")
        if inner is None:
            return None
        node = inner
    return node.text.decode("utf-8", "replace") if node.type == "identifier" and node.text is not None else None


def _braced_assignment(node: Node, data: bytes, vectors: set[str]) -> tuple[int, int, str] | None:
    """``LHS = {…}`` on a GNU vector gets the type of LHS before the list (an insertion: lines and columns of
    the rest stay)."""
    target, value = node.child_by_field_name("left"), node.child_by_field_name("right")
    operator = node.child_by_field_name("operator")
    if target is None or value is None or _root_name(target) not in vectors or value.type != "initializer_list" \
            or (operator is not None and operator.text != b"=") or node.has_error \
            or data[value.start_byte:value.start_byte + 1] != b"{":
        return None  # (a statement the grammar only recovered from is left as written)
    lhs = data[target.start_byte:target.end_byte].decode("utf-8", "replace")
    if "\n" in lhs:
        return None
    return value.start_byte, value.start_byte, f"__typeof__({lhs})"


_REINTERPRET_TO_VOID = re.compile(rb"^reinterpret_cast\s*<\s*(?:const\s+)?void\s*\*\s*>$")


def _void_pointer_cast(node: Node, data: bytes) -> tuple[int, int, str] | None:
    """``(void*)name``, ``(void*)&name`` or ``reinterpret_cast<void*>(name)`` as ``::xpiler::void_pointer(...)``
    of the same operand: the same address (or value, for an integer or null), with a kernel's parameter types
    registered."""
    if node.type == "call_expression":
        func, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        if func is None or args is None or not _REINTERPRET_TO_VOID.match(data[func.start_byte:func.end_byte]):
            return None
        value = next((c for c in args.named_children if c.type != "comment"), None)
        if value is None or len(args.named_children) != 1:
            return None
    else:
        kind, value = node.child_by_field_name("type"), node.child_by_field_name("value")
        if kind is None or value is None or b"".join(data[kind.start_byte:kind.end_byte].split()) != b"void*":
            return None
    operand = value
    if operand.type == "pointer_expression" and data[operand.start_byte:operand.start_byte + 1] == b"&":
        operand = operand.child_by_field_name("argument") or operand
    if operand.type not in ("identifier", "qualified_identifier"):
        return None
    text = data[value.start_byte:value.end_byte].decode("utf-8", "replace")
    return node.start_byte, node.end_byte, f"::xpiler::void_pointer({text})"


def rewrite_for_cpu(text: str, dialect: Dialect = Dialect.CUDA) -> RewriteResult:
    """Rewrite launches and dynamic shared arrays; everything else is left byte-for-byte as it was."""
    parsed = parse_text(text, "<rewrite>", dialect)
    data = parsed.data
    edits: list[tuple[int, int, str]] = []
    result = RewriteResult(text)
    nodes = _walk(parsed.root)
    templates = _function_template_names(nodes) | _overloaded_names(nodes)
    vectors = _gnu_vector_names(nodes, data) if any(a in data for a in _VECTOR_ATTRIBUTES) else set()
    # graph kernel nodes and launches through an argument array name their kernel by a type-erased address
    # (`params.func = (void*)k`, `cudaLaunchKernel((void*)k, ...)`): the cast registers k's parameter types
    # (graph.h), so the node or the launch can copy and pass its arguments
    kernel_nodes = dialect in (Dialect.CUDA, Dialect.HIP) and any(
        api in data for api in (b"KernelNodeParams", b"LaunchKernel", b"LaunchCooperativeKernel"))
    for node in nodes:
        if kernel_nodes and node.type in ("cast_expression", "call_expression") and (
                edit := _void_pointer_cast(node, data)) is not None:
            edits.append(edit)
            continue
        if node.type == "preproc_if" and not _inside_function(node):  # (an include guard around it too)
            edits.extend(_device_region_arch_edits(node, data, dialect))
        if node.type == "function_definition" and dialect in (Dialect.CUDA, Dialect.HIP):
            block = node.child_by_field_name("body")
            head = data[node.start_byte:(block.start_byte if block is not None else node.end_byte)]
            if any(q in head for q in _DEVICE_QUALIFIERS) and b"volatile" in data[node.start_byte:node.end_byte]:
                edits.extend(_lockstep_edits(node))
            edits.extend(_device_arch_edits(node, data, dialect))
        if node.type == "call_expression":
            config = next((c for c in node.children if c.type == "kernel_call_syntax"), None)
            if config is None or not node.children or node.children[0].type == "kernel_call_syntax":
                continue
            function = node.children[0]
            parts = [
                data[c.start_byte : c.end_byte].decode("utf-8", "replace")
                for c in config.children
                if c.type not in ("<<<", ">>>", ",") and c.is_named
            ]
            kernel = data[function.start_byte : function.end_byte].decode("utf-8", "replace")
            original = data[function.start_byte : config.end_byte].decode("utf-8", "replace")
            replacement = (
                f"::xpiler::launch({_kernel_expression(function, kernel, templates, dialect is not Dialect.BANG)}, {', '.join(parts)})"
            )
            edits.append((function.start_byte, config.end_byte, _same_lines(replacement, original)))
            result.launches.append(Launch(kernel, node.start_point[0], tuple(parts)))
        elif node.type == "assignment_expression" and vectors and (
                edit := _braced_assignment(node, data, vectors)) is not None:
            edits.append(edit)
        elif node.type == "preproc_arg" and b"<<<" in data[node.start_byte : node.end_byte]:
            body = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
            rewritten = _MACRO_LAUNCH.sub(lambda m: f"::xpiler::launch({m.group(1)}, {m.group(2).strip()})", body)
            edits.append((node.start_byte, node.end_byte, rewritten))
            for found in _MACRO_LAUNCH.finditer(body):
                line = node.start_point[0] + body.count("\n", 0, found.start())
                result.launches.append(Launch(found.group(1), line, (found.group(2).strip(),)))
        elif node.type == "declaration":
            decl = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
            if "__shared__" in decl and not decl.startswith("extern"):
                # `__shared__` already expands to `static thread_local`: drop a second `static`.
                for child in node.children:
                    if child.type == "storage_class_specifier" and child.text == b"static":
                        edits.append((child.start_byte, child.end_byte, " " * (child.end_byte - child.start_byte)))
                edits.extend(_alignas_first(node, decl))
                is_shared = any(c.type == "type_qualifier" and c.text == b"__shared__" for c in node.children)
                names = [
                    name
                    for d in node.children_by_field_name("declarator")
                    if (name := _declared_name(d)) is not None
                ]
                # The fill hook calls the SIMT runtime (CUDA/HIP headers); the BANG model has its own.
                if is_shared and names and dialect in (Dialect.CUDA, Dialect.HIP):
                    edits.append((node.end_byte, node.end_byte, _shared_fill_hook(node, names)))
                    result.static_shared.extend(names)
                continue
            if not decl.startswith("extern") or "__shared__" not in decl:
                continue
            # `__shared__` may stand anywhere among the specifiers (`extern float __shared__ smem[];`)
            m = _EXTERN_SHARED.match(re.sub(r"\b__shared__\b", " ", decl))
            if m is None:
                continue
            ctype = " ".join(m.group("type").split())
            name = m.group("name")
            dims = "".join(m.group("dims").split())
            volatile = "volatile " if "volatile" in m.group("quals") else ""
            pointee = f"{volatile}{ctype}"
            if _inside_function(node):
                pointer_type = f"{pointee} (*)" + dims if dims else f"{pointee}*"
                declarator = f"(* const {name}){dims}" if dims else f"* const {name}"
                replacement = f"{pointee} {declarator} = reinterpret_cast<{pointer_type}>(::xpiler::dynamic_shared_memory());"
            else:
                pointer_type = f"{pointee} (*)" + dims if dims else f"{pointee}*"
                replacement = (
                    f"#define {name} (reinterpret_cast<{pointer_type}>(::xpiler::dynamic_shared_memory()))"
                )
                # A #define must stand on a line of its own.
                if node.start_point[1] != 0:
                    replacement = "\n" + replacement
            edits.append((node.start_byte, node.end_byte, _same_lines(replacement, decl)))
            result.dynamic_shared.append(name)
    result.text = _applied(data, edits)
    result.launches.sort(key=lambda launch: launch.line)
    return result
