"""Launch inference: the block and grid of a kernel that no launch site, spec or ``__launch_bounds__``
gives, derived from its code (shared by loop recovery and the automatic test builder).

A kernel whose threads' work depends only on their global index (no shared memory, barriers, warp
collectives; ``threadIdx``/``blockIdx`` only as ``blockIdx.a*blockDim.a+threadIdx.a``) computes the same with
any block: 256 (16×16, 8×8×4) is chosen. The grid per axis comes from the guard on that axis's global index.
"""

from __future__ import annotations

from xpiler_core import ast as A
from xpiler_core.passes.support.ast_support import scalar_writes

#: The block shape chosen for a kernel whose result does not depend on it (see :func:`block_size_agnostic`),
#: by the number of axes its global indices use.
AGNOSTIC_BLOCKS = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}
AGNOSTIC_BLOCK = AGNOSTIC_BLOCKS[1][0]
AXES = ("x", "y", "z")


def infer_block(kernel: A.Function, module: A.Module | None = None) -> list[A.Expr] | None:
    if kernel.launch_bounds:
        return [kernel.launch_bounds[0]]
    axes = block_size_agnostic(kernel, module) if module is not None else 0
    if axes:
        return [A.lit(b) for b in AGNOSTIC_BLOCKS[axes]]
    return None


def block_size_agnostic(kernel: A.Function, module: A.Module) -> int:
    """The number of axes (1-3) when every thread's work is a function of its global index alone, else 0.

    The kernel reads ``threadIdx``/``blockIdx`` only as ``blockIdx.a * blockDim.a + threadIdx.a`` and the
    launch extents only as grid strides ``blockDim.a * gridDim.a``; it has no shared memory, barriers, warp
    collectives or device-function calls that could see the block. Then any block shape with enough blocks to
    cover the guards computes the same result, so one can be chosen when no launch site says which.
    """
    functions = {f.name: f for f in module.functions()}
    seen: set[str] = set()
    bodies = [kernel.body]
    while bodies:  # the kernel and every user function it calls, transitively
        body = bodies.pop()
        for n in A.walk(body):
            if isinstance(n, A.Call) and n.callee in functions and n.callee not in seen:
                callee = functions[n.callee]
                if callee.is_kernel or not callee.is_device:
                    return 0
                seen.add(n.callee)
                bodies.append(callee.body)
                if any(A.builtin_ref(m) for m in A.walk(callee.body)):
                    return 0
    for n in (m for body in [kernel.body, *(functions[f].body for f in seen)] for m in A.walk(body)):
        if isinstance(n, A.VarDecl) and n.is_shared:
            return 0
        if isinstance(n, A.Call) and (any(
                key in (n.callee or "") for key in ("sync", "shfl", "ballot", "__any", "__all", "activemask",
                                                     "lane", "warp", "cooperative", "tiled"))):
            return 0
        if isinstance(n, A.Name) and n.id == "warpSize":
            return 0

    used: set[int] = set()

    def neutral(n: A.Node) -> A.Node | None:
        for k, axis in enumerate(AXES):
            if global_index_on(n, axis):
                used.add(k)
                return A.Name("xp_global_index")
            if isinstance(n, A.Binary) and _is_pair(n, ("blockDim", axis), ("gridDim", axis)):
                used.add(k)
                return A.Name("xp_grid_stride")
        return None

    stripped = A.rewrite(kernel.body, neutral)
    if any(A.builtin_ref(n) for n in A.walk(stripped)) or not used:
        return 0
    return max(used) + 1


def _is_pair(e: A.Expr, a: tuple[str, str], b: tuple[str, str]) -> bool:
    e = _strip_casts(e)
    return isinstance(e, A.Binary) and e.op == "*" and {A.builtin_ref(_strip_casts(e.left)),
                                                        A.builtin_ref(_strip_casts(e.right))} == {a, b}


