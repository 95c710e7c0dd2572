"""Keep CUDA's 32-lane warp semantics correct on AMD's 64-lane wavefronts (and undo it for HIP -> CUDA).

CUDA code is full of 32-lane assumptions: shuffle reductions whose offsets start at 16, ``0xffffffff``
masks, 32-bit ``__ballot_sync`` results (then ``__popc``/``__ffs`` of them), ``lane = tid & 31``,
``warp = tid / 32`` or ``tid >> 5``, shared arrays sized ``blockDim.x / 32``, ``WARP_SIZE 32`` macros. A
rename-only port runs all of these with 64-wide shuffles and 64-bit ballots and computes wrong answers.

Strategy ``native`` (a candidate only for code that already speaks in ``warpSize`` and uses no votes or
literal 32s): leave the warp code as written so it runs on the full 64-lane wavefront; the plan tries it
first and keeps it only if the tests pass, else falls back to lanes32.

Strategy ``lanes32`` (the default): make the 32-lane semantics explicit so that each half of a
wavefront behaves exactly as one CUDA warp, whatever the hardware width:
- every shuffle gets an explicit ``width`` of 32 (CUDA's default width is its warp size, 32);
- ``warpSize`` in the source is CUDA's warp size: it becomes the constant 32;
- ballot / any / all / activemask / ``__reduce_*_sync`` go through small helpers that look at the caller's
  32-lane half of the 64-bit wave ballot;
- lane and warp index arithmetic (``& 31``, ``/ 32``, ``>> 5``), shared arrays sized per 32-lane warp and
  ``WARP_SIZE`` macros then stay consistent and are left as they are (they are reported, not edited).
This is semantically exact for code that only communicates within a warp through these intrinsics; the
verifier still runs the result at warp size 64 against the source at warp size 32.

HIP -> CUDA: the helper block is removed and the helper calls go back to the CUDA intrinsics. HIP code that
assumes 64 lanes (shuffle offsets of 32 and above, widths above 32) is reported unresolved.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.source import ParsedSource, parse_text
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused, SourceUnit, Unresolved
from xpiler_core.passes.support.cst import (
    Edit,
    apply_edits,
    call_arguments,
    marked_region,
    remove_marked_region,
    top_insertion_point,
    users_own_names,
    walk,
)
from xpiler_core.passes.support.macro_bodies import rewrite_bodies

INFO = PassInfo(
    name="warp_size",
    summary="Make CUDA's 32-lane warp semantics explicit so they hold on 64-wide AMD wavefronts",
    kind="cst",
    directions=("cuda->hip", "hip->cuda"),
    params=(
        ParamSpec("strategy", "str", "lanes32", "how 32-lane code is made correct at warp size 64",
                  choices=("lanes32", "native")),
        ParamSpec("cuda_warp", "int", 32, "the warp size the CUDA source was written for"),
    ),
)

BEGIN_MARK = "// xpiler(warp_size) begin"
END_MARK = "// xpiler(warp_size) end"

HELPERS = f"""
{BEGIN_MARK}: CUDA warps have 32 lanes, AMD wavefronts 64. These helpers keep CUDA's
// 32-lane semantics on either width: each 32-lane half of a wavefront acts as one CUDA warp.
#ifndef XPILER_WARP32_HELPERS
#define XPILER_WARP32_HELPERS
__device__ inline unsigned xpiler_lane_in_wave() {{
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % warpSize;
}}
__device__ inline unsigned xpiler_ballot32(int predicate) {{
    return (unsigned)(__ballot(predicate) >> (xpiler_lane_in_wave() & ~31u));
}}
__device__ inline unsigned xpiler_activemask32() {{ return xpiler_ballot32(1); }}
__device__ inline int xpiler_any32(int predicate) {{ return xpiler_ballot32(predicate) != 0u; }}
__device__ inline int xpiler_all32(int predicate) {{ return xpiler_ballot32(predicate) == xpiler_activemask32(); }}
template <class T> __device__ inline T xpiler_reduce_add32(T v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor(v, o, 32);
    return v;
}}
template <class T> __device__ inline T xpiler_reduce_min32(T v) {{
    for (int o = 16; o > 0; o >>= 1) {{ T w = __shfl_xor(v, o, 32); v = w < v ? w : v; }}
    return v;
}}
template <class T> __device__ inline T xpiler_reduce_max32(T v) {{
    for (int o = 16; o > 0; o >>= 1) {{ T w = __shfl_xor(v, o, 32); v = w > v ? w : v; }}
    return v;
}}
#if defined(__HIP__) && defined(HIP_VERSION_MAJOR) && HIP_VERSION_MAJOR < 6
// HIP before 6.0 has no __syncwarp; lanes of a wavefront run in lockstep, a wave barrier orders them.
__device__ inline void __syncwarp(unsigned long long = 0) {{ __builtin_amdgcn_wave_barrier(); }}
#endif
#endif
{END_MARK}
"""

_SHUFFLES_SYNC = {"__shfl_sync": 3, "__shfl_up_sync": 3, "__shfl_down_sync": 3, "__shfl_xor_sync": 3}
_SHUFFLES_LEGACY = {"__shfl": 2, "__shfl_up": 2, "__shfl_down": 2, "__shfl_xor": 2}
# call name -> (helper, number of leading mask arguments to drop)
_COLLECTIVES = {
    "__ballot_sync": ("xpiler_ballot32", 1),
    "__any_sync": ("xpiler_any32", 1),
    "__all_sync": ("xpiler_all32", 1),
    "__activemask": ("xpiler_activemask32", 0),
    "__ballot": ("xpiler_ballot32", 0),
    "__any": ("xpiler_any32", 0),
    "__all": ("xpiler_all32", 0),
    "__reduce_add_sync": ("xpiler_reduce_add32", 1),
    "__reduce_min_sync": ("xpiler_reduce_min32", 1),
    "__reduce_max_sync": ("xpiler_reduce_max32", 1),
}
_BACK_TO_CUDA = {
    "xpiler_ballot32": "__ballot_sync(0xffffffff, {args})",
    "xpiler_any32": "__any_sync(0xffffffff, {args})",
    "xpiler_all32": "__all_sync(0xffffffff, {args})",
    "xpiler_activemask32": "__activemask()",
    "xpiler_reduce_add32": "__reduce_add_sync(0xffffffff, {args})",
    "xpiler_reduce_min32": "__reduce_min_sync(0xffffffff, {args})",
    "xpiler_reduce_max32": "__reduce_max_sync(0xffffffff, {args})",
}
_NO_EQUIVALENT = {
    "__match_any_sync": "no HIP equivalent of __match_any_sync (lanes grouped by value)",
    "__match_all_sync": "no HIP equivalent of __match_all_sync",
    "__reduce_and_sync": "no HIP equivalent of __reduce_and_sync in the helpers",
    "__reduce_or_sync": "no HIP equivalent of __reduce_or_sync in the helpers",
    "__reduce_xor_sync": "no HIP equivalent of __reduce_xor_sync in the helpers",
}
# every call name this pass rewrites (a macro body that calls one is rewritten as a fragment)
_WARP_CALL_NAMES = frozenset({*_SHUFFLES_SYNC, *_SHUFFLES_LEGACY, *_COLLECTIVES, "__syncwarp", *_NO_EQUIVALENT})


# 32-lane assumptions worth reporting (they stay valid under lanes32, and they explain why it is needed).
_ASSUMPTIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b0x[fF]{8}\b(?![0-9a-fA-F])"), "32-lane full mask 0xffffffff"),
    (re.compile(r"&\s*31\b|&\s*0x1[fF]\b|%\s*32\b"), "lane index computed with & 31 / % 32"),
    (re.compile(r"/\s*32\b|>>\s*5\b"), "warp index computed with / 32 or >> 5"),
    (re.compile(r"#\s*define\s+\w*WARP\w*\s+32\b"), "warp size macro defined as 32"),
    (re.compile(r"blockDim\.x\s*/\s*32|\[\s*32\s*\]"), "shared array sized per 32-lane warp"),
    (re.compile(r"blockDim\.x\s*/\s*32"), "warp count computed as blockDim.x / 32"),
    (re.compile(r"=\s*16\s*;[^;]*;[^)]*(>>=\s*1|/=\s*2)"), "shuffle offsets starting at 16"),
    (re.compile(r"__popc\s*\(\s*__ballot"), "__popc of a 32-bit ballot"),
]


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    if module.dialect is Dialect.HIP and ctx.target is Dialect.CUDA:
        return _hip_to_cuda(module, ctx)
    strategy = str(params.get("strategy", "lanes32"))
    if strategy == "native":
        if not native_is_plausible(module.text):
            raise PassRefused("the code has literal 32-lane assumptions or ballots: only lanes32 keeps it right")
        text, widened = _widen_shared_32(module.text)
        ctx.notes.append("warp_size(native): warp code written with warpSize runs on the full 64-lane wavefront"
                         + (f"; {widened} shared array(s) of 32 widened to 64" if widened else ""))
        return SourceUnit(text, module.dialect, module.path) if widened else module
    if strategy != "lanes32":
        ctx.unresolved.append(Unresolved(f"warp_size strategy '{strategy}' is not implemented", Span.empty()))
        return module
    return _lanes32(module, ctx)


_VOTES = re.compile(r"\b(__ballot(_sync)?|__any(_sync)?|__all(_sync)?|__activemask|__reduce_\w+_sync|__match_\w+)\s*\(")
_SHUFFLE_CALL = re.compile(r"\b__shfl(_up|_down|_xor)?(_sync)?\s*\(")


def native_is_plausible(text: str) -> bool:
    """Warp code written against ``warpSize`` (not 32) with shuffles only: it may be right at the hardware
    width as it stands. Only a candidate: the verifier decides, and lanes32 is the fallback."""
    if "warpSize" not in text or not _SHUFFLE_CALL.search(text) or _VOTES.search(text):
        return False
    # a shared array of 32 (one slot per warp of a 1024-thread block, or per lane) is widened to 64 in the
    # native port, so it alone does not rule the full wavefront out
    return not any(pattern.search(text) for pattern, label in _ASSUMPTIONS
                   if label not in ("32-lane full mask 0xffffffff", "shared array sized per 32-lane warp"))


_SHARED_32 = re.compile(r"(__shared__[^;{}()]*?\[\s*)32(\s*\])")


def _widen_shared_32(text: str) -> tuple[str, int]:
    """Shared arrays of 32 entries made 64: enough for a slot per lane or per warp at the 64-lane width."""
    return _SHARED_32.subn(r"\g<1>64\g<2>", text)


def _helper_region(text: str) -> tuple[int, int] | None:
    return marked_region(text, BEGIN_MARK, END_MARK)


def _lanes32(module: SourceUnit, ctx: PassContext) -> SourceUnit:
    src = parse_text(module.text, module.path, module.dialect)
    region = _helper_region(module.text)
    region_bytes = (
        (len(module.text[: region[0]].encode()), len(module.text[: region[1]].encode())) if region else None
    )
    edits: list[Edit] = []
    counts: dict[str, int] = {}
    # a user macro or function named like an intrinsic (``#define __shfl(v, d) __shfl_sync(...)``) is the
    # user's: its calls are not intrinsic calls (its body is rewritten where the intrinsic appears)
    user_names = users_own_names(src, ctx)

    def count(what: str) -> None:
        counts[what] = counts.get(what, 0) + 1

    for node in walk(src.root, skip=frozenset({"comment", "string_literal", "char_literal"})):
        if region_bytes and region_bytes[0] <= node.start_byte < region_bytes[1]:
            continue
        if node.type == "identifier" and src.node_text(node) == "warpSize":
            parent = node.parent
            if parent is not None and parent.type == "field_expression":
                continue
            edits.append(Edit(node.start_byte, node.end_byte, "32"))
            count("warpSize → 32")
        elif node.type == "call_expression":
            func = node.child_by_field_name("function")
            if func is None or src.node_text(func) not in user_names:
                _rewrite_call(src, node, edits, ctx, count)

    def as_fragment(text: str) -> str:
        inner = PassContext(ctx.source_dialect, ctx.target, ctx.warp_size, ctx.file, project_names=ctx.project_names,
                            defines=ctx.defines)
        out = _lanes32(SourceUnit(text, module.dialect, module.path), inner).text
        ctx.unresolved.extend(inner.unresolved)
        return out

    # macros that wrap warp intrinsics are rewritten once, in their bodies (their call sites are the user's)
    wraps = _WARP_CALL_NAMES - user_names
    fragment_edits = rewrite_bodies(src, as_fragment, lambda body: any(re.search(rf"\b{re.escape(n)}\s*\(", body)
                                                                          for n in wraps))
    edits.extend(fragment_edits)
    if any("xpiler_" in e.text for e in fragment_edits):
        counts["helpers for macro bodies"] = len(fragment_edits)

    needs_helpers = any(k.startswith("helper") or k == "__syncwarp" for k in counts)
    if needs_helpers and region is None:
        edits.append(Edit(top_insertion_point(src), top_insertion_point(src), _helper_block(src)))
    data, _ = apply_edits(src.data, edits)
    found = _report_assumptions(module, ctx)
    if counts or found:
        ctx.notes.append(
            "warp_size(lanes32): "
            + ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items()))
            + (("; 32-lane assumptions kept consistent: " + ", ".join(found)) if found else "")
        )
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)


def _helper_block(src: ParsedSource) -> str:
    offset = top_insertion_point(src)
    needs_newline = offset > 0 and not src.data[:offset].endswith(b"\n")
    return ("\n" if needs_newline else "") + HELPERS.lstrip("\n")


def _rewrite_call(src: ParsedSource, call: Node, edits: list[Edit], ctx: PassContext, count: Any) -> None:
    func = call.child_by_field_name("function")
    if func is None or func.type != "identifier":
        return
    name = src.node_text(func)
    args = call_arguments(call)
    arg_list = call.child_by_field_name("arguments")
    if arg_list is None:
        return
    if name in _SHUFFLES_SYNC or name in _SHUFFLES_LEGACY:
        base = _SHUFFLES_SYNC.get(name) or _SHUFFLES_LEGACY[name]
        if len(args) == base:
            edits.append(Edit(args[-1].end_byte, args[-1].end_byte, ", 32"))
            count("shuffle width 32 added")
        elif len(args) == base + 1:
            width = src.node_text(args[-1]).strip()
            if width.isdigit() and int(width) > 32:
                ctx.unresolved.append(Unresolved(f"{name} with width {width} > CUDA's 32 lanes", Span.of(call), name))
        else:
            ctx.unresolved.append(Unresolved(f"{name} with {len(args)} arguments", Span.of(call), name))
    elif name in _COLLECTIVES:
        helper, drop = _COLLECTIVES[name]
        if len(args) < drop:
            return
        kept = src.data[args[drop].start_byte : args[-1].end_byte].decode() if len(args) > drop else ""
        edits.append(Edit(call.start_byte, call.end_byte, f"{helper}({kept})"))
        count(f"helper {helper}")
    elif name == "__syncwarp":
        count("__syncwarp")
    elif name in _NO_EQUIVALENT:
        ctx.unresolved.append(Unresolved(_NO_EQUIVALENT[name], Span.of(call), name))


def _report_assumptions(module: SourceUnit, ctx: PassContext) -> list[str]:
    found: list[str] = []
    text = module.text
    region = _helper_region(text)
    if region:
        text = text[: region[0]] + " " * (region[1] - region[0]) + text[region[1] :]
    for pattern, label in _ASSUMPTIONS:
        match = pattern.search(text)
        if match is None:
            continue
        found.append(label)
        line = text.count("\n", 0, match.start())
        col = match.start() - (text.rfind("\n", 0, match.start()) + 1)
        ctx.diagnostics.append(
            Diagnostic(Severity.INFO, "warp_size.assumption", f"32-lane assumption: {label}",
                       Span(match.start(), match.end(), line, col, line, col + len(match.group(0))), module.path)
        )
    return found


# ---- HIP -> CUDA -------------------------------------------------------------------------------------

# Loops whose shuffle offsets start at 32 only make sense with 64 lanes. (Index arithmetic such as `& 63`
# is not reported: it is as common in plain data indexing as in lane computations.)
_WAVE64_HAZARDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"=\s*32\s*;[^;]*;[^)]*(>>=\s*1|/=\s*2)\)[^;]*__shfl"), "shuffle offsets starting at 32"),
]


def _hip_to_cuda(module: SourceUnit, ctx: PassContext) -> SourceUnit:
    text = remove_marked_region(module.text, BEGIN_MARK, END_MARK)
    helpers_removed = text != module.text
    src = parse_text(text, module.path, module.dialect)
    edits: list[Edit] = []
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type != "call_expression":
            continue
        func = node.child_by_field_name("function")
        if func is None or func.type != "identifier":
            continue
        if src.node_text(func) in _SHUFFLES_LEGACY:
            _check_wave64_shuffle(src, node, ctx)
        template = _BACK_TO_CUDA.get(src.node_text(func))
        if template is None:
            continue
        args = call_arguments(node)
        inner = src.data[args[0].start_byte : args[-1].end_byte].decode() if args else ""
        edits.append(Edit(node.start_byte, node.end_byte, template.format(args=inner)))
    data, _ = apply_edits(src.data, edits)
    out = data.decode("utf-8")
    for pattern, label in _WAVE64_HAZARDS:
        for match in pattern.finditer(out):
            line = out.count("\n", 0, match.start())
            col = match.start() - (out.rfind("\n", 0, match.start()) + 1)
            ctx.unresolved.append(
                Unresolved(f"HIP code assumes 64-lane wavefronts ({label}); CUDA warps have 32 lanes",
                           Span(match.start(), match.end(), line, col, line, col), label)
            )
    if edits or helpers_removed:
        ctx.notes.append(f"warp_size(hip->cuda): helper block removed, {len(edits)} helper call(s) restored")
    return SourceUnit(out, module.dialect, module.path)


def _check_wave64_shuffle(src: ParsedSource, call: Node, ctx: PassContext) -> None:
    """HIP ``__shfl*(v, x[, width])``: an offset/lane of 32+ or a width above 32 needs 64 lanes."""
    args = call_arguments(call)
    name = src.node_text(call.child_by_field_name("function"))  # type: ignore[arg-type]
    offset = src.node_text(args[1]).strip() if len(args) > 1 else ""
    width = src.node_text(args[2]).strip() if len(args) > 2 else ""
    if name != "__shfl" and offset.isdigit() and int(offset) >= 32:
        reason = f"shuffle offset {offset}"
    elif width.isdigit() and int(width) > 32:
        reason = f"shuffle width {width}"
    elif len(args) == 2 and name != "__shfl":
        # default width is the wavefront (64 on CDNA): only a problem if offsets reach 32, checked above
        return
    else:
        return
    ctx.unresolved.append(
        Unresolved(f"HIP code assumes 64-lane wavefronts ({reason}); CUDA warps have 32 lanes", Span.of(call), name)
    )
