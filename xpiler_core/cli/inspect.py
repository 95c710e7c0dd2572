"""``xpiler inspect FILE [--json]``: print the kernel model of a source file.

Exit status 0 when the file models without errors, 1 when it has error diagnostics (syntax errors,
unsupported constructs the grammar cannot read) or cannot be read at all; errors go to stderr as
``file:line:col: error: message``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from xpiler_core.diagnostics import Severity, Span, XpilerError
from xpiler_core.dialect import Dialect

if TYPE_CHECKING:
    from xpiler_core.frontend.model import Buffer, Function, KernelModel, LaunchSite, Use

_KIND_TITLES = {
    "kernel": "kernel",
    "cpu_kernel": "CPU kernel",
    "device": "device function",
    "host_entry": "host entry",
    "host": "host function",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="print the kernel model of a source file (kernels, launch sites, features, diagnostics)",
        description="Print the kernels, device functions, launch sites, features and diagnostics of FILE.",
    )
    parser.add_argument("file", metavar="FILE", help="a .cu/.cuh/.hip/.mlu/.c/.cpp source file")
    parser.add_argument("--json", action="store_true", help="print the model as JSON")
    parser.add_argument(
        "--dialect", choices=[d.value for d in Dialect], help="override the dialect detected from suffix and content"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.frontend.model import build_model
    from xpiler_core.frontend.source import parse_file

    dialect = Dialect(args.dialect) if args.dialect else None
    parsed = parse_file(args.file, dialect)
    if not parsed.data.strip():
        raise XpilerError("empty file: nothing to inspect", args.file)
    model = build_model(parsed)
    if args.json:
        json.dump(model.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_model(model))
    errors = [d for d in model.diagnostics if d.severity is Severity.ERROR]
    for diagnostic in errors:
        print(diagnostic.format(), file=sys.stderr)
    return 1 if errors else 0


def format_model(model: KernelModel) -> str:
    """The model as readable text (what ``xpiler inspect`` prints)."""
    lines: list[str] = []
    kernels = model.kernels
    lines.append(
        f"{model.path}: {model.dialect.value.upper()} source, {len(kernels)} kernel(s), "
        f"{len(model.device_functions)} device function(s), {len(model.host_functions)} host function(s), "
        f"{len(model.launches)} launch site(s)"
    )
    lines.append(f"features: {', '.join(model.features()) or '-'}")
    if model.includes:
        lines.append(f"includes: {' '.join(model.includes)}")
    for buffer in model.buffers:
        lines.append(f"file-scope {_buffer_text(buffer)}  @{_at(buffer.span)}")
    for function in model.functions:
        lines.append("")
        lines.extend(_function_lines(function))
        if function.calls:
            lines.append(f"  features with called functions: {', '.join(model.reachable_features(function.name))}")
    lines.append("")
    lines.append(f"launch sites ({len(model.launches)}):")
    for launch in model.launches:
        lines.append(f"  {_at(launch.span)}  {_launch_text(launch)}  in {launch.caller or '<file scope>'}")
        if not launch.resolved:
            lines.append("    (kernel not defined in this file)")
    lines.append("")
    lines.append(f"diagnostics ({len(model.diagnostics)}):")
    for diagnostic in model.diagnostics:
        lines.append(f"  {diagnostic.format()}")
    return "\n".join(lines) + "\n"


def _at(span: Span) -> str:
    return f"{span.start_line + 1}:{span.start_col + 1}"


def _function_lines(function: Function) -> list[str]:
    title = _KIND_TITLES.get(function.kind.value, function.kind.value)
    signature = ", ".join(
        f"{p.type_text} {p.name}" if p.name else p.type_text for p in function.params
    )
    template = ""
    if function.template_params is not None:
        parts = []
        for t in function.template_params:
            head = t.type_text if t.kind.startswith("value") else ("typename" if t.kind.startswith("type") else "template")
            parts.append(f"{head} {t.name or ''}".strip() + (f" = {t.default}" if t.default else ""))
        template = f"template <{', '.join(parts)}> "
    lines = [f"{title} {function.name}  @{_at(function.span)}"]
    qualifiers = " ".join(function.qualifiers)
    lines.append(f"  {template}{qualifiers + ' ' if qualifiers else ''}{function.return_type} {function.name}({signature})")
    if function.extern_c:
        lines.append('  linkage: extern "C"')
    if function.launch_bounds is not None:
        bounds = function.launch_bounds
        min_blocks = f", min blocks {bounds.min_blocks.text}" if bounds.min_blocks else ""
        lines.append(f"  launch bounds: max threads {bounds.max_threads.text}{min_blocks}")
    for param in function.params:
        flags = [
            flag
            for flag, on in (
                ("pointer", param.pointer_depth > 0),
                ("array", param.is_array),
                ("reference", param.is_reference),
                ("const", param.is_const),
                ("const pointer", param.is_const_pointer),
                ("restrict", param.is_restrict),
            )
            if on
        ]
        lines.append(f"  param {param.name or '<unnamed>'}: {param.type_text}" + (f"  [{', '.join(flags)}]" if flags else ""))
    for buffer in function.buffers:
        lines.append(f"  {_buffer_text(buffer)}  @{_at(buffer.span)}")
    for label, uses in (
        ("barriers", function.barriers),
        ("warp ops", function.warp_ops),
        ("atomics", function.atomics),
        ("tensor core", function.tensor_core),
        ("API calls", function.api_calls),
        ("intrinsics", function.intrinsics),
    ):
        if uses:
            lines.append(f"  {label}: {_uses_text(uses)}")
    for asm in function.inline_asm:
        asm_flags = ("volatile " if asm.volatile else "") + ("tensor-core " if asm.tensor_core else "")
        lines.append(f"  inline asm {asm_flags}@{_at(asm.span)}: {json.dumps(asm.text)}")
    for pragma in function.pragmas:
        lines.append(f"  #pragma {pragma.text}  @{_at(pragma.span)}")
    if function.builtins:
        lines.append(f"  builtins: {', '.join(function.builtin_names)}")
    for launch in function.launches:
        lines.append(f"  launches {_launch_text(launch)}  @{_at(launch.span)}")
    if function.calls:
        lines.append(f"  calls: {', '.join(function.calls)}")
    lines.append(f"  features: {', '.join(function.features()) or '-'}")
    return lines


def _buffer_text(buffer: Buffer) -> str:
    extent = "[]" if buffer.dynamic else "".join(f"[{s.text}]" for s in buffer.sizes)
    kind = "dynamic" if buffer.dynamic else "static"
    return f"{buffer.memory} buffer ({kind}): {buffer.element_type} {buffer.name}{extent}"


def _uses_text(uses: Iterable[Use]) -> str:
    """`name (kind) xN @l:c, l:c` grouped by name, in first-use order."""
    groups: dict[str, list[Use]] = {}
    for use in uses:
        groups.setdefault(use.name, []).append(use)
    parts = []
    for name, group in groups.items():
        count = f" x{len(group)}" if len(group) > 1 else ""
        places = ", ".join(_at(u.span) for u in group[:4]) + (", ..." if len(group) > 4 else "")
        parts.append(f"{name} ({group[0].kind}){count} @{places}")
    return "; ".join(parts)


def _launch_text(launch: LaunchSite) -> str:
    template = launch.template_args or ""
    config = ", ".join(f"{c.role}={c.expr.text}" for c in launch.config)
    args = ", ".join(a.text for a in launch.args)
    if launch.style == "chevron":
        return f"{launch.kernel}{template}<<<{config}>>>({args})"
    return f"{launch.style}({launch.kernel}{template}; {config}; args: {args or '-'})"

