"""Device mirrors: on the CPU device memory is host memory, so an input buffer that a host entry copies to
the device only to be read by kernels is read from the host buffer directly.

    T* d; cudaMalloc(&d, B); cudaMemcpy(d, h, B, cudaMemcpyHostToDevice); K(..., d, ...); cudaFree(d);
        →  T* d; d = (T*)h; K(..., d, ...);

Conditions (checked on the host function after loop recovery, top-level statements only): the mirror is
allocated and filled with the same byte count from a pointer parameter ``h`` of the host function that the
function never writes; afterwards it is used only as an argument of recovered kernels whose parameter is a
pointer to const (they cannot write it), and every such use comes before the first copy back to the host
(which could write ``h`` if the caller passed one buffer twice); besides that it is only freed. Otherwise
the copy stays.

An output mirror whose only fate is one full copy back to a pointer parameter ``h`` (kernels and a memset
fill it, one free after the copy) becomes ``h`` itself; when inputs are read in place and ``h`` overlaps one
of them at run time, a private buffer is used and copied back as before.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave

INFO = PassInfo(
    name="device_mirrors",
    summary="Host entries read input buffers directly instead of through a device copy (CPU: one memory)",
    kind="ast",
    directions=("cuda->cpu",),
    params=(),
)

_HOST_WRITES = ("cudaMemcpy", "cudaMemcpyAsync", "memcpy", "memmove", "memset", "cudaMemcpyFromSymbol")


def _call(stmt: A.Stmt, name: str) -> A.Call | None:
    if isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Call) and stmt.expr.callee == name:
        return stmt.expr
    return None


def _address_of(e: A.Expr) -> str | None:
    """``&d`` or ``(void**)&d`` → d."""
    while isinstance(e, A.Cast):
        e = e.operand
    if isinstance(e, A.Unary) and e.op == "&" and isinstance(e.operand, A.Name):
        return e.operand.id
    return None


def _kernels(module: A.Module) -> dict[str, A.Function]:
    """Recovered kernels (leading ``dim3 xp_grid`` parameter) by name."""
    out: dict[str, A.Function] = {}
    for f in module.functions():
        params = [p for p in f.params if isinstance(p, A.Param)]
        if params and params[0].name == "xp_grid":
            out[f.name] = f
    return out


def _kernel_call(stmt: A.Stmt, kernels: dict[str, A.Function]) -> tuple[A.Call, A.Function] | None:
    if isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Call) and stmt.expr.callee:
        fn = kernels.get(stmt.expr.callee.split("<")[0].strip())
        if fn is not None:
            return stmt.expr, fn
    return None


def _is_host_copy_back(stmt: A.Stmt) -> bool:
    for n in A.walk(stmt):
        if isinstance(n, A.Call) and n.callee in _HOST_WRITES:
            if n.callee == "cudaMemcpy" and len(n.args) == 4 and n.args[3] == A.Name("cudaMemcpyHostToDevice"):
                continue
            return True
    return False


def _rewrite(fn: A.Function, kernels: dict[str, A.Function]) -> tuple[A.Function, list[str]]:
    stmts = list(fn.body.stmts)
    params = {p.name: p for p in fn.params if isinstance(p, A.Param) and p.name and p.type.pointers}
    body_rw = A.read_write(fn.body)
    pointer_decls = {d.name: d for s in stmts if isinstance(s, A.DeclStmt) for d in s.decls
                     if len(d.type.pointers) == 1 and not d.dims}
    first_copy_back = next((i for i, s in enumerate(stmts) if _is_host_copy_back(s)), len(stmts))
    done: list[str] = []
    inputs: list[tuple[A.Expr, A.Expr]] = []  # (host buffer, bytes) read in place
    for m, s in enumerate(stmts):
        malloc = _call(s, "cudaMalloc")
        name = _address_of(malloc.args[0]) if malloc is not None and len(malloc.args) == 2 else None
        if malloc is None or name is None or name not in pointer_decls:
            continue
        copy_at = next((i for i in range(m + 1, len(stmts)) if (c := _call(stmts[i], "cudaMemcpy")) is not None
                        and c.args[:1] == (A.Name(name),)), None)
        if copy_at is None:
            continue
        copy = _call(stmts[copy_at], "cudaMemcpy")
        assert copy is not None
        if len(copy.args) != 4 or copy.args[3] != A.Name("cudaMemcpyHostToDevice") or copy.args[2] != malloc.args[1]:
            continue
        host = copy.args[1]
        if not (isinstance(host, A.Name) and host.id in params) or host.id in body_rw.writes | body_rw.mem_writes \
                | body_rw.address_taken:
            continue
        if any(A.Name(name) in (x for x in A.walk(stmts[i])) for i in range(m + 1, copy_at)):
            continue  # used between allocation and fill
        ok = True
        frees: list[int] = []
        for i, t in enumerate(stmts):
            if i in (m, copy_at) or not any(n == A.Name(name) for n in A.walk(t)):
                continue
            if (free := _call(t, "cudaFree")) is not None and free.args == (A.Name(name),):
                frees.append(i)
                continue
            if isinstance(t, A.DeclStmt) and i < m and any(d.name == name for d in t.decls):
                continue
            found = _kernel_call(t, kernels)
            if found is None or i > first_copy_back or i < copy_at:
                ok = False
                break
            call, kernel = found
            kparams = [p for p in kernel.params if isinstance(p, A.Param)]
            for k, arg in enumerate(call.args):
                if any(n == A.Name(name) for n in A.walk(arg)):
                    if arg != A.Name(name) or k >= len(kparams) or not kparams[k].type.pointers \
                            or "const" not in kparams[k].type.quals:
                        ok = False
        if not ok:
            continue
        decl = pointer_decls[name]
        stmts[m] = A.ExprStmt(A.assign(A.Name(name), A.Cast(A.replace(decl.type, quals=()), host)))
        for i in (copy_at, *frees):
            stmts[i] = A.Empty()
        done.append(name)
        inputs.append((host, malloc.args[1]))
    for m in range(len(stmts)):
        out = _output_mirror(stmts, m, pointer_decls, params, body_rw, kernels, inputs)
        if out is not None:
            done.append(out)
    kept = tuple(s for s in stmts if not isinstance(s, A.Empty))
    return A.replace(fn, body=A.replace(fn.body, stmts=kept)), done


def _bytes(p: A.Expr) -> A.Expr:
    return A.Cast(A.ctype("char", 1, ("const",)), p)


def _output_mirror(stmts: list[A.Stmt], m: int, pointer_decls: dict[str, A.VarDecl], params: dict[str, A.Param],
                   body_rw: A.ReadWrite, kernels: dict[str, A.Function], inputs: list[tuple[A.Expr, A.Expr]]
                   ) -> str | None:
    """Kernels write the host buffer itself when the mirror's only fate is one full copy back: ``d`` =
    ``h`` unless ``h`` overlaps an input read in place (then a private buffer, copied back as before).
    Rewrites ``stmts`` in place; returns the mirror's name or ``None``."""
    malloc = _call(stmts[m], "cudaMalloc")
    name = _address_of(malloc.args[0]) if malloc is not None and len(malloc.args) == 2 else None
    if malloc is None or name is None or name not in pointer_decls:
        return None
    d = A.Name(name)
    back = [i for i, t in enumerate(stmts) if (c := _call(t, "cudaMemcpy")) is not None and len(c.args) == 4
            and c.args[1] == d]
    if len(back) != 1:
        return None
    c_at = back[0]
    copy = _call(stmts[c_at], "cudaMemcpy")
    assert copy is not None
    host = copy.args[0]
    if copy.args[3] != A.Name("cudaMemcpyDeviceToHost") or copy.args[2] != malloc.args[1] or not (
            isinstance(host, A.Name) and host.id in params) or host.id in body_rw.writes | body_rw.address_taken:
        return None
    if any(isinstance(n, A.Return) for t in stmts[m:c_at] for n in A.walk(t)):
        return None  # an early exit would leave kernels' results in the host buffer without the copy
    frees: list[int] = []
    for i, t in enumerate(stmts):
        if i in (m, c_at):
            continue
        mentions_d = any(n == d for n in A.walk(t))
        if any(n == host for n in A.walk(t)):
            return None  # the host buffer is used elsewhere
        if not mentions_d:
            if m < i < c_at and (found := _kernel_call(t, kernels)) is not None and any(
                    isinstance(a, A.Name) and a.id in params for a in found[0].args):
                return None  # a kernel reads a host buffer of unknown extent that might overlap
            continue
        if (free := _call(t, "cudaFree")) is not None and free.args == (d,) and i > c_at:
            frees.append(i)
            continue
        if isinstance(t, A.DeclStmt) and i < m:
            continue
        memset = _call(t, "cudaMemset")
        if memset is not None and m < i < c_at and memset.args[:1] == (d,):
            continue
        if _kernel_call(t, kernels) is not None and m < i < c_at:
            continue
        return None
    if len(frees) != 1:
        return None
    size = malloc.args[1]
    # the overlap test sits at the allocation: the inputs' extents must be known there
    declared_later = {x.name for t in stmts[m:] for x in A.walk(t) if isinstance(x, A.VarDecl)}
    if any((A.free_names(b) | A.free_names(h)) & declared_later for h, b in inputs):
        return None
    overlap: A.Expr | None = None
    for h, b in inputs:
        test = A.binop("&&", A.binop("<", _bytes(host), A.binop("+", _bytes(h), b)),
                       A.binop("<", _bytes(h), A.binop("+", _bytes(host), size)))
        overlap = test if overlap is None else A.binop("||", overlap, test)
    dtype = A.replace(pointer_decls[name].type, quals=())
    direct = A.Cast(dtype, host)
    private = A.Cast(dtype, A.call("malloc", A.Ternary(A.binop(">", size, A.lit(0)), size, A.lit(1))))
    stmts[m] = A.ExprStmt(A.assign(d, direct if overlap is None else A.Ternary(overlap, private, direct)))
    stmts[c_at] = A.If(A.binop("!=", d, direct), A.Block((stmts[c_at], A.ExprStmt(A.call("free", d)))))
    stmts[frees[0]] = A.Empty()
    return name


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    kernels = _kernels(module)
    if not kernels:
        raise PassRefused("no recovered kernel (run loop_recovery first)")
    items: list[Any] = []
    done: list[str] = []
    for item in module.items:
        if isinstance(item, A.Function) and item.name not in kernels and any(
                _call(s, "cudaMalloc") is not None for s in item.body.stmts):
            item, names = _rewrite(item, kernels)
            done += [f"{item.name}:{n}" for n in names]
        items.append(item)
    if not done:
        raise PassRefused("no input mirror that kernels only read")
    ctx.notes.append(f"device mirrors: {', '.join(done)} read from the host buffer")
    return leave(unit, A.replace(module, items=tuple(items)), ctx)
