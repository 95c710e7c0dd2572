"""Map CUDA API names to HIP (or back) from the tables in ``xpiler_core/tables``, editing the CST in place.

Only what must change changes: identifiers, type names, include paths, namespace names and the argument
lists of the calls the tables describe. Comments, string literals, layout and every name the file declares
itself stay exactly as they were. Names that look like the source API but have no mapping are reported as
unresolved (with their location), never passed through silently. HIP -> CUDA also turns
``hipLaunchKernelGGL(K, grid, block, smem, stream, args...)`` into ``K<<<grid, block, smem, stream>>>(args...)``.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import ParsedSource, parse_text
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, SourceUnit, Unresolved
from xpiler_core.passes.support.cst import Edit, apply_edits, call_arguments, users_own_names, walk
from xpiler_core.passes.support.macro_bodies import rewrite_bodies
from xpiler_core.tables import Direction, MappingTable, load_mapping

INFO = PassInfo(
    name="api_map",
    summary="Rename CUDA runtime/driver/library APIs, types, enums, headers and intrinsics to HIP (or back)",
    kind="cst",
    directions=("cuda->hip", "hip->cuda"),
    params=(
        ParamSpec("report_unknown", "bool", True, "report source-API-looking names the tables do not know"),
    ),
)

# Names that look like the source API: used to report what the tables do not cover.
_API_LOOKING: dict[str, re.Pattern[str]] = {
    "cuda->hip": re.compile(
        r"^(cuda[A-Z]\w*|cu[A-Z][a-z]\w*|CU[a-z]\w*|CUDA_[A-Z_]+|CU_[A-Z_]+|cublas\w+|CUBLAS_\w+|curand\w*|"
        r"CURAND_\w+|cufft\w+|CUFFT_\w+|cusparse\w+|CUSPARSE_\w+|cudnn\w+|CUDNN_\w+|nvrtc\w+|NVRTC_\w+)$"
    ),
    "hip->cuda": re.compile(
        r"^(hip[A-Z]\w*|HIP_[A-Z_]+|hipblas\w+|HIPBLAS_\w+|hiprand\w*|HIPRAND_\w+|hipfft\w+|HIPFFT_\w+|"
        r"hipsparse\w+|HIPSPARSE_\w+|miopen\w+|rocwmma\w*|hiprtc\w+|HIPRTC_\w+)$"
    ),
}
# Names that match the pattern above but are not API names (or are handled by other passes).
_NOT_API = frozenset(
    {"cudaLaunchKernelGGL", "hipLaunchKernelGGL", "HIP_KERNEL_NAME", "HIP_DYNAMIC_SHARED", "HIP_VERSION",
     "HIP_VERSION_MAJOR", "HIP_VERSION_MINOR", "HIP_VERSION_PATCH", "CUDART_VERSION", "CUDA_VERSION"}
)
_IDENT_TOKEN = re.compile(r"\b[A-Za-z_]\w*\b")
_LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|//[^\n]*|/\*.*?\*/', re.S)
_INCLUDE_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*include[^\n]*", re.M)
_NAME_NODES = frozenset({"identifier", "type_identifier"})
# CUDA's calling-convention macros (empty on Linux; HIP declares none): dropped in HIP output
_DROPPED_WORDS = ("CUDART_CB",)


def direction_of(ctx: PassContext) -> Direction:
    if ctx.source_dialect is Dialect.HIP and ctx.target is Dialect.CUDA:
        return "hip->cuda"
    return "cuda->hip"


_HIP_AS_CUDA_ARCH = 700  # the __CUDA_ARCH__ value HIP device code is given where CUDA code compares it


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    direction = direction_of(ctx)
    table = load_mapping(direction)
    report_unknown = bool(params.get("report_unknown", True))
    src = parse_text(module.text, module.path, module.dialect)
    own_names = users_own_names(src, ctx)
    edits: list[Edit] = []
    handled_calls: set[int] = set()
    replaced_ranges: list[tuple[int, int]] = []  # whole-call rewrites: nothing inside is edited again
    renamed: dict[str, int] = {}
    code_names = frozenset(_IDENT_TOKEN.findall(_INCLUDE_DIRECTIVE.sub(" ", _LITERAL_OR_COMMENT.sub(" ", module.text))))

    def rename(node: Node, new: str) -> None:
        old = src.node_text(node)
        edits.append(Edit(node.start_byte, node.end_byte, new))
        renamed[old] = renamed.get(old, 0) + 1

    # function-like macros whose bodies call an API whose arguments change: rewritten once, as code
    def as_fragment(text: str) -> str:
        inner = PassContext(ctx.source_dialect, ctx.target, ctx.warp_size, ctx.file, project_names=ctx.project_names,
                            defines=ctx.defines)
        return apply(SourceUnit(text, module.dialect, module.path), {**params, "report_unknown": False}, inner).text

    fragment_edits = rewrite_bodies(src, as_fragment, lambda body: any(
        m.group(0) in table.calls and m.group(0) not in own_names for m in _IDENT_TOKEN.finditer(body)))
    edits.extend(fragment_edits)
    rewritten_bodies = [(e.start_byte, e.end_byte) for e in fragment_edits]

    for node in walk(src.root, skip=frozenset({"comment", "string_literal", "char_literal", "raw_string_literal"})):
        kind = node.type
        if replaced_ranges and any(a <= node.start_byte and node.end_byte <= b for a, b in replaced_ranges):
            continue
        if kind == "preproc_include":
            _map_include(src, node, table, edits, renamed, code_names, ctx)
        elif kind == "declaration" and table.member_orders:
            for init in _reordered_initializers(src, node, table, own_names, edits):
                replaced_ranges.append(init)
                renamed["(member order)"] = renamed.get("(member order)", 0) + 1
        elif kind == "call_expression" and node.id not in handled_calls:
            if direction == "hip->cuda" and _map_hip_launch(src, node, table, edits, ctx, own_names):
                replaced_ranges.append((node.start_byte, node.end_byte))
                continue
            name_node = node.child_by_field_name("function")
            if name_node is not None and name_node.type == "identifier":
                name = src.node_text(name_node)
                if name == "printf" and direction == "cuda->hip":
                    _scalar_printf_builtins(src, node, edits)
                rewrite = table.calls.get(name)
                if rewrite is not None and name not in own_names:
                    _rewrite_call(src, node, name_node, rewrite, direction, edits, ctx, renamed)
                    handled_calls.add(name_node.id)
        elif kind in _NAME_NODES:
            if node.id in handled_calls:
                continue
            name = src.node_text(node)
            if name in own_names:
                continue
            status, needs = table.status.get(name, ("ok", ""))
            if name in table.unsupported or status == "unsupported":
                ctx.unresolved.append(Unresolved(table.unsupported.get(name) or f"{name}: {needs}", Span.of(node),
                                                 name))
            elif name == "__CUDA_ARCH__" and direction == "cuda->hip" and node.parent is not None and \
                    node.parent.type not in ("preproc_defined", "preproc_ifdef"):
                # its value, compared (`#if __CUDA_ARCH__ < 600`): HIP's device pass defines its flag as 1, so a
                # plain rename would read as a pre-Kepler device; the device passes as sm_70 (what HIP and this
                # tool's warp passes provide; sm_80-gated paths such as cp.async take their fallbacks), the host
                # pass as 0, as nvcc's does
                rename(node, f"({table.names[name]} * {_HIP_AS_CUDA_ARCH})")
            elif name in table.names:
                if status != "ok":
                    ctx.diagnostics.append(Diagnostic(Severity.WARNING, f"api_map.{status}",
                                                      f"{name} → {table.names[name]} needs {needs}", Span.of(node),
                                                      module.path))
                rename(node, table.names[name])
            elif name in table.calls:
                # a call-rewrite name used without a call (taken as a function pointer): plain rename
                rewrite = table.calls[name]
                rename(node, rewrite.hip if direction == "cuda->hip" else rewrite.cuda)
            elif report_unknown and name not in _NOT_API and _API_LOOKING[direction].match(name):
                ctx.unresolved.append(
                    Unresolved(f"no {direction.split('->')[1].upper()} mapping for '{name}' in the tables",
                               Span.of(node), name)
                )
        elif kind == "kernel_call_syntax" and direction == "cuda->hip" and _in_device_function(src, node):
            ctx.unresolved.append(Unresolved(
                "a kernel launched from device code (dynamic parallelism): HIP has no device-side launch",
                Span.of(node), "<<<>>> in device code"))
        elif kind in ("<<<", ">>>") and src.node_text(node) != kind:
            # nvcc reads a launch's chevrons written with spaces (`k << <g, b >> >(x)`, an old workaround for
            # compilers that split `>>>`); hip-clang reads `<< <` as a shift: the target gets them joined
            edits.append(Edit(node.start_byte, node.end_byte, kind))
        elif kind == "field_expression" and direction == "cuda->hip" and table.members:
            member, accessed = node.child_by_field_name("field"), node.child_by_field_name("argument")
            operator = node.child_by_field_name("operator")
            spelled = table.members.get(src.node_text(member)) if member is not None else None
            if spelled is not None and member is not None and accessed is not None and operator is not None:
                edits.append(Edit(node.start_byte, node.end_byte, spelled.format(
                    object=_mapped_expr(src, accessed, table, own_names), op=src.node_text(operator))))
                replaced_ranges.append((node.start_byte, node.end_byte))
                renamed[src.node_text(member)] = renamed.get(src.node_text(member), 0) + 1
        elif kind == "namespace_identifier":
            _map_namespace(src, node, table, edits, renamed)
        elif kind == "preproc_arg" and (node.start_byte, node.end_byte) not in rewritten_bodies:
            _map_macro_body(src, node, table, own_names, edits, ctx, renamed)

    if direction == "cuda->hip" and any(word in module.text for word in _DROPPED_WORDS):
        # blanked for the grammar (frontend.source.CALLING_CONVENTIONS), so no tree node names them: HIP has no
        # such macros, the words go
        skipped = [(m.start(), m.end()) for m in _LITERAL_OR_COMMENT.finditer(module.text)]
        for match in re.finditer(r"\b(?:" + "|".join(_DROPPED_WORDS) + r")\b", module.text):
            if not any(a <= match.start() < b for a, b in skipped):
                start = len(module.text[:match.start()].encode("utf-8"))
                edits.append(Edit(start, start + len(match.group(0).encode("utf-8")), ""))
                renamed[match.group(0)] = renamed.get(match.group(0), 0) + 1
    if direction == "cuda->hip" and not _has_runtime_include(src, edits):
        # nvcc includes cuda_runtime.h implicitly; hipcc does not include hip_runtime.h: say it explicitly
        at = _first_code_offset(src)
        edits.append(Edit(at, at, "#include <hip/hip_runtime.h>\n"))
        renamed["(implicit cuda_runtime.h)"] = 1
    data, dropped = apply_edits(src.data, edits)
    for edit in dropped:
        ctx.diagnostics.append(
            Diagnostic(Severity.WARNING, "api_map.overlap", f"overlapping edit not applied: '{edit.text[:40]}'",
                       Span(edit.start_byte, edit.end_byte, 0, 0, 0, 0), module.path)
        )
    if renamed:
        ctx.notes.append(
            "api_map: " + ", ".join(f"{k}→{_target_of(k, table, direction)}" for k in sorted(renamed)[:40])
            + (" …" if len(renamed) > 40 else "")
        )
    target = Dialect.HIP if direction == "cuda->hip" else Dialect.CUDA
    return SourceUnit(data.decode("utf-8"), target, module.path)


_BUILTIN_INDEX = re.compile(r"(?:threadIdx|blockIdx|blockDim|gridDim)\.[xyz]")


def _scalar_printf_builtins(src: ParsedSource, call: Node, edits: list[Edit]) -> None:
    """HIP's built-in index variables are structs with a conversion operator, which hip-clang's device printf
    refuses as arguments ("non-scalar arg to printf"): each is passed as the unsigned it converts to."""
    for arg in call_arguments(call):
        if arg.type == "field_expression" and _BUILTIN_INDEX.fullmatch(src.node_text(arg)):
            edits.append(Edit(arg.start_byte, arg.start_byte, "(unsigned)"))


def _has_runtime_include(src: ParsedSource, edits: list[Edit]) -> bool:
    """hip_runtime.h is included before any other HIP header (HIP's other headers need it first, where
    nvcc includes cuda_runtime.h implicitly)."""
    # hip_runtime_api.h declares the host API only: device code (kernels, builtins) needs hip_runtime.h
    device_code = re.search(rb"__global__|__device__|<<<|\bthreadIdx\b", src.data) is not None
    accepted = ("hip/hip_runtime.h",) if device_code else ("hip/hip_runtime.h", "hip/hip_runtime_api.h")
    runtime = [e.start_byte for e in edits if e.text in accepted]
    pattern = rb"#\s*include\s*[<\"]hip/hip_runtime\.h[>\"]" if device_code else \
        rb"#\s*include\s*[<\"]hip/hip_runtime(_api)?\.h[>\"]"
    runtime += [m.start() for m in re.finditer(pattern, src.data)]
    if not runtime:
        return False
    others = [e.start_byte for e in edits if e.text.startswith(("hip/", "hipcub/", "rocwmma/", "hiprand/"))
              and e.text not in ("hip/hip_runtime.h", "hip/hip_runtime_api.h")]
    return not others or min(runtime) < min(others)


def _first_code_offset(src: ParsedSource) -> int:
    """Offset of the first top-level node that is not a comment (leading file comments stay first)."""
    for child in src.root.children:
        if child.type != "comment" or src.node_text(child).startswith("// xpiler("):
            return child.start_byte
    return len(src.data)


def _target_of(name: str, table: MappingTable, direction: Direction) -> str:
    if name in _DROPPED_WORDS:
        return "nothing"
    if name in table.members:
        return table.members[name].format(object="", op=".")
    if name in table.names:
        return table.names[name]
    if name in table.calls:
        rw = table.calls[name]
        return rw.hip if direction == "cuda->hip" else rw.cuda
    if name in table.namespaces:
        return table.namespaces[name]
    if name.startswith("(implicit"):
        return "hip/hip_runtime.h"
    if name.endswith(" (unused)"):
        return "dropped"
    return table.map_header(name) or "?"


def _map_include(src: ParsedSource, node: Node, table: MappingTable, edits: list[Edit], renamed: dict[str, int],
                 code_names: frozenset[str], ctx: PassContext) -> None:
    path_node = node.child_by_field_name("path")
    if path_node is None:
        return
    raw = src.node_text(path_node)
    if len(raw) < 2:
        return
    inner = raw[1:-1]
    if inner in table.unsupported:
        ctx.unresolved.append(Unresolved(table.unsupported[inner], Span.of(node), inner))
        return
    if inner.startswith("cuda/") and table.direction == "cuda->hip" and table.map_header(inner) in (None, inner):
        # any other libcu++ header (<cuda/atomic>, <cuda/std/...>): ROCm 5.x has no libcu++
        ctx.unresolved.append(Unresolved(f"libcu++'s <{inner}> has no HIP counterpart in ROCm 5.x; port by hand",
                                         Span.of(node), inner))
        return
    constants = table.defined_in_place.get(inner)
    if constants is not None:
        edits.append(Edit(node.start_byte, node.end_byte, _constants_in_place(inner, constants, code_names)))
        renamed[inner] = renamed.get(inner, 0) + 1
        return
    prefixes = table.drop_when_unused.get(inner)
    if prefixes is not None and not any(name.startswith(prefixes) for name in code_names):
        edits.append(Edit(node.start_byte, node.end_byte, ""))
        renamed[f"{inner} (unused)"] = 1
        return
    mapped = table.map_header(inner)
    if mapped is not None and mapped != inner:
        edits.append(Edit(path_node.start_byte + 1, path_node.end_byte - 1, mapped))
        renamed[inner] = renamed.get(inner, 0) + 1


def _constants_in_place(header: str, constants: dict[str, str], code_names: frozenset[str]) -> str:
    """Definitions of the constants of ``header`` the file names (and those their values name), each kept if
    the target's headers define it already."""
    wanted = [name for name in sorted(constants) if name in code_names]
    seen = set(wanted)
    for name in wanted:  # grows as values name other constants
        for other in _IDENT_TOKEN.findall(constants[name]):
            if other in constants and other not in seen:
                seen.add(other)
                wanted.append(other)
    lines = [f"// xpiler: {header} (CUDA's; no HIP header before 6.x): the constants this file uses"]
    for name in sorted(wanted):
        lines += [f"#ifndef {name}", f"#define {name} {constants[name]}", "#endif"]
    return "\n".join(lines) + "\n"


