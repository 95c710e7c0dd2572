"""``extern "C"`` forwarders for host entries with C++ linkage.

The harness calls an entry through ``dlsym``, which cannot find a C++ function by its source name (the
symbol is mangled). A spec may carry the forwarder itself (``entry_shim``); when it does not and the entry is
a non-template host function with C++ linkage in source built as C++ (CUDA, HIP, or C that needs C++), the
harness appends one made here.
"""

from __future__ import annotations

import re

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.model import Function, FunctionKind, build_model
from xpiler_core.frontend.source import parse_text

SHIM_PREFIX = "xp_entry_"
_CALLABLE = (FunctionKind.HOST, FunctionKind.HOST_ENTRY, FunctionKind.CPU_KERNEL)


def shim_for(fn: Function) -> tuple[str, str]:
    """(forwarder name, forwarder definition) calling ``fn`` with its own parameters."""
    name = f"{SHIM_PREFIX}{fn.name}"
    params = ", ".join(f"{p.type_text} {p.name}" for p in fn.params)
    args = ", ".join(p.name or "" for p in fn.params)
    return name, f'extern "C" void {name}({params}) {{ {fn.name}({args}); }}'


def add_entry_shim(text: str, dialect: Dialect, entry: str, display: str = "<input>", *,
                   built_as_cplusplus: bool = True) -> tuple[str, str] | None:
    """``(text with a forwarder appended, forwarder name)`` when ``entry`` needs one, else None (it has C
    linkage already, is a kernel, a template, overloaded, has unnamed or variadic parameters, or the source is
    built as C, whose symbols are not mangled)."""
    if not built_as_cplusplus or dialect is Dialect.BANG or f"{SHIM_PREFIX}{entry}" in text:
        return None
    if re.search(rf'extern\s+"C"\s+[^;{{}}()]*\b{re.escape(entry)}\s*\(', text):
        return None  # the usual case, settled without parsing: it runs on every verification
    try:
        model = build_model(parse_text(text, display, dialect))
    except Exception:  # noqa: BLE001 - an unparsable source fails later with the compiler's own message
        return None
    matches = [f for f in model.functions if f.name == entry]
    if len(matches) != 1:
        return None
    fn = matches[0]
    if fn.extern_c or fn.is_template or fn.kind not in _CALLABLE:
        return None
    if any(not p.name or p.name == "..." for p in fn.params):
        return None
    name, definition = shim_for(fn)
    return f"{text}\n{definition}\n", name
