"""Block reduce: row-per-block (or row-per-warp) reductions whose combined value every thread uses become
straight-line loops over the row that one thread runs.

The CUDA shape (softmax, layernorm, rmsnorm-style kernels; any spelling of the combine):

    T v = INIT;
    for (j = LANE; j < N; j += STRIDE) v = v (+) E(j);        // each thread folds a strided slice
    v = allreduce(v);   or   T r = F(allreduce(v, smem));      // combine across the block / warp, broadcast
    for (j = LANE; j < N; j += STRIDE) out[j] = G(j, r);       // every thread uses the total

where LANE/STRIDE is ``threadIdx.x``/``blockDim.x`` (a block owns the row) or ``threadIdx.x & 31`` (or
``% 32``)/``32`` (a warp owns the row). It becomes a kernel in which the first lane alone runs

    T v = INIT;
    #pragma omp simd reduction(op:v)
    for (j = 0; j < N; ++j) v = v (+) E(j);
    T r = F(v);
    #pragma omp simd
    for (j = 0; j < N; ++j) out[j] = G(j, r);

so loop recovery keeps the block loop (parallel) and each row is vectorizable loops over j.

Preconditions, from data flow (not names): (+) is +, max or min with the identity as the partial's start (0
for +); the partial is declared in the same loop trip as its fold (a partial carried across a loop over rows
would keep per-thread values there). The combine is either a call of a device helper or, in a warp-owned
row, an inline shuffle loop over offsets 16, 8, 4, 2, 1. Its value is built from the partial, the identity
and (+) alone (shuffles, shared-memory stores and loads; grid_reduce's check); a helper writes no memory but
shared memory, takes only the partial and shared arrays, and ends in its only return, whose value does not
depend on the thread. A block-owned row is combined through shared memory and a barrier; a warp-owned one
by xor shuffles (every lane gets the total) or a down tree (the total is on lane 0: it is then read only
inside ``if (lane == 0)`` branches, unless the helper broadcasts it with ``__shfl_sync(mask, v, 0)``). The
partial is used only by its fold and its combine (in place, or as the combine's argument). Every other
statement is thread-uniform (depends on the thread only through the warp number in warp mode): scalar
declarations and assignments, same-value stores, uniform branches and early exits, uniform loops over rows,
barriers (dropped), first-lane branches (kept as their body, without row loops or combines), or loops over
the row stride whose iterations write no scalar outside their body except one fold. Warp-owned rows are
recognized for 32-lane warps only. Floating point folds are reassociated and the combine tree becomes a
sequential order; a max/min fold is emitted as a select (vectorizable without -ffinite-math-only; equal to
fmaxf/fminf because the partial starts at the identity and never becomes NaN). The plan verifies against
the reference and retries without this step. Not recognized yet: combines written inline with shared
memory (tree in the kernel body, per-warp slots summed by thread 0), strides that are a constant equal to
the block size rather than ``blockDim.x``.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo
from xpiler_core.passes.cpu.grid_flatten import _effect_free, _pure_functions
from xpiler_core.passes.cpu.grid_reduce import _OP_CALLS, _Combine
from xpiler_core.passes.support.ast_support import enter, int_param, leave
from xpiler_core.passes.support.per_function import kernel_or_why, rewrite_each

INFO = PassInfo(
    name="block_reduce",
    summary="Row-per-block/warp reductions (strided fold, block combine, broadcast) → sequential SIMD loops",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("warp_size", "int", 0, "warp width the source was written for (0: the context's; 64 for HIP)",
                  (0, 32, 64)),
    ),
)

_TX = A.Member(A.Name("threadIdx"), "x")
_BDX = A.Member(A.Name("blockDim"), "x")
_WARP_SHUFFLES = {"__shfl_xor_sync", "__shfl_xor"}
_DOWN_SHUFFLES = {"__shfl_down_sync", "__shfl_down"}  # a down tree leaves the total on lane 0
_INDEXED_SHUFFLES = {"__shfl_sync", "__shfl"}  # from lane 0: the broadcast after a down tree
_UP_SHUFFLES = {"__shfl_up_sync", "__shfl_up"}


def _broadcast_from_lane0(e: A.Expr) -> bool:
    """``__shfl_sync(mask, v, 0)`` / ``__shfl(v, 0)``."""
    if not (isinstance(e, A.Call) and e.callee in _INDEXED_SHUFFLES):
        return False
    pos = 2 if e.callee == "__shfl_sync" else 1
    return len(e.args) > pos and A.const_int(e.args[pos]) == 0


class _Refuse(Exception):
    pass


def _mentions(e: A.Node, names: set[str]) -> bool:
    return any(isinstance(n, A.Name) and n.id in names for n in A.walk(e))


def _uses_builtin(e: A.Node, bases: set[str]) -> bool:
    return any((ref := A.builtin_ref(n)) is not None and ref[0] in bases for n in A.walk(e))


def _is_lane_expr(e: A.Expr) -> str | None:
    """``threadIdx.x`` → "block"; ``threadIdx.x & 31`` / ``threadIdx.x % 32`` (``warpSize``) → "warp"."""
    while isinstance(e, A.Cast):
        e = e.operand
    if e == _TX:
        return "block"
    if isinstance(e, A.Binary) and e.left == _TX:
        k = A.const_int(e.right)
        if (e.op == "&" and k == 31) or (e.op == "%" and (k == 32 or e.right == A.Name("warpSize"))):
            return "warp"
    return None


def _warp_number_free(e: A.Node) -> A.Node:
    """``e`` with ``threadIdx.x / 32`` and ``threadIdx.x >> 5`` (uniform in a warp) blanked out."""
    def fn(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Binary) and _warp_aligned(n.left) and (
                (n.op == ">>" and A.const_int(n.right) == 5)
                or (n.op == "/" and (A.const_int(n.right) == 32 or n.right == A.Name("warpSize")))):
            return A.Name("xp_warp_number")
        return None
    return A.rewrite(e, fn)


def _warp_aligned(e: A.Expr) -> bool:
    """``threadIdx.x`` plus thread-free multiples of the block size or of 32 (whole warps: the global
    thread index): its quotient by 32 is the same for a warp's lanes."""
    if e == _TX:
        return True
    if not (isinstance(e, A.Binary) and e.op == "+"):
        return False
    for own, other in ((e.left, e.right), (e.right, e.left)):
        if own == _TX and not _uses_builtin(other, {"threadIdx"}):
            factors = [other.left, other.right] if isinstance(other, A.Binary) and other.op == "*" else [other]
            if any(f == _BDX or (A.const_int(f) or 1) % 32 == 0 for f in factors):
                return True
    return False