def _map_namespace(src: ParsedSource, node: Node, table: MappingTable, edits: list[Edit], renamed: dict[str, int]) -> None:
    name = src.node_text(node)
    # qualified keys ("thrust::cuda") match when the text just before the name is the qualifier
    for key, new in table.namespaces.items():
        if "::" in key:
            qualifier, _, last = key.rpartition("::")
            new_last = new.rpartition("::")[2]
            before = src.data[max(0, node.start_byte - len(qualifier) - 2) : node.start_byte].decode("utf-8", "replace")
            if name == last and before == qualifier + "::":
                edits.append(Edit(node.start_byte, node.end_byte, new_last))
                renamed[key] = renamed.get(key, 0) + 1
                return
        elif name == key:
            edits.append(Edit(node.start_byte, node.end_byte, new))
            renamed[key] = renamed.get(key, 0) + 1
            return


def _rewrite_call(
    src: ParsedSource,
    call: Node,
    name_node: Node,
    rewrite: Any,
    direction: Direction,
    edits: list[Edit],
    ctx: PassContext,
    renamed: dict[str, int],
) -> None:
    args = call_arguments(call)
    arg_list = call.child_by_field_name("arguments")
    new_name = rewrite.hip if direction == "cuda->hip" else rewrite.cuda
    edits.append(Edit(name_node.start_byte, name_node.end_byte, new_name))
    renamed[src.node_text(name_node)] = renamed.get(src.node_text(name_node), 0) + 1
    if arg_list is None:
        return
    if direction == "cuda->hip":
        if rewrite.drop_all and args:
            edits.append(Edit(arg_list.start_byte + 1, arg_list.end_byte - 1, ""))
        elif rewrite.drop_leading:
            if len(args) <= rewrite.drop_leading:
                ctx.unresolved.append(
                    Unresolved(f"'{rewrite.cuda}' with {len(args)} argument(s): expected more than "
                               f"{rewrite.drop_leading}", Span.of(call), rewrite.cuda)
                )
                return
            edits.append(Edit(args[0].start_byte, args[rewrite.drop_leading].start_byte, ""))
        if 0 <= rewrite.void_ptr_arg < len(args):
            arg = args[rewrite.void_ptr_arg]
            text = src.node_text(arg)
            if "reinterpret_cast" not in text and "(const void*)" not in text and "(void*)" not in text:
                edits.append(Edit(arg.start_byte, arg.end_byte, f"reinterpret_cast<const void*>({text})"))
        missing = rewrite.arity - len(args)
        if args and 0 < missing <= len(rewrite.trailing_defaults):
            edits.append(Edit(args[-1].end_byte, args[-1].end_byte,
                              "".join(f", {d}" for d in rewrite.trailing_defaults[-missing:])))
        if 0 <= rewrite.void_ptr_ptr_arg < len(args):
            arg = args[rewrite.void_ptr_ptr_arg]
            text = src.node_text(arg)
            if not re.search(r"void\s*\*\s*\*", text):
                edits.append(Edit(arg.start_byte, arg.end_byte, f"reinterpret_cast<void**>({text})"))
    elif rewrite.reverse_prepend:
        prefix = ", ".join(rewrite.reverse_prepend)
        if args:
            edits.append(Edit(args[0].start_byte, args[0].start_byte, prefix + ", "))
        else:
            edits.append(Edit(arg_list.start_byte + 1, arg_list.start_byte + 1, prefix))


