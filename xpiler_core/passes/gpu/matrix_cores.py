"""AMD matrix-core intrinsics and GNU vector types for targets that have neither (HIP → CUDA, HIP → CPU).

``__builtin_amdgcn_mfma_f32_16x16x4f32(a, b, c, 0, 0, 0)`` is one V_MFMA_F32_16X16X4F32 of a 64-lane wavefront:
A is 16x4 with lane ``l`` holding ``A[l % 16][l / 16]``, B is 4x16 with lane ``l`` holding ``B[l / 16][l % 16]``,
and lane ``l``'s four results are rows ``4*(l/16) .. 4*(l/16)+3`` of column ``l % 16`` of ``C + A*B``. The call
becomes ``xp_mfma_f32_16x16x4f32(a, b, c)``, defined in the file: every lane publishes its A and B values in
shared memory (one 64-value slot per wavefront of the block, up to 1024 threads), a barrier, each lane sums
its four dot products, a barrier. That keeps the wavefront's semantics at any warp width (a CUDA warp is 32
lanes) and on the CPU, as long as the whole block makes the call together (the hardware needs the whole
wavefront too; a call under a divergent branch would deadlock on the GPU and is the source's bug). The
``cbsz``/``abid``/``blgp`` broadcast modifiers other than 0 are unresolved.

nvcc rejects GNU vector types in device code (``__attribute__((vector_size(N)))``, clang's
``ext_vector_type(N)``), which HIP code uses for MFMA operands: for a CUDA target they become
``xp_gnu_vector<T, BYTES>``, a struct with ``operator[]`` and aggregate initialization (element access and
``{...}`` initialization keep their meaning; vector arithmetic is left to the compiler to reject).
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core.frontend.source import parse_text
from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit, Unresolved
from xpiler_core.passes.support.cst import (
    Edit,
    apply_edits,
    call_arguments,
    span_at,
    top_insertion_point,
    walk,
)

INFO = PassInfo(
    name="matrix_cores",
    summary="AMD MFMA intrinsics → a wavefront-exact shared-memory helper; GNU vector types → structs for CUDA",
    kind="cst",
    directions=("hip->cuda", "hip->cpu"),
)

BEGIN_MARK = "// xpiler(matrix_cores) begin"
END_MARK = "// xpiler(matrix_cores) end"
MFMA = "__builtin_amdgcn_mfma_f32_16x16x4f32"
HELPER_NAME = "xp_mfma_f32_16x16x4f32"

VECTOR_STRUCT = """template <class T, int BYTES>
struct xp_gnu_vector {
    T v[BYTES / sizeof(T)];
    __host__ __device__ T& operator[](int i) { return v[i]; }
    __host__ __device__ const T& operator[](int i) const { return v[i]; }
};
"""

HELPER = """// V_MFMA_F32_16X16X4F32 of each 64-lane wavefront of the block (lanes numbered by linear thread index).
__device__ inline xp_gnu_vector<float, 16> xp_mfma_f32_16x16x4f32(float a, float b, xp_gnu_vector<float, 16> c) {
    __shared__ float xp_mfma_a[1024];
    __shared__ float xp_mfma_b[1024];
    const int xp_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int xp_w = xp_t / 64 * 64, xp_l = xp_t % 64;
    xp_mfma_a[xp_t] = a;
    xp_mfma_b[xp_t] = b;
    __syncthreads();
    for (int r = 0; r < 4; ++r) {
        float s = c[r];
        for (int k = 0; k < 4; ++k)
            s += xp_mfma_a[xp_w + 4 * (xp_l / 16) + r + 16 * k] * xp_mfma_b[xp_w + xp_l % 16 + 16 * k];
        c[r] = s;
    }
    __syncthreads();
    return c;
}
"""

# `__attribute__((__vector_size__(E))) T` (a type spelled with the attribute first) and
# `T NAME __attribute__((ext_vector_type(N)))` / `vector_size(E)` after a typedef's name
_ATTR_FIRST = re.compile(r"__attribute__\s*\(\(\s*(?:__)?vector_size(?:__)?\s*\((?P<bytes>.+?)\)\s*\)\)\s*"
                         r"(?P<type>(?:unsigned\s+|signed\s+)?(?:float|double|int|short|char|long|_Float16|__fp16))\b")
_TYPEDEF_AFTER = re.compile(r"typedef\s+(?P<type>(?:unsigned\s+|signed\s+)?(?:float|double|int|short|char|long|"
                            r"_Float16|__fp16))\s+(?P<name>\w+)\s+__attribute__\s*\(\(\s*(?P<kind>ext_vector_type|"
                            r"(?:__)?vector_size(?:__)?)\s*\((?P<arg>[^()]*(?:\([^()]*\)[^()]*)*)\)\s*\)\)\s*;")


def _vector_types_for_cuda(text: str) -> tuple[str, int]:
    count = 0

    def first(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f"xp_gnu_vector<{m.group('type')}, ({m.group('bytes')})>"

    def after(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        t, arg = m.group("type"), m.group("arg")
        size = f"({arg}) * sizeof({t})" if m.group("kind") == "ext_vector_type" else f"({arg})"
        return f"typedef xp_gnu_vector<{t}, {size}> {m.group('name')};"

    text = _ATTR_FIRST.sub(first, text)
    text = _TYPEDEF_AFTER.sub(after, text)
    return text, count


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    text = module.text
    if BEGIN_MARK in text:
        return module
    src = parse_text(text, module.path, module.dialect)
    edits: list[Edit] = []
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type != "call_expression":
            continue
        func = node.child_by_field_name("function")
        if func is None or src.node_text(func) != MFMA:
            continue
        args = call_arguments(node)
        modifiers = [src.node_text(a).strip() for a in args[3:]]
        if len(args) != 6 or any(m not in ("0", "0u") for m in modifiers):
            ctx.unresolved.append(Unresolved(f"{MFMA} with broadcast modifiers {', '.join(modifiers)} is not "
                                             "translated (only 0, 0, 0)", span_at(src.data, node.start_byte,
                                                                                   node.end_byte), MFMA))
            continue
        operands = ", ".join(src.node_text(a) for a in args[:3])
        edits.append(Edit(node.start_byte, node.end_byte, f"{HELPER_NAME}({operands})"))
    data, _ = apply_edits(src.data, edits)
    out = data.decode("utf-8")
    out, vectors = _vector_types_for_cuda(out)
    if not edits and not vectors:
        return module
    block = BEGIN_MARK + ": GNU vector types and AMD matrix-core operations\n" + VECTOR_STRUCT \
        + (HELPER if edits else "") + END_MARK + "\n"
    raw = out.encode("utf-8")
    at = top_insertion_point(parse_text(out, module.path, module.dialect))
    raw = raw[:at] + (b"\n" if at and not raw[:at].endswith(b"\n") else b"") + block.encode("utf-8") + raw[at:]
    out = raw.decode("utf-8")
    ctx.notes.append(f"matrix_cores: {len(edits)} MFMA call(s) through shared memory, {vectors} GNU vector "
                     "type(s) as structs")
    return SourceUnit(out, module.dialect, module.path)
