"""Block constants: a kernel whose block shape is known runs a copy of its body with the block extents as
constants.

The recovered kernel reads its block extents at run time (``const int xp_bdx = (int)xp_block.x``), so the thread
loops have run-time trip counts and the per-thread arrays that thread-interchanged code keeps
(``float acc[xp_bdx][1]``) are variable-length: g++ cannot keep a warp's 32 partial sums in registers, unroll
a 4-thread loop or size a vector loop's tail. When the block shape is known (the module's one constant launch
of the kernel, or ``__launch_bounds__(B)`` of device code alone, launched ``B`` wide by the generators that
write it), the body after the extents' declarations runs as a copy with ``xp_bdx``, ``xp_bdy``, ``xp_bdz`` and
``xp_nt`` replaced by those constants, behind the run-time test that the launch has exactly that block; any
other block runs the original body. Kernels larger than ``max_nodes`` are left alone (the copy doubles
their compile time), and so are those ``cpu_gemm`` handed to the packed GEMM (their thread loops are the
fallback). Refuses when no kernel has a known block shape.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo
from xpiler_core.passes.support.ast_support import enter, int_param, leave
from xpiler_core.passes.support.cpu_prelude import GEMM_ENTRY
from xpiler_core.passes.support.launch_points import launch_of
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each

INFO = PassInfo(
    name="block_constants",
    summary="Kernels with a known block shape run a copy of their body with the block extents as constants",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("max_nodes", "int", 4000, "largest kernel body (AST nodes) that gets the constant copy",
                  (1000, 4000, 16000)),
    ),
)

_EXTENTS = ("xp_bdx", "xp_bdy", "xp_bdz")


def _block_shape(module: A.Module, fn: A.Function) -> tuple[int, int, int] | None:
    launch = launch_of(module, fn.name)
    if launch is not None:
        return launch[1]
    if fn.launch_bounds:
        threads = A.const_int(fn.launch_bounds[0])
        if threads is not None and threads > 0:
            return threads, 1, 1
    return None


def _declares_extents(s: A.Stmt) -> bool:
    return isinstance(s, A.DeclStmt) and {d.name for d in s.decls} >= set(_EXTENTS)


def _specialized(fn: A.Function, shape: tuple[int, int, int], max_nodes: int) -> A.Function | str:
    stmts = fn.body.stmts
    first = next((i for i, s in enumerate(stmts) if _declares_extents(s)), None)
    if first is None:
        return "no recovered block extents"
    head = list(stmts[:first + 1])
    rest = list(stmts[first + 1:])
    # the thread count's declaration (and its void use) stay with the extents
    while rest and (isinstance(rest[0], A.DeclStmt) and [d.name for d in rest[0].decls] == ["xp_nt"]
                    or isinstance(rest[0], A.ExprStmt) and A.free_names(rest[0]) == {"xp_nt"}):
        head.append(rest.pop(0))
    body = A.Block(tuple(rest))
    if any(isinstance(n, A.Call) and n.callee == GEMM_ENTRY or isinstance(n, A.Opaque) and GEMM_ENTRY in n.text
           for n in A.walk(body)):
        return "its thread loops are the packed GEMM's fallback"
    if not any(isinstance(n, A.Name) and n.id in (*_EXTENTS, "xp_nt") for n in A.walk(body)):
        return "the body does not read the block extents"
    if sum(1 for _ in A.walk(body)) > max_nodes:
        return f"the body is larger than max_nodes ({max_nodes})"
    values = {**dict(zip(_EXTENTS, shape, strict=True)), "xp_nt": shape[0] * shape[1] * shape[2]}
    constant = A.rewrite(body, lambda n: A.lit(values[n.id]) if isinstance(n, A.Name) and n.id in values else None)
    test: A.Expr | None = None
    for name, value in zip(_EXTENTS, shape, strict=True):
        check = A.binop("==", A.Name(name), A.lit(value))
        test = check if test is None else A.binop("&&", test, check)
    assert test is not None
    return A.replace(fn, body=A.replace(fn.body, stmts=(*head, A.If(test, constant, body))))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    max_nodes = int_param(params, "max_nodes", 4000, 1, 1 << 20)

    shapes = {fn.name: _block_shape(module, fn) for fn in module.functions() if is_bound_kernel(fn)}

    def known(fn: A.Function) -> bool | str:
        if fn.name not in shapes:
            return False
        return shapes[fn.name] is not None or "block shape not known (no constant launch, no __launch_bounds__)"

    def specialize(fn: A.Function) -> A.Function | str:
        shape = shapes[fn.name]
        assert shape is not None
        return _specialized(fn, shape, max_nodes)

    result = rewrite_each(module, known, specialize, nothing="no recovered kernel")
    ctx.notes.append(f"block_constants: {', '.join(result.done)} with constant block extents")
    return leave(unit, result.module, ctx)