_PASTE_AFTER = re.compile(r"[ \t]*##")
_DEVICE_SPACE = re.compile(r"\b__(?:global|device)__\b")


def _in_device_function(src: ParsedSource, node: Node) -> bool:
    """Whether ``node`` lies in the body of a ``__global__`` or ``__device__`` function."""
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        parent = parent.parent
    if parent is None:
        return False
    body = parent.child_by_field_name("body")
    head = src.data[parent.start_byte:body.start_byte if body is not None else parent.end_byte]
    return _DEVICE_SPACE.search(head.decode("utf-8", "replace")) is not None


def _reordered_initializers(
    src: ParsedSource, declaration: Node, table: MappingTable, own_names: set[str], edits: list[Edit]
) -> list[tuple[int, int]]:
    """A declaration of a struct whose members the target declares in another order (``[member_order]``):
    each positional brace initializer with one value per member is rewritten in the target's order (its values
    mapped like any code). Returns the rewritten ranges (nothing inside is edited again)."""
    type_node = declaration.child_by_field_name("type")
    if type_node is None:
        return []
    struct = src.node_text(type_node).removeprefix("struct").strip()
    orders = table.member_orders.get(struct)
    if orders is None or struct in own_names:
        return []
    source_order, target_order = orders
    done: list[tuple[int, int]] = []
    for init in declaration.named_children:
        value = init.child_by_field_name("value") if init.type == "init_declarator" else None
        if value is None or value.type != "initializer_list":
            continue
        values = [c for c in value.named_children if c.type != "comment"]
        if len(values) != len(source_order) or any(v.type == "initializer_pair" for v in values):
            continue  # designated or partial: the names (or the defaults) already say which member is which
        by_member = {m: _mapped_expr(src, v, table, own_names) for m, v in zip(source_order, values, strict=True)}
        edits.append(Edit(value.start_byte, value.end_byte,
                          "{" + ", ".join(by_member[m] for m in target_order) + "}"))
        done.append((value.start_byte, value.end_byte))
    return done


