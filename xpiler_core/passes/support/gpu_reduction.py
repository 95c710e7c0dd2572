"""Sum reductions of a C loop bound to GPU threads: ``s += e`` across iterations becomes one atomic add per
thread into a managed accumulator that the host adds to ``s`` after the launch.

A scalar ``s`` declared before the loop is a sum reduction when, inside the loop, it is only updated by
``s += e`` / ``s -= e`` / ``s = s + e`` / ``s = s - e`` (``e`` not reading ``s``) and read nowhere else.
Floating-point sums are reassociated (the order of the atomics is unspecified), like OpenMP's
``reduction(+:s)``; the translation's tests compare against the sequential C with the spec's tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpiler_core import ast as A

#: Element types CUDA's ``atomicAdd`` takes (``double`` needs compute capability 6.0+).
ATOMIC_ADD_TYPES = frozenset({"int", "unsigned", "unsigned int", "unsigned long long", "float", "double"})


@dataclass(frozen=True)
class SumReduction:
    name: str
    type: A.Type

    @property
    def pointer(self) -> str:
        return f"xp_sum_{self.name}"

    @property
    def partial(self) -> str:
        return f"xp_part_{self.name}"


def _update_term(n: A.Node, name: str) -> A.Expr | None:
    """The added term of an update of ``name`` (negated for subtraction), or None if ``n`` is not one."""
    if not (isinstance(n, A.Assign) and n.target == A.Name(name)):
        return None
    if n.op in ("+=", "-="):
        term = n.value
        op = n.op[0]
    elif n.op == "=" and isinstance(n.value, A.Binary) and n.value.op in ("+", "-") and n.value.left == A.Name(name):
        term, op = n.value.right, n.value.op
    elif n.op == "=" and isinstance(n.value, A.Binary) and n.value.op == "+" and n.value.right == A.Name(name):
        term, op = n.value.left, "+"
    else:
        return None
    if any(isinstance(m, A.Name) and m.id == name for m in A.walk(term)):
        return None
    return term if op == "+" else A.Unary("-", term)


def find_sum_reductions(loop: A.For, carried: set[str], declared_types: dict[str, A.Type]) -> list[SumReduction] | str:
    """The carried scalars of ``loop`` that are all sum reductions, or why one is not."""
    found: list[SumReduction] = []
    for name in sorted(carried):
        t = declared_types.get(name)
        base = " ".join(t.base.split()) if t is not None else ""
        if t is None or t.pointers or base not in ATOMIC_ADD_TYPES:
            return f"scalar '{name}' is carried across iterations and is not a sum of an atomic-add type"
        updates = [n for n in A.walk(loop.body) if _update_term(n, name) is not None]
        if not updates:
            return f"scalar '{name}' is carried across iterations"
        # every other mention of the name is a read or write outside an update: not a pure reduction
        inside_updates = {id(m) for u in updates for m in A.walk(u)}
        if any(isinstance(m, A.Name) and m.id == name and id(m) not in inside_updates for m in A.walk(loop.body)):
            return f"scalar '{name}' is read inside the loop besides its own sum updates"
        if any(isinstance(m, A.Unary) and m.op in ("++", "--") and m.operand == A.Name(name) for m in A.walk(loop.body)):
            return f"scalar '{name}' is incremented as a counter"
        found.append(SumReduction(name, t))
    return found


def rewrite_updates(body: A.Stmt, reductions: list[SumReduction]) -> A.Stmt:
    """Updates of each reduced scalar go to the thread's partial sum instead."""
    by_name = {r.name: r for r in reductions}

    def fn(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Assign) and isinstance(n.target, A.Name) and n.target.id in by_name:
            term = _update_term(n, n.target.id)
            if term is not None:
                return A.Assign("+=", A.Name(by_name[n.target.id].partial), term)
        return None

    return A.rewrite(body, fn)


def partial_decls(reductions: list[SumReduction]) -> list[A.Stmt]:
    return [A.decl(r.partial, r.type, A.Cast(r.type, A.lit(0))) for r in reductions]


def partial_flush(reductions: list[SumReduction]) -> list[A.Stmt]:
    return [A.ExprStmt(A.call("atomicAdd", A.Name(r.pointer), A.Name(r.partial))) for r in reductions]


def kernel_params(reductions: list[SumReduction]) -> list[A.Param]:
    return [A.Param(r.pointer, A.replace(r.type, pointers=((),), quals=())) for r in reductions]


def host_setup(reductions: list[SumReduction]) -> list[A.Stmt]:
    out: list[A.Stmt] = []
    for r in reductions:
        pointer_type = A.replace(r.type, pointers=((),), quals=())
        out.append(A.decl(r.pointer, pointer_type, A.lit(0)))
        out.append(A.ExprStmt(A.call("cudaMallocManaged", A.Cast(A.ctype("void", 2), A.Unary("&", A.Name(r.pointer))),
                                     A.call("sizeof", A.Name(r.name)))))
        out.append(A.ExprStmt(A.assign(A.Unary("*", A.Name(r.pointer)), A.Cast(r.type, A.lit(0)))))
    return out


def host_combine(reductions: list[SumReduction]) -> list[A.Stmt]:
    out: list[A.Stmt] = [A.ExprStmt(A.call("cudaDeviceSynchronize"))] if reductions else []
    for r in reductions:
        out.append(A.ExprStmt(A.Assign("+=", A.Name(r.name), A.Unary("*", A.Name(r.pointer)))))
        out.append(A.ExprStmt(A.call("cudaFree", A.Name(r.pointer))))
    return out


__all__ = ["SumReduction", "find_sum_reductions", "host_combine", "host_setup", "kernel_params", "partial_decls",
           "partial_flush", "rewrite_updates"]
