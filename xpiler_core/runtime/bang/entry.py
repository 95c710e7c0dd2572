"""Generated ``extern "C"`` glue that lets ctypes launch a ``__mlu_global__`` kernel on the BANG model.

The glue has the same shape as the CUDA/HIP one (``runtime/entry.py``) so a harness can treat every
dialect alike: ``int xpiler_entry(void** args, const unsigned* cfg)`` where ``cfg[0..2]`` is the task
dimension ``{x, y, z}`` and ``cfg[3]`` the task type as its CNRT value (1 Block, 4 Union1, 8 Union2,
16 Union4, 32 Union8, 64 Union16). It returns 0, or non-zero after a model error whose text
``xpiler_bang_last_error()`` gives.
"""

from __future__ import annotations

ENTRY_SYMBOL = "xpiler_entry"

TASK_TYPES: dict[str, int] = {"block": 1, "union1": 4, "union2": 8, "union4": 16, "union8": 32, "union16": 64}

C_TYPES: dict[str, str] = {
    "float32": "float",
    "float64": "double",
    "float16": "half",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "uint16": "uint16_t",
    "int32": "int32_t",
    "uint32": "uint32_t",
    "int64": "int64_t",
    "uint64": "uint64_t",
    "bool": "bool",
}


def bang_entry_glue(kernel: str, args: list[tuple[str, bool]]) -> str:
    """C++ launching ``kernel`` with the ``cfg`` task dimension and type; ``args`` lists (dtype,
    is_buffer) in parameter order; buffers convert to any pointer type, scalars are read by value."""
    actuals = []
    for i, (dtype, is_buffer) in enumerate(args):
        if is_buffer:
            actuals.append(f"::xpiler::bang::AnyPtr{{args[{i}]}}")
        else:
            actuals.append(f"*static_cast<{C_TYPES[dtype]}*>(args[{i}])")
    return (
        f'extern "C" int {ENTRY_SYMBOL}(void** args, const unsigned* cfg) {{\n'
        "  (void)args;\n"
        "  cnrtDim3_t dim = {cfg[0], cfg[1], cfg[2]};\n"
        f"  ::xpiler::launch({kernel}, dim, static_cast<cnrtFunctionType_t>(cfg[3]), nullptr)(\n"
        f"      {', '.join(actuals)});\n"
        "  return static_cast<int>(xpiler_cnrt_status());\n"
        "}\n"
    )
