"""``nvcuda::wmma`` tensor-core code for AMD, with CUDA's fragment semantics preserved.

CUDA wmma operations are collective over one 32-lane warp. On a 64-lane wavefront the natural library,
rocWMMA, distributes a fragment over the whole wavefront — a kernel launched with one 32-thread warp per
tile (common in CUDA) would then run each fragment with half of its lanes missing.

Strategy ``portable32`` (default): replace ``#include <mma.h>`` with a small self-contained
``xpiler_wmma`` namespace that implements the 16×16×16 API (fragment, fill/load/store/mma_sync, row/col
major layouts and ``mem_row_major``/``mem_col_major`` with any ``ldm``) for one 32-lane group: lane l holds
tile elements 8l..8l+7 (row-major), and ``mma_sync`` gathers the A row and B column it needs with width-32
shuffles. It compiles with hipcc (no rocWMMA install needed) and keeps exactly the CUDA semantics at any
wavefront width; it does not use the matrix cores (slower than MFMA).
Strategy ``rocwmma``: map the namespace and header to rocWMMA (for kernels whose blocks give every
fragment a full 64-lane wavefront); not verified here, rocWMMA is not installed on this machine.
Shapes other than 16×16×16, tf32/bf16/int8 precisions and ``wmma::experimental`` are unresolved.
HIP → CUDA: the portable block goes back to ``#include <mma.h>`` and ``nvcuda::wmma``; ``rocwmma::`` maps to
``nvcuda::wmma::``.
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core.diagnostics import Span
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import parse_text
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, SourceUnit, Unresolved
from xpiler_core.passes.support.cst import Edit, apply_edits, marked_region, walk

INFO = PassInfo(
    name="tensor_cores",
    summary="nvcuda::wmma → a portable 32-lane wmma (or rocWMMA), fragment layout semantics preserved",
    kind="cst",
    directions=("cuda->hip", "hip->cuda"),
    params=(ParamSpec("strategy", "str", "portable32", "how wmma is expressed for AMD",
                      choices=("portable32", "rocwmma")),),
)

BEGIN_MARK = "// xpiler(tensor_cores) begin"
END_MARK = "// xpiler(tensor_cores) end"

PORTABLE_WMMA = f"""{BEGIN_MARK}: stands for the mma.h header. CUDA's 16x16x16 wmma for one 32-lane
// group, at any wavefront width: lane l holds tile elements 8l..8l+7 (row-major order of the tile).
#include <hip/hip_fp16.h>
namespace xpiler_wmma {{
struct matrix_a {{}};
struct matrix_b {{}};
struct accumulator {{}};
struct row_major {{}};
struct col_major {{}};
enum layout_t {{ mem_row_major, mem_col_major }};
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {{
    static_assert(M == 16 && N == 16 && K == 16, "xpiler_wmma implements the 16x16x16 shape");
    enum {{ num_elements = 8 }};
    T x[8];
}};
template <class L> struct is_col_major {{ static const bool value = false; }};
template <> struct is_col_major<col_major> {{ static const bool value = true; }};
__device__ inline int lane32() {{
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31;
}}
template <class Use, int M, int N, int K, class T, class L, class V>
__device__ inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& v) {{
    for (int i = 0; i < 8; ++i) f.x[i] = static_cast<T>(v);
}}
template <class Use, int M, int N, int K, class T, class L, class P>
__device__ inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {{
    const int l = lane32();
    for (int i = 0; i < 8; ++i) {{
        const int r = (8 * l + i) / 16, c = (8 * l + i) % 16;
        f.x[i] = static_cast<T>(is_col_major<L>::value ? p[c * ldm + r] : p[r * ldm + c]);
    }}
}}
template <int M, int N, int K, class T, class P>
__device__ inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const P* p, unsigned ldm,
                                        layout_t layout) {{
    const int l = lane32();
    for (int i = 0; i < 8; ++i) {{
        const int r = (8 * l + i) / 16, c = (8 * l + i) % 16;
        f.x[i] = static_cast<T>(layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]);
    }}
}}
template <int M, int N, int K, class T, class P>
__device__ inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                                         layout_t layout) {{
    const int l = lane32();
    for (int i = 0; i < 8; ++i) {{
        const int r = (8 * l + i) / 16, c = (8 * l + i) % 16;
        if (layout == mem_col_major) p[c * ldm + r] = static_cast<P>(f.x[i]);
        else p[r * ldm + c] = static_cast<P>(f.x[i]);
    }}
}}
// D = A * B + C. Lane l owns C(l/2, 8(l%2)+i); A(r,k) lives in lane 2r+k/8 slot k%8, B(k,c) in lane
// 2k+c/8 slot c%8, so every shuffle reads the same slot in all lanes.
template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC, class TD>
__device__ inline void mma_sync(fragment<accumulator, M, N, K, TD, void>& d,
                                const fragment<matrix_a, M, N, K, TA, LA>& a,
                                const fragment<matrix_b, M, N, K, TB, LB>& b,
                                const fragment<accumulator, M, N, K, TC, void>& c) {{
    const int l = lane32();
    float acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = static_cast<float>(c.x[i]);
    for (int k = 0; k < 16; ++k) {{
        const float av = __shfl(static_cast<float>(a.x[k & 7]), 2 * (l >> 1) + (k >> 3), 32);
        for (int i = 0; i < 8; ++i) acc[i] += av * __shfl(static_cast<float>(b.x[i]), 2 * k + (l & 1), 32);
    }}
    for (int i = 0; i < 8; ++i) d.x[i] = static_cast<TD>(acc[i]);
}}
}}  // namespace xpiler_wmma
{END_MARK}
"""

_UNSUPPORTED = [
    (re.compile(r"\bprecision\s*::\s*(tf32|b1|u4|s4)\b"), "wmma sub-byte / tf32 precisions have no portable form here"),
    (re.compile(r"\bexperimental\b"), "wmma::experimental has no portable form here"),
    (re.compile(r"\bfragment\s*<[^;>]*?,\s*(8|32)\s*,\s*(8|32)\s*,\s*(16|8|4)\b"), "wmma shapes other than 16x16x16"),
    (re.compile(r"\b(__nv_bfloat16|signed char|unsigned char|double)\s*,\s*\w*::?\s*(row|col)_major"),
     "wmma with bf16/int8/double fragments"),
]


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    if module.dialect is Dialect.HIP and ctx.target is Dialect.CUDA:
        return _to_cuda(module, ctx)
    if "nvcuda" not in module.text and "<mma.h>" not in module.text:
        return module
    strategy = str(params.get("strategy", "portable32"))
    for pattern, reason in _UNSUPPORTED:
        for match in pattern.finditer(module.text):
            line = module.text.count("\n", 0, match.start())
            col = match.start() - (module.text.rfind("\n", 0, match.start()) + 1)
            ctx.unresolved.append(Unresolved(reason, Span(match.start(), match.end(), line, col, line, col), "wmma"))
    namespace = "xpiler_wmma" if strategy == "portable32" else "rocwmma"
    src = parse_text(module.text, module.path, module.dialect)
    edits: list[Edit] = []
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type == "preproc_include":
            path = node.child_by_field_name("path")
            if path is not None and src.node_text(path) in ("<mma.h>", '"mma.h"'):
                if strategy == "portable32":
                    end = node.end_byte if src.data[node.end_byte - 1 : node.end_byte] == b"\n" else node.end_byte
                    edits.append(Edit(node.start_byte, end, PORTABLE_WMMA))
                else:
                    edits.append(Edit(path.start_byte, path.end_byte, "<rocwmma/rocwmma.hpp>"))
        elif node.type == "using_declaration":
            text = src.node_text(node)
            compact = re.sub(r"\s+", "", text)
            if compact == "usingnamespacenvcuda;":
                edits.append(Edit(node.start_byte, node.end_byte, f"namespace wmma = {namespace};"))
            elif compact == "usingnamespacenvcuda::wmma;":
                edits.append(Edit(node.start_byte, node.end_byte, f"using namespace {namespace};"))
        elif node.type == "namespace_identifier" and src.node_text(node) == "nvcuda":
            tail = src.data[node.end_byte : node.end_byte + 40].decode("utf-8", "replace")
            qualified = re.match(r"\s*::\s*wmma\b", tail)
            if qualified:
                edits.append(Edit(node.start_byte, node.end_byte + len(qualified.group(0).encode()), namespace))
    data, _ = apply_edits(src.data, edits)
    if edits:
        ctx.notes.append(f"tensor_cores({strategy}): nvcuda::wmma → {namespace}")
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)


def _to_cuda(module: SourceUnit, ctx: PassContext) -> SourceUnit:
    text = module.text
    region = marked_region(text, BEGIN_MARK, END_MARK)
    changed = region is not None
    if region is not None:
        text = text[: region[0]] + "#include <mma.h>" + text[region[1] :]
    text2 = re.sub(r"namespace\s+wmma\s*=\s*(xpiler_wmma|rocwmma)\s*;", "using namespace nvcuda;", text)
    text2 = re.sub(r"\b(xpiler_wmma|rocwmma)\s*::", "nvcuda::wmma::", text2)
    text2 = re.sub(r"using\s+namespace\s+(xpiler_wmma|rocwmma)\s*;", "using namespace nvcuda::wmma;", text2)
    if text2 != text or changed:
        ctx.notes.append("tensor_cores(hip->cuda): wmma restored to nvcuda::wmma")
    if re.search(r"\brocwmma\b", text2):
        ctx.unresolved.append(Unresolved("rocwmma construct without an nvcuda::wmma equivalent", Span.empty(), "rocwmma"))
    return SourceUnit(text2, module.dialect, module.path)
