"""x86 SIMD intrinsics in C code → portable device functions, so C → CUDA can compile and bind the code.

C kernels written for the CPU use ``<immintrin.h>``: integer vectors (``__m128i``, ``__m512i``) moved with
loads and stores and multiplied with the VNNI dot products (``_mm512_dpbusd_epi32``, ``_mm_dpbusds_epi32``,
``_mm512_dpwssds_epi32``). nvcc cannot compile them for the device. Each vector type and intrinsic the file
uses is renamed to an ``xp_`` spelling and defined once at the top of the file from the rows of
``tables/x86_simd.toml`` (``__host__ __device__``: the vector as bytes, the dot products lane by lane in
64-bit integers, wrapped or saturated as the instruction does); the intrinsic headers are dropped. A file
that uses an intrinsic the table does not support is refused with its name. Little-endian lanes (x86 and
the GPUs both are).
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core.frontend.source import parse_text
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused, SourceUnit
from xpiler_core.passes.support.cst import Edit, apply_edits, top_insertion_point, walk
from xpiler_core.tables import raw_table

INFO = PassInfo(
    name="x86_simd",
    summary="x86 SIMD/VNNI intrinsics (_mm512_dpbusd_epi32, loads, stores) → portable __host__ __device__ code",
    kind="cst",
    directions=("c->cuda",),
)

INTRINSIC = re.compile(r"^_mm\d*_\w+$")
VECTOR = re.compile(r"^__m\d+[a-z]*$")
HEADERS = re.compile(r"#\s*include\s*<(immintrin|x86intrin|emmintrin|xmmintrin|smmintrin|tmmintrin|nmmintrin|"
                     r"pmmintrin|zmmintrin|avx512[a-z0-9_]*intrin)\.h>[^\n]*\n?")

COMMON = r"""#include <string.h>
#define XP_X86 static __host__ __device__ inline
template <class V> XP_X86 int xp_x86_lane32(const V &v, int j) { int x; memcpy(&x, v.b + 4 * j, 4); return x; }
template <class V> XP_X86 void xp_x86_set32(V &v, int j, long long x, bool saturate) {
  if (saturate) x = x > 2147483647LL ? 2147483647LL : (x < -2147483647LL - 1 ? -2147483647LL - 1 : x);
  const unsigned bits = (unsigned)(unsigned long long)x;  /* wraps modulo 2^32 */
  memcpy(v.b + 4 * j, &bits, 4);
}
/* lane j: src[j] + the 4 products of unsigned bytes of a by signed bytes of b */
template <class V, int L> XP_X86 V xp_x86_dpbusd(V s, V a, V b, bool saturate) {
  V r;
  for (int j = 0; j < L; ++j) {
    long long acc = xp_x86_lane32(s, j);
    for (int k = 0; k < 4; ++k) acc += (long long)(unsigned char)a.b[4 * j + k] * (long long)(signed char)b.b[4 * j + k];
    xp_x86_set32(r, j, acc, saturate);
  }
  return r;
}
/* lane j: src[j] + the 2 products of signed 16-bit words of a and b */
template <class V, int L> XP_X86 V xp_x86_dpwssd(V s, V a, V b, bool saturate) {
  V r;
  for (int j = 0; j < L; ++j) {
    long long acc = xp_x86_lane32(s, j);
    for (int k = 0; k < 2; ++k) {
      short x, y;
      memcpy(&x, a.b + 4 * j + 2 * k, 2);
      memcpy(&y, b.b + 4 * j + 2 * k, 2);
      acc += (long long)x * (long long)y;
    }
    xp_x86_set32(r, j, acc, saturate);
  }
  return r;
}
"""


def _rows() -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    table = raw_table("x86_simd")
    types = {row["name"]: int(row["bytes"]) for row in table["type"]}
    intrinsics = {row["name"]: row for row in table["intrinsic"]}
    return types, intrinsics


def _spelling(name: str) -> str:
    """``_mm512_dpbusd_epi32`` → ``xp_mm512_dpbusd_epi32``; ``__m512i`` → ``xp_m512i``."""
    return "xp_" + name.lstrip("_")


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    if "_mm" not in module.text and "__m" not in module.text:
        return module
    src = parse_text(module.text, module.path, module.dialect)
    found: dict[str, list[tuple[int, int]]] = {}
    for node in walk(src.root, skip=frozenset({"comment", "string_literal", "preproc_include"})):
        if node.type in ("identifier", "type_identifier"):
            text = src.node_text(node)
            if INTRINSIC.match(text) or VECTOR.match(text):
                found.setdefault(text, []).append((node.start_byte, node.end_byte))
    if not found:
        return module
    types, intrinsics = _rows()
    unknown = sorted(n for n in found if (n not in types if VECTOR.match(n) else
                                          intrinsics.get(n, {}).get("status") != "supported"))
    if unknown:
        raise PassRefused(f"x86 SIMD {'names' if len(unknown) > 1 else 'name'} without a device form: "
                          f"{', '.join(unknown)} (tables/x86_simd.toml)")
    edits = [Edit(start, end, _spelling(name)) for name, spans in found.items() for start, end in spans]
    used_types = sorted({t for t in types if t in found} | {t for t in types for n in found if n in intrinsics
                                                             and _spelling(t) in intrinsics[n]["code"]})
    header = [f"/* xpiler(x86_simd): {', '.join(sorted(found))} as device code */", COMMON]
    header += [f"struct {_spelling(t)} {{ unsigned char b[{types[t]}]; }};" for t in used_types]
    header += [intrinsics[n]["code"] for n in sorted(found) if n in intrinsics]
    at = top_insertion_point(src)
    lead = "\n" if at and not src.data[:at].endswith(b"\n") else ""
    edits.append(Edit(at, at, lead + "\n".join(header) + "\n"))
    data, _ = apply_edits(src.data, edits)
    text = HEADERS.sub("", data.decode("utf-8"))
    ctx.notes.append(f"x86_simd: {len([n for n in found if n in intrinsics])} intrinsic(s) as portable device "
                     "functions (byte vectors, dot products lane by lane)")
    return SourceUnit(text, module.dialect, module.path)
