"""CUDA device intrinsics that HIP 5.x lacks, given portable definitions (and taken back for HIP → CUDA).

Cache-hinted loads and stores (``__ldcs``, ``__stcs``, …: the hint changes speed, not results) become plain
accesses; the per-byte/per-halfword SIMD intrinsics (``__vmaxs4``, ``__vadd4``, …) become loops over the
lanes; ``__dp4a`` (four 8-bit products accumulated into 32 bits) has no HIP 5.2 declaration either. Calls become
``xpiler_dp4a`` with a definition in the file: plain C++ on the bytes, the same arithmetic as the PTX
``dp4a.s32.s32`` / ``dp4a.u32.u32`` (signed or unsigned bytes by the overload), so it compiles with hipcc and
runs unchanged on the CPU runtime (it does not use AMD's dot-product instructions). ``atomicAdd`` on
``__half``/``__half2`` (HIP 5.x declares none) gets template definitions by compare-and-swap of the 32-bit word.
``min``/``max`` calls (and ``umin``, ``llmax``, … which HIP 5.x lacks) get CUDA's own overload set (mixed signed/unsigned integers meet in the unsigned type;
HIP 5.x picks a double template). The ``register`` storage class (removed in C++17; hipcc's clang rejects it)
is dropped. CUDA 12's ``cudaGraphInstantiate(exec, graph[, flags])`` becomes ``cudaGraphInstantiateWithFlags``
(HIP 5.x's ``hipGraphInstantiate`` is CUDA 11's five-argument form); CUDA 13's graph dependency calls with null edge
data lose that argument (HIP 5.x's form has none). A ``dim3`` assigned from ``make_uint3(...)`` (CUDA's dim3 converts from uint3, HIP's does not) is built
as ``dim3(...)``. Host calls CUDA overloads for typed pointers (``cudaHostAlloc(int**, ...)``, also reached through a project
macro that pastes the prefix) get the same ``T**`` templates over HIP's ``void**`` functions (under hipcc).
CUDA's pipeline primitives (``__pipeline_memcpy_async``/``commit``/``wait_prior``, sm_80 asynchronous copies), which
HIP lacks, become ``xpiler_pipeline_*`` definitions that copy at once (CUDA lets the copy complete at any point
before its wait); HIP → CUDA restores them and their header.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import ParsedSource, parse_text
from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit
from xpiler_core.passes.support.cst import (
    Edit,
    apply_edits,
    call_arguments,
    remove_marked_region,
    top_insertion_point,
    users_own_names,
    walk,
)

INFO = PassInfo(
    name="intrinsics_compat",
    summary="Portable definitions for CUDA intrinsics HIP 5.x lacks (__dp4a, cache-hinted loads/stores, SIMD, "
            "atomicAdd on half types, T** host-memory overloads)",
    kind="cst",
    directions=("cuda->hip", "hip->cuda"),
)

BEGIN_MARK = "// xpiler(intrinsics_compat) begin"
END_MARK = "// xpiler(intrinsics_compat) end"
HELPERS = f"""{BEGIN_MARK}: CUDA __dp4a — sum of the four 8-bit lane products plus c.
__device__ inline int xpiler_dp4a(int a, int b, int c) {{
    for (int k = 0; k < 4; ++k) c += (int)(signed char)(a >> (8 * k)) * (int)(signed char)(b >> (8 * k));
    return c;
}}
__device__ inline unsigned int xpiler_dp4a(unsigned int a, unsigned int b, unsigned int c) {{
    for (int k = 0; k < 4; ++k) c += ((a >> (8 * k)) & 0xffu) * ((b >> (8 * k)) & 0xffu);
    return c;
}}
#define XPILER_LOAD(name) template <class T> __device__ inline T name(const T* p) {{ return *p; }}
XPILER_LOAD(xpiler_ldcs) XPILER_LOAD(xpiler_ldcg) XPILER_LOAD(xpiler_ldca) XPILER_LOAD(xpiler_ldlu)
XPILER_LOAD(xpiler_ldcv)
#define XPILER_STORE(name) template <class T> __device__ inline void name(T* p, T v) {{ *p = v; }}
XPILER_STORE(xpiler_stcs) XPILER_STORE(xpiler_stcg) XPILER_STORE(xpiler_stwb) XPILER_STORE(xpiler_stwt)
@SIMD@
{END_MARK}
"""


HALF_BEGIN_MARK = "// xpiler(intrinsics_compat) half atomics begin"
HALF_END_MARK = "// xpiler(intrinsics_compat) half atomics end"
# templates: a HIP that declares atomicAdd on half types (a plain function, preferred over a template in overload
# resolution) keeps its own; on one that does not (5.x) these are the only candidates for half pointers
HALF_ATOMICS = f"""{HALF_BEGIN_MARK}: CUDA's atomicAdd on __half and __half2, which HIP 5.x lacks — a
// compare-and-swap of the aligned 32-bit word that holds the value.
#include <hip/hip_fp16.h>
template <class H, class = typename std::enable_if<std::is_same<H, __half>::value>::type>
__device__ inline __half atomicAdd(H* address, __half val) {{
    const size_t at = reinterpret_cast<size_t>(address);
    unsigned int* word = reinterpret_cast<unsigned int*>(at & ~size_t(3));
    const unsigned int shift = (at & 2) ? 16u : 0u;
    unsigned int old = *word, assumed;
    do {{
        assumed = old;
        const __half sum = __hadd(__ushort_as_half((unsigned short)(assumed >> shift)), val);
        const unsigned int bits = __half_as_ushort(sum);
        old = atomicCAS(word, assumed, (assumed & ~(0xffffu << shift)) | (bits << shift));
    }} while (assumed != old);
    return __ushort_as_half((unsigned short)(old >> shift));
}}
template <class H, class = typename std::enable_if<std::is_same<H, __half2>::value>::type>
__device__ inline __half2 atomicAdd(H* address, __half2 val) {{
    unsigned int* word = reinterpret_cast<unsigned int*>(address);
    unsigned int old = *word, assumed;
    __half2 seen;
    do {{
        assumed = old;
        __builtin_memcpy(&seen, &assumed, sizeof seen);
        const __half2 sum = __hadd2(seen, val);
        unsigned int bits;
        __builtin_memcpy(&bits, &sum, sizeof bits);
        old = atomicCAS(word, assumed, bits);
    }} while (assumed != old);
    __builtin_memcpy(&seen, &old, sizeof seen);
    return seen;
}}
{HALF_END_MARK}
"""
PIPELINE_BEGIN_MARK = "// xpiler(intrinsics_compat) pipeline primitives begin"
PIPELINE_END_MARK = "// xpiler(intrinsics_compat) pipeline primitives end"
# CUDA's pipeline primitives (cuda_pipeline.h, sm_80's cp.async): HIP has none. An asynchronous copy may complete
# at any point before the wait that covers it, so a copy done at once is one of the behaviours CUDA allows.
PIPELINE_PRIMITIVES = f"""{PIPELINE_BEGIN_MARK}: CUDA's __pipeline_* primitives, the copy done at once
__device__ inline void xpiler_pipeline_memcpy_async(void* dst, const void* src, size_t size_and_align,
                                                    size_t zfill = 0) {{
    if (zfill == 0 && size_and_align == 16) {{ *(uint4*)dst = *(const uint4*)src; return; }}
    if (zfill == 0 && size_and_align == 8) {{ *(uint2*)dst = *(const uint2*)src; return; }}
    if (zfill == 0 && size_and_align == 4) {{ *(unsigned int*)dst = *(const unsigned int*)src; return; }}
    for (size_t k = 0; k < size_and_align; ++k)
        ((char*)dst)[k] = k < size_and_align - zfill ? ((const char*)src)[k] : (char)0;
}}
__device__ inline void xpiler_pipeline_commit() {{}}
__device__ inline void xpiler_pipeline_wait_prior(size_t) {{}}
{PIPELINE_END_MARK}
"""
_PIPELINE_RENAMES = {f"__pipeline_{n}": f"xpiler_pipeline_{n}" for n in ("memcpy_async", "commit", "wait_prior")}
POINTER_BEGIN_MARK = "// xpiler(intrinsics_compat) typed pointer overloads begin"
POINTER_END_MARK = "// xpiler(intrinsics_compat) typed pointer overloads end"
# CUDA's runtime API has templates taking T** for these (a project calls them with an int**, often through a
# macro that pastes the prefix: `cuda(HostAlloc(&p, ...))` → `hip##HostAlloc`); HIP declares only void**. Under
# hipcc alone (__HIP__): other compilers of the file bring their own declarations. Once per build (each
# translated header of a project gets the block too).
POINTER_OVERLOADS = f"""{POINTER_BEGIN_MARK}: CUDA's T** overloads of host-memory calls, which
// HIP declares for void** only.
#if defined(__HIP__) && !defined(XPILER_TYPED_POINTER_OVERLOADS)
#define XPILER_TYPED_POINTER_OVERLOADS
template <class T> inline hipError_t hipHostAlloc(T** ptr, size_t size, unsigned int flags) {{
    return hipHostMalloc(reinterpret_cast<void**>(ptr), size, flags);
}}
template <class T> inline hipError_t hipHostGetDevicePointer(T** device, void* host, unsigned int flags) {{
    return hipHostGetDevicePointer(reinterpret_cast<void**>(device), host, flags);
}}
#endif
{POINTER_END_MARK}
"""
MINMAX_BEGIN_MARK = "// xpiler(intrinsics_compat) min/max begin"
MINMAX_END_MARK = "// xpiler(intrinsics_compat) min/max end"
# CUDA's own overload set of min/max (crt/math_functions.hpp): mixed signed/unsigned integers meet in the unsigned
# type, float with double in double. HIP 5.x has a different set (min(unsigned, int) resolves to a double
# template, so `a[min(i + blockDim.x, n - 1)]` does not compile and `min(u, n) / 2` divides in double): calls
# are renamed to this copy of CUDA's set, which resolves every call the way nvcc does.
_MINMAX_INTEGERS = (("int", "int", "int"), ("unsigned int", "unsigned int", "unsigned int"),
                    ("unsigned int", "int", "unsigned int"), ("unsigned int", "unsigned int", "int"),
                    ("long", "long", "long"), ("unsigned long", "unsigned long", "unsigned long"),
                    ("unsigned long", "long", "unsigned long"), ("unsigned long", "unsigned long", "long"),
                    ("long long", "long long", "long long"),
                    ("unsigned long long", "unsigned long long", "unsigned long long"),
                    ("unsigned long long", "long long", "unsigned long long"),
                    ("unsigned long long", "unsigned long long", "long long"))


def _minmax_overloads() -> str:
    lines = [f"{MINMAX_BEGIN_MARK}: CUDA's min/max overloads (HIP 5.x resolves mixed ones otherwise).",
             "#ifndef XPILER_CUDA_MINMAX", "#define XPILER_CUDA_MINMAX"]
    for name, compare, fp in (("min", "<", "fmin"), ("max", ">", "fmax")):
        for result, a, b in _MINMAX_INTEGERS:
            lines.append(f"__host__ __device__ inline {result} xpiler_{name}({a} a, {b} b) {{ {result} x = ({result})a, "
                         f"y = ({result})b; return x {compare} y ? x : y; }}")
        lines += [f"__host__ __device__ inline float xpiler_{name}(float a, float b) {{ return {fp}f(a, b); }}",
                  f"__host__ __device__ inline double xpiler_{name}(double a, double b) {{ return {fp}(a, b); }}",
                  f"__host__ __device__ inline double xpiler_{name}(float a, double b) {{ return {fp}((double)a, b); }}",
                  f"__host__ __device__ inline double xpiler_{name}(double a, float b) {{ return {fp}(a, (double)b); }}"]
    # CUDA's typed forms (umin, llmax, ...), which HIP 5.x does not declare: the overload of their type
    for name, compare in (("min", "<"), ("max", ">")):
        for prefix, type_ in (("u", "unsigned int"), ("ll", "long long"), ("ull", "unsigned long long")):
            lines.append(f"__host__ __device__ inline {type_} xpiler_{prefix}{name}({type_} a, {type_} b) "
                         f"{{ return a {compare} b ? a : b; }}")
    return "\n".join([*lines, "#endif", MINMAX_END_MARK, ""])


MINMAX_OVERLOADS = _minmax_overloads()
_TYPED_POINTER_CALL = re.compile(r"\b(?:hip)?Host(?:Alloc|GetDevicePointer)\s*\(")
# a file that adds to half values atomically: it calls atomicAdd and names a half type
_HALF_TYPE = re.compile(r"\b(?:__)?half2?\b")
_ATOMIC_ADD = re.compile(r"\batomicAdd\s*\(")


def _simd_helpers() -> str:
    """The SIMT runtime's lane-wise SIMD definitions (runtime/include/xpiler/simd_video.h), as HIP device code
    named ``xpiler_*``."""
    from importlib import resources

    text = resources.files("xpiler_core.runtime").joinpath("include/xpiler/simd_video.h").read_text(encoding="utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    return ("#define XPILER_SIMD_QUALIFIER __device__\n#define XPILER_SIMD_NAME(n) xpiler_##n\n" + body
            + "\n#undef XPILER_SIMD_QUALIFIER\n#undef XPILER_SIMD_NAME")


HELPERS = HELPERS.replace("@SIMD@", _simd_helpers())
_SIMD = ("vmaxs4", "vmins4", "vmaxu4", "vminu4", "vadd4", "vsub4", "vabsdiffu4", "vavgu4", "vmaxs2", "vmins2",
         "vmaxu2", "vminu2", "vadd2", "vsub2", "vabsdiffu2")
_RENAMES = {"__dp4a": "xpiler_dp4a", **{f"__{n}": f"xpiler_{n}" for n in (
    "ldcs", "ldcg", "ldca", "ldlu", "ldcv", "stcs", "stcg", "stwb", "stwt", *_SIMD)}}


def _dim3_variables(src: ParsedSource) -> set[str]:
    """Names the file declares as ``dim3`` and as nothing else (a name declared with another type somewhere
    is left alone)."""
    typed: dict[str, set[str]] = {}
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type not in ("declaration", "parameter_declaration", "field_declaration"):
            continue
        kind = node.child_by_field_name("type")
        type_text = src.node_text(kind) if kind is not None else ""
        for declarator in node.children_by_field_name("declarator"):
            while declarator.type == "init_declarator":
                inner = declarator.child_by_field_name("declarator")
                if inner is None:
                    break
                declarator = inner
            if declarator.type in ("identifier", "field_identifier"):
                typed.setdefault(src.node_text(declarator), set()).add(type_text)
    return {name for name, types in typed.items() if types == {"dim3"}}


def _dim3_target_and_value(src: ParsedSource, node: Node) -> tuple[str | None, Node | None]:
    """(the name assigned or declared, the value when it is a call) of an assignment or an init declarator;
    a member (``params.gridDim = ...``) by its field name."""
    if node.type == "assignment_expression":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is not None and left.type == "field_expression":
            left = left.child_by_field_name("field")
    else:
        left, right = node.child_by_field_name("declarator"), node.child_by_field_name("value")
    if left is None or right is None or right.type != "call_expression":
        return None, None
    operator = node.child_by_field_name("operator")
    if node.type == "assignment_expression" and (operator is None or src.node_text(operator) != "="):
        return None, None
    return (src.node_text(left) if left.type in ("identifier", "field_identifier") else None), right


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    backwards = module.dialect is Dialect.HIP and ctx.target is Dialect.CUDA
    text = module.text
    if backwards:
        text = remove_marked_region(text, BEGIN_MARK, END_MARK)
        text = remove_marked_region(text, HALF_BEGIN_MARK, HALF_END_MARK)
        text = remove_marked_region(text, POINTER_BEGIN_MARK, POINTER_END_MARK)
        text = remove_marked_region(text, MINMAX_BEGIN_MARK, MINMAX_END_MARK)
        text = remove_marked_region(text, PIPELINE_BEGIN_MARK, PIPELINE_END_MARK)
    renames = {v: k for k, v in _RENAMES.items()} if backwards else _RENAMES
    pipeline = {v: k for k, v in _PIPELINE_RENAMES.items()} if backwards else _PIPELINE_RENAMES
    forward_minmax = {f"{p}{n}": f"xpiler_{p}{n}" for n in ("min", "max") for p in ("", "u", "ll", "ull")}
    minmax = {v: k for k, v in forward_minmax.items()} if backwards else forward_minmax
    src = parse_text(text, module.path, module.dialect)
    # a user's function named like an intrinsic is theirs
    user_names = users_own_names(src, ctx)
    edits: list[Edit] = []
    calls = minmax_calls = dropped = dim3_made = calls_graph = calls_edges = pipeline_calls = 0
    dim3_names = _dim3_variables(src) if not backwards and "make_uint3" in text else set()
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if dim3_names and node.type in ("assignment_expression", "init_declarator"):
            # CUDA's dim3 converts from uint3 (`grid = make_uint3(n, 1, 1)`); HIP's has no such constructor
            target, value = _dim3_target_and_value(src, node)
            if target in dim3_names and value is not None:
                func = value.child_by_field_name("function")
                if func is not None and src.node_text(func) == "make_uint3" and "make_uint3" not in user_names:
                    edits.append(Edit(func.start_byte, func.end_byte, "dim3"))
                    dim3_made += 1
            continue
        if node.type == "storage_class_specifier" and not backwards and src.node_text(node) == "register":
            # C++17 removed the `register` storage class: nvcc warns, clang (under hipcc) rejects it; it never
            # changed what a program computes
            end = node.end_byte
            while end < len(src.data) and src.data[end:end + 1] in (b" ", b"\t"):
                end += 1
            edits.append(Edit(node.start_byte, end, ""))
            dropped += 1
            continue
        func = node.child_by_field_name("function") if node.type == "call_expression" else None
        if func is None or func.type != "identifier" or src.node_text(func) in user_names:
            continue
        name = src.node_text(func)
        if not backwards and name == "cudaGraphInstantiate" and len(call_arguments(node)) <= 3:
            # CUDA 12's (exec, graph[, flags]); HIP 5.x's hipGraphInstantiate is CUDA 11's five-argument form
            arguments = call_arguments(node)
            edits.append(Edit(func.start_byte, func.end_byte, "cudaGraphInstantiateWithFlags"))
            if len(arguments) == 2:
                edits.append(Edit(arguments[1].end_byte, arguments[1].end_byte, ", 0"))
            calls_graph += 1
        elif not backwards and name in ("cudaGraphAddDependencies", "cudaGraphRemoveDependencies") and len(
                edges := call_arguments(node)) == 5 and src.node_text(edges[3]).strip() in ("NULL", "nullptr", "0"):
            # CUDA 13's form with edge data; null is the default (data) edges, HIP 5.x's form, which has none
            edits.append(Edit(edges[2].end_byte, edges[3].end_byte, ""))
            calls_edges += 1
        elif name in renames and call_arguments(node):
            edits.append(Edit(func.start_byte, func.end_byte, renames[name]))
            calls += 1
        elif name in pipeline:
            edits.append(Edit(func.start_byte, func.end_byte, pipeline[name]))
            pipeline_calls += 1
        elif name in minmax and len(call_arguments(node)) == 2:
            edits.append(Edit(func.start_byte, func.end_byte, minmax[name]))
            minmax_calls += 1
    if dropped:
        ctx.notes.append(f"intrinsics_compat: {dropped} 'register' storage class(es) dropped (not C++17)")
    if calls_edges:
        ctx.notes.append(f"intrinsics_compat: {calls_edges} graph dependency call(s) of CUDA 13's form without their "
                         "null edge data (HIP 5.x's form)")
    if calls_graph:
        ctx.notes.append(f"intrinsics_compat: {calls_graph} cudaGraphInstantiate call(s) of CUDA 12's form as "
                         "...WithFlags (HIP 5.x's hipGraphInstantiate takes CUDA 11's five arguments)")
    if dim3_made:
        ctx.notes.append(f"intrinsics_compat: {dim3_made} dim3 value(s) built as dim3, not from make_uint3 "
                         "(HIP's dim3 has no uint3 constructor)")
    at = top_insertion_point(src)
    lead = "\n" if at and not src.data[:at].endswith(b"\n") else ""
    if calls and not backwards and BEGIN_MARK not in text:
        edits.append(Edit(at, at, lead + HELPERS))
    half_atomics = (not backwards and HALF_BEGIN_MARK not in text and "atomicAdd" not in user_names
                    and _ATOMIC_ADD.search(text) is not None and _HALF_TYPE.search(text) is not None)
    if half_atomics:
        edits.append(Edit(at, at, lead + HALF_ATOMICS))
        ctx.notes.append("intrinsics_compat: atomicAdd on __half/__half2 given a definition (HIP 5.x has none)")
    typed_pointers = (not backwards and POINTER_BEGIN_MARK not in text
                      and not {"hipHostAlloc", "hipHostGetDevicePointer"} & user_names
                      and _TYPED_POINTER_CALL.search(text) is not None)
    if minmax_calls and not backwards and MINMAX_BEGIN_MARK not in text:
        edits.append(Edit(at, at, lead + MINMAX_OVERLOADS))
        ctx.notes.append(f"intrinsics_compat: {minmax_calls} min/max call(s) given CUDA's overloads")
    if pipeline_calls and not backwards and PIPELINE_BEGIN_MARK not in text:
        edits.append(Edit(at, at, lead + PIPELINE_PRIMITIVES))
        ctx.notes.append(f"intrinsics_compat: {pipeline_calls} pipeline primitive call(s) as copies done at once "
                         "(HIP has no asynchronous copies)")
    if pipeline_calls and backwards and not re.search(r"#\s*include\s*[<\"]cuda_pipeline", text):
        edits.append(Edit(at, at, lead + "#include <cuda_pipeline.h>\n"))
    if typed_pointers:
        edits.append(Edit(at, at, lead + POINTER_OVERLOADS))
        ctx.notes.append("intrinsics_compat: hipHostAlloc/hipHostGetDevicePointer given CUDA's T** overloads")
    if calls:
        ctx.notes.append(f"intrinsics_compat: {calls} call(s) "
                         + ("restored to CUDA intrinsics" if backwards else "given portable definitions"))
    data, _ = apply_edits(src.data, edits)
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)
