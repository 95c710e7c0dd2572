"""Store reuse: a value that a later loop recomputes for every element is stored by the earlier loop into the
array the later loop writes, and the later loop reads it back instead of recomputing it.

Softmax is the common case: one loop sums ``expf(x[c] - m)``, a later loop over the same range writes
``y[c] = expf(x[c] - m) * inv``. After the pass the first loop also stores ``y[c] = expf(x[c] - m)`` and the
second computes ``y[c] = y[c] * inv``: one exponential per element instead of two, same values (the stored
value is the one recomputed, of the same floating type).

Preconditions (else the pass refuses): two loops in one block with the same header (``for (v = a; v < b;
++v)``, ``a`` and ``b`` unchanged between them); the later loop's body is one statement ``Y[e + v] = F(E)``
where ``E`` is a side-effect-free float math call (``expf``, ``__expf``, ``tanhf``, ...: the ``f`` and ``__``
forms for ``float`` arrays, the plain ones for ``double``) that also occurs, unconditionally evaluated, in the
earlier loop's body; nothing ``E`` reads is written by either loop or between them; ``Y`` is neither read
nor written by the earlier loop nor between the loops (distinct pointer names are taken not to overlap, as
elsewhere). Parameters: ``loop`` (variable of the loops), ``function``.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    PURE_CALLS,
    conditionally_evaluated,
    enter,
    has_jumps,
    leave,
    names_in,
    target_function,
)

INFO = PassInfo(
    name="store_reuse",
    summary="A later loop's recomputed math value is stored by an earlier loop over the same range and read back",
    kind="ast",
    directions=("cuda->cpu",),
    search_priority=1,
    params=(
        ParamSpec("loop", "str", "", "variable of the two loops (default: the first pair that qualifies)"),
        ParamSpec("function", "str", "", "function holding the loops (default: first with loops)"),
    ),
)

_FLOAT_TYPES = frozenset({"float", "double"})


def _float_call_for(element: str, call: A.Call) -> bool:
    """The call computes in the array's floating type (float: ``expf``/``__expf``; double: ``exp``)."""
    name = call.callee or ""
    if name not in PURE_CALLS or name in ("min", "max", "xp_min", "__half2float", "__float2half",
                                          "__float2half_rn", "__int2float_rn"):
        return False
    is_float = name.endswith("f") or name.startswith("__")
    return is_float if element == "float" else not is_float


def _writes(node: A.Node) -> set[str]:
    """Names assigned, memory bases written, or addresses taken in ``node``."""
    rw = A.read_write(node)
    return set(rw.writes | rw.mem_writes | rw.address_taken)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    fn = target_function(module, params)
    wanted = str(params.get("loop") or "")
    types = A.declared_types(fn)
    state: dict[str, Any] = {"done": 0, "reason": None}

    def try_pair(stmts: tuple[A.Stmt, ...], i: int, j: int) -> tuple[A.For, A.For] | None:
        first, later = stmts[i], stmts[j]
        assert isinstance(first, A.For) and isinstance(later, A.For)
        v1, v2 = first.canonical(), later.canonical()
        if v1 is None or v2 is None or (wanted and v2.var != wanted) or A.const_int(v2.step) != 1:
            return None
        if v1.var != v2.var or v1.start != v2.start or v1.stop != v2.stop or v1.step != v2.step:
            return None
        body = A.stmts_of(later.body)
        body = tuple(s for s in body if not isinstance(s, (A.Comment, A.Empty)))
        if len(body) != 1 or not isinstance(body[0], A.ExprStmt) or not isinstance(body[0].expr, A.Assign) \
                or body[0].expr.op != "=" or not isinstance(body[0].expr.target, A.Index):
            return None
        store = body[0].expr
        target = store.target
        assert isinstance(target, A.Index)
        if not isinstance(target.base, A.Name) or v2.var not in names_in(target.index):
            return None
        array = target.base.id
        atype = types.get(array)
        if atype is None or len(atype.pointers) != 1 or atype.base not in _FLOAT_TYPES:
            return None
        between = stmts[i + 1:j]
        bounds = names_in(v1.start) | names_in(v1.stop)
        if any(_writes(s) & bounds for s in between):
            return None
        conditional = conditionally_evaluated(first.body)
        candidates = [n for n in A.walk(store.value) if isinstance(n, A.Call) and _float_call_for(atype.base, n)
                      and v2.var in names_in(n)]
        for expr in candidates:
            uses = [n for n in A.walk(first.body) if n == expr and id(n) not in conditional]
            if not uses:
                continue
            reads = names_in(expr) - {v2.var}
            touched = _writes(first.body) | _writes(later.body) | set().union(*(_writes(s) for s in between))
            declared = {d.name for part in (first.body, *between) for d in A.walk(part) if isinstance(d, A.VarDecl)}
            if (reads | names_in(target.index) - {v2.var}) & declared:
                state["reason"] = "the value or the store's index uses names declared in or after the earlier loop"
                continue
            if reads & touched:
                state["reason"] = "what the recomputed value reads changes between the loops"
                continue
            if array in names_in(first.body) or any(array in names_in(s) for s in between):
                state["reason"] = f"'{array}' is used before the later loop"
                continue
            if array in names_in(store.value) or has_jumps([first.body, later.body]) or \
                    any(isinstance(n, A.Opaque) for n in A.walk(first.body)):
                continue
            slot = A.replace(target, span=None)

            def reuse(n: A.Node, e: A.Expr = expr, s: A.Expr = slot) -> A.Node | None:
                return s if n == e else None

            new_first_body = A.rewrite(first.body, reuse)
            saved = A.ExprStmt(A.assign(slot, expr))
            first_stmts = A.stmts_of(new_first_body)
            new_first = A.replace(first, body=A.Block((saved, *first_stmts)))
            new_value = A.rewrite(store.value, reuse)
            new_later = A.replace(later, body=A.Block((A.ExprStmt(A.assign(target, new_value)),)))
            return new_first, new_later
        return None

    class _Blocks(A.Transformer):
        def visit_Block(self, block: A.Block) -> Any:  # noqa: N802
            new = self.generic_visit(block)
            stmts = list(new.stmts)
            changed = new is not block
            for j, later in enumerate(stmts):
                if not isinstance(later, A.For):
                    continue
                for i in range(j - 1, -1, -1):
                    if not isinstance(stmts[i], A.For):
                        continue
                    pair = try_pair(tuple(stmts), i, j)
                    if pair is not None:
                        stmts[i], stmts[j] = pair
                        state["done"] += 1
                        changed = True
                        break
            return A.replace(new, stmts=tuple(stmts)) if changed else new

    new_fn = _Blocks().visit(fn)
    if not state["done"]:
        raise PassRefused(state["reason"] or f"no loop of '{fn.name}' recomputes a value an earlier loop over the "
                          "same range computes")
    ctx.notes.append(f"store_reuse: {state['done']} recomputed value(s) in {fn.name} stored once and read back")
    return leave(unit, module.replace_function(fn.name, new_fn), ctx)
