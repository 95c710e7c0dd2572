"""Grid reduction: a kernel whose threads fold elements into a per-thread partial and then combine the
partials of the block into one atomic update of a global scalar becomes one OpenMP reduction loop.

The CUDA shape (any block combine: warp shuffles, shared-memory trees, device helpers):

    T v = INIT;
    for (i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) v = v (+) E(i);
    ... block combine of v ...
    atomicOp(P, R);

(or ``T v = (i < N) ? E(i) : INIT`` with ``i`` the global thread index; the fold may also be spelled ``T i =
G; while (i < N) { v (+)= E(i); i += S; }`` and the partial kept in the thread's own slot of a shared array,
``s[t] = INIT; ... s[t] += E(i)``: both are read as the form above first) becomes a kernel that one thread
runs (loop recovery then keeps no thread loops around it, see grid_flatten):

    if (all thread and block indices are 0) {
      T acc = INIT;
      #pragma omp parallel for simd reduction(op:acc)
      for (i = 0; i < N; ++i) acc = acc (+) E(i);
      atomicOp(P, acc);
    }

Preconditions, from data flow (not names): (+) is +, max or min, matching the atomic (atomicAdd,
atomicMax, atomicMin); for + the initial value is 0. E is free of the partial, of thread indices (except
through ``i``) and of effects. After the fold, the kernel reads no global memory and writes only shared
memory and locals; every value derived from the partial is built from partials, the identity and (+)
(shuffles, shared-memory stores and loads, selects with partial-free conditions, pure device helpers), and
reaches global memory only through that one atomic, whose address does not depend on the thread. The atomic
may also be a call of a device helper proven to be an atomic add/max/min built from an ``atomicCAS`` retry
loop (``_cas_atomic``: by its structure and data flow, whatever its name); the result is then published by
calling that helper once. Floating point sums are reassociated (the plan verifies against the reference and
retries without this step). A launch with y/z extents repeats the x-indexed work per y/z index; a sum is then
published that many times (max/min once: repeats do not change them).

Parameters: ``min_parallel`` (elements below which the reduction runs on one thread).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo
from xpiler_core.passes.cpu.grid_flatten import _effect_free, _pure_functions, _same_sum
from xpiler_core.passes.support.ast_support import enter, int_param, leave, parallel_or_serial, scalar_writes
from xpiler_core.passes.support.cas_atomic import CasAtomic, cas_atomic
from xpiler_core.passes.support.per_function import kernel_or_why, rewrite_each

INFO = PassInfo(
    name="grid_reduce",
    summary="Whole-grid reductions (per-thread fold, block combine, one atomic) → one OpenMP reduction loop",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("min_parallel", "int", 32768, "elements below which the reduction runs on one thread",
                  (0, 8192, 32768, 131072)),
    ),
)

_BUILTINS = {("threadIdx", "x"): "xp_tx", ("threadIdx", "y"): "xp_ty", ("threadIdx", "z"): "xp_tz",
             ("blockIdx", "x"): "xp_bx", ("blockIdx", "y"): "xp_by", ("blockIdx", "z"): "xp_bz",
             ("blockDim", "x"): "xp_bdx", ("blockDim", "y"): "xp_bdy", ("blockDim", "z"): "xp_bdz",
             ("gridDim", "x"): "xp_gdx", ("gridDim", "y"): "xp_gdy", ("gridDim", "z"): "xp_gdz"}
_THREAD_DEPENDENT = {"threadIdx", "blockIdx"}
_ATOMICS = {"atomicAdd": "+", "atomicMax": "max", "atomicMin": "min"}
_OP_CALLS = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}
_IDENTITY_NAMES = {"max": {"-INFINITY", "-FLT_MAX", "INT_MIN", "-HUGE_VALF", "LLONG_MIN", "-DBL_MAX"},
                   "min": {"INFINITY", "FLT_MAX", "INT_MAX", "HUGE_VALF", "LLONG_MAX", "DBL_MAX", "UINT_MAX"}}
_SHUFFLES = {"__shfl_sync": 1, "__shfl_down_sync": 1, "__shfl_up_sync": 1, "__shfl_xor_sync": 1,
             "__shfl": 0, "__shfl_down": 0, "__shfl_up": 0, "__shfl_xor": 0}
_SYNC = {"__syncthreads", "__syncwarp"}


# Each device helper of a module as an atomic: a proven CAS-loop atomic, or why it is not one (a message).
AtomicHelpers = dict[str, CasAtomic | str]


def _atomic_helpers(module: A.Module) -> AtomicHelpers:
    """Every non-kernel device function judged once (an overloaded name is refused: calls cannot pick one)."""
    functions = list(module.functions())
    names = Counter(f.name for f in functions)
    out: AtomicHelpers = {}
    for f in functions:
        if not f.is_device or f.is_kernel:
            continue
        if names[f.name] > 1:
            out[f.name] = f"{f.name}: an overloaded helper"
            continue
        found = cas_atomic(f)
        out[f.name] = found if isinstance(found, CasAtomic) else f"{f.name}: not a CAS-loop atomic ({found})"
    return out


def _atomic_kind(call: A.Node, helpers: AtomicHelpers) -> tuple[str, int, int] | str:
    """(op, address position, value position) of a builtin atomic or a proven CAS-loop helper call, else
    the reason it is neither (``""`` when the call is not an atomic candidate at all)."""
    if not isinstance(call, A.Call) or call.callee is None:
        return ""
    if call.callee in _ATOMICS:
        return (_ATOMICS[call.callee], 0, 1)
    found = helpers.get(call.callee)
    if found is None:
        return ""
    if isinstance(found, str):
        return found
    if len(call.args) != 2:
        return f"{call.callee}: called with {len(call.args)} arguments"
    return (found.op, found.address, found.value)


def _indexed(e: A.Node) -> Any:
    """Builtins as the names loop recovery gives them (``blockIdx.x`` → ``xp_bx``) for index algebra."""
    def fn(n: A.Node) -> A.Node | None:
        ref = A.builtin_ref(n)
        return A.Name(_BUILTINS[ref]) if ref in _BUILTINS else None
    return A.rewrite(e, fn)


def _uses_thread(e: A.Node, dependent: set[str]) -> bool:
    for n in A.walk(e):
        ref = A.builtin_ref(n)
        if ref is not None and ref[0] in _THREAD_DEPENDENT:
            return True
        if isinstance(n, A.Name) and n.id in dependent:
            return True
    return False


def _mentions(e: A.Node, names: set[str]) -> bool:
    return any(isinstance(n, A.Name) and n.id in names for n in A.walk(e))


class _Combine:
    """Checks that values derived from the partial are (+)-combinations of partials and the identity."""

    def __init__(self, op: str, init: A.Expr, functions: dict[str, A.Function],
                 helpers: AtomicHelpers | None = None) -> None:
        self.op, self.init, self.functions = op, init, functions
        self.helpers = helpers or {}
        self.atomics: list[tuple[A.Call, int, int]] = []  # (call, address position, value position)
        self.refusals: list[str] = []  # why helper calls were not taken as atomics

    def identity(self, e: A.Expr) -> bool:
        """The fold's neutral value (for max/min also the partials' start, which repeats harmlessly)."""
        if self.op == "+":
            text = e.text if isinstance(e, A.Literal) else ""
            return text.rstrip("fFlLuU") in ("0", "0.0", "0.", ".0", "0.00")
        if e == self.init:
            return True
        spelled = e.id if isinstance(e, A.Name) else (
            "-" + e.operand.id if isinstance(e, A.Unary) and e.op == "-" and isinstance(e.operand, A.Name) else "")
        return spelled in _IDENTITY_NAMES[self.op]

    def value(self, e: A.Expr, data: set[str], depth: int = 0) -> bool:
        if depth > 6:
            return False
        if isinstance(e, A.Cast) and not e.type.pointers:
            return self.value(e.operand, data, depth)
        if isinstance(e, A.Name):
            return e.id in data or self.identity(e)
        if isinstance(e, A.Index):
            base = e.base
            return isinstance(base, A.Name) and base.id in data and not _mentions(e.index, data)
        if not _mentions(e, data):
            return self.identity(e)
        if isinstance(e, A.Binary) and e.op == "+" and self.op == "+":
            return self.value(e.left, data, depth) and self.value(e.right, data, depth)
        if isinstance(e, A.Ternary):
            if not _mentions(e.cond, data):
                return self.value(e.then, data, depth) and self.value(e.else_, data, depth)
            return self._select(e, data, depth)
        if isinstance(e, A.Call) and e.callee is not None:
            name = e.callee
            if _OP_CALLS.get(name) == self.op and len(e.args) == 2:
                return all(self.value(a, data, depth) for a in e.args)
            if name in _SHUFFLES:
                pos = _SHUFFLES[name]
                return len(e.args) > pos and self.value(e.args[pos], data, depth) and not any(
                    _mentions(a, data) for k, a in enumerate(e.args) if k != pos)
            fn = self.functions.get(name)
            if fn is not None and fn.is_device and not fn.is_kernel:
                return self._helper(fn, e.args, data, depth + 1)
        return False

    def _select(self, e: A.Ternary, data: set[str], depth: int) -> bool:
        """``a > b ? a : b`` (max) / ``a < b ? a : b`` (min), in any spelling."""
        c = e.cond
        if self.op == "+" or not (isinstance(c, A.Binary) and c.op in ("<", "<=", ">", ">=")):
            return False
        if not ((c.left == e.then and c.right == e.else_) or (c.left == e.else_ and c.right == e.then)):
            return False
        picks_left_when_greater = (c.op in (">", ">=")) == (e.then == c.left)
        if picks_left_when_greater != (self.op == "max"):
            return False
        return self.value(e.then, data, depth) and self.value(e.else_, data, depth)

    def _helper(self, fn: A.Function, args: tuple[A.Expr, ...], data: set[str], depth: int) -> bool:
        params = [p for p in fn.params if isinstance(p, A.Param)]
        if len(params) != len(args) or any(p.type.pointers or p.type.reference for p in params):
            return False
        inner: set[str] = set()
        for p, a in zip(params, args, strict=True):
            if _mentions(a, data):
                if not self.value(a, data, depth):
                    return False
                inner.add(p.name or "")
        return self.block(fn.body.stmts, inner, depth, returns=True, allow_atomic=False)

    def block(self, stmts: tuple[A.Stmt, ...], data: set[str], depth: int = 0, returns: bool = False,
              allow_atomic: bool = True) -> bool:
        data |= _derived(A.Block(stmts), data)
        return all(self.stmt(s, data, depth, returns, allow_atomic) for s in stmts)

    def stmt(self, s: A.Stmt, data: set[str], depth: int, returns: bool, allow_atomic: bool) -> bool:
        if isinstance(s, A.Block):
            return all(self.stmt(x, data, depth, returns, allow_atomic) for x in s.stmts)
        if isinstance(s, A.DeclStmt):
            for d in s.decls:
                if any(_mentions(x, data) for x in d.dims if x is not None):
                    return False
                if d.init is not None and not (self.value(d.init, data, depth) if d.name in data
                                               else not _mentions(d.init, data)):
                    return False
            return True
        if isinstance(s, A.ExprStmt):
            return self.expr_stmt(s.expr, data, depth, allow_atomic)
        if isinstance(s, A.If):
            return not _mentions(s.cond, data) and self.stmt(s.then, data, depth, returns, allow_atomic) and (
                s.else_ is None or self.stmt(s.else_, data, depth, returns, allow_atomic))
        if isinstance(s, A.For):
            heads = [x for x in (s.init, s.cond, s.step) if x is not None]
            return not any(_mentions(h, data) for h in heads) and self.stmt(s.body, data, depth, returns,
                                                                            allow_atomic)
        if isinstance(s, (A.While, A.DoWhile)):
            return not _mentions(s.cond, data) and self.stmt(s.body, data, depth, returns, allow_atomic)
        if isinstance(s, A.Return):
            if s.value is None:
                return not returns
            return returns and self.value(s.value, data, depth)
        return isinstance(s, (A.Break, A.Continue, A.Empty, A.Pragma, A.Comment))

    def expr_stmt(self, e: A.Expr, data: set[str], depth: int, allow_atomic: bool) -> bool:
        if isinstance(e, A.Call) and e.callee in _SYNC:
            return True
        kind = _atomic_kind(e, self.helpers) if allow_atomic else ""
        if isinstance(kind, str) and kind:
            self.refusals.append(kind)
            return False
        if isinstance(e, A.Call) and isinstance(kind, tuple):
            op, where, what = kind
            if op != self.op or len(e.args) != 2 or _mentions(e.args[where], data):
                if op != self.op:
                    self.refusals.append(f"{e.callee} is an atomic {op} on a {self.op} fold")
                return False
            self.atomics.append((e, where, what))
            return self.value(e.args[what], data, depth)
        if isinstance(e, A.Assign):
            target = e.target
            base = target.id if isinstance(target, A.Name) else (
                target.base.id if isinstance(target, A.Index) and isinstance(target.base, A.Name) else None)
            if base is None or (isinstance(target, A.Index) and _mentions(target.index, data)):
                return False
            if base not in data:
                return not _mentions(e.value, data)
            if e.op == "=":
                return self.value(e.value, data, depth)
            return e.op == "+=" and self.op == "+" and self.value(e.value, data, depth)
        if isinstance(e, A.Unary) and e.op in ("++", "--"):
            return not _mentions(e.operand, data)
        return False


def _derived(node: A.Node, data: set[str]) -> set[str]:
    """Names (scalars and arrays) that receive values mentioning ``data``, to a fixed point."""
    out = set(data)
    changed = True
    while changed:
        changed = False
        for n in A.walk(node):
            target: str | None = None
            value: A.Expr | None = None
            if isinstance(n, A.VarDecl) and n.init is not None:
                target, value = n.name, n.init
            elif isinstance(n, A.Assign):
                t = n.target
                target = t.id if isinstance(t, A.Name) else (
                    t.base.id if isinstance(t, A.Index) and isinstance(t.base, A.Name) else None)
                value = n.value
            if target is not None and value is not None and target not in out and _mentions(value, out):
                out.add(target)
                changed = True
    return out


def _fold(stmt: A.Stmt, var: str) -> tuple[str, A.Expr] | None:
    """``v += E`` / ``v = v + E`` / ``v = fmaxf(v, E)`` ... → (op, E) with E free of v."""
    while isinstance(stmt, A.Block) and len(stmt.stmts) == 1:
        stmt = stmt.stmts[0]
    if not (isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Assign) and stmt.expr.target == A.Name(var)):
        return None
    e = stmt.expr
    v = A.Name(var)
    found: tuple[str, A.Expr] | None = None
    if e.op == "+=":
        found = ("+", e.value)
    elif e.op == "=" and isinstance(e.value, A.Binary) and e.value.op == "+":
        if e.value.left == v:
            found = ("+", e.value.right)
        elif e.value.right == v:
            found = ("+", e.value.left)
    elif e.op == "=" and isinstance(e.value, A.Call) and e.value.callee in _OP_CALLS and len(e.value.args) == 2:
        a, b = e.value.args
        if a == v:
            found = (_OP_CALLS[e.value.callee or ""], b)
        elif b == v:
            found = (_OP_CALLS[e.value.callee or ""], a)
    if found is None or _mentions(found[1], {var}):
        return None
    return found


def _while_as_for(stmts: list[A.Stmt]) -> list[A.Stmt]:
    """``T i = G; while (i < N) { B; i += S; }`` → ``for (T i = G; i < N; i += S) B`` where ``B`` neither writes
    ``i`` nor leaves the loop early and nothing after reads ``i`` (the same iterations, the same values)."""
    out = list(stmts)
    for k in range(len(out) - 1):
        decl, loop = out[k], out[k + 1]
        if not (isinstance(decl, A.DeclStmt) and len(decl.decls) == 1 and isinstance(loop, A.While)):
            continue
        d = decl.decls[0]
        body = [x for x in A.stmts_of(loop.body) if not isinstance(x, A.Empty | A.Comment)]
        step = body[-1] if body else None
        inner = A.Block(tuple(body[:-1]))
        if not (d.init is not None and not d.dims and isinstance(loop.cond, A.Binary) and loop.cond.op == "<"
                and loop.cond.left == A.Name(d.name) and isinstance(step, A.ExprStmt)
                and isinstance(step.expr, A.Assign) and step.expr.op == "+=" and step.expr.target == A.Name(d.name)):
            continue
        if d.name in A.read_write(inner).writes or d.name in A.free_names(A.Block(tuple(out[k + 2:]))) or any(
                isinstance(n, A.Continue | A.Break | A.Return | A.Opaque) for n in A.walk(inner)):
            continue
        out[k] = A.For(decl, loop.cond, step.expr, inner)
        out[k + 1] = A.Empty()
    return [x for x in out if not isinstance(x, A.Empty)]


def _replacing(old: A.Expr, new: A.Expr) -> Callable[[A.Node], A.Node | None]:
    return lambda n: new if n == old else None


def _own_slot_partial(kernel: A.Function, stmts: list[A.Stmt]) -> list[A.Stmt]:
    """A partial kept in the thread's own slot of a shared array, ``s[t] = INIT; for (...) s[t] += E;`` (``t``
    a per-thread value declared once and never written again, nothing between the two that names ``s``)
    → ``T v = INIT; for (...) v += E; s[t] = v;``: the slot ends with the same value, and no other thread reads
    it before a barrier, which only comes after."""
    arrays = {d.name: d.type for st in stmts if isinstance(st, A.DeclStmt) for d in st.decls
              if d.dims and "__shared__" in d.storage}
    fixed = {d.name for st in stmts if isinstance(st, A.DeclStmt) for d in st.decls if not d.dims and d.init}
    fixed -= scalar_writes(kernel.body)
    out = list(stmts)
    for k, st in enumerate(out):
        target = st.expr.target if isinstance(st, A.ExprStmt) and isinstance(st.expr, A.Assign) else None
        if not (isinstance(st, A.ExprStmt) and isinstance(st.expr, A.Assign) and st.expr.op == "="
                and isinstance(target, A.Index) and isinstance(target.base, A.Name) and target.base.id in arrays
                and isinstance(target.index, A.Name) and target.index.id in fixed):
            continue
        at = next((j for j in range(k + 1, len(out)) if isinstance(out[j], A.For)), None)
        if at is None or target.base.id in A.free_names(A.Block(tuple(out[k + 1:at]))):
            continue
        loop = out[at]
        assert isinstance(loop, A.For)
        partial = A.fresh_name(kernel, "xp_part")
        body = A.rewrite(loop.body, _replacing(target, A.Name(partial)))
        if target.base.id in A.free_names(body) or _fold(body, partial) is None:
            continue
        element = A.replace(arrays[target.base.id], quals=())
        decl = A.DeclStmt((A.VarDecl(partial, element, (), st.expr.value),))
        store = A.ExprStmt(A.assign(target, A.Name(partial)))
        return [*out[:k], *out[k + 1:at], decl, A.replace(loop, body=body), store, *out[at + 1:]]
    return out


def _rewrite(kernel: A.Function, module: A.Module, pure: set[str], min_parallel: int) -> A.Function | str:
    stmts = _own_slot_partial(kernel, _while_as_for(list(kernel.body.stmts)))
    functions = {f.name: f for f in module.functions()}
    helpers = _atomic_helpers(module)
    names = set(functions)
    pointer_params = {p.name for p in kernel.params if isinstance(p, A.Param) and p.type.pointers}
    # the partial: T v = INIT; then the grid-stride fold, or T v = (i < N) ? E : INIT
    for k, s in enumerate(stmts):
        if not (isinstance(s, A.DeclStmt) and len(s.decls) == 1 and not s.decls[0].dims
                and s.decls[0].init is not None and not s.decls[0].type.pointers
                and "__shared__" not in s.decls[0].storage):
            continue
        d = s.decls[0]
        pre = stmts[:k]
        if not all(isinstance(p, A.DeclStmt) and all(x.init is None or _effect_free(x.init, pure, names, False)
                                                     for x in p.decls) for p in pre):
            continue
        pre_decls = [x for p in pre if isinstance(p, A.DeclStmt) for x in p.decls]
        env = {x.name: _indexed(x.init) for x in pre_decls if x.init is not None and not x.dims}
        dependent = {x.name for x in pre_decls if x.init is not None and _uses_thread(x.init, set())}
        site = _fold_loop(stmts, k, d, env, dependent, pure, names, helpers)
        if site is None:
            continue
        op, init, loop_var, loop_type, stop, elem, rest = site
        arrays = {x.name for x in pre_decls if x.dims or "__shared__" in x.storage}
        if _mentions(elem, arrays) or _mentions(stop, arrays):
            return "the fold reads a shared or local array"
        if op == "+" and not _Combine(op, init, functions).identity(init):
            return "a sum whose partials start from a nonzero value"
        combine = _Combine(op, init, functions, helpers)
        rest_rw = A.read_write(A.Block(tuple(rest)))
        pointer_locals = {n.name for n in A.walk(kernel.body) if isinstance(n, A.VarDecl) and n.type.pointers}
        if rest_rw.opaque or rest_rw.mem_reads & (pointer_params | pointer_locals | _globals(module)):
            return "the block combine reads global memory"
        if not combine.block(tuple(rest), {d.name}):
            why = f" ({'; '.join(dict.fromkeys(combine.refusals))})" if combine.refusals else ""
            return "the block combine is not built from the partials and the fold operation alone" + why
        if len(combine.atomics) != 1:
            return "the partials do not reach global memory through exactly one atomic"
        atomic, where, what = combine.atomics[0]
        if _uses_thread(atomic.args[where], dependent | _locals(rest)):
            return "the atomic's address depends on the thread"
        return _single_thread_kernel(kernel, pre, d, op, init, loop_var, loop_type, stop, elem, atomic, what,
                                     min_parallel)
    return "no per-thread partial folded over a grid-stride loop or the global index"


def _globals(module: A.Module) -> set[str]:
    return {d.name for item in module.items if isinstance(item, A.DeclStmt) for d in item.decls}


def _locals(stmts: list[A.Stmt]) -> set[str]:
    return {n.name for s in stmts for n in A.walk(s) if isinstance(n, A.VarDecl)}


def _fold_loop(stmts: list[A.Stmt], k: int, d: A.VarDecl, env: dict[str, A.Expr], dependent: set[str],
               pure: set[str], names: set[str], helpers: AtomicHelpers) -> tuple[Any, ...] | None:
    """(op, init, var, type, stop, E, rest) for the partial declared at ``k``, or ``None``."""
    assert d.init is not None
    init = d.init
    global_index = [("xp_bdx", "xp_bx"), ("xp_tx",)]
    if isinstance(init, A.Ternary) and isinstance(init.cond, A.Binary) and init.cond.op == "<" \
            and isinstance(init.cond.left, A.Name) and _same_sum(init.cond.left, env, global_index):
        # T v = (i < N) ? E(i) : INIT with i the global index: one element per thread
        var, stop, elem = init.cond.left.id, init.cond.right, init.then
        if var in dependent:
            dependent = dependent - {var}
        ok_vars = {var}
        if _uses_thread(elem, dependent - ok_vars) or _uses_thread(stop, dependent):
            return None
        rest = stmts[k + 1:]
        found = [_atomic_kind(n, helpers) for r in rest for n in A.walk(r)]
        kinds = {f[0] for f in found if isinstance(f, tuple)}
        for op in kinds if len(kinds) == 1 else ():
            # threads past N contribute the else value: it must be the identity itself
            if _Combine(op, A.Name("xp no init"), {}).identity(init.else_):
                grid = A.binop("*", A.Cast(A.ctype("long long"), A.Member(A.Name("gridDim"), "x")),
                               A.Member(A.Name("blockDim"), "x"))
                bounded = A.Ternary(A.binop("<", stop, grid), stop, grid)
                if not _effect_free(elem, pure, names, False):
                    return None
                return op, init.else_, var, A.ctype("long long"), bounded, elem, rest
        return None
    if k + 1 >= len(stmts) or not isinstance(stmts[k + 1], A.For):
        return None
    loop = stmts[k + 1]
    assert isinstance(loop, A.For)
    view = loop.canonical()
    if view is None or view.var_type is None:
        return None
    if not _same_sum(_indexed(view.start), env, global_index):
        return None
    if not _same_sum(_indexed(view.step), env, [("xp_bdx", "xp_gdx")]):
        return None
    fold = _fold(loop.body, d.name)
    if fold is None:
        return None
    op, elem = fold
    if _uses_thread(elem, dependent) or _uses_thread(view.stop, dependent) or not _effect_free(
            elem, pure, names, False):
        return None
    return op, init, view.var, A.replace(view.var_type, quals=()), view.stop, elem, stmts[k + 2:]


def _single_thread_kernel(kernel: A.Function, pre: list[A.Stmt], d: A.VarDecl, op: str, init: A.Expr, var: str,
                          var_type: A.Type, stop: A.Expr, elem: A.Expr, atomic: A.Call, value_pos: int,
                          min_parallel: int) -> A.Function:
    acc = A.fresh_name(kernel, "xp_acc")
    count = A.fresh_name(kernel, "xp_count")
    a = A.Name(acc)
    if op == "+":
        update: A.Stmt = A.ExprStmt(A.assign(a, elem, "+="))
    else:
        e = A.fresh_name(kernel, "xp_e")
        better = ">" if op == "max" else "<"
        update = A.Block((A.DeclStmt((A.VarDecl(e, A.replace(d.type, quals=()), (), elem),)),
                          A.ExprStmt(A.assign(a, A.Ternary(A.binop(better, A.Name(e), a), A.Name(e), a)))))
    loop = A.For(A.decl(var, var_type, A.lit(0)), A.binop("<", A.Name(var), A.Name(count)),
                 A.Unary("++", A.Name(var)), A.Block((update,)))
    clause = f"omp parallel for simd reduction({op}:{acc})"
    # the prefix's scalars that the fold and its bound use stay; the rest (shared arrays, lane numbers) goes
    needed = set(A.free_names(elem) | A.free_names(stop)) - {var}
    kept_decls: list[A.VarDecl] = []
    for x in reversed([x for p in pre if isinstance(p, A.DeclStmt) for x in p.decls]):
        if x.name in needed and not x.dims and "__shared__" not in x.storage:
            kept_decls.insert(0, x)
            needed |= set(A.free_names(x.init)) if x.init is not None else set()
    kept = [A.DeclStmt((x,)) for x in kept_decls]
    args = tuple(a if k == value_pos else x for k, x in enumerate(atomic.args))
    publish: A.Stmt = A.ExprStmt(A.Call(atomic.func, args))
    if op == "+":
        # a launch with y/z extents repeats the x-indexed work once per (blockIdx.yz, threadIdx.yz): so do we
        r = A.fresh_name(kernel, "xp_rep")
        copies: A.Expr = A.Cast(A.ctype("long long"), A.Member(A.Name("gridDim"), "y"))
        for base, field in (("gridDim", "z"), ("blockDim", "y"), ("blockDim", "z")):
            copies = A.binop("*", copies, A.Member(A.Name(base), field))
        publish = A.For(A.decl(r, "long long", copies), A.binop(">", A.Name(r), A.lit(0)),
                        A.Unary("--", A.Name(r)), A.Block((publish,)))
    body = A.Block((*kept, A.DeclStmt((A.VarDecl(acc, A.replace(d.type, quals=()), (), init),)),
                    A.decl(count, var_type, stop),
                    *((parallel_or_serial(loop, clause, A.binop(">=", A.Name(count), A.lit(min_parallel))),)
                      if min_parallel > 0 else (A.Pragma(clause), loop)), publish))
    first = A.binop("==", A.Member(A.Name("threadIdx"), "x"), A.lit(0))
    for base, field in (("threadIdx", "y"), ("threadIdx", "z"), ("blockIdx", "x"), ("blockIdx", "y"),
                        ("blockIdx", "z")):
        first = A.binop("&&", first, A.binop("==", A.Member(A.Name(base), field), A.lit(0)))
    return A.replace(kernel, body=A.Block((A.If(first, body),)))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    min_parallel = int_param(params, "min_parallel", 32768, 0, 1 << 30)
    pure = _pure_functions(module)
    result = rewrite_each(module, kernel_or_why, lambda kernel: _rewrite(kernel, module, pure, min_parallel),
                          nothing="no __global__ kernel")
    ctx.notes.append(f"grid reduce: {', '.join(result.done)} as one OpenMP reduction")
    return leave(unit, result.module, ctx)
