"""Cooperative groups → plain CUDA builtins, so loop recovery can treat them like hand-written code.

``this_thread_block()`` handles become the block (``thread_rank`` = linear thread index, ``size``,
``sync`` = ``__syncthreads``, ``thread_index``/``group_index``/``group_dim`` = ``threadIdx``/``blockIdx``/``blockDim``); ``tiled_partition<S>`` tiles become S-lane segments of the warp
(``thread_rank`` = lane within the tile, ``meta_group_rank``/``meta_group_size``, ``shfl*`` with width S,
``sync`` = ``__syncwarp``); ``cg::reduce(tile, v, cg::plus<T>()|greater|less)`` becomes a device function
doing an S-wide xor butterfly. Anything else on a group handle is refused.
"""

from __future__ import annotations

import re

from xpiler_core import ast as A
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes.base import PassRefused
from xpiler_core.passes.support.ast_support import named_spellings
from xpiler_core.passes.support.bang_thread import module_int_constants

_BLOCK_TYPE = re.compile(r"^(?:cg|cooperative_groups)::thread_block$")
_TILE = re.compile(r"^\s*(?:cg::|cooperative_groups::)?thread_block_tile\s*<\s*(\w+)\s*>\s+(\w+)\s*=\s*"
                   r"(?:cg::|cooperative_groups::)?tiled_partition\s*<\s*\w+\s*>\s*\(\s*\w+\s*\)\s*;?\s*$")
_TILE_TYPE = re.compile(r"^(?:cg::|cooperative_groups::)?thread_block_tile\s*<\s*(\w+)\s*>$")
_TILE_CALL = re.compile(r"^(?:cg::|cooperative_groups::)?tiled_partition\s*<\s*(\w+)\s*>$")
_BLOCK_CALL = re.compile(r"^(?:cg::|cooperative_groups::)?this_thread_block$")
_AUTO = re.compile(r"^(?:const\s+)?auto\s*&?$")
_REDUCE = re.compile(r"^(?:cg|cooperative_groups)::(plus|greater|less)\s*<\s*([\w ]+?)\s*>$")
# What is left of cooperative groups after the lowering above: a qualified name, or (under `using namespace
# cooperative_groups`) one of the API's own names. Left in place, a thread loop would run `grid.sync()` once per
# thread, or the output would name a type the CPU prelude lacks: refused, so the exact portable tier runs it.
_CG_QUALIFIED = re.compile(r"\b(?:cg|cooperative_groups)::(\w+)")
_CG_API = frozenset({
    "this_grid", "this_multi_grid", "grid_group", "multi_grid_group", "coalesced_threads", "coalesced_group",
    "thread_group", "this_cluster", "cluster_group", "labeled_partition", "binary_partition", "tiled_partition",
    "thread_block", "thread_block_tile", "this_thread_block", "memcpy_async", "wait_prior", "invoke_one",
    "inclusive_scan", "exclusive_scan",
})


def _bx(field: str) -> A.Expr:
    return A.member(A.Name("blockDim"), field)


def _linear() -> A.Expr:
    tid = A.member(A.Name("threadIdx"), "x")
    return A.binop("+", tid, A.binop("*", _bx("x"), A.binop("+", A.member(A.Name("threadIdx"), "y"),
                                                          A.binop("*", _bx("y"), A.member(A.Name("threadIdx"), "z")))))


def _size() -> A.Expr:
    return A.binop("*", A.binop("*", _bx("x"), _bx("y")), _bx("z"))


def uses_cooperative_groups(module: A.Module) -> bool:
    return any(isinstance(n, A.Opaque) and "cooperative_groups" in n.text for n in module.items) or any(
        isinstance(n, A.Name) and n.id.startswith(("cg::", "cooperative_groups::")) for n in A.walk(module))