def _map_macro_body(
    src: ParsedSource,
    node: Node,
    table: MappingTable,
    own_names: set[str],
    edits: list[Edit],
    ctx: PassContext,
    renamed: dict[str, int],
) -> None:
    """Macro bodies are raw text in the CST: rename whole-word tokens and API prefixes pasted onto names
    (``cuda##fn``); call rewrites there are reported."""
    body = src.node_text(node)
    protected = [m.span() for m in _LITERAL_OR_COMMENT.finditer(body)]
    for match in _IDENT_TOKEN.finditer(body):
        name = match.group(0)
        if name in own_names or any(a <= match.start() < b for a, b in protected):
            continue
        start = node.start_byte + len(body[: match.start()].encode("utf-8"))
        end = start + len(name.encode("utf-8"))
        if name in table.pasted_prefixes and _PASTE_AFTER.match(body, match.end()):
            edits.append(Edit(start, end, table.pasted_prefixes[name]))
            renamed[f"{name}##"] = renamed.get(f"{name}##", 0) + 1
        elif name in table.calls:
            ctx.unresolved.append(
                Unresolved(f"'{name}' inside a macro body: its arguments change and macros are not rewritten",
                           Span.of(node), name)
            )
        elif name in table.names:
            edits.append(Edit(start, end, table.names[name]))
            renamed[name] = renamed.get(name, 0) + 1