def global_index_on(n: A.Node, axis: str, bsize: A.Expr | None = None) -> bool:
    """``blockIdx.a * blockDim.a + threadIdx.a`` (either order; the block extent may be the constant ``bsize``)."""
    if not (isinstance(n, A.Binary) and n.op == "+"):
        return False
    for a, b in ((n.left, n.right), (n.right, n.left)):
        if A.builtin_ref(_strip_casts(b)) == ("threadIdx", axis) and (
                _is_pair(a, ("blockIdx", axis), ("blockDim", axis))
                or (bsize is not None and _is_block_offset(_strip_casts(a), bsize, axis))):
            return True
    return False


def infer_grid(kernel: A.Function, block: list[A.Expr]) -> list[A.Expr] | None:
    """Per axis, ``blockIdx.a * B + threadIdx.a < N`` (directly, through a variable, an early return or a
    grid-stride loop's bound) → ``ceil(N / B)`` blocks; ``None`` when an axis has no such guard."""
    defs: dict[str, A.Expr] = {}
    for n in A.walk(kernel.body):
        if isinstance(n, A.VarDecl) and n.init is not None and n.name not in scalar_writes(kernel.body):
            defs[n.name] = n.init
    # a grid-stride loop's variable starts at the global index: its bound is the guard too
    strided: dict[str, A.Expr] = {}
    for n in A.walk(kernel.body):
        if isinstance(n, A.For) and isinstance(n.init, A.DeclStmt) and len(n.init.decls) == 1:
            decl = n.init.decls[0]
            if decl.init is not None and decl.name not in defs:
                strided[decl.name] = decl.init

    def is_global_index(e: A.Expr, axis: str, bsize: A.Expr) -> bool:
        e = _strip_casts(e)
        if isinstance(e, A.Name) and e.id in defs:
            return is_global_index(defs[e.id], axis, bsize)
        if isinstance(e, A.Name) and e.id in strided:
            return is_global_index(strided[e.id], axis, bsize)
        return global_index_on(e, axis, bsize)

    grid: list[A.Expr] = []
    for axis, bsize in zip(AXES, block, strict=False):
        found: A.Expr | None = None
        for n in A.walk(kernel.body):
            if isinstance(n, A.Binary) and n.op in ("<", ">=", ">", "<="):
                idx, raw_bound = (n.left, n.right) if n.op in ("<", ">=") else (n.right, n.left)
                bound = _over_params(raw_bound, defs, set(kernel.param_names()))
                if bound is not None and is_global_index(idx, axis, bsize):
                    found = A.binop("/", A.binop("-", A.binop("+", bound, bsize), A.lit(1)), bsize)
                    break
        if found is None:
            return None
        grid.append(found)
    return grid


def _over_params(e: A.Expr, defs: dict[str, A.Expr], params: set[str], depth: int = 0) -> A.Expr | None:
    """``e`` with local definitions substituted until only parameters remain (``None`` if impossible)."""
    for _ in range(6):
        if any(A.builtin_ref(m) for m in A.walk(e)) or any(isinstance(m, (A.Index, A.Call)) for m in A.walk(e)):
            return None
        free = {m.id for m in A.walk(e) if isinstance(m, A.Name)} - params
        if not free:
            return e
        if not free <= set(defs):
            return None
        e = A.substitute(e, {nm: defs[nm] for nm in free})
    return None


def _strip_casts(e: A.Expr) -> A.Expr:
    while isinstance(e, A.Cast):
        e = e.operand
    return e


def _is_block_offset(e: A.Expr, bsize: A.Expr, axis: str = "x") -> bool:
    if isinstance(e, A.Binary) and e.op == "*":
        for a, b in ((e.left, e.right), (e.right, e.left)):
            if A.builtin_ref(_strip_casts(a)) == ("blockIdx", axis):
                b = _strip_casts(b)
                return A.builtin_ref(b) == ("blockDim", axis) or (
                    A.const_int(b) is not None and A.const_int(b) == A.const_int(bsize))
    return False