def lower_cooperative_groups(module: A.Module) -> A.Module:
    blocks: set[str] = set()
    tiles: dict[str, int] = {}
    helpers: dict[str, A.Function] = {}
    constants = module_int_constants(module)  # a tile's size may be a macro (`tiled_partition<ROWS_PER_CTA>`)

    def drop_handles(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Block):
            kept: list[A.Stmt] = []
            for s in n.stmts:
                init = s.decls[0].init if isinstance(s, A.DeclStmt) and len(s.decls) == 1 else None
                if isinstance(s, A.DeclStmt) and len(s.decls) == 1 and (
                        _BLOCK_TYPE.match(s.decls[0].type.base) or (
                        _AUTO.match(s.decls[0].type.base.strip()) and isinstance(init, A.Call)
                        and _BLOCK_CALL.match(init.callee or "") and not init.args)):
                    blocks.add(s.decls[0].name)  # `cg::thread_block b = ...` or `auto b = cg::this_thread_block()`
                    continue
                text = s.expr.text if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Opaque) else (
                    s.text if isinstance(s, A.Opaque) else None)
                m = _TILE.match(text) if text else None
                found = (m.group(1), m.group(2)) if m else None
                if isinstance(s, A.DeclStmt) and len(s.decls) == 1 and (t := _TILE_TYPE.match(s.decls[0].type.base)) \
                        and isinstance(s.decls[0].init, A.Call) and _TILE_CALL.match(s.decls[0].init.callee or ""):
                    found = (t.group(1), s.decls[0].name)  # parsed as a declaration: `thread_block_tile<R> t = ...`
                if isinstance(s, A.DeclStmt) and len(s.decls) == 1 and _AUTO.match(s.decls[0].type.base.strip()) \
                        and isinstance(init, A.Call) and (c := _TILE_CALL.match(init.callee or "")):
                    found = (c.group(1), s.decls[0].name)  # `auto tile = cg::tiled_partition<32>(block)`
                if found:
                    size = int(found[0]) if found[0].isdigit() else constants.get(found[0])
                    if size is None:
                        raise PassRefused(f"cooperative groups: the tile size {found[0]} is not a constant", s.span)
                    tiles[found[1]] = size
                    continue
                kept.append(A.rewrite(s, drop_handles))  # tiles declared in nested blocks (under an if) too
            return A.replace(n, stmts=tuple(kept))
        return None

    module = A.rewrite(module, drop_handles)

    def method(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Call) and isinstance(n.func, A.Member) and isinstance(n.func.base, A.Name):
            handle, name = n.func.base.id, n.func.field
            args = tuple(A.rewrite(a, method) for a in n.args)
            if handle in blocks:
                table = {"thread_rank": _linear(), "size": _size(), "num_threads": _size(),
                         "sync": A.call("__syncthreads"), "thread_index": A.Name("threadIdx"),
                         "group_index": A.Name("blockIdx"), "group_dim": A.Name("blockDim"),
                         "dim_threads": A.Name("blockDim")}
                if name in table and not args:
                    return table[name]
                raise PassRefused(f"cooperative groups: thread_block::{name} is not supported", n.span)
            if handle in tiles:
                s = A.lit(tiles[handle])
                lane = A.binop("%", _linear(), s)
                full = A.Literal("0xffffffffu")
                simple = {"thread_rank": lane, "meta_group_rank": A.binop("/", _linear(), s),
                          "meta_group_size": A.binop("/", A.binop("+", _size(), A.lit(tiles[handle] - 1)), s),
                          "size": s, "num_threads": s, "sync": A.call("__syncwarp")}
                if name in simple and not args:
                    return simple[name]
                shfl = {"shfl": "__shfl_sync", "shfl_down": "__shfl_down_sync", "shfl_up": "__shfl_up_sync",
                        "shfl_xor": "__shfl_xor_sync"}
                if name in shfl and len(args) == 2:
                    return A.call(shfl[name], full, args[0], args[1], s)
                raise PassRefused(f"cooperative groups: thread_block_tile::{name} is not supported", n.span)
        if (isinstance(n, A.Call) and n.callee in ("cg::sync", "cooperative_groups::sync") and len(n.args) == 1
                and isinstance(n.args[0], A.Name) and (n.args[0].id in blocks or n.args[0].id in tiles)):
            # the free function: cg::sync(g) is g.sync()
            return A.call("__syncthreads") if n.args[0].id in blocks else A.call("__syncwarp")
        if isinstance(n, A.Call) and n.callee in ("cg::reduce", "cooperative_groups::reduce"):
            if len(n.args) != 3 or not isinstance(n.args[0], A.Name) or n.args[0].id not in tiles:
                raise PassRefused("cg::reduce over something other than a tiled_partition tile", n.span)
            op = n.args[2]
            m = _REDUCE.match(op.callee or "") if isinstance(op, A.Call) else None
            if m is None:
                raise PassRefused("cg::reduce with an operator other than plus/greater/less", n.span)
            size, kind, ctype = tiles[n.args[0].id], m.group(1), m.group(2)
            suffix = re.sub(r"\W", "_", ctype)
            fname = f"xp_cg_reduce_{kind}_{size}_{suffix}"
            if fname not in helpers:
                combine = {"plus": "v + o", "greater": "(o > v ? o : v)", "less": "(o < v ? o : v)"}[kind]
                src = (f"__device__ {ctype} {fname}({ctype} v) {{\n  for (int m = {size // 2}; m > 0; m >>= 1) {{\n"
                       f"    {ctype} o = __shfl_xor_sync(0xffffffffu, v, m, {size});\n    v = {combine};\n  }}\n"
                       f"  return v;\n}}\n")
                helpers[fname] = lower_text(src, "<cg>.cu").functions()[0]
            return A.call(fname, A.rewrite(n.args[1], method))
        if isinstance(n, A.Name) and (n.id in blocks or n.id in tiles):
            raise PassRefused(f"cooperative groups handle '{n.id}' used in an unsupported way", n.span)
        return None

    module = A.rewrite(module, method)
    _refuse_leftovers(module)
    items: list[A.TopItem] = []
    for item in module.items:
        if isinstance(item, A.Opaque) and "cooperative_groups" in item.text:
            continue
        if isinstance(item, A.Include) and item.path.startswith("cooperative_groups"):
            continue
        if isinstance(item, A.Function) and helpers:
            items.extend(helpers.values())
            helpers = {}
        items.append(item)
    return A.replace(module, items=tuple(items))


def _refuse_leftovers(module: A.Module) -> None:
    """Refuse a kernel or device function that still names cooperative groups after the lowering."""
    for fn, node, text in named_spellings(module):
        for word in re.findall(r"[\w:]+", text):
            m = _CG_QUALIFIED.match(word)
            name = m.group(1) if m else word if word in _CG_API else None
            if name is None:
                continue
            what = ("grid-wide synchronization" if name in ("this_grid", "grid_group", "this_multi_grid",
                                                            "multi_grid_group") else f"cooperative_groups::{name}")
            raise PassRefused(f"cooperative groups: {what} is not lowered to loops over threads (in '{fn.name}')",
                              node.span)