def _map_hip_launch(
    src: ParsedSource, call: Node, table: MappingTable, edits: list[Edit], ctx: PassContext, own_names: set[str]
) -> bool:
    """``hipLaunchKernelGGL(K, g, b, smem, stream, args...)`` -> ``K<<<g, b, smem, stream>>>(args...)``."""
    func = call.child_by_field_name("function")
    if func is None or src.node_text(func) != "hipLaunchKernelGGL" or "hipLaunchKernelGGL" in own_names:
        return False
    args = call_arguments(call)
    if len(args) < 5:
        ctx.unresolved.append(Unresolved("hipLaunchKernelGGL with fewer than 5 arguments", Span.of(call)))
        return True
    kernel = src.node_text(args[0])
    wrapped = re.fullmatch(r"\s*HIP_KERNEL_NAME\s*\((.*)\)\s*", kernel, re.S)
    if wrapped:
        kernel = wrapped.group(1).strip()
    config = ", ".join(_mapped_expr(src, a, table, own_names) for a in args[1:5])
    rest = ", ".join(_mapped_expr(src, a, table, own_names) for a in args[5:])
    edits.append(Edit(call.start_byte, call.end_byte, f"{kernel}<<<{config}>>>({rest})"))
    return True


def _mapped_expr(src: ParsedSource, node: Node, table: MappingTable, own_names: set[str]) -> str:
    """An argument's text with the table's renames applied (the launch rewrite replaces the whole call)."""
    parts: list[Edit] = []
    for sub in walk(node, skip=frozenset({"comment", "string_literal"})):
        if sub.type in _NAME_NODES:
            name = src.node_text(sub)
            if name in table.names and name not in own_names:
                parts.append(Edit(sub.start_byte - node.start_byte, sub.end_byte - node.start_byte, table.names[name]))
    data, _ = apply_edits(src.data[node.start_byte : node.end_byte], parts)
    return data.decode("utf-8")
