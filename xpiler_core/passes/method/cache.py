"""Cache: stage the part of an array a loop reads into a local buffer, then read the buffer.

For ``for (i = a; i < b; ++i)`` with a constant trip count ``T <= max_elems`` that only reads ``x`` at
indices ``e + i`` (``e`` loop-invariant), emits ``T' xp_cache_x[T]`` filled by a copy loop before the
loop and replaces the reads with ``xp_cache_x[i - a]``. On GPUs the same transform targets shared
memory; on CPUs it makes a strided or aliasing-prone operand contiguous and local. Parameters: ``array``,
``loop``, ``max_elems``, ``function``. Refuses when the array is written in the loop, indices do not
have that form, the trip count is not constant, or ``e`` changes inside the loop.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    enter,
    int_param,
    leave,
    names_in,
    offset_from,
    scalar_writes,
    target_function,
)

INFO = PassInfo(
    name="cache",
    summary="Stage an array's tile read by a loop into a local buffer",
    kind="ast",
    directions=("cuda->cpu", "c->cuda"),
    params=(
        ParamSpec("array", "str", "", "array to stage (required)"),
        ParamSpec("loop", "str", "", "loop variable of the loop reading it (default: first that reads it)"),
        ParamSpec("max_elems", "int", 4096, "largest buffer to create", (256, 1024, 4096, 16384)),
        ParamSpec("function", "str", "", "function holding the loop"),
    ),
)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    array = str(params.get("array") or "")
    if not array:
        raise PassRefused("cache needs array=NAME")
    wanted = str(params.get("loop") or "")
    limit = int_param(params, "max_elems", 4096, 1, 1 << 20)
    types = A.declared_types(fn)
    if array not in types or not (types[array].pointers or array in {d.name for d in A.walk(fn) if isinstance(d, A.VarDecl) and d.dims}):
        raise PassRefused(f"'{array}' is not a pointer or array of '{fn.name}'")
    state: dict[str, Any] = {"done": False, "reason": None}

    from xpiler_core.passes.support.ast_support import map_loops

    def stage(loop: A.For) -> Any:
        view = loop.canonical()
        if state["done"] or view is None or (wanted and view.var != wanted):
            return None
        accesses = [a for a in A.array_accesses(loop.body) if a.base == array]
        if not accesses:
            return None
        if any(a.write for a in accesses) or array in A.read_write(loop.body).mem_writes:
            state["reason"] = f"'{array}' is written inside the loop"
            return None
        refs = sum(1 for n in A.walk(loop.body) if isinstance(n, A.Name) and n.id == array)
        if refs != len({id(a.node) for a in accesses}) or any(len(a.indices) != 1 for a in accesses):
            state["reason"] = f"'{array}' is used other than as {array}[e + {view.var}]"
            return None
        offsets = {offset_from(a.indices[0], view.var) for a in accesses}
        if None in offsets or len(offsets) != 1:
            state["reason"] = f"'{array}' is read at indices not of the form e + {view.var} with one e"
            return None
        offset = next(iter(offsets))
        assert offset is not None
        if names_in(offset) & scalar_writes(loop.body):
            state["reason"] = "the offset changes inside the loop"
            return None
        trip = view.trip_count()
        if trip is None or A.const_int(view.step) != 1 or not 0 < trip <= limit:
            state["reason"] = f"the loop needs a constant unit-stride trip count <= {limit}"
            return None
        state["done"] = True
        buf = f"xp_cache_{array}"
        k = A.fresh_name(fn, "xp_c")
        etype = A.replace(types[array], quals=(), pointers=types[array].pointers[:-1])
        fill = A.for_range(k, A.lit(0), A.lit(trip), A.ExprStmt(A.assign(
            A.Index(A.Name(buf), A.Name(k)),
            A.Index(A.Name(array), A.binop("+", offset, A.binop("+", view.start, A.Name(k)))))))
        local = A.binop("-", A.Name(view.var), view.start)
        body = A.rewrite(loop.body, lambda n: A.Index(A.Name(buf), local)
                         if isinstance(n, A.Index) and n.base == A.Name(array) else None)
        return A.Block((A.DeclStmt((A.VarDecl(buf, etype, (A.lit(trip),)),)), fill, A.replace(loop, body=body)))

    new_fn = map_loops(fn, stage)
    if not state["done"]:
        raise PassRefused(state["reason"] or f"no loop reads '{array}'")
    ctx.notes.append(f"cache: staged {array} into xp_cache_{array} in {fn.name}")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
