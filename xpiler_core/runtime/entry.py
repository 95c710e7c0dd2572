"""Generated ``extern "C"`` glue that lets ctypes launch a ``__global__`` kernel of a translation unit."""

from __future__ import annotations

ENTRY_SYMBOL = "xpiler_entry"

C_TYPES: dict[str, str] = {
    "float32": "float",
    "float64": "double",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "uint16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
    "bool": "bool",
}


def kernel_entry_glue(kernel: str, args: list[tuple[str, bool]]) -> str:
    """C++ for ``int xpiler_entry(void** args, const unsigned* cfg)``: launch ``kernel`` with
    grid ``cfg[0..2]``, block ``cfg[3..5]``, dynamic shared bytes ``cfg[6]``; return the launch error.

    ``args`` lists (dtype, is_buffer) in parameter order; buffers convert to any pointer type.
    """
    actuals = []
    for i, (dtype, is_buffer) in enumerate(args):
        if is_buffer:
            actuals.append(f"::xpiler::AnyPtr{{args[{i}]}}")
        else:
            actuals.append(f"*static_cast<{C_TYPES[dtype]}*>(args[{i}])")
    name = kernel.replace("\\", "\\\\").replace('"', '\\"')
    return (
        f'extern "C" int {ENTRY_SYMBOL}(void** args, const unsigned* cfg) {{\n'
        "  (void)args;\n"
        f'  ::xpiler::set_next_kernel_name("{name}");\n'
        f"  ::xpiler::launch({kernel}, dim3(cfg[0], cfg[1], cfg[2]), dim3(cfg[3], cfg[4], cfg[5]), cfg[6])(\n"
        f"      {', '.join(actuals)});\n"
        "  return ::xpiler::take_last_error();\n"
        "}\n"
    )
