"""Names a target's toolchain declares for every file, taken by the user's own declarations in the source.

A C program may call a local ``dim3`` or typedef its own ``half``; nvcc declares both (``dim3`` and the vector
types implicitly, ``half`` with the fp16 header the runtime and many preludes include), so the translation's
launch ``dim3(...)`` or the runtime's ``half`` would no longer mean what they must. Every such user name is
renamed consistently (each identifier token, macro bodies included) before the passes run; function names are
left alone: a C-linkage entry named like a function CUDA or ``<math.h>`` declares (``CUDA_C_LINKAGE_NAMES``,
``C_MATH_NAMES``) keeps its symbol through an assembler label (C → CUDA entries, BANG → CUDA host entries).
"""

from __future__ import annotations

import re

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import parse_text
from xpiler_core.passes.support.cst import NOT_CODE, rename_identifiers, walk_fields
from xpiler_core.tables import c_math_functions

_VECTOR_TYPES = frozenset(
    f"{base}{n}" for base in ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong",
                              "ulonglong", "float", "double") for n in (1, 2, 3, 4))
_GPU_NAMES = frozenset({"dim3", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "half", "half2",
                        "__half", "__half2", "nv_bfloat16", "__nv_bfloat16"}) | _VECTOR_TYPES

#: target → the names its toolchain declares in every translation unit the tool writes.
RESERVED: dict[Dialect, frozenset[str]] = {Dialect.CUDA: _GPU_NAMES, Dialect.HIP: _GPU_NAMES}

# Names CUDA's math_functions.h declares with C linkage that the C library does not: a C program may name its
# own function so (``extern "C" void max(float*, float*)``); nvcc rejects a second C-linkage overload.
CUDA_C_LINKAGE_NAMES = frozenset({
    "cospi", "cospif", "cyl_bessel_i0f", "cyl_bessel_i1f", "erfcinv", "erfcinvf", "erfcx", "erfcxf", "erfinv",
    "erfinvf", "llmax", "llmin", "max", "min", "norm", "norm3df", "norm4df", "normcdf", "normcdff", "normcdfinv",
    "normcdfinvf", "normf", "rcbrt", "rcbrtf", "rhypot", "rhypotf", "rnorm", "rnorm3d", "rnorm3df", "rnorm4d",
    "rnorm4df", "rnormf", "rsqrt", "rsqrtf", "sincospi", "sincospif", "sinpi", "sinpif", "ullmax", "ullmin",
    "umax", "umin",
})

# C-linkage functions of <math.h> (every precision): a CUDA file includes it, so an entry of the same name with C
# linkage cannot be declared either
C_MATH_NAMES = c_math_functions()


_NAME_NODES = frozenset({"identifier", "type_identifier"})
_DECLARING = frozenset({"init_declarator", "declaration", "parameter_declaration", "type_definition",
                        "struct_specifier", "union_specifier", "enum_specifier", "array_declarator",
                        "pointer_declarator", "enumerator"})


def rename_reserved(text: str, path: str, source: Dialect, target: Dialect) -> tuple[str, dict[str, str]]:
    """``text`` with the user's declarations of names ``target`` reserves (and ``source`` does not) renamed,
    and the renaming (old → new)."""
    reserved = RESERVED.get(target, frozenset()) - RESERVED.get(source, frozenset())
    if not reserved or not any(re.search(rf"\b{name}\b", text) for name in reserved):
        return text, {}
    src = parse_text(text, path, source)
    taken: set[str] = set()
    declared: set[str] = set()
    for node, field in walk_fields(src.root, skip=NOT_CODE):
        if node.type not in _NAME_NODES:
            continue
        name = src.node_text(node)
        taken.add(name)
        parent = node.parent
        if name in reserved and parent is not None and parent.type in _DECLARING and (
                field in ("declarator", "name") or parent.type == "enumerator"):
            declared.add(name)
    if not declared:
        return text, {}
    renaming: dict[str, str] = {}
    for name in sorted(declared):
        new, n = f"xp_{name}", 1
        while new in taken:
            n += 1
            new = f"xp_{name}{n}"
        renaming[name] = new
    return rename_identifiers(src, renaming), renaming