def _stride_ok(step: A.Expr, mode: str) -> bool:
    if mode == "block":
        return step == _BDX
    return A.const_int(step) == 32 or step == A.Name("warpSize")


def _fold_of(body: A.Stmt, var: str) -> tuple[str, A.Expr, tuple[A.Stmt, ...]] | None:
    """(op, E, local statements before) for a loop body ``locals...; v (+)= E`` with v nowhere else."""
    stmts = body.stmts if isinstance(body, A.Block) else (body,)
    if not stmts:
        return None
    *pre, last = stmts
    if any(not isinstance(p, A.DeclStmt) or _mentions(p, {var}) for p in pre):
        return None
    if not (isinstance(last, A.ExprStmt) and isinstance(last.expr, A.Assign) and last.expr.target == A.Name(var)):
        return None
    e, v = last.expr, A.Name(var)
    found: tuple[str, A.Expr] | None = None
    if e.op == "+=":
        found = ("+", e.value)
    elif e.op == "=" and isinstance(e.value, A.Binary) and e.value.op == "+" and v in (e.value.left, e.value.right):
        found = ("+", e.value.right if e.value.left == v else e.value.left)
    elif e.op == "=" and isinstance(e.value, A.Call) and _OP_CALLS.get(e.value.callee or "") and len(e.value.args) == 2 \
            and v in e.value.args:
        found = (_OP_CALLS[e.value.callee or ""], e.value.args[1] if e.value.args[0] == v else e.value.args[0])
    if found is None or _mentions(found[1], {var}):
        return None
    return found[0], found[1], tuple(pre)


