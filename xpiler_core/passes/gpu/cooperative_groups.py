"""Cooperative groups for HIP: same namespace and API, minus what HIP 5.x lacks (``cg::reduce``).

HIP ships ``cooperative_groups`` (``hip/hip_cooperative_groups.h``, mapped by the tables) with thread
blocks, tiled partitions (tiles up to the wavefront size, so CUDA's ``tiled_partition<32>`` keeps its
32-lane meaning on a 64-lane wavefront) and tile shuffles. ``<cooperative_groups/reduce.h>`` does not exist
there: ``cg::reduce(tile, v, op)`` becomes a butterfly over the tile with ``tile.shfl_xor`` — every lane
gets the result, as with ``cg::reduce`` — and ``cg::plus/less/greater`` become small functors. ``tile.meta_group_rank()``/``meta_group_size()`` (not in HIP 5.x) are computed
from the parent thread block for tiles cut directly from one. Grid-wide
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


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    if "cooperative_groups" not in module.text:
        return module
    src = parse_text(module.text, module.path, module.dialect)
    aliases = set(re.findall(r"namespace\s+(\w+)\s*=\s*cooperative_groups\s*;", module.text)) | {"cooperative_groups"}
    edits: list[Edit] = []
    rewrites = 0
    meta_rewrites = 0
    reduce_include = None
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type == "preproc_include":
            path = node.child_by_field_name("path")
            if path is not None and src.node_text(path).strip('<>"') == "cooperative_groups/reduce.h":
                reduce_include = node
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
    if meta_rewrites:
        ctx.notes.append(f"cooperative_groups: {meta_rewrites} meta_group_rank/size call(s) computed from the block")
    data, _ = apply_edits(src.data, edits)
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)


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
