"""Cooperative groups for HIP: same namespace and API, minus what HIP 5.x lacks (``cg::reduce``).

HIP ships ``cooperative_groups`` (``hip/hip_cooperative_groups.h``, mapped by the tables) with thread
blocks, tiled partitions (tiles up to the wavefront size, so CUDA's ``tiled_partition<32>`` keeps its
32-lane meaning on a 64-lane wavefront) and tile shuffles. ``<cooperative_groups/reduce.h>`` does not exist
there: ``cg::reduce(tile, v, op)`` becomes a butterfly over the tile with ``tile.shfl_xor`` — every lane
gets the result, as with ``cg::reduce`` — and ``cg::plus/less/greater`` become small functors. ``tile.meta_group_rank()``/``meta_group_size()`` (not in HIP 5.x) are computed
from the parent thread block for tiles cut directly from one. A group's shuffle takes any trivially copyable value
in CUDA, integers and floats only in HIP 5.x: ``tile.shfl_xor(v, m)`` becomes ``xpiler_cg_shfl(tile, v, m, 3)``,
which moves other values 32 bits at a time. CUDA 11's ``block_tile_memory`` scratch for tiles wider than a warp is
dropped (HIP's tiles reach the wavefront without it). Grid-wide
``this_grid().sync()`` needs a cooperative launch (``hipLaunchCooperativeKernel``): reported for review.
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.frontend.source import parse_text
from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit, Unresolved
from xpiler_core.passes.support.cst import Edit, apply_edits, top_insertion_point, walk

INFO = PassInfo(
    name="cooperative_groups",
    summary="Cooperative groups on HIP: cg::reduce and its functors rewritten, grid sync flagged",
    kind="cst",
    directions=("cuda->hip",),
)

REDUCE_HELPERS = """// xpiler(cooperative_groups): cg::reduce for HIP — a butterfly over the tile, every lane gets the result.
template <class Tile, class T, class Op>
__device__ inline T xpiler_cg_reduce(const Tile& tile, T value, Op op) {
    for (int offset = static_cast<int>(tile.size()) / 2; offset > 0; offset /= 2)
        value = op(value, tile.shfl_xor(value, offset));
    return value;
}
template <class T> struct xpiler_cg_plus { __device__ T operator()(T a, T b) const { return a + b; } };
template <class T> struct xpiler_cg_less { __device__ T operator()(T a, T b) const { return b < a ? b : a; } };
template <class T> struct xpiler_cg_greater { __device__ T operator()(T a, T b) const { return a < b ? b : a; } };
"""

_REPLACE = {"reduce": "xpiler_cg_reduce", "plus": "xpiler_cg_plus", "less": "xpiler_cg_less",
            "greater": "xpiler_cg_greater"}

SHUFFLE_HELPERS = """// xpiler(cooperative_groups): a group shuffle of any trivially copyable value, as CUDA's groups allow (HIP 5.x's
// take integers and floats only): other values move 32 bits at a time.
template <class Group, class T>
__device__ inline typename std::enable_if<std::is_arithmetic<T>::value, T>::type
xpiler_cg_shfl(const Group& group, T value, unsigned int arg, int kind) {
    return kind == 0 ? group.shfl(value, arg) : kind == 1 ? group.shfl_up(value, arg)
         : kind == 2 ? group.shfl_down(value, arg) : group.shfl_xor(value, arg);
}
template <class Group, class T>
__device__ inline typename std::enable_if<!std::is_arithmetic<T>::value, T>::type
xpiler_cg_shfl(const Group& group, T value, unsigned int arg, int kind) {
    int words[(sizeof(T) + sizeof(int) - 1) / sizeof(int)] = {};
    __builtin_memcpy(words, &value, sizeof(T));
    for (unsigned int i = 0; i < sizeof(words) / sizeof(int); ++i) words[i] = xpiler_cg_shfl(group, words[i], arg, kind);
    __builtin_memcpy(&value, words, sizeof(T));
    return value;
}
"""
_SHUFFLES = {"shfl": 0, "shfl_up": 1, "shfl_down": 2, "shfl_xor": 3}
# CUDA 11's scratch for tiles wider than a warp (`__shared__ cg::block_tile_memory<256> scratch;` handed to
# `this_thread_block(scratch)`): HIP 5.x has neither; its tiles reach the 64-lane wavefront without scratch
_TILE_MEMORY = re.compile(r"^[ \t]*(?:__shared__[ \t]+)?(?:\w+[ \t]*::[ \t]*)?block_tile_memory[ \t]*<[^;>]*>[ \t]+(\w+)[ \t]*;",
                          re.MULTILINE)
# names of group handles: made by a partition call, or declared (a parameter too) with a tile or coalesced type
_GROUP_MADE = re.compile(r"\b(\w+)\s*=\s*(?:\w+\s*::\s*)?(?:tiled_partition|coalesced_threads|labeled_partition|"
                         r"binary_partition)\b")
_GROUP_DECLARED = re.compile(r"\b(?:thread_block_tile\s*<[^<>]*>|coalesced_group)\s*(?:const\s*)?&?\s*(\w+)")


def _group_names(text: str) -> set[str]:
    return {m.group(1) for m in _GROUP_MADE.finditer(text)} | {m.group(1) for m in _GROUP_DECLARED.finditer(text)}


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    if "cooperative_groups" not in module.text:
        return module
    text, scratch = _without_tile_memory(module.text)
    if scratch:
        ctx.notes.append(f"cooperative_groups: block_tile_memory scratch ({', '.join(sorted(scratch))}) dropped (HIP's "
                         "tiles reach the wavefront without it)")
        module = SourceUnit(text, module.dialect, module.path)
    src = parse_text(module.text, module.path, module.dialect)
    aliases = set(re.findall(r"namespace\s+(\w+)\s*=\s*cooperative_groups\s*;", module.text)) | {"cooperative_groups"}
    edits: list[Edit] = []
    rewrites = 0
    meta_rewrites = 0
    shuffles = 0
    groups = _group_names(module.text)
    reduce_include = None
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type == "preproc_include":
            path = node.child_by_field_name("path")
            if path is not None and src.node_text(path).strip('<>"') == "cooperative_groups/reduce.h":
                reduce_include = node
        elif node.type == "call_expression" and (shuffle := _group_shuffle(src, node, groups)) is not None:
            edits.append(Edit(node.start_byte, node.end_byte, shuffle))
            shuffles += 1
        elif node.type == "call_expression":
            rewrite = _meta_group(src, node, module.text)
            if rewrite is not None:
                if rewrite.startswith("unresolved:"):
                    ctx.unresolved.append(Unresolved(rewrite[len("unresolved:"):], Span.of(node), "meta_group"))
                else:
                    edits.append(Edit(node.start_byte, node.end_byte, rewrite))
                    meta_rewrites += 1
        elif node.type == "qualified_identifier":
            scope = node.child_by_field_name("scope")
            name = node.child_by_field_name("name")
            if scope is None or name is None or src.node_text(scope) not in aliases:
                continue
            base = name.child_by_field_name("name") if name.type in ("template_type", "template_function") else name
            base_text = src.node_text(base) if base is not None else ""
            if base is not None and base_text in _REPLACE and name.type in ("identifier", "template_type", "template_function"):
                edits.append(Edit(node.start_byte, base.end_byte, _REPLACE[base_text]))
                rewrites += 1
            elif base_text == "this_grid" and "LaunchCooperativeKernel" not in module.text:
                ctx.diagnostics.append(Diagnostic(
                    Severity.WARNING, "cooperative_groups.grid",
                    "grid-wide groups need a cooperative launch on HIP (hipLaunchCooperativeKernel)",
                    Span.of(node), module.path))
    if rewrites:
        if reduce_include is not None:
            edits.append(Edit(reduce_include.start_byte, reduce_include.end_byte, REDUCE_HELPERS))
        else:
            at = top_insertion_point(src)
            edits.append(Edit(at, at, ("\n" if at and not src.data[:at].endswith(b"\n") else "") + REDUCE_HELPERS))
        ctx.notes.append(f"cooperative_groups: {rewrites} cg::reduce/functor use(s) rewritten for HIP")
    elif reduce_include is not None:
        edits.append(Edit(reduce_include.start_byte, reduce_include.end_byte, ""))
    if shuffles:
        at = top_insertion_point(src)
        edits.append(Edit(at, at, ("\n" if at and not src.data[:at].endswith(b"\n") else "") + SHUFFLE_HELPERS))
        ctx.notes.append(f"cooperative_groups: {shuffles} group shuffle(s) through xpiler_cg_shfl (any value type)")
    if meta_rewrites:
        ctx.notes.append(f"cooperative_groups: {meta_rewrites} meta_group_rank/size call(s) computed from the block")
    data, _ = apply_edits(src.data, edits)
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)


def _without_tile_memory(text: str) -> tuple[str, set[str]]:
    """The text without block_tile_memory declarations, and ``this_thread_block(scratch)`` as
    ``this_thread_block()`` for each such scratch (line breaks kept)."""
    names = set(_TILE_MEMORY.findall(text))
    if not names:
        return text, names
    text = _TILE_MEMORY.sub(lambda m: " " * len(m.group(0).split("\n")[0]), text)
    for name in names:
        text = re.sub(rf"\bthis_thread_block\s*\(\s*{re.escape(name)}\s*\)", "this_thread_block()", text)
    return text, names


def _group_shuffle(src: Any, call: Any, groups: set[str]) -> str | None:
    """``tile.shfl_xor(v, m)`` on a group handle → ``xpiler_cg_shfl(tile, v, m, 3)`` (its arguments as written)."""
    func = call.child_by_field_name("function")
    if func is None or func.type != "field_expression":
        return None
    field, handle = func.child_by_field_name("field"), func.child_by_field_name("argument")
    arguments = call.child_by_field_name("arguments")
    if field is None or handle is None or arguments is None or handle.type != "identifier":
        return None
    method = src.node_text(field)
    args = [a for a in arguments.named_children if a.type != "comment"]
    if method not in _SHUFFLES or src.node_text(handle) not in groups or len(args) != 2:
        return None
    value, arg = (src.node_text(a) for a in args)
    return f"xpiler_cg_shfl({src.node_text(handle)}, {value}, {arg}, {_SHUFFLES[method]})"


def _meta_group(src: Any, call: Any, text: str) -> str | None:
    """``tile.meta_group_rank()`` / ``meta_group_size()`` (not in HIP 5.x) for tiles cut from a thread block.

    The tile's index in its parent is the parent rank divided by the tile size; the count is the parent size
    over the tile size, rounded up. Only tiles partitioned directly from a thread block are rewritten.
    """
    func = call.child_by_field_name("function")
    if func is None or func.type != "field_expression":
        return None
    field = func.child_by_field_name("field")
    tile_node = func.child_by_field_name("argument")
    method = src.node_text(field) if field is not None else ""
    if method not in ("meta_group_rank", "meta_group_size") or tile_node is None or tile_node.type != "identifier":
        return None
    tile = src.node_text(tile_node)
    made = re.search(rf"\b{re.escape(tile)}\s*=\s*(?:\w+\s*::\s*)?tiled_partition\s*(?:<[^>]*>)?\s*\(\s*(\w+)\s*\)",
                     text)
    if made is None:
        return f"unresolved:{method}() on '{tile}': HIP 5.x has no meta groups and the tile's parent is not visible"
    parent = made.group(1)
    is_block = re.search(rf"\bthread_block\s+{re.escape(parent)}\b|\b{re.escape(parent)}\s*=\s*(?:\w+\s*::\s*)?"
                         r"this_thread_block\s*\(", text)
    if is_block is None:
        return f"unresolved:{method}() on '{tile}': its parent '{parent}' is not a thread block"
    if method == "meta_group_rank":
        return f"(static_cast<unsigned>({parent}.thread_rank()) / {tile}.size())"
    return f"((static_cast<unsigned>({parent}.size()) + {tile}.size() - 1) / {tile}.size())"