def _combine_call(e: A.Node, partial: str) -> list[A.Call]:
    """Calls of a module function taking the partial as an argument."""
    return [n for n in A.walk(e) if isinstance(n, A.Call) and any(a == A.Name(partial) for a in n.args)]


class _Rewriter:
    def __init__(self, kernel: A.Function, module: A.Module, warp_size: int = 32) -> None:
        self.kernel, self.module, self.warp_size = kernel, module, warp_size
        self.functions = {f.name: f for f in module.functions()}
        self.pure = _pure_functions(module)
        self.shared = {n.name for n in A.walk(kernel.body) if isinstance(n, A.VarDecl) and n.is_shared}
        self.params = {p.name for p in kernel.params if isinstance(p, A.Param) and p.name}
        self.mode = ""
        self.lanes: set[str] = set()
        self.lane_modes: dict[str, str] = {}
        self.dead: set[str] = set()
        self.first_only = 0  # depth of branches that only the first lane takes
        self.lane0_only: set[str] = set()  # totals complete on the first lane only (down-shuffle trees)
        self.lane0_result = False  # partials consumed by a combine whose value went elsewhere

    # ------------------------------------------------------------------ recognition
    def lane_start(self, e: A.Expr) -> str | None:
        if isinstance(e, A.Name) and e.id in self.lanes:
            return self.lane_modes[e.id]
        return _is_lane_expr(e)

    def strided(self, s: A.Stmt) -> A.LoopView | None:
        if not isinstance(s, A.For):
            return None
        view = s.canonical()
        if view is None:
            return None
        mode = self.lane_start(view.start)
        if mode is None or not _stride_ok(view.step, mode):
            return None
        if self.mode and mode != self.mode:
            raise _Refuse("the kernel mixes block-strided and warp-strided loops over the row")
        self.mode = mode
        return view

    def uniform(self, e: A.Node) -> bool:
        """Thread-uniform within the row's owner (block, or warp in warp mode)."""
        if self.mode == "warp":
            e = _warp_number_free(e)
        return not _uses_builtin(e, {"threadIdx"}) and not _mentions(e, self.lanes)

    def check_combine(self, call: A.Call, partial: str, op: str, init: A.Expr) -> bool:
        """Refuses unless the call combines the partials; True when the total is complete on lane 0 only."""
        fn = self.functions.get(call.callee or "")
        if fn is None or not fn.is_device or fn.is_kernel:
            raise _Refuse(f"the partial {partial} goes to {call.callee or 'a call'}, not a device helper")
        for a in call.args:
            if a != A.Name(partial) and not (isinstance(a, A.Name) and a.id in self.shared):
                raise _Refuse(f"{fn.name} takes arguments other than the partial and shared arrays")
        if not self._helper_folds(fn, call, partial, op, init):
            raise _Refuse(f"{fn.name} is not a pure {op}-fold of the partials")
        top_returns = [x for x in fn.body.stmts if isinstance(x, A.Return)]
        if len([n for n in A.walk(fn.body) if isinstance(n, A.Return)]) != 1 or fn.body.stmts[-1:] != tuple(
                top_returns):
            raise _Refuse(f"{fn.name} does not end in its only return (threads could return different values)")
        rw = A.read_write(fn.body)
        pointer_params = {p.name for p in fn.params if isinstance(p, A.Param) and p.type.pointers and p.name}
        local_shared = {n.name for n in A.walk(fn.body) if isinstance(n, A.VarDecl) and n.is_shared}
        if rw.opaque or not rw.mem_writes <= pointer_params | local_shared or any(
                c in self.functions and c not in self.pure for c in rw.calls):
            raise _Refuse(f"{fn.name} writes memory other than shared arrays")
        calls = {n.callee for n in A.walk(fn.body) if isinstance(n, A.Call)}
        if calls & _UP_SHUFFLES:
            raise _Refuse(f"{fn.name} combines with up shuffles (the total lands on the last lane)")
        returns = [n.value for n in A.walk(fn.body) if isinstance(n, A.Return) and n.value is not None]
        broadcast = len(returns) == 1 and _broadcast_from_lane0(returns[0])
        indexed = [n for n in A.walk(fn.body) if isinstance(n, A.Call) and n.callee in _INDEXED_SHUFFLES]
        if indexed and not (broadcast and len(indexed) == 1):
            raise _Refuse(f"{fn.name} uses an indexed shuffle other than a final broadcast from lane 0")
        decls = {n.name: n.init for n in A.walk(fn.body) if isinstance(n, A.VarDecl) and n.init is not None}
        for r in returns:
            seen = r
            while isinstance(seen, A.Name) and seen.id in decls and decls[seen.id] is not None:
                seen = decls[seen.id]
            if _uses_builtin(seen, {"threadIdx"}) or any(
                    isinstance(n, A.Index) and _uses_builtin(n.index, {"threadIdx"}) for n in A.walk(seen)):
                raise _Refuse(f"{fn.name}'s result depends on the thread (not a broadcast)")
        uses_shared = bool(local_shared or pointer_params & rw.mem_writes)
        barrier = any(A.is_barrier(n) for n in A.walk(fn.body))
        if self.mode == "warp" and (uses_shared or not calls & (_WARP_SHUFFLES | _DOWN_SHUFFLES)):
            raise _Refuse(f"a warp owns the row but {fn.name} is not a shuffle all-reduce")
        if self.mode == "block" and not (uses_shared and barrier):
            raise _Refuse(f"a block owns the row but {fn.name} does not combine through shared memory")
        if calls & _DOWN_SHUFFLES and self.mode == "block":
            raise _Refuse(f"a block owns the row but {fn.name} leaves warp totals on lane 0")
        return bool(calls & _DOWN_SHUFFLES) and not broadcast

    def _helper_folds(self, fn: A.Function, call: A.Call, partial: str, op: str, init: A.Expr) -> bool:
        """The helper's fold check with its shared-array parameters as data too (stores of the partial)."""
        params = [p for p in fn.params if isinstance(p, A.Param)]
        if len(params) != len(call.args):
            return False
        data = {p.name or "" for p, a in zip(params, call.args, strict=True) if a == A.Name(partial)}
        arrays = {p.name or "" for p, a in zip(params, call.args, strict=True) if a != A.Name(partial)}
        return _Combine(op, init, self.functions).block(fn.body.stmts, data | arrays, 1, returns=True,
                                                        allow_atomic=False)

    # ------------------------------------------------------------------ rewriting
    def run(self) -> A.Function:
        stmts = list(self.kernel.body.stmts)
        # pass 1: the lane names and the mode
        loop_inits = {id(n.init) for n in A.walk(self.kernel.body) if isinstance(n, A.For)}
        for s in A.walk(self.kernel.body):
            if not isinstance(s, A.DeclStmt) or id(s) in loop_inits:
                continue
            for d in s.decls:
                mode = _is_lane_expr(d.init) if d.init is not None and not d.dims else None
                if mode is not None:
                    self.lanes.add(d.name)
                    self.lane_modes[d.name] = mode
        for n in A.walk(self.kernel.body):
            if isinstance(n, A.For):
                self.strided(n)
        if not self.mode:
            raise _Refuse("no loop over a row strided by the block or warp size")
        if self.mode == "warp" and self.warp_size != 32:
            raise _Refuse(f"warp-owned rows are recognized for 32-lane warps, not {self.warp_size}")
        if _uses_builtin(self.kernel.body, {"threadIdx"}) and any(
                (ref := A.builtin_ref(n)) is not None and ref[0] == "threadIdx" and ref[1] != "x"
                for n in A.walk(self.kernel.body)):
            raise _Refuse("the kernel uses threadIdx.y/z")
        out: list[A.Stmt] = []
        pending: dict[str, tuple[str, A.Expr, A.Type]] = {}  # partial → (op, init, type), not yet folded
        folded: dict[str, tuple[str, A.Expr]] = {}  # partial folded, awaiting its combine
        totals: set[str] = set()
        for s in stmts:
            out.extend(self.stmt(s, pending, folded, totals))
        if folded:
            raise _Refuse(f"the partial {', '.join(folded)} is never combined across the block")
        if not totals:
            raise _Refuse("no strided fold combined across the block")
        body: A.Stmt = A.Block(tuple(out))
        used = A.free_names(body)
        if _mentions(body, self.shared):
            raise _Refuse("shared memory is used outside the combine")
        if _mentions(body, self.lanes) or not self.uniform(body):
            raise _Refuse("a statement outside the row loops depends on the lane")
        out = [s for s in out if not (isinstance(s, A.DeclStmt) and all(
            d.is_shared for d in s.decls) and not any(d.name in used for d in s.decls))]
        guard_lane = _TX if self.mode == "block" else A.binop("&", _TX, A.lit(31))
        guard: A.Expr = A.binop("==", guard_lane, A.lit(0))
        for field in ("y", "z"):
            guard = A.binop("&&", guard, A.binop("==", A.Member(A.Name("threadIdx"), field), A.lit(0)))
        return A.replace(self.kernel, body=A.Block((A.If(guard, A.Block(tuple(out))),)))

    def stmt(self, s: A.Stmt, pending: dict[str, tuple[str, A.Expr, A.Type]], folded: dict[str, tuple[str, A.Expr]],
             totals: set[str]) -> list[A.Stmt]:
        if isinstance(s, (A.Empty, A.Comment, A.Pragma)):
            return [s]
        # branches are checked statement by statement inside (a first-lane branch may read lane-0 totals)
        checked = s.cond if isinstance(s, A.If) else None if isinstance(s, A.Block) else s
        if not self.first_only and checked is not None and _mentions(checked, self.lane0_only):
            raise _Refuse(f"{', '.join(sorted(self.lane0_only))} is complete on the first lane only but other lanes "
                          "use it")
        if _mentions(s, self.dead):
            raise _Refuse(f"{', '.join(sorted(self.dead))} is read after its combine (a per-thread partial there)")
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and A.is_barrier(s.expr):
            return []  # one thread: barriers order nothing
        if isinstance(s, A.DeclStmt):
            out: list[A.VarDecl] = []
            for d in s.decls:
                if d.name in self.lanes:
                    continue
                if d.is_shared:
                    out.append(d)
                    continue
                if d.init is not None and _mentions(d.init, set(folded)):
                    self.lane0_result = False
                    d = A.replace(d, init=self.combine(d.init, folded, totals, in_place=None))
                    if self.lane0_result:
                        self.lane0_only.add(d.name)
                if d.dims or (d.init is not None and not self.uniform(d.init)):
                    raise _Refuse(f"declaration of {d.name} is not uniform across the row's threads")
                if d.init is not None and not _effect_free(d.init, self.pure, set(self.functions), False):
                    raise _Refuse(f"declaration of {d.name} has effects")
                if d.init is not None and not d.type.pointers and not _mentions(d.init, set(pending) | set(folded)):
                    pending[d.name] = ("", d.init, d.type)
                out.append(d)
            return [A.replace(s, decls=tuple(out))] if out else []
        if isinstance(s, A.For) and (view := self.strided(s)) is not None:
            return self.row_loop(s, view, pending, folded)
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Assign) and isinstance(s.expr.target, A.Name) \
                and s.expr.target.id in folded and s.expr.op == "=":
            name = s.expr.target.id
            self.lane0_result = False
            value = self.combine(s.expr.value, folded, totals, in_place=name)
            if value != A.Name(name):
                raise _Refuse(f"{name} is assigned more than its combined value")
            if self.lane0_result:
                self.lane0_only.add(name)
            return []
        if isinstance(s, A.For) and _mentions(s, set(folded)):
            return self.inline_combine(s, folded, totals)
        if isinstance(s, A.If) and self.first_lane(s.cond) and s.else_ is None:
            # only the first lane acts: the one thread we keep is that lane (no row work or combine there:
            # a strided loop run by one lane covers a slice of the row, not all of it)
            self.first_only += 1
            try:
                return self.nested(s.then, pending, folded, totals)
            finally:
                self.first_only -= 1
        if isinstance(s, A.If):
            if not self.uniform(s.cond) or _mentions(s.cond, set(folded)):
                raise _Refuse("a branch that depends on the lane or on a partial")
            # the branch is uniform: a partial folded there and combined after it is the identity everywhere
            # when the branch is not taken, as the untouched partial is here
            before = dict(folded)
            then = A.Block(tuple(self.nested(s.then, pending, folded, totals)))
            if s.else_ is not None and folded != before:
                raise _Refuse("a partial folded in one arm of a branch with two arms")
            other = None if s.else_ is None else A.Block(tuple(self.nested(s.else_, pending, folded, totals)))
            if folded != before and s.else_ is not None:
                raise _Refuse("a partial folded in one arm of a branch with two arms")
            return [A.If(s.cond, then, other)]
        if isinstance(s, A.Block):
            return [A.Block(tuple(self.nested(s, pending, folded, totals)))]
        if isinstance(s, A.For) and all(
                self.uniform(h) and not _mentions(h, set(folded)) for h in (s.init, s.cond, s.step) if h is not None):
            # a thread-uniform loop around row work (rows strided over the grid): each trip is a row
            before = dict(folded)
            # partials declared outside would carry one trip's value into the next (per thread there, as the
            # total here): only partials declared in the body are folded
            body = A.Block(tuple(self.nested(s.body, {}, folded, totals)))
            if folded != before:
                raise _Refuse("a partial folded in a loop is combined outside it")
            return [A.replace(s, body=body)]
        if isinstance(s, A.Return) and s.value is None:
            if self.first_only:
                raise _Refuse("the first lane returns alone (the other lanes go on with the row)")
            return [s]
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Assign) and self.uniform(s.expr) \
                and not _mentions(s.expr, set(folded)) and _effect_free(s.expr.value, self.pure, set(self.functions),
                                                                        False):
            target = s.expr.target
            if isinstance(target, A.Name) and target.id in pending:
                del pending[target.id]  # no longer its declared start: not a fold's partial
            if isinstance(target, A.Name) or s.expr.op == "=":
                # every thread stores the same value at the same place (or updates its own copy of a scalar)
                return [s]
        raise _Refuse(f"a statement outside the row loops that is not modeled ({type(s).__name__})")

    def nested(self, s: A.Stmt, pending: dict[str, tuple[str, A.Expr, A.Type]],
               folded: dict[str, tuple[str, A.Expr]], totals: set[str]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        for x in (s.stmts if isinstance(s, A.Block) else (s,)):
            out.extend(self.stmt(x, pending, folded, totals))
        return out

    def inline_combine(self, s: A.For, folded: dict[str, tuple[str, A.Expr]], totals: set[str]) -> list[A.Stmt]:
        """``for (o = 16; o > 0; o >>= 1) v (+)= shfl(v, o)`` right in the kernel: a warp's combine, dropped."""
        names = [p for p in folded if _mentions(s, {p})]
        if len(names) != 1 or self.first_only:
            raise _Refuse("a loop that reads a partial other than to combine it")
        partial = names[0]
        op, init = folded[partial]
        start = s.init.decls[0].init if isinstance(s.init, A.DeclStmt) and len(s.init.decls) == 1 else None
        var = s.init.decls[0].name if isinstance(s.init, A.DeclStmt) and len(s.init.decls) == 1 else ""
        halves = isinstance(s.step, A.Assign) and s.step.target == A.Name(var) and (
            (s.step.op == ">>=" and A.const_int(s.step.value) == 1) or (s.step.op == "/=" and A.const_int(
                s.step.value) == 2))
        to_one = isinstance(s.cond, A.Binary) and s.cond.left == A.Name(var) and (
            (s.cond.op == ">" and A.const_int(s.cond.right) == 0) or (s.cond.op == ">=" and A.const_int(
                s.cond.right) == 1))
        if start is None or A.const_int(start) != 16 or not halves or not to_one:
            raise _Refuse("an inline shuffle combine whose offsets are not 16, 8, 4, 2, 1")
        calls = {n.callee for n in A.walk(s.body) if isinstance(n, A.Call)}
        rw = A.read_write(s.body)
        body_locals = {n.name for n in A.walk(s.body) if isinstance(n, A.VarDecl)}
        if self.mode != "warp" or rw.opaque or rw.mem_writes or not rw.writes <= {partial} | body_locals \
                or not calls & (_WARP_SHUFFLES | _DOWN_SHUFFLES) or calls & (_UP_SHUFFLES | _INDEXED_SHUFFLES):
            raise _Refuse("an inline combine that is not a warp's xor or down shuffle tree")
        if not _Combine(op, init, self.functions).stmt(s.body, {partial}, 0, False, False):
            raise _Refuse(f"the inline combine is not a pure {op}-fold of the partials")
        del folded[partial]
        totals.add(partial)
        if calls & _DOWN_SHUFFLES:
            self.lane0_only.add(partial)
        return []

    def first_lane(self, cond: A.Expr) -> bool:
        """``lane == 0`` / ``0 == lane`` with the row owner's lane (``threadIdx.x`` in block mode)."""
        if not (isinstance(cond, A.Binary) and cond.op == "=="):
            return False
        side = cond.left if A.const_int(cond.right) == 0 else cond.right if A.const_int(cond.left) == 0 else None
        return side is not None and self.lane_start(side) == self.mode

    def combine(self, e: A.Expr, folded: dict[str, tuple[str, A.Expr]], totals: set[str],
                in_place: str | None) -> A.Expr:
        """``e`` with the combine call of a folded partial replaced by the partial (now the row's total)."""
        for partial, (op, init) in list(folded.items()):
            if not _mentions(e, {partial}):
                continue
            calls = _combine_call(e, partial)
            if self.first_only:
                raise _Refuse(f"the partial {partial} is combined by the first lane alone")
            if len(calls) != 1:
                raise _Refuse(f"the partial {partial} is used other than as one combine's argument")
            self.lane0_result = self.check_combine(calls[0], partial, op, init)
            call = calls[0]

            def blank(n: A.Node, call: A.Call = call) -> A.Node | None:
                return A.lit(0) if n is call else None

            def total(n: A.Node, call: A.Call = call, partial: str = partial) -> A.Node | None:
                return A.Name(partial) if n is call else None

            if _mentions(A.rewrite(e, blank), {partial}):
                raise _Refuse(f"the partial {partial} is used other than as one combine's argument")
            e = A.rewrite(e, total)
            del folded[partial]
            totals.add(partial)
            if in_place is None:
                # the partial itself is not the total afterwards in the source: later reads would differ
                self.dead.add(partial)
        return e

    def select_fold(self, body: A.Stmt, partial: str, op: str, elem: A.Expr, var_type: A.Type) -> A.Stmt:
        """``v = fmaxf(v, E)`` → ``T e = E; v = e > v ? e : v``: the same value while v is not NaN (it starts
        at the identity and only takes elements greater than it), and a select vectorizes where fmaxf does not
        without -ffinite-math-only."""
        stmts = body.stmts if isinstance(body, A.Block) else (body,)
        e = A.fresh_name(self.kernel, "xp_e")
        v = A.Name(partial)
        pick = A.Ternary(A.binop(">" if op == "max" else "<", A.Name(e), v), A.Name(e), v)
        return A.Block((*stmts[:-1], A.decl(e, A.replace(var_type, quals=()), elem), A.ExprStmt(A.assign(v, pick))))

    def row_loop(self, s: A.For, view: A.LoopView, pending: dict[str, tuple[str, A.Expr, A.Type]],
                 folded: dict[str, tuple[str, A.Expr]]) -> list[A.Stmt]:
        if self.first_only:
            raise _Refuse("a loop over the row strided by the lanes that only the first lane runs")
        if not self.uniform(s.body) or not self.uniform(view.stop) or _uses_builtin(s.body, {"blockDim"}):
            raise _Refuse("a row loop's body depends on the lane")
        if _mentions(s.body, set(folded) | self.dead):
            raise _Refuse("a row loop reads a partial before its combine")
        var_type = A.replace(view.var_type, quals=()) if view.var_type is not None else None
        init: A.Stmt = A.decl(view.var, var_type, A.lit(0)) if var_type is not None else \
            A.ExprStmt(A.assign(A.Name(view.var), A.lit(0)))
        loop = A.For(init, A.binop("<", A.Name(view.var), view.stop), A.Unary("++", A.Name(view.var)), s.body)
        rw = A.read_write(s.body)
        body_locals = {n.name for n in A.walk(s.body) if isinstance(n, A.VarDecl)}
        pointers = {n.name for n in A.walk(self.kernel.body) if isinstance(n, A.VarDecl) and n.type.pointers} | {
            p.name for p in self.kernel.params if isinstance(p, A.Param) and p.name and p.type.pointers}
        outside = (rw.writes - body_locals) | (rw.address_taken - pointers - body_locals)
        if rw.opaque or not _effect_free(s.body, self.pure, set(self.functions), False):
            raise _Refuse("a row loop calls code with effects (atomics, impure helpers)")
        if not outside:
            return [A.Pragma("omp simd"), loop]
        if len(outside) == 1:
            partial = next(iter(outside))
            fold = _fold_of(s.body, partial)
            if partial in pending and fold is not None:
                op, start, pending_type = fold[0], pending[partial][1], pending[partial][2]
                if not _Combine(op, start, self.functions).identity(start):
                    raise _Refuse(f"the partial {partial} does not start from the identity of {op}")
                del pending[partial]
                folded[partial] = (op, start)
                if op != "+":
                    loop = A.replace(loop, body=self.select_fold(s.body, partial, op, fold[1], pending_type))
                return [A.Pragma(f"omp simd reduction({op}:{partial})"), loop]
        raise _Refuse(f"a row loop writes {', '.join(sorted(outside))} outside its body other than one fold")


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    warp_size = int_param(params, "warp_size", 0, 0, 128) or (
        64 if ctx.source_dialect is Dialect.HIP else ctx.warp_size)
    def rewrite(kernel: A.Function) -> A.Function | str:
        try:
            return _Rewriter(kernel, module, warp_size).run()
        except _Refuse as refusal:
            return str(refusal)

    result = rewrite_each(module, kernel_or_why, rewrite, nothing="no __global__ kernel")
    ctx.notes.append(f"block reduce: {', '.join(result.done)} as sequential SIMD loops per row")
    return leave(unit, result.module, ctx)
