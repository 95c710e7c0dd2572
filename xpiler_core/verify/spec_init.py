"""A test spec drafted from a kernel's signature (``xpiler spec init``, the editor's "Create test spec").

For a kernel no host code launches and no automatic test can reach, the draft names every parameter in order
(buffers with the element type of their pointer, integers as scalars bound to a case variable of the same name),
the launch the code determines (``__launch_bounds__``, a block-size-independent kernel's guards) or
placeholders, three cases, and the source itself as the reference (a translation is then compared with it).
What the code does not say is marked ``FILL_ME``: the spec does not load until the user replaced it, and the
error says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from xpiler_core.diagnostics import XpilerError
from xpiler_core.frontend.model import Function, FunctionKind, KernelModel
from xpiler_core.verify.autospec import _FLOAT_TYPES, CASE_SIZES, _dtype, _is_int_scalar
from xpiler_core.verify.spec import PLACEHOLDER


def _launch(model: KernelModel, kernel: Function, module_text: str, path: str) -> tuple[list[str], list[str], str]:
    """(grid, block, how) as spec expressions over the kernel's integer parameters, or placeholders."""
    from xpiler_core.frontend.lower import lower_text
    from xpiler_core.passes.support.launch import infer_block, infer_grid
    from xpiler_core.printer import print_node

    module = lower_text(module_text, path)
    fn = module.function(kernel.name)
    block = infer_block(fn, module) if fn is not None else None
    grid = infer_grid(fn, block) if fn is not None and block is not None else None
    if block is None:
        return [PLACEHOLDER], [PLACEHOLDER], "the block size is not determined by the code: fill grid and block"
    block_text = [print_node(b).strip("()") for b in block]
    if grid is None:
        return [PLACEHOLDER] * len(block_text), block_text, "the grid is not determined by the code: fill grid"
    return [_integer_expression(print_node(g)) for g in grid], block_text, "launch from the kernel's guards"


_CEIL = re.compile(r"^\(?\((.+) \+ (.+) - 1\) / (.+?)\)?$")


def _integer_expression(c_expr: str) -> str:
    """A C integer expression as a spec expression: a rounding-up division reads ``ceil_div``, others ``//``.

    Spec expressions are Python-like, where ``/`` is true division; C's integer division of the non-negative
    sizes a launch uses is ``//``.
    """
    text = c_expr.strip()
    match = _CEIL.match(text)
    if match and match.group(2).strip("()") == match.group(3).strip("()"):
        return f"ceil_div({match.group(1)}, {match.group(3).strip('()')})"
    return re.sub(r"(?<![/])/(?![/])", "//", text)


def draft_spec(text: str, path: str, model: KernelModel, kernel_name: str | None = None) -> str:
    kernels = [k for k in model.kernels if k.kind is FunctionKind.KERNEL]
    if not kernels:
        raise XpilerError("no __global__ kernel to write a test spec for", path)
    kernel = next((k for k in kernels if k.name == kernel_name), None) if kernel_name else kernels[0]
    if kernel is None:
        raise XpilerError(f"no kernel named '{kernel_name}' (kernels: {', '.join(k.name for k in kernels)})", path)
    sizes = [p.name for p in kernel.params if p.name and _is_int_scalar(p)]
    grid, block, how = _launch(model, kernel, text, path)
    name = Path(path).name
    lines = [
        f"# Test spec of kernel {kernel.name} in {name}, drafted by `xpiler spec init` ({how}).",
        f"# Replace every {PLACEHOLDER}; the reference is the source itself: a translation must compute what it does.",
        f'name = "{kernel.name}"',
        f'source = "{name}"',
        f'entry = "{kernel.name}"',
        'kind = "kernel"',
        f"grid = [{', '.join(_quote(g) for g in grid)}]",
        f"block = [{', '.join(_quote(b) for b in block)}]",
        "shared_bytes = 0",
        f'reference_source = "{name}"',
        f'reference_entry = "{kernel.name}"',
        "tolerance = { atol = 1e-5, rtol = 1e-5 }",
        "",
    ]
    for p in kernel.params:
        pname = p.name or PLACEHOLDER
        lines.append("[[args]]")
        lines.append(f'name = "{pname}"')
        if p.is_pointer:
            dtype = _dtype(p) or PLACEHOLDER
            shape = sizes[0] if len(sizes) == 1 else PLACEHOLDER
            hint = f"  # the element count, e.g. {' * '.join(sizes)}" if len(sizes) > 1 else ""
            role = "in" if "const" in p.type_text.split("*")[0] else "inout"
            lines += [f'dtype = "{dtype}"', f'shape = ["{shape}"]{hint}', f'role = "{role}"',
                      'init = "uniform(-1, 1)"' if dtype.startswith("float") else 'init = "randint(0, 100)"']
        elif _is_int_scalar(p):
            lines += ['dtype = "int32"', 'role = "scalar"', f'value = "{pname}"']
        else:
            dtype = _FLOAT_TYPES.get(p.base_type.strip(), PLACEHOLDER)
            lines += [f'dtype = "{dtype}"', 'role = "scalar"', 'value = "1.5"']
        lines.append("")
    variables = sizes or ["n"]
    for i in range(len(CASE_SIZES)):
        lines.append("[[cases]]")
        lines += [f"{v} = {CASE_SIZES[(i + j) % len(CASE_SIZES)]}" for j, v in enumerate(variables)]
        lines.append("")
    return "\n".join(lines)


def placeholders(draft: str) -> int:
    """How many values of a draft the user still has to fill (comments do not count)."""
    return sum(line.count(PLACEHOLDER) for line in draft.splitlines() if not line.lstrip().startswith("#"))


def _quote(expr: str) -> str:
    return '"' + expr.replace('"', "'") + '"'
