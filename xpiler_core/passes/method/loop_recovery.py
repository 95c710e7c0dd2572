"""Loop recovery: CUDA kernels become CPU functions with explicit block and thread loops.

Each ``__global__ K(params)`` becomes ``static void K(dim3 xp_grid, dim3 xp_block, size_t xp_smem, params)``:
a block loop nest over ``xp_grid`` whose body holds the block's shared memory as local arrays and the
kernel body as thread loops over ``xp_block``. How the body is cut into thread loops:

* ``__syncthreads()`` ends a thread loop (loop fission). Scalars declared before a barrier and used after
  it are **expanded** into per-thread arrays ``v[xp_nt]``; declarations that do not depend on the thread
  (uniform: params, ``blockIdx``, ``blockDim``, other uniform values, never reassigned) become block-level
  scalars instead.
* A ``for``/``while`` loop that contains a barrier stays a block-level loop (its header must be uniform);
  an ``if`` that contains one is predicated: its condition goes into a per-thread array first.
* Warp collectives (``__shfl*_sync``, ``__ballot_sync``, ``__any_sync``, ``__all_sync``; ``__activemask`` as
  a ballot of true) are sequentialized: each thread stores its operand into a per-thread array, a barrier
  splits the loop, and the result is read from the partner's slot with CUDA's out-of-range rules
  (``xp_shfl_*`` in the prelude).
* Device functions that use barriers, warp collectives or thread builtins are inlined first (a template's
  type parameters deduced from the arguments' declared types when the call names none, as C++ does).
* A parameter the kernel writes is a per-thread copy (every CUDA thread owns its parameters).
* ``return`` leaves the thread (``continue``/``goto``); with later thread loops a per-thread done flag keeps
  the thread out of them. Atomics map onto OpenMP atomics in the prelude; launches ``K<<<g, b, s>>>(args)``
  become ``K(dim3(g), dim3(b), s, args)``; the CUDA host API maps onto host memory.
* For a bare kernel (no ``extern "C"`` host entry), an ``extern "C"`` function over the kernel's parameters
  computes the launch shape (``grid``/``block`` parameters: from the test spec, the launch site,
  ``__launch_bounds__`` and a ``blockIdx.x * B + threadIdx.x < N`` guard) and calls it; when the grid
  cannot be inferred the pass refuses and says so.

Parameters: ``warp_size`` (the source's warp width), ``entry``/``grid``/``block``/``shared_bytes`` for the
bare-kernel wrapper (C expressions over the kernel parameters, comma-separated per dimension).
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.names import LAUNCH_FUNCTIONS
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import (
    INT_TYPES,
    PURE_CALLS,
    bool_param,
    calls_in,
    enter,
    int_param,
    leave,
    named_spellings,
    names_in,
    parse_stmts,
    scalar_writes,
    side_effect_free,
    template_actuals,
    template_formals,
    value_template_arguments,
)
from xpiler_core.passes.support.coop_groups import lower_cooperative_groups, uses_cooperative_groups
from xpiler_core.passes.support.counted_while import counted_whiles_as_fors
from xpiler_core.passes.support.cpu_prelude import GRAPH_NODES, PRELUDE, PRELUDE_MARK, cublas_section
from xpiler_core.passes.support.function_macros import Macros, expand_macros, function_macros
from xpiler_core.passes.support.launch import infer_block, infer_grid
from xpiler_core.tables import is_gpu_header

_INCLUDE_DIRECTIVE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"][^\n]*$', re.MULTILINE)

INFO = PassInfo(
    name="loop_recovery",
    summary="Kernels → CPU functions: block/thread loops, barrier fission with expansion, warp ops and atomics",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("warp_size", "int", 32, "warp width the source was written for", (32, 64)),
        ParamSpec("entry", "str", "", "kernel to expose as an extern \"C\" function (bare kernels)"),
        ParamSpec("grid", "str", "", "grid for that entry: C expressions over its parameters, comma-separated"),
        ParamSpec("block", "str", "", "block for that entry, comma-separated (default: __launch_bounds__)"),
        ParamSpec("shared_bytes", "str", "0", "dynamic shared memory bytes for that entry"),
        ParamSpec("wrapper", "bool", True, "emit the extern \"C\" wrapper for a bare kernel"),
        ParamSpec("launch_params", "str", "", "extra trailing int parameters of the wrapper that carry the "
                  "launch shape when it is not a function of the kernel's parameters (e.g. xp_grid_x)"),
    ),
)

WARP_OPS: dict[str, tuple[str, int, int | None, int | None]] = {
    # name: (helper kind, value argument, lane/offset argument, width argument)
    "__shfl_sync": ("idx", 1, 2, 3),
    "__shfl_down_sync": ("down", 1, 2, 3),
    "__shfl_up_sync": ("up", 1, 2, 3),
    "__shfl_xor_sync": ("xor", 1, 2, 3),
    "__shfl": ("idx", 0, 1, 2),
    "__shfl_down": ("down", 0, 1, 2),
    "__shfl_up": ("up", 0, 1, 2),
    "__shfl_xor": ("xor", 0, 1, 2),
    "__ballot_sync": ("ballot", 1, None, None),
    "__any_sync": ("any", 1, None, None),
    "__all_sync": ("all", 1, None, None),
    "__ballot": ("ballot", 0, None, None),
    "__any": ("any", 0, None, None),
    "__all": ("all", 0, None, None),
    "__activemask": ("ballot", -1, None, None),  # the lanes that reach it: a ballot of true
}
BARRIERS = frozenset({"__syncthreads", "__syncwarp", "__threadfence_block"})
SIDE_EFFECT_CALLS = frozenset({"atomicAdd", "atomicSub", "atomicMax", "atomicMin", "atomicExch", "atomicCAS",
                               "printf", "malloc", "free"})
_T = A.Name("xp_t")
_NT = A.Name("xp_nt")
_BUILTIN_NAMES = {
    ("threadIdx", "x"): "xp_tx", ("threadIdx", "y"): "xp_ty", ("threadIdx", "z"): "xp_tz",
    ("blockIdx", "x"): "xp_bx", ("blockIdx", "y"): "xp_by", ("blockIdx", "z"): "xp_bz",
    ("blockDim", "x"): "xp_bdx", ("blockDim", "y"): "xp_bdy", ("blockDim", "z"): "xp_bdz",
    ("gridDim", "x"): "xp_gdx", ("gridDim", "y"): "xp_gdy", ("gridDim", "z"): "xp_gdz",
}


def _is_sync_call(node: A.Node) -> bool:
    return isinstance(node, A.Call) and (node.callee in BARRIERS or node.callee in WARP_OPS)


def _has_sync(node: A.Node) -> bool:
    return any(_is_sync_call(n) for n in A.walk(node))


def _barrier() -> A.Stmt:
    return A.ExprStmt(A.call("__syncthreads"))


def _is_barrier_stmt(stmt: A.Stmt) -> bool:
    return isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Call) and stmt.expr.callee in BARRIERS


@dataclass(frozen=True)
class _ThreadLoop(A.Stmt):
    """A placeholder for one thread loop during fission: its statements and the predicates guarding it."""

    stmts: tuple[A.Stmt, ...]
    guards: tuple[A.Expr, ...] = ()


# ------------------------------------------------------------------------------------------ inlining
class _Inliner:
    """Inlines device functions that use barriers, warp collectives, builtins or shared memory."""

    def __init__(self, module: A.Module) -> None:
        self.functions = {f.name: f for f in module.functions() if not f.is_kernel}
        self.counter = itertools.count()
        needs: set[str] = set()
        changed = True
        while changed:
            changed = False
            for f in self.functions.values():
                if f.name in needs:
                    continue
                if any(
                    _is_sync_call(n) or A.builtin_ref(n) is not None
                    or (isinstance(n, A.VarDecl) and n.is_shared)
                    or (isinstance(n, A.Call) and n.callee in needs)
                    or (isinstance(n, A.Name) and n.id == "warpSize")
                    for n in A.walk(f.body)
                ):
                    needs.add(f.name)
                    changed = True
        self.inline = needs
        # function-like macros (``#define AS(i, j) As[i][j]``): expanded where an inlined function's body uses one
        # that names its locals, so that renaming the locals renames what the macro reads too
        self.macros: Macros = function_macros(module)
        # declared types of the names in scope where calls are inlined (the kernel's, then each inlined copy's):
        # what a template's type parameters are deduced from when a call names no template arguments
        self.types: dict[str, A.Type] = {}

    def stmts(self, stmts: tuple[A.Stmt, ...], depth: int = 0) -> tuple[A.Stmt, ...]:
        out: list[A.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, depth))
        return tuple(out)

    def stmt(self, s: A.Stmt, depth: int) -> list[A.Stmt]:
        if depth > 8:
            raise PassRefused("device functions nest too deeply to inline (recursion?)", s.span)
        if isinstance(s, A.Block):
            return [A.replace(s, stmts=self.stmts(s.stmts, depth))]
        if isinstance(s, A.For):
            if s.cond is not None and self._target_call(s.cond) or s.step is not None and self._target_call(s.step):
                raise PassRefused("a device function with barriers in a loop header cannot be inlined", s.span)
            return [A.replace(s, body=self._body(s.body, depth))]
        if isinstance(s, (A.While, A.DoWhile)):
            if self._target_call(s.cond):
                raise PassRefused("a device function with barriers in a loop condition cannot be inlined", s.span)
            return [A.replace(s, body=self._body(s.body, depth))]
        if isinstance(s, A.If):
            if self._target_call(s.cond):
                call = self._target_call(s.cond)
                assert call is not None
                pre, result = self._expand(call, depth, s)
                cond = A.rewrite(s.cond, lambda n: result if n is call else None)
                return [*pre, *self.stmt(A.replace(s, cond=cond), depth)]
            return [A.replace(s, then=self._body(s.then, depth),
                              else_=None if s.else_ is None else self._body(s.else_, depth))]
        if isinstance(s, (A.ExprStmt, A.DeclStmt, A.Return)):
            call = self._target_call(s)
            if call is None:
                return [s]
            pre, result = self._expand(call, depth, s)
            if isinstance(s, A.ExprStmt) and s.expr is call:
                return pre
            rest = A.rewrite(s, lambda n: result if n is call else None)
            return [*pre, *self.stmt(rest, depth)]
        return [s]

    def _body(self, s: A.Stmt, depth: int) -> A.Stmt:
        out = self.stmt(s, depth)
        return out[0] if len(out) == 1 else A.Block(tuple(out))

    def _target_call(self, node: A.Node) -> A.Call | None:
        # innermost-first: a call whose arguments hold no other call to inline
        found: A.Call | None = None
        for n in A.walk(node):
            if isinstance(n, A.Call) and n.callee and n.callee.split("<")[0].strip() in self.inline:
                found = n
        return found

    @staticmethod
    def _template_bindings(fn: A.Function, callee: str, at: A.Stmt) -> dict[str, A.Expr]:
        """``f<256>`` against ``template <int BLOCK>`` → {BLOCK: 256} (value parameters only)."""
        if fn.template is None:
            return {}
        try:
            actuals = value_template_arguments(fn.template, callee)
        except ValueError as why:
            if "<" not in callee:
                raise PassRefused(f"cannot inline template device function '{fn.name}' {why}", at.span) from None
            raise PassRefused(f"cannot inline '{callee}': {why}", at.span) from None
        # a number is a literal; a name (the caller's constexpr local or template parameter) stays a name, so
        # the caller's renames reach it
        return {name: A.Literal(actual) if re.fullmatch(r"-?\d\w*", actual) else A.Name(actual)
                if re.fullmatch(r"[A-Za-z_]\w*", actual) else A.Name(f"({actual})") for name, actual in actuals.items()}

    def _deduce_types(self, fn: A.Function, call: A.Call) -> A.Function | None:
        """``fn`` with its type template parameters replaced by the types of the call's arguments, as C++
        deduces them (``warp_reduce_max(v)`` with ``float v``: ``T`` is ``float``); None when a parameter is
        not a type, or an argument's type is not known here."""
        assert fn.template is not None
        names: list[str] = []
        for formal, _default in template_formals(fn.template):
            words = formal.split()
            if len(words) != 2 or words[0] not in ("typename", "class"):
                return None
            names.append(words[1])
        params = [p for p in fn.params if isinstance(p, A.Param)]
        if len(params) != len(call.args):
            return None
        deduced: dict[str, A.Type] = {}
        for p, arg in zip(params, call.args, strict=True):
            if p.type.base not in names or p.type.base in deduced:
                continue
            known = self.types.get(arg.id) if isinstance(arg, A.Name) else None
            if known is None or len(known.pointers) < len(p.type.pointers) or known.reference:
                return None
            # by value, T drops the argument's top-level const; through a pointer it keeps the pointee's
            pointers = known.pointers[: len(known.pointers) - len(p.type.pointers)]
            quals = known.quals if p.type.pointers else tuple(q for q in known.quals if q not in ("const", "volatile"))
            deduced[p.type.base] = A.Type(known.base, quals, pointers)
        if set(deduced) != set(names):
            return None

        return A.replace(_with_types(fn, deduced), template=None)

    @staticmethod
    def _explicit_types(fn: A.Function, callee: str) -> tuple[A.Function, str]:
        """``f<8, size_t>`` against ``template <int B, typename T>``: ``fn`` with ``T`` written as ``size_t``
        and the callee left with the value arguments (``f<8>``), for :meth:`_template_bindings`; unchanged when
        the call names no type argument or is not understood."""
        if fn.template is None or "<" not in callee:
            return fn, callee
        formals = [declaration for declaration, _default in template_formals(fn.template)]
        actuals = template_actuals(fn.template, callee)
        if len(formals) != len(actuals):
            return fn, callee
        types: dict[str, A.Type] = {}
        kept_formals, kept_actuals = [], []
        for formal, actual in zip(formals, actuals, strict=True):
            words = formal.split()
            if len(words) == 2 and words[0] in ("typename", "class"):
                if not _TYPE_ARGUMENT.fullmatch(actual):
                    return fn, callee
                types[words[1]] = A.Type(actual)
            else:
                kept_formals.append(formal)
                kept_actuals.append(actual)
        if not types:
            return fn, callee

        specialized = _with_types(fn, types)
        header = "<" + ", ".join(kept_formals) + ">" if kept_formals else None
        name = callee[: callee.index("<")].strip()
        return A.replace(specialized, template=header), name + ("<" + ", ".join(kept_actuals) + ">" if kept_formals
                                                                else "")

    def _expand_macros(self, fn: A.Function, local: set[str]) -> A.Function:
        """``fn`` with its calls of function-like macros whose bodies name its locals expanded in place."""
        return expand_macros(fn, self.macros, lambda _name, body: bool(set(re.findall(r"[A-Za-z_]\w*", body)) & local))

    def _expand(self, call: A.Call, depth: int, at: A.Stmt) -> tuple[list[A.Stmt], A.Expr]:
        assert call.callee is not None
        fn = self.functions[call.callee.split("<")[0].strip()]
        if fn.template is not None and "<" not in call.callee:
            fn = self._deduce_types(fn, call) or fn
        fn, callee = self._explicit_types(fn, call.callee)
        template_args = self._template_bindings(fn, callee, at)
        params = [p for p in fn.params if isinstance(p, A.Param)]
        if len(params) != len(fn.params) or len(params) != len(call.args):
            raise PassRefused(f"cannot inline '{fn.name}': parameter list not understood", at.span)
        k = next(self.counter)
        local = {p.name for p in params if p.name} | {n.name for n in A.walk(fn.body) if isinstance(n, A.VarDecl)}
        fn = _without_static_asserts(self._expand_macros(fn, local))
        self.types.update({f"{name}_i{k}": t for name, t in A.declared_types(fn).items() if name in local})
        renames: dict[str, A.Expr] = {**template_args, **{nm: A.Name(f"{nm}_i{k}") for nm in local}}
        body_stmts = list(fn.body.stmts)
        returns = [n for n in A.walk(fn.body) if isinstance(n, A.Return)]
        ret_void = fn.ret.base == "void" and not fn.ret.pointers
        result_name = f"xp_ret{k}"
        tail: A.Expr | None = None
        pre: list[A.Stmt] = []
        if returns:
            last = body_stmts[-1] if body_stmts else None
            if len(returns) == 1 and last is returns[0]:
                body_stmts = body_stmts[:-1]
                tail = returns[0].value
            else:
                # several returns: each sets the result and a done flag, what follows runs only while not done
                done = f"xp_done{k}"
                if any(isinstance(n, A.Opaque) for n in A.walk(fn.body)):
                    raise PassRefused(f"cannot inline '{fn.name}': it returns from several places around code the "
                                      "AST does not model", at.span)
                body_stmts = list(eliminate_returns(tuple(body_stmts), None if ret_void else result_name, done))
                pre.append(A.DeclStmt((A.VarDecl(done, A.ctype("int"), (), A.lit(0)),)))
                if not ret_void:
                    pre.append(A.DeclStmt((A.VarDecl(result_name, A.replace(fn.ret, quals=()), ()),)))
        inner: list[A.Stmt] = []
        for p, arg in zip(params, call.args, strict=True):
            assert p.name is not None
            if p.type.reference:
                if not isinstance(arg, A.Name):
                    raise PassRefused(f"cannot inline '{fn.name}': reference argument is not a variable", at.span)
                renames[p.name] = arg
                continue
            if p.dims:
                # an array parameter is a pointer to the caller's array: the body indexes the argument itself
                if not isinstance(arg, A.Name) or p.name in scalar_writes(fn.body):
                    raise PassRefused(f"cannot inline '{fn.name}': array parameter '{p.name}' is not given an array "
                                      "variable (or is reassigned)", at.span)
                renames[p.name] = arg
                continue
            # the copy drops its top-level const (expansion may assign it per thread): a pointer keeps what it
            # points to const (``const float* in``) and drops the const after its last star
            if p.type.pointers:
                ptype = A.replace(p.type, pointers=(*p.type.pointers[:-1], tuple(
                    q for q in p.type.pointers[-1] if q != "const")))
            else:
                ptype = A.replace(p.type, quals=tuple(q for q in p.type.quals if q != "const"))
            inner.append(A.DeclStmt((A.VarDecl(f"{p.name}_i{k}", ptype, p.dims, arg),)))
        body: list[A.Stmt] = list(body_stmts)
        if tail is not None and not ret_void:
            body.append(A.ExprStmt(A.assign(A.Name(result_name), tail)))
            pre.append(A.DeclStmt((A.VarDecl(result_name, A.replace(fn.ret, quals=()), ()),)))
        elif tail is not None:
            body.append(A.ExprStmt(tail))
        # arguments are evaluated in the caller's names; only the body is renamed
        block = A.Block((*inner, *A.substitute(A.Block(tuple(body)), renames).stmts))
        # the renamed declarations inside the body
        block = _rename_decls(block, {nm: f"{nm}_i{k}" for nm in local if isinstance(renames.get(nm), A.Name)
                                      and renames[nm] == A.Name(f"{nm}_i{k}")})
        pre.append(A.Block(self.stmts(block.stmts, depth + 1)))
        return pre, A.Name(result_name)


def eliminate_returns(stmts: tuple[A.Stmt, ...], result: str | None, done: str) -> tuple[A.Stmt, ...]:
    """A function body without ``return``: each one stores the value in ``result``, sets ``done`` and leaves
    the loops around it; the statements after one that may return run under ``if (!done)``."""

    def may_return(s: A.Stmt) -> bool:
        return any(isinstance(n, A.Return) for n in A.walk(s))

    def stmt(s: A.Stmt, loops: int) -> A.Stmt:
        if isinstance(s, A.Return):
            out: list[A.Stmt] = []
            if result is not None and s.value is not None:
                out.append(A.ExprStmt(A.assign(A.Name(result), s.value)))
            out.append(A.ExprStmt(A.assign(A.Name(done), A.lit(1))))
            if loops:
                out.append(A.Break())
            return A.Block(tuple(out))
        if isinstance(s, A.Block):
            return A.replace(s, stmts=block(s.stmts, loops))
        if isinstance(s, A.If):
            return A.replace(s, then=stmt(s.then, loops), else_=None if s.else_ is None else stmt(s.else_, loops))
        if isinstance(s, (A.For, A.While, A.DoWhile)) and may_return(s):
            return A.replace(s, body=stmt(s.body, loops + 1))
        return s

    def block(items: tuple[A.Stmt, ...], loops: int) -> tuple[A.Stmt, ...]:
        out: list[A.Stmt] = []
        for i, s in enumerate(items):
            out.append(stmt(s, loops))
            if may_return(s) and i + 1 < len(items):
                if loops and isinstance(s, (A.For, A.While, A.DoWhile)):
                    out.append(A.If(A.Name(done), A.Break()))  # a return in an inner loop leaves this one too
                rest = block(items[i + 1:], loops)
                out.append(A.If(A.Unary("!", A.Name(done)), A.Block(rest)))
                break
        return tuple(out)

    return block(stmts, 0)


def _rename_decls(node: A.Block, mapping: dict[str, str]) -> A.Block:
    class _R(A.Transformer):
        def visit_VarDecl(self, d: A.VarDecl) -> A.VarDecl:  # noqa: N802
            d = self.generic_visit(d)
            return A.replace(d, name=mapping[d.name]) if d.name in mapping else d

    out: A.Block = _R().visit(node)
    return out


# ---------------------------------------------------------------------------------- warp collectives
@dataclass
class _KernelState:
    warp: int
    block_decls: list[A.Stmt] = field(default_factory=list)
    types: dict[str, A.Type] = field(default_factory=dict)
    counter: itertools.count[int] = field(default_factory=itertools.count)
    exit_labels: int = 0


def _warp_normalize(stmts: tuple[A.Stmt, ...], st: _KernelState) -> tuple[A.Stmt, ...]:
    out: list[A.Stmt] = []
    for s in stmts:
        out.extend(_warp_stmt(s, st))
    return tuple(out)


def _warp_body(s: A.Stmt, st: _KernelState) -> A.Stmt:
    out = _warp_stmt(s, st)
    return out[0] if len(out) == 1 else A.Block(tuple(out))


def _innermost_warp_call(node: A.Node) -> A.Call | None:
    found: A.Call | None = None
    for n in A.walk(node):
        if isinstance(n, A.Call) and n.callee in WARP_OPS:
            found = n
    return found


def _warp_stmt(s: A.Stmt, st: _KernelState) -> list[A.Stmt]:
    if isinstance(s, A.Block):
        return [A.replace(s, stmts=_warp_normalize(s.stmts, st))]
    if isinstance(s, A.For):
        for part in (s.init, s.cond, s.step):
            if part is not None and _innermost_warp_call(part) is not None:
                raise PassRefused("a warp collective in a loop header is not supported", s.span)
        return [A.replace(s, body=_warp_body(s.body, st))]
    if isinstance(s, (A.While, A.DoWhile)):
        if _innermost_warp_call(s.cond) is not None:
            raise PassRefused("a warp collective in a loop condition is not supported", s.span)
        return [A.replace(s, body=_warp_body(s.body, st))]
    if isinstance(s, A.If):
        call = _innermost_warp_call(s.cond)
        if call is not None:
            pre, repl = _warp_call(call, st, s)
            cond = A.rewrite(s.cond, lambda n: repl if n is call else None)
            return [*pre, *_warp_stmt(A.replace(s, cond=cond), st)]
        return [A.replace(s, then=_warp_body(s.then, st), else_=None if s.else_ is None else _warp_body(s.else_, st))]
    if isinstance(s, (A.ExprStmt, A.DeclStmt, A.Return)):
        call = _innermost_warp_call(s)
        if call is None:
            return [s]
        pre, repl = _warp_call(call, st, s)
        rest = A.rewrite(s, lambda n: repl if n is call else None)
        return [*pre, *_warp_stmt(rest, st)]
    return [s]


def _warp_call(call: A.Call, st: _KernelState, at: A.Stmt) -> tuple[list[A.Stmt], A.Expr]:
    assert call.callee is not None
    kind, value_at, lane_at, width_at = WARP_OPS[call.callee]
    if len(call.args) <= value_at or (lane_at is not None and len(call.args) <= lane_at):
        raise PassRefused(f"{call.callee} with too few arguments", at.span)
    value = call.args[value_at] if value_at >= 0 else A.lit(1)
    k = next(st.counter)
    array = f"xp_w{k}"
    if kind in ("ballot", "any", "all"):
        elem = A.ctype("int")
        stored: A.Expr = A.Cast(A.ctype("int"), A.binop("!=", value, A.lit(0)))
    else:
        elem = A.ctype("double")
        if isinstance(value, A.Name) and value.id in st.types:
            elem = A.replace(st.types[value.id], quals=(), span=None)
            elem = A.replace(elem, pointers=tuple(() for _ in elem.pointers))
        stored = value
    st.block_decls.append(A.DeclStmt((A.VarDecl(array, elem, (_NT,)),)))
    if kind in ("ballot", "any", "all"):
        # lanes that do not reach the vote (exited, or on the other side of a branch) are inactive: they count
        # as false in a ballot or any, and do not make all() false; every block starts from that
        neutral = 1 if kind == "all" else 0
        st.block_decls.extend(parse_stmts(
            [f"for (int xp_i = 0; xp_i < xp_nt; ++xp_i) {array}[xp_i] = {neutral};"], Dialect.CUDA))
    pre: list[A.Stmt] = [A.ExprStmt(A.assign(A.Index(A.Name(array), _T), stored)), _barrier()]
    warp = A.lit(st.warp)
    if kind in ("ballot", "any", "all"):
        helper = A.call(f"xp_{kind}", A.Name(array), _T, _NT, warp)
    else:
        assert lane_at is not None
        width = call.args[width_at] if width_at is not None and len(call.args) > width_at else warp
        helper = A.call(f"xp_shfl_{kind}", A.Name(array), _T, _NT, warp, call.args[lane_at], width)
    return pre, helper


# -------------------------------------------------------------------------------------------- fission
class _Fission:
    def __init__(self, kernel: A.Function, st: _KernelState) -> None:
        self.st = st
        self.kernel = kernel
        self.shared = {d.name for d in A.walk(kernel.body) if isinstance(d, A.VarDecl) and d.is_shared}
        self.assigned = scalar_writes(kernel.body)
        params = set(kernel.param_names())
        self.uniform: set[str] = params - self.assigned
        self.local: set[str] = {d.name for d in A.walk(kernel.body) if isinstance(d, A.VarDecl)} - self.shared
        self.hoisted: list[A.Stmt] = []
        self.updated_uniform = self._uniformly_updated(kernel.body)
        # the kernel's `const` integer locals computed from constants alone (literals, template parameters,
        # file-scope names): their expression, for the arrays hoisted above their declarations
        self.constants: dict[str, A.Expr] = {}
        self.pred_count = itertools.count()

    def is_uniform(self, expr: A.Node) -> bool:
        for n in A.walk(expr):
            ref = A.builtin_ref(n)
            if ref is not None and ref[0] == "threadIdx":
                return False
            if isinstance(n, A.Name):
                if n.id in self.local and n.id not in self.uniform:
                    return False
                if n.id in self.shared or n.id == "xp_t":
                    return False
            if isinstance(n, (A.Index, A.Assign, A.Opaque)) or isinstance(n, A.Unary) and n.op in ("*", "++", "--"):
                return False
            if isinstance(n, A.Member) and n.arrow:
                return False
            if isinstance(n, A.Call) and (n.callee is None or n.callee in SIDE_EFFECT_CALLS or _is_sync_call(n)):
                return False
        return True

    def _uniformly_updated(self, body: A.Stmt) -> set[str]:
        """Scalar locals every thread updates alike (``int i = blockDim.x / 2; while (i != 0) { ...;
        __syncthreads(); i /= 2; }``): each write of one, its declaration included, is a value of such names,
        parameters and block builtins, under conditions of the same kind (the greatest such set). A kernel that
        breaks out of or continues a loop keeps none (a thread could skip an update the others make)."""
        if any(isinstance(n, A.Break | A.Continue) or (isinstance(n, A.Opaque) and "goto" in n.text)
               for n in A.walk(body)):
            return set()
        writes: dict[str, list[tuple[A.Node, tuple[A.Expr, ...]]]] = {}  # name → (value written, conditions)
        # a write inside a statement with no barrier runs in a thread loop, once per thread: never at block level
        unplaced = A.Opaque("?")

        def visit(stmt: A.Stmt, conds: tuple[A.Expr, ...]) -> None:
            if not isinstance(stmt, A.ExprStmt | A.DeclStmt) and not _has_sync(stmt):
                inner(stmt, (*conds, unplaced))
            elif isinstance(stmt, A.Block):
                for x in stmt.stmts:
                    visit(x, conds)
            elif isinstance(stmt, A.If):
                visit(stmt.then, (*conds, stmt.cond))
                if stmt.else_ is not None:
                    visit(stmt.else_, (*conds, stmt.cond))
            elif isinstance(stmt, A.For):
                header = tuple(x for x in (stmt.cond, stmt.step) if x is not None)
                if stmt.init is not None:
                    visit(stmt.init, conds)
                if stmt.step is not None:
                    inner(stmt.step, (*conds, *header))
                visit(stmt.body, (*conds, *header))
            elif isinstance(stmt, A.While | A.DoWhile):
                visit(stmt.body, (*conds, stmt.cond))
            elif isinstance(stmt, A.DeclStmt):
                for d in stmt.decls:
                    if not d.dims and not d.is_shared and not d.type.pointers and d.init is not None:
                        writes.setdefault(d.name, []).append((d.init, conds))
                    if d.init is not None:
                        inner(d.init, conds)
            else:
                # a write inside a statement of another kind (a switch, text the AST keeps) is not judged
                inner(stmt, conds if isinstance(stmt, A.ExprStmt) else (*conds, unplaced))

        def inner(node: A.Node, conds: tuple[A.Expr, ...]) -> None:
            for n in A.walk(node):
                target = n.target if isinstance(n, A.Assign) else n.operand if isinstance(
                    n, A.Unary) and n.op in ("++", "--", "&") else None
                if isinstance(target, A.Name):
                    writes.setdefault(target.id, []).append((n, conds))

        visit(body, ())
        scalars = {d.name for d in A.walk(body) if isinstance(d, A.VarDecl) and not d.dims and not d.is_shared
                   and not d.type.pointers}
        candidates = scalars & self.assigned
        assumed = set(scalars) | self.uniform
        saved = self.uniform
        try:
            while True:
                self.uniform = assumed
                bad = {v for v in candidates & assumed if any(
                    not self._uniform_write(node, conds) for node, conds in writes.get(v, []))}
                bad |= {v for v in scalars - candidates if v in assumed and any(
                    not self._uniform_write(node, conds) for node, conds in writes.get(v, []))}
                if not bad:
                    break
                assumed = assumed - bad
        finally:
            self.uniform = saved
        return candidates & assumed

    def _uniform_write(self, node: A.Node, conds: tuple[A.Expr, ...]) -> bool:
        value = node.value if isinstance(node, A.Assign) else node.operand if isinstance(node, A.Unary) else node
        if isinstance(node, A.Unary) and node.op == "&":
            return False  # an address taken: written through a pointer, anywhere
        return self.is_uniform(value) and all(self.is_uniform(c) for c in conds)

    def uniform_decl(self, s: A.Stmt) -> bool:
        if not isinstance(s, A.DeclStmt):
            return False
        earlier: set[str] = set()  # `const int a0 = K * by, a1 = a0 + K;`: a later declarator reads an earlier
        try:
            for d in s.decls:
                value = _scalar_init(d)
                if d.is_shared or d.dims or value is None or (
                        d.name in self.assigned and d.name not in self.updated_uniform):
                    return False
                if not self.is_uniform(value):
                    return False
                if d.name not in self.uniform:
                    earlier.add(d.name)
                    self.uniform.add(d.name)
            return True
        finally:
            self.uniform -= earlier

    def _uniform_update(self, s: A.Stmt) -> bool:
        """``i /= 2;`` of a variable every thread updates alike, with a value of such names."""
        if not isinstance(s, A.ExprStmt):
            return False
        e = s.expr
        target = e.target if isinstance(e, A.Assign) else e.operand if isinstance(e, A.Unary) and e.op in (
            "++", "--") else None
        if not (isinstance(target, A.Name) and target.id in self.updated_uniform and target.id in self.uniform):
            return False
        return not isinstance(e, A.Assign) or self.is_uniform(e.value)

    # region → block-level statements
    def region(self, stmts: tuple[A.Stmt, ...], guards: tuple[A.Expr, ...]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        run: list[A.Stmt] = []

        def flush() -> None:
            if run:
                out.append(_ThreadLoop(tuple(run), guards))
                run.clear()

        for s in stmts:
            if isinstance(s, A.DeclStmt) and any(d.is_shared for d in s.decls):
                # hoisted above the kernel's own constants: extents that name them (`__shared__ float a[BM][BK]`
                # after `const int BM = 128;`) take their values
                self.hoisted.append(A.substitute(s, self.constants))
                continue
            if not _has_sync(s) and self._uniform_update(s):
                flush()  # every thread updates it alike: once, for the block
                out.append(s)
                continue
            if not _has_sync(s):
                if self.uniform_decl(s):
                    assert isinstance(s, A.DeclStmt)
                    for d in s.decls:
                        init = _scalar_init(d)
                        if init is not None and ("const" in d.type.quals or "constexpr" in d.storage) \
                                and not d.type.pointers and not (
                                names_in(init) - set(self.constants)) & (self.local | set(self.kernel.param_names())):
                            value = A.const_int(A.substitute(init, self.constants))
                            self.constants[d.name] = A.lit(value) if value is not None else A.substitute(
                                init, self.constants)
                    declared = {d.name for d in s.decls}
                    self.uniform |= declared
                    # a value of params/builtins/literals that the pending thread statements neither compute
                    # nor name goes before them: the thread loop is not split (no per-thread arrays to carry
                    # their locals across the split)
                    if not run or declared & {n for r in run for n in names_in(r)} or \
                            calls_in(s) - PURE_CALLS:
                        flush()
                    out.append(s)
                else:
                    run.append(s)
                continue
            flush()
            if _is_barrier_stmt(s):
                continue
            if isinstance(s, A.Block):
                out.extend(self.region(s.stmts, guards))
            elif isinstance(s, A.If):
                out.extend(self.branch(s, guards))
            elif isinstance(s, A.For):
                pre, loop = self._predicate_jumps(s)
                out.extend(self.region(pre, guards))
                assert isinstance(loop, A.For)
                out.append(self.loop(loop, guards))
            elif isinstance(s, A.While):
                pre, whole = self._predicate_jumps(s)
                out.extend(self.region(pre, guards))
                assert isinstance(whole, A.While)
                if not self.is_uniform(whole.cond):
                    raise PassRefused("a while loop with a barrier must have a thread-independent condition", s.span)
                self._no_loop_jumps(whole.body)
                out.append(A.While(whole.cond, A.Block(tuple(self.region(A.stmts_of(whole.body), guards)))))
            elif isinstance(s, A.DoWhile):
                # `do body while (c);` is `for (first = 1; first || c; first = 0) body`: c first read after one
                # pass, as the do-while reads it (a double-buffered tile loop's form)
                first = f"xp_first{next(self.pred_count)}"
                out.extend(self.region((A.For(
                    A.DeclStmt((A.VarDecl(first, A.ctype("int"), init=A.lit(1)),)),
                    A.binop("||", A.Name(first), s.cond), A.assign(A.Name(first), A.lit(0)), s.body, span=s.span),),
                    guards))
            else:
                raise PassRefused(f"a barrier inside {type(s).__name__} is not supported", s.span)
        flush()
        return out

    def branch(self, s: A.If, guards: tuple[A.Expr, ...]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        if self.is_uniform(s.cond):
            then = A.Block(tuple(self.region(A.stmts_of(s.then), guards)))
            other = None if s.else_ is None else A.Block(tuple(self.region(A.stmts_of(s.else_), guards)))
            return [A.If(s.cond, then, other)]
        name = f"xp_p{next(self.pred_count)}"
        self.st.block_decls.append(A.DeclStmt((A.VarDecl(name, A.ctype("unsigned char"), (_NT,)),)))
        cell = A.Index(A.Name(name), _T)
        out.append(_ThreadLoop((A.ExprStmt(A.assign(cell, A.Cast(A.ctype("unsigned char"),
                                                                  A.binop("!=", s.cond, A.lit(0))))),), guards))
        out.extend(self.region(A.stmts_of(s.then), (*guards, cell)))
        if s.else_ is not None:
            out.extend(self.region(A.stmts_of(s.else_), (*guards, A.Unary("!", cell))))
        return out

    def loop(self, s: A.For, guards: tuple[A.Expr, ...]) -> A.Stmt:
        init_ok = s.init is None or (
            isinstance(s.init, A.DeclStmt) and all(d.init is None or self.is_uniform(d.init) for d in s.init.decls)
        ) or (isinstance(s.init, A.ExprStmt) and self._uniform_assign(s.init.expr))
        if isinstance(s.init, A.DeclStmt):
            self.uniform |= {d.name for d in s.init.decls}
        header_ok = init_ok and (s.cond is None or self.is_uniform(s.cond)) and (
            s.step is None or self._uniform_assign(s.step))
        self._no_loop_jumps(s.body)
        if not header_ok:
            return self.divergent_loop(s, guards)
        return A.For(s.init, s.cond, s.step, A.Block(tuple(self.region(A.stmts_of(s.body), guards))))

    def divergent_loop(self, s: A.For, guards: tuple[A.Expr, ...]) -> A.Stmt:
        """A loop whose trip count differs per thread: run while any thread is active, predicated."""
        if isinstance(s.init, A.DeclStmt):
            self.uniform -= {d.name for d in s.init.decls}
            self.local |= {d.name for d in s.init.decls}
        k = next(self.pred_count)
        active, anyname = f"xp_p{k}", f"xp_any{k}"
        self.st.block_decls.append(A.DeclStmt((A.VarDecl(active, A.ctype("unsigned char"), (_NT,)),)))
        cell = A.Index(A.Name(active), _T)
        out: list[A.Stmt] = []
        if s.init is not None:
            out.append(_ThreadLoop((s.init,), guards))
        out.append(A.ExprStmt(A.call("memset", A.Name(active), A.lit(0), _NT)))
        cond = s.cond if s.cond is not None else A.lit(1)
        iteration: list[A.Stmt] = [
            _ThreadLoop((A.ExprStmt(A.assign(cell, A.Cast(A.ctype("unsigned char"), A.binop("!=", cond, A.lit(0))))),),
                        guards),
            A.DeclStmt((A.VarDecl(anyname, A.ctype("int"), (), A.lit(0)),)),
            A.for_range("xp_i", A.lit(0), _NT, A.ExprStmt(A.assign(A.Name(anyname), A.Index(A.Name(active),
                                                                                             A.Name("xp_i")), "|="))),
            A.If(A.Unary("!", A.Name(anyname)), A.Break()),
            *self.region(A.stmts_of(s.body), (*guards, cell)),
        ]
        if s.step is not None:
            iteration.append(_ThreadLoop((A.ExprStmt(s.step),), (*guards, cell)))
        out.append(A.For(None, None, None, A.Block(tuple(iteration))))
        return A.Block(tuple(out))

    def _uniform_assign(self, expr: A.Expr) -> bool:
        if isinstance(expr, A.Assign) and isinstance(expr.target, A.Name):
            return self.is_uniform(expr.value) and (expr.target.id in self.uniform or expr.target.id not in self.local)
        if isinstance(expr, A.Unary) and expr.op in ("++", "--") and isinstance(expr.operand, A.Name):
            return True
        if isinstance(expr, A.Binary) and expr.op == ",":
            return self._uniform_assign(expr.left) and self._uniform_assign(expr.right)
        return False

    def _predicate_jumps(self, s: A.For | A.While) -> tuple[tuple[A.Stmt, ...], A.For | A.While]:
        """A loop with barriers or warp collectives whose threads ``continue`` or ``break`` on their own: each
        jump sets a per-thread flag and what follows it in the iteration runs only where the flag is clear; a
        ``break`` also leaves the thread out of the loop's condition (the loop then runs while any thread is
        in it, predicated). Returns the declarations to put before the loop and the loop."""
        jumps = _own_jumps(s.body)
        if not jumps:
            return (), s
        k = next(self.pred_count)
        skip, stop = f"xp_skip{k}", f"xp_stop{k}"
        self.assigned |= {skip, stop}  # per-thread flags: assigned in the loop, never uniform
        self.local |= {skip, stop}
        has_break = any(isinstance(j, A.Break) for j in jumps)
        body = _predicate_body(A.stmts_of(s.body), skip, stop)
        body = (A.DeclStmt((A.VarDecl(skip, A.ctype("int"), (), A.lit(0)),)), *body)
        pre: tuple[A.Stmt, ...] = ()
        if has_break:
            pre = (A.DeclStmt((A.VarDecl(stop, A.ctype("int"), (), A.lit(0)),)),)
        cond = s.cond
        if has_break:
            cond = A.binop("&&", cond if cond is not None else A.lit(1), A.Unary("!", A.Name(stop)))
        return pre, A.replace(s, cond=cond, body=A.Block(body))

    def _no_loop_jumps(self, body: A.Stmt) -> None:
        stack: list[tuple[A.Node, bool]] = [(body, False)]
        while stack:
            node, in_loop = stack.pop()
            if isinstance(node, (A.Break, A.Continue)) and not in_loop:
                raise PassRefused("break/continue in a loop that contains a barrier is not supported", node.span)
            nested = in_loop or isinstance(node, (A.For, A.While, A.DoWhile))
            stack.extend((c, nested) for c in A.children(node))


def _own_jumps(body: A.Stmt) -> list[A.Stmt]:
    """The ``break``/``continue`` statements of a loop body that belong to this loop (not to loops inside)."""
    found: list[A.Stmt] = []
    stack: list[A.Node] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, (A.Break, A.Continue)):
            found.append(node)
        elif not isinstance(node, (A.For, A.While, A.DoWhile)):
            stack.extend(A.children(node))
    return found


def _predicate_body(stmts: tuple[A.Stmt, ...], skip: str, stop: str) -> tuple[A.Stmt, ...]:
    """``stmts`` with this loop's ``continue`` (sets ``skip``) and ``break`` (sets ``skip`` and ``stop``) made
    flags; the statements after a jump run under ``if (!skip)``."""

    def jumps(s: A.Stmt) -> bool:
        return bool(_own_jumps(s))

    def stmt(s: A.Stmt) -> A.Stmt:
        if isinstance(s, A.Continue):
            return A.ExprStmt(A.assign(A.Name(skip), A.lit(1)))
        if isinstance(s, A.Break):
            return A.Block((A.ExprStmt(A.assign(A.Name(skip), A.lit(1))), A.ExprStmt(A.assign(A.Name(stop), A.lit(1)))))
        if isinstance(s, A.Block):
            return A.replace(s, stmts=block(s.stmts))
        if isinstance(s, A.If):
            return A.replace(s, then=stmt(s.then), else_=None if s.else_ is None else stmt(s.else_))
        return s

    def block(items: tuple[A.Stmt, ...]) -> tuple[A.Stmt, ...]:
        out: list[A.Stmt] = []
        for i, s in enumerate(items):
            out.append(stmt(s))
            if jumps(s) and i + 1 < len(items):
                out.append(A.If(A.Unary("!", A.Name(skip)), A.Block(block(items[i + 1:]))))
                break
        return tuple(out)

    return block(stmts)


# ------------------------------------------------------------------------------------- thread loops
def _threadloop_decls(loop: _ThreadLoop) -> set[str]:
    return {d.name for s in loop.stmts if isinstance(s, A.DeclStmt) for d in s.decls}


_TYPE_ALIAS = re.compile(r"\s*(using\s+\w+\s*=|typedef\b)")


def _type_aliases(kernel: A.Function) -> list[A.Opaque]:
    """Type aliases (``using T = ...;``, ``typedef``) at the kernel's top level: compile-time only, so they are
    hoisted to the top of the block body, where every per-thread array and thread loop sees them."""
    return [s for s in kernel.body.stmts if isinstance(s, A.Opaque) and _TYPE_ALIAS.match(s.text)]


def _private_params(kernel: A.Function) -> A.Function:
    """In CUDA every thread owns a copy of every parameter: one the kernel writes (``A += cRow * K``, ``n--``,
    ``&n``) becomes a local initialized from the argument, which the thread loops then keep per thread like any
    other local (expanded across barriers). Left as a parameter it would be one variable shared by all the
    threads the loops run — and by the OpenMP threads running blocks. A parameter named in code the AST does
    not model is copied too (a copy is always what CUDA means)."""
    written = scalar_writes(kernel.body)
    opaque = " ".join(n.text for n in A.walk(kernel.body) if isinstance(n, A.Opaque))
    private = {p.name for p in kernel.params if isinstance(p, A.Param) and p.name and not p.dims
               and (p.name in written or re.search(rf"\b{re.escape(p.name)}\b", opaque))}
    if not private:
        return kernel
    params: list[A.Param | A.Node] = []
    copies: list[A.Stmt] = []
    for p in kernel.params:
        if isinstance(p, A.Param) and p.name in private:
            argument = f"xp_arg_{p.name}"
            params.append(A.replace(p, name=argument))
            copies.append(A.DeclStmt((A.VarDecl(p.name, p.type, (), A.Name(argument)),)))
        else:
            params.append(p)
    return A.replace(kernel, params=tuple(params), body=A.replace(kernel.body, stmts=(*copies, *kernel.body.stmts)))


def _volatile_memory(fn: A.Function, body: A.Block) -> str | None:
    """The first name ``fn`` (its parameters, ``body``'s declarations) declares as a volatile pointer or array."""
    declared = [(p.name, p.type) for p in fn.params if isinstance(p, A.Param)]
    declared += [(n.name, n.type) for n in A.walk(body) if isinstance(n, A.VarDecl)]
    for name, typ in declared:
        volatile = "volatile" in typ.quals or any("volatile" in q for q in typ.pointers)
        if volatile and (typ.is_pointer or any(isinstance(n, A.VarDecl) and n.name == name and n.dims
                                               for n in A.walk(body))):
            return name
    return None


def _refuse_warp_synchronous(kernel: A.Function, body: A.Block, functions: dict[str, A.Function]) -> None:
    """Memory reached through a volatile pointer or array (``volatile float* v = s; v[tid] += v[tid + 16];``),
    in the kernel, the device functions inlined into it or any device function it calls (``warpReduce(volatile
    float* s, int tid)``, not inlined: it has no barrier): the warp-synchronous idiom, whose lanes must take each
    statement in step, and flags other threads or blocks write while this one waits. A loop over threads runs one
    thread's statements after another's, so it would compute something else: refused (the portable tier runs
    the warps)."""
    name = _volatile_memory(kernel, body)
    seen: set[str] = set()
    pending = [body]
    while name is None and pending:
        for call in (n for n in A.walk(pending.pop()) if isinstance(n, A.Call) and n.callee):
            callee = functions.get(str(call.callee).split("<")[0].strip())
            if callee is None or callee.name in seen or callee.body is None:
                continue
            seen.add(callee.name)
            name = _volatile_memory(callee, callee.body)
            if name is not None:
                break
            pending.append(callee.body)
    if name is not None:
        raise PassRefused(f"'{name}' reaches memory through a volatile pointer (the warp-synchronous idiom: "
                          "a warp's lanes take each statement in step), which a loop over threads does not",
                          kernel.span)


def _build_kernel(kernel: A.Function, warp: int, inliner: _Inliner) -> A.Function:
    # function-like macros that read the kernel's parameters or locals (`#define A(i, j) A[(i) + (j) * lda]`):
    # expanded first, so a variable made per-thread is per-thread where the macro reads it too
    local = {p.name for p in kernel.params if isinstance(p, A.Param) and p.name} | {
        n.name for n in A.walk(kernel.body) if isinstance(n, A.VarDecl)}
    kernel = inliner._expand_macros(kernel, local)
    kernel = _private_params(kernel)
    aliases = _type_aliases(kernel)
    if aliases:
        kernel = A.replace(kernel, body=A.replace(kernel.body, stmts=tuple(
            s for s in kernel.body.stmts if not any(s is a for a in aliases))))
    st = _KernelState(warp=warp, types=A.declared_types(kernel))
    inliner.types = dict(st.types)
    body = A.Block(inliner.stmts(kernel.body.stmts))
    # a stride loop spelled `i = s; while (i < n) { ...; i += k; }` is the for loop the later passes read
    body = counted_whiles_as_fors(body)
    _refuse_warp_synchronous(kernel, body, inliner.functions)
    body = A.Block(_warp_normalize(body.stmts, st))
    st.types = A.declared_types(A.replace(kernel, body=body))
    fission = _Fission(A.replace(kernel, body=body), st)
    top = fission.region(body.stmts, ())
    loops = [n for s in top for n in A.walk(s) if isinstance(n, _ThreadLoop)]
    # names each thread loop uses; a name declared in one loop and used elsewhere is expanded
    uses: list[set[str]] = []
    for lp in loops:
        uses.append({n.id for s in lp.stmts for n in A.walk(s) if isinstance(n, A.Name)}
                    | {n.id for g in lp.guards for n in A.walk(g) if isinstance(n, A.Name)})
    block_level_names = {
        n.id for s in top if not isinstance(s, _ThreadLoop)
        for n in A.walk(_strip_threadloops(s)) if isinstance(n, A.Name)
    }
    expanded: dict[str, A.VarDecl] = {}
    for i, lp in enumerate(loops):
        for s in lp.stmts:
            if not isinstance(s, A.DeclStmt):
                continue
            for d in s.decls:
                elsewhere = any(d.name in u for j, u in enumerate(uses) if j != i) or d.name in block_level_names
                if elsewhere:
                    prior = expanded.get(d.name)
                    if prior is not None and prior.type != d.type:
                        raise PassRefused(f"variable '{d.name}' is declared twice with different types across a barrier",
                                          d.span)
                    expanded[d.name] = d
    has_return = any(isinstance(n, A.Return) for lp in loops for s in lp.stmts for n in A.walk(s))
    done_flags = has_return and len(loops) > 1
    recomputed = _recomputable(expanded, body, fission, block_level_names)
    for name in recomputed:
        del expanded[name]
    block_decls: list[A.Stmt] = [*fission.hoisted, *st.block_decls]
    for d in expanded.values():
        t = A.replace(d.type, quals=tuple(q for q in d.type.quals if q != "const") if not d.type.pointers
                      else d.type.quals, pointers=tuple(tuple(q for q in p if q != "const") for p in d.type.pointers))
        # the kernel's constants, declared below the block's arrays
        dims = tuple(A.substitute(x, fission.constants) if x is not None else None for x in d.dims)
        block_decls.append(A.DeclStmt((A.VarDecl(d.name, t, (_NT, *dims)),)))
    if done_flags:
        block_decls.append(A.DeclStmt((A.VarDecl("xp_done", A.ctype("unsigned char"), (_NT,)),)))
        block_decls.append(A.ExprStmt(A.call("memset", A.Name("xp_done"), A.lit(0), A.Name("xp_nt"))))
    ctx = _LoopContext(expanded=set(expanded), done_flags=done_flags, st=st, recomputed=recomputed)
    block_body = [*aliases, *block_decls, *(_lower_threadloops(s, ctx) for s in top)]
    block_body = [_fix_shared(s) for s in block_body]
    new_body = _block_nest(A.Block(tuple(block_body)))
    new_body = _builtins(new_body, warp)
    params = (
        A.Param("xp_grid", A.ctype("dim3")), A.Param("xp_block", A.ctype("dim3")),
        A.Param("xp_smem", A.ctype("size_t")), *kernel.params,
    )
    quals = tuple(q for q in kernel.qualifiers if q not in A.KERNEL_QUALIFIERS) + ("static",)
    # the kernel's __launch_bounds__ stay on the block function (the C printer does not print them): what a
    # pass may assume of its launches (affine_index checks its indices over them)
    return A.replace(kernel, params=params, body=new_body, qualifiers=quals, linkage=None)


def _strip_threadloops(s: A.Stmt) -> A.Stmt:
    return A.rewrite(s, lambda n: A.Empty() if isinstance(n, _ThreadLoop) else None)


@dataclass
class _LoopContext:
    expanded: set[str]
    done_flags: bool
    st: _KernelState
    # thread-pure values declared in one thread loop and read in others: declared again where read
    recomputed: dict[str, A.VarDecl] = field(default_factory=dict)
    # of those, the `int t = threadIdx.x;` copies, read as the builtin itself (the lowering reads every thread
    # builtin as an `int`, so an `int` copy of one is the same value)
    as_builtins: dict[str, A.Expr] = field(init=False)

    def __post_init__(self) -> None:
        self.as_builtins = {}
        for name, d in self.recomputed.items():
            value = _scalar_init(d)
            if value is not None and d.type.base == "int" and not d.type.pointers and A.builtin_ref(value) is not None:
                self.as_builtins[name] = value


def _recomputable(expanded: dict[str, A.VarDecl], body: A.Block, fission: _Fission,
                  block_level_names: set[str]) -> dict[str, A.VarDecl]:
    """The values carried across a barrier that each thread can compute again where it reads them, instead of
    keeping them in a per-thread array: ``int tid = threadIdx.x;``, ``const int row = blockIdx.y * 16 + ty;`` —
    a scalar declared once, never written after, whose value reads only thread and block builtins, names no
    thread writes (parameters, block constants) and other such values. An array cell ``tid[xp_t]`` hides the
    index from the vectorizer and the affine passes; ``tid`` recomputed does not."""
    declared: dict[str, int] = {}
    for n in A.walk(body):
        if isinstance(n, A.VarDecl):
            declared[n.name] = declared.get(n.name, 0) + 1
    params = set(fission.kernel.param_names())
    opaque_words = {w for n in A.walk(body) if isinstance(n, A.Opaque) for w in re.findall(r"[A-Za-z_]\w*", n.text)}

    def stable(name: str) -> bool:  # one declaration (or a parameter), never written, not in opaque text
        return (declared.get(name, 0) + (name in params) == 1 and name not in fission.assigned
                and name not in opaque_words)

    out: dict[str, A.VarDecl] = {}
    for name, d in expanded.items():
        value = _scalar_init(d)
        if d.dims or d.init_style != "=" or value is None or d.is_shared or name in block_level_names \
                or not stable(name):
            continue
        # no memory read (a barrier may separate it from the use), no side effect; names of such values or of
        # what every thread sees alike and nothing writes
        nodes = list(A.walk(A.rewrite(value, lambda x: A.lit(0) if A.builtin_ref(x) is not None else None)))
        reads_memory = any(isinstance(n, A.Index) or isinstance(n, A.Member) and n.arrow
                           or isinstance(n, A.Unary) and n.op == "*" for n in nodes)
        names_known = all(n.id in out or (n.id in fission.uniform and n.id not in fission.updated_uniform
                                          and stable(n.id)) for n in nodes if isinstance(n, A.Name))
        if side_effect_free(value) and not reads_memory and names_known:
            out[name] = d
    return out


def _lower_threadloops(s: A.Stmt, ctx: _LoopContext) -> A.Stmt:
    return A.rewrite(s, lambda n: _thread_loop(n, ctx) if isinstance(n, _ThreadLoop) else None)


def _thread_loop(lp: _ThreadLoop, ctx: _LoopContext) -> A.Stmt:
    stmts: list[A.Stmt] = []
    as_builtins = ctx.as_builtins
    if as_builtins:
        lp = _ThreadLoop(tuple(A.substitute(s, as_builtins) for s in _without_decls(lp.stmts, set(as_builtins))),
                         tuple(A.substitute(g, as_builtins) for g in lp.guards))
    for s in lp.stmts:
        if isinstance(s, A.DeclStmt) and any(d.name in ctx.expanded for d in s.decls):
            for d in s.decls:
                if d.name in ctx.expanded:
                    if d.init is not None:
                        stmts.extend(_expanded_init(d))
                else:
                    stmts.append(A.DeclStmt((d,)))
        else:
            stmts.append(s)
    cell = {name: A.Index(A.Name(name), _T) for name in ctx.expanded}
    body: A.Stmt = _scoped_substitute(A.Block(tuple(stmts)), cell)
    label = f"xp_exit{ctx.st.exit_labels}"
    ctx.st.exit_labels += 1
    body, used_label = _returns(body, label, ctx.done_flags)
    head: list[A.Stmt] = [A.DeclStmt((A.VarDecl("xp_t", A.ctype("int", 0, ("const",)),
                                                init=A.binop("+", A.Name("xp_tx"), A.binop(
                                                    "*", A.Name("xp_bdx"), A.binop(
                                                        "+", A.Name("xp_ty"), A.binop("*", A.Name("xp_bdy"),
                                                                                      A.Name("xp_tz")))))),))]
    declared_here = _threadloop_decls(lp)
    used_here = {n.id for s in lp.stmts for n in A.walk(s) if isinstance(n, A.Name)} | {
        n.id for g in lp.guards for n in A.walk(g) if isinstance(n, A.Name)}
    wanted = {name for name in ctx.recomputed
              if name in used_here and name not in declared_here and name not in as_builtins}
    while True:  # and the values those read
        more = {n.id for name in wanted for n in A.walk(ctx.recomputed[name])
                if isinstance(n, A.Name) and n.id in ctx.recomputed and n.id not in declared_here} - wanted
        if not more:
            break
        wanted |= more
    head.extend(A.DeclStmt((d,)) for name, d in ctx.recomputed.items() if name in wanted)
    if ctx.done_flags:
        head.append(A.If(A.Index(A.Name("xp_done"), _T), A.Continue()))
    if lp.guards:
        cond = lp.guards[0]
        for g in lp.guards[1:]:
            cond = A.binop("&&", cond, g)
        head.append(A.If(A.Unary("!", cond), A.Continue()))
    inner: list[A.Stmt] = [*head, *(body.stmts if isinstance(body, A.Block) and not used_label else (body,))]
    if used_label:
        inner.append(A.Opaque(f"{label}:;"))
    loop: A.Stmt = A.for_range("xp_tx", A.lit(0), A.Name("xp_bdx"), A.Block(tuple(inner)))
    loop = A.for_range("xp_ty", A.lit(0), A.Name("xp_bdy"), loop)
    return A.for_range("xp_tz", A.lit(0), A.Name("xp_bdz"), loop)


def _without_decls(stmts: tuple[A.Stmt, ...], names: set[str]) -> list[A.Stmt]:
    out: list[A.Stmt] = []
    for s in stmts:
        if isinstance(s, A.DeclStmt) and any(d.name in names for d in s.decls):
            kept = tuple(d for d in s.decls if d.name not in names)
            if kept:
                out.append(A.replace(s, decls=kept))
            continue
        out.append(s)
    return out


def _scalar_init(d: A.VarDecl) -> A.Expr | None:
    """The one value a scalar declaration starts from: ``e`` of ``T x = e``, ``T x{e}`` and ``T x(e)`` (a scalar
    or pointer); None for arrays, objects and declarations without one."""
    if d.init_style == "=" or bool(d.type.pointers) or d.type.base in _SCALAR_TYPES:
        return A.single_value_init(d)
    return None


def _expanded_init(d: A.VarDecl) -> list[A.Stmt]:
    """The initializer of a declaration expanded per thread, as statements on this thread's copy (``d.name``
    stands for it until the cell substitution): a scalar is assigned; an array with a braced list is zeroed
    whole (what the elements the list leaves out hold) and then given the listed elements, one level deep."""
    assert d.init is not None
    if not d.dims:
        if d.init_style == "=":
            return [A.ExprStmt(A.assign(A.Name(d.name), d.init))]
        # `size_t const i{e}` / `int n(e)` of a scalar or pointer: the one value, as `= e` would give it
        value = _scalar_init(d)
        if value is not None:
            return [A.ExprStmt(A.assign(A.Name(d.name), A.Cast(A.replace(d.type, quals=()), value)))]
        raise PassRefused(f"cannot expand the constructed variable '{d.name}' across a barrier", d.span)
    if not isinstance(d.init, A.InitList) or any(isinstance(x, A.InitList) for x in d.init.items):
        raise PassRefused(f"cannot expand initialized array '{d.name}' across a barrier", d.span)
    this = A.Name(d.name)
    out: list[A.Stmt] = [A.ExprStmt(A.call("memset", A.Unary("&", this), A.lit(0), A.call("sizeof", this)))]
    # a flat list fills a many-dimensional array in row-major order (brace elision): through its first element
    first: A.Expr = this
    for _ in d.dims[1:]:
        first = A.Index(first, A.lit(0))
    flat = this if len(d.dims) == 1 else A.Unary("&", A.Index(first, A.lit(0)))
    for i, item in enumerate(d.init.items):
        if not _zero_literal(item):  # the memset wrote those
            out.append(A.ExprStmt(A.assign(A.Index(flat, A.lit(i)), item)))
    return out


_SCALAR_TYPES = frozenset({*INT_TYPES, "float", "double", "bool", "char", "signed char", "unsigned char", "half",
                           "__half"})


def _zero_literal(e: A.Expr) -> bool:
    """``0``, ``0.0``, ``0.f``, also converted (``static_cast<T>(0)``, ``(float)0``): a literal whose bytes are all
    zero (not ``-0.0``)."""
    if isinstance(e, A.Cast) and not e.type.pointers:
        return _zero_literal(e.operand)
    if isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id.startswith("static_cast<") \
            and "*" not in e.func.id and len(e.args) == 1:
        return _zero_literal(e.args[0])
    if not isinstance(e, A.Literal) or e.text.startswith("-"):
        return False
    try:
        return float(e.text.rstrip("fFlLuU") or "nan") == 0.0
    except ValueError:
        return False


def _scoped_substitute(stmt: A.Stmt, mapping: dict[str, Any]) -> A.Stmt:
    """Like ``A.substitute`` but a nested declaration of a name shadows the mapping in its scope."""
    if not mapping:
        return stmt
    if isinstance(stmt, A.Block):
        current = dict(mapping)
        out: list[A.Stmt] = []
        for s in stmt.stmts:
            out.append(_scoped_substitute(s, current))
            if isinstance(s, A.DeclStmt):
                for d in s.decls:
                    current.pop(d.name, None)
        return A.replace(stmt, stmts=tuple(out))
    if isinstance(stmt, A.For):
        inner = dict(mapping)
        init = stmt.init
        if isinstance(init, A.DeclStmt):
            init = A.substitute(init, inner)
            for d in stmt.init.decls:  # type: ignore[union-attr]
                inner.pop(d.name, None)
        elif init is not None:
            init = A.substitute(init, inner)
        return A.replace(stmt, init=init, cond=None if stmt.cond is None else A.substitute(stmt.cond, inner),
                         step=None if stmt.step is None else A.substitute(stmt.step, inner),
                         body=_scoped_substitute(stmt.body, inner))
    if isinstance(stmt, A.If):
        return A.replace(stmt, cond=A.substitute(stmt.cond, mapping), then=_scoped_substitute(stmt.then, mapping),
                         else_=None if stmt.else_ is None else _scoped_substitute(stmt.else_, mapping))
    if isinstance(stmt, (A.While, A.DoWhile)):
        return A.replace(stmt, cond=A.substitute(stmt.cond, mapping), body=_scoped_substitute(stmt.body, mapping))
    return A.substitute(stmt, mapping)


def _returns(body: A.Stmt, label: str, done_flags: bool) -> tuple[A.Stmt, bool]:
    """``return`` → ``continue`` at the thread body's loop level, ``goto label`` inside nested loops."""
    used = False

    def exit_stmt(in_loop: bool) -> A.Stmt:
        nonlocal used
        jump: A.Stmt
        if in_loop:
            used = True
            jump = A.Opaque(f"goto {label};")
        else:
            jump = A.Continue()
        if done_flags:
            return A.Block((A.ExprStmt(A.assign(A.Index(A.Name("xp_done"), _T), A.lit(1))), jump))
        return jump

    def visit(node: A.Stmt, in_loop: bool) -> A.Stmt:
        if isinstance(node, A.Return):
            if node.value is not None:
                raise PassRefused("a kernel cannot return a value", node.span)
            return exit_stmt(in_loop)
        if isinstance(node, A.Block):
            return A.replace(node, stmts=tuple(visit(s, in_loop) for s in node.stmts))
        if isinstance(node, A.If):
            return A.replace(node, then=visit(node.then, in_loop),
                             else_=None if node.else_ is None else visit(node.else_, in_loop))
        if isinstance(node, (A.For, A.While, A.DoWhile)):
            return A.replace(node, body=visit(node.body, True))
        if isinstance(node, A.Opaque) and "return" in node.text:
            raise PassRefused("unmodeled code with a return in a kernel", node.span)
        return node

    out = visit(body, False)
    return out, used


def _fix_shared(s: A.Stmt) -> A.Stmt:
    """Shared declarations become block-local: dynamic ``extern __shared__ T s[]`` views the launch's bytes."""
    if not isinstance(s, A.DeclStmt) or not any(d.is_shared for d in s.decls):
        return s
    out: list[A.Stmt] = []
    for d in s.decls:
        storage = tuple(q for q in d.storage if q not in A.SHARED_QUALIFIERS and q != "extern")
        if d.is_dynamic_shared:
            buf = A.VarDecl("xp_dsmem", A.ctype("double"), (A.binop("+", A.binop("/", A.Name("xp_smem"), A.lit(8)),
                                                                      A.lit(1)),))
            ptr_type = A.replace(d.type, pointers=(*d.type.pointers, ()))
            return _dyn_shared(buf, d, ptr_type)
        out.append(A.DeclStmt((A.replace(d, storage=storage),)))
    # several declarators (`__shared__ float a[T], b[T];`): a Block would scope them away, so they are spliced
    return out[0] if len(out) == 1 else _Splice(tuple(out))


def _dyn_shared(buf: A.VarDecl, d: A.VarDecl, ptr_type: A.Type) -> A.Stmt:
    view = A.VarDecl(d.name, ptr_type, (), A.Cast(ptr_type, A.Name("xp_dsmem")))
    # a Block would scope the view away: the pair is spliced into the block body by _block_nest
    return _Splice((A.DeclStmt((buf,)), A.DeclStmt((view,))))


@dataclass(frozen=True)
class _Splice(A.Stmt):
    stmts: tuple[A.Stmt, ...]


def _block_nest(body: A.Block) -> A.Block:
    flat: list[A.Stmt] = []
    for s in body.stmts:
        flat.extend(s.stmts if isinstance(s, _Splice) else (s,))
    inner = A.Block(tuple(flat))
    loop: A.Stmt = A.for_range("xp_bx", A.lit(0), A.Name("xp_gdx"), inner)
    loop = A.for_range("xp_by", A.lit(0), A.Name("xp_gdy"), loop)
    loop = A.for_range("xp_bz", A.lit(0), A.Name("xp_gdz"), loop)
    dims = []
    for name, src in (("xp_bdx", "xp_block.x"), ("xp_bdy", "xp_block.y"), ("xp_bdz", "xp_block.z"),
                      ("xp_gdx", "xp_grid.x"), ("xp_gdy", "xp_grid.y"), ("xp_gdz", "xp_grid.z")):
        base, fld = src.split(".")
        dims.append(A.VarDecl(name, A.ctype("int", 0, ("const",)), (), A.Cast(A.ctype("int"), A.member(A.Name(base), fld))))
    nt = A.VarDecl("xp_nt", A.ctype("int", 0, ("const",)), (),
                   A.binop("*", A.binop("*", A.Name("xp_bdx"), A.Name("xp_bdy")), A.Name("xp_bdz")))
    return A.Block((A.DeclStmt(tuple(dims)), A.DeclStmt((nt,)), A.ExprStmt(A.Cast(A.ctype("void"), A.Name("xp_nt"))),
                    loop))


def _builtins(node: A.Block, warp: int) -> A.Block:
    def fn(n: A.Node) -> A.Node | None:
        ref = A.builtin_ref(n)
        if ref is not None:
            return A.Name(_BUILTIN_NAMES[ref])
        if isinstance(n, A.Name) and n.id == "warpSize":
            return A.lit(warp)
        return None

    return A.rewrite(node, fn)


# ------------------------------------------------------------------------------------------- module
_CAPTURE_CALLS = frozenset({"cudaStreamBeginCapture", "hipStreamBeginCapture", "cudaStreamBeginCaptureToGraph"})


def _captures_streams(module: A.Module) -> bool:
    """Whether the program records stream work into graphs (then launches on a stream go through the prelude's
    ``XP_ON_STREAM``, which records them while their stream is captured)."""
    return any((isinstance(n, A.Call) and n.callee in _CAPTURE_CALLS)
               or (isinstance(n, A.Opaque) and any(name in n.text for name in _CAPTURE_CALLS)) for n in A.walk(module))


def _launch_to_call(node: A.Node, on_streams: bool = False) -> A.Node | None:
    if isinstance(node, A.Launch):
        cfg = list(node.config)
        grid = A.call("dim3", cfg[0])
        block = A.call("dim3", cfg[1]) if len(cfg) > 1 else A.call("dim3", A.lit(1))
        smem: A.Expr = A.Cast(A.ctype("size_t"), cfg[2]) if len(cfg) > 2 else A.Cast(A.ctype("size_t"), A.lit(0))
        args = tuple(A.rewrite(a, _launch_to_call) for a in node.args)
        call = A.Call(node.kernel, (grid, block, smem, *args))
        if on_streams and len(cfg) > 3:
            return A.Call(A.Name("XP_ON_STREAM"), (cfg[3], call))
        return call
    return None


_OPAQUE_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)(\s*<[^<>;]*>)?\s*<<<(.*?)>>>\s*\(", re.DOTALL)


def _top_level_split(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p]


def _opaque_launches(text: str, renamed: dict[str, str]) -> str:
    """Launches inside code the AST keeps as text (a ``switch`` choosing a kernel) as calls of the block
    functions, like :func:`_launch_to_call` (the stream is not needed: launches run in order)."""
    def call(m: re.Match[str]) -> str:
        config = _top_level_split(m.group(3))
        if not config:
            return m.group(0)
        grid, block = f"dim3({config[0]})", f"dim3({config[1]})" if len(config) > 1 else "dim3(1)"
        smem = f"(size_t)({config[2]})" if len(config) > 2 else "(size_t)0"
        name = renamed.get(m.group(1), m.group(1)) + (m.group(2) or "").strip()
        no_args = text[m.end():].lstrip().startswith(")")
        return f"{name}({grid}, {block}, {smem}" + ("" if no_args else ", ")
    return _OPAQUE_LAUNCH.sub(call, text)


def _opaque_launch_text(n: A.Node, renamed: dict[str, str], pointers: set[str]) -> A.Node | None:
    if not isinstance(n, A.Opaque):
        return None
    text = _launch_pointer_types(_opaque_launches(n.text, renamed), pointers)
    if pointers:  # a kernel's address taken (inside a switch) for a pointer the host code launches
        for old, new in renamed.items():
            text = re.sub(rf"&\s*{re.escape(old)}\b(?!\s*\()", f"&{new}", text)
            text = re.sub(rf"(=\s*){re.escape(old)}(\s*;)", rf"\1&{new}\2", text)  # `f = kernel;` too
    return A.replace(n, text=text) if text != n.text else None


_GRAPH_NODE_APIS = re.compile(r"\b(?:cuda|hip)(?:Launch(?:Cooperative)?Kernel|Graph(?:Add\w+|Clone|ExecUpdate\w*|"
                              r"ExecKernelNodeSetParams)|(?:Kernel|HostNode|Memset)(?:Node)?Params)\b")


def _builds_graph_nodes(module: A.Module) -> bool:
    """Whether host code builds graphs node by node or launches through an argument array (the prelude's section
    for them comes with the program)."""
    return any(_GRAPH_NODE_APIS.search(n.id if isinstance(n, A.Name) else n.text if isinstance(n, A.Opaque) else
                                       n.base if isinstance(n, A.Type) else "") for n in A.walk(module))


def _names_cublas(module: A.Module) -> bool:
    """Whether host code calls cuBLAS (its handles, calls or constants), whose headers the prelude replaces."""
    for n in A.walk(module):
        text = n.id if isinstance(n, A.Name) else n.text if isinstance(n, A.Opaque) else n.base if isinstance(
            n, A.Type) else ""
        if re.search(r"\b(?:cublas[A-Z]\w*|CUBLAS_\w+)", text):
            return True
    return False


def _renamed_callee(callee: str, renamed: dict[str, str]) -> str:
    """``callee`` with a renamed kernel's name replaced, template arguments kept."""
    base, angle, rest = callee.partition("<")
    new = renamed.get(base.strip())
    return callee if new is None else new + angle + rest


_REINTERPRET_TO_POINTER = re.compile(r"^reinterpret_cast\s*<[^<>]*\*\s*>$")


def _kernel_values(item: A.Function, block_names: dict[str, str]) -> A.Function:
    """A kernel named as a value — cast to a pointer (``(void *)k``, ``reinterpret_cast<void *>(k)``: for
    ``cudaLaunchKernel``, a graph's kernel node, ``cudaFuncSetAttribute``), or the kernel of a launch API that
    takes its arguments as an array — becomes the prelude's entry for its block function
    (``xp_host_kernel_value(k_blocks)``), which knows the parameter types that array holds."""

    def value(e: A.Expr) -> A.Expr | None:
        if isinstance(e, A.Unary) and e.op == "&":
            e = e.operand
        if isinstance(e, A.Name) and e.id.partition("<")[0].strip() in block_names:
            return A.call("xp_host_kernel_value", A.Name(_renamed_callee(e.id, block_names)))
        return None

    def visit(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Cast) and n.type.pointers and (kernel := value(n.operand)) is not None:
            return A.replace(n, operand=kernel)
        if isinstance(n, A.Call) and _REINTERPRET_TO_POINTER.match(n.callee or "") and len(n.args) == 1 and (
                kernel := value(n.args[0])) is not None:
            return A.replace(n, args=(kernel,))  # reinterpret_cast<void *>(k)
        if isinstance(n, A.Call) and n.callee in LAUNCH_FUNCTIONS and LAUNCH_FUNCTIONS[n.callee][2] is None \
                and n.args and (kernel := value(n.args[0])) is not None:
            return A.replace(n, args=(kernel, *n.args[1:]))
        return None

    return A.rewrite(item, visit)


def _kernel_pointers(item: A.Node, kernels_here: set[str]) -> set[str]:
    """Function pointers a host function declares with a kernel as their value (``void (*f)(float *, int) =
    k;``): another function launches through them, so they point at the kernel's block function too."""
    if not kernels_here:
        return set()
    kernels = "|".join(re.escape(k) for k in sorted(kernels_here))
    found: set[str] = set()
    for n in A.walk(item):
        if isinstance(n, A.Opaque):
            found |= set(re.findall(rf"\bvoid\s*\(\s*\*\s*(\w+)\s*\)\s*\([^;=]*\)\s*=\s*&?\s*(?:{kernels})\s*;",
                                    n.text))
    return found


def _launch_pointer_types(text: str, pointers: set[str]) -> str:
    """``void (*k)(float *, int)`` → ``void (*k)(dim3, dim3, size_t, float *, int)`` for a function pointer the
    host code launches as a kernel (it now points at a block function)."""
    for name in pointers:
        text = re.sub(rf"(\bvoid\s*\(\s*\*\s*{re.escape(name)}\s*\)\s*\()(\s*\)|\s*void\s*\))?",
                      lambda m: m.group(1) + ("dim3, dim3, size_t)" if m.group(2) else "dim3, dim3, size_t, "), text)
    return text


def _split_dims(text: str) -> list[A.Expr]:
    from xpiler_core.frontend.lower import lower_text

    out: list[A.Expr] = []
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in [p.strip() for p in parts if p.strip()]:
        probe = lower_text(f"int xp_probe = {part};", "<param>.c", Dialect.C)
        decls = [i for i in probe.items if isinstance(i, A.DeclStmt)]
        if not decls or decls[0].decls[0].init is None:
            raise PassRefused(f"cannot read launch expression '{part}'")
        out.append(decls[0].decls[0].init)
    return out


def _device_only(fn: A.Function) -> bool:
    """A ``__device__`` (not ``__host__``) function whose body uses thread builtins, barriers or warp
    collectives."""
    if not fn.is_device or "__host__" in fn.qualifiers:
        return False
    return any(A.builtin_ref(n) is not None or (isinstance(n, A.Call) and (_is_sync_call(n) or "shfl" in (n.callee or "")))
               for n in A.walk(fn.body))


def _template_formals(header: str) -> list[str]:
    """The parameter names of a template header (``<int BM, typename T = float>`` → [BM, T])."""
    return [words[-1] for declaration, _default in template_formals(header)
            if (words := re.findall(r"[A-Za-z_]\w*", declaration))]


def _wrapper(kernel: A.Function, grid: list[A.Expr], block: list[A.Expr], smem: A.Expr,
             extra: list[str], instance: str = "") -> A.Function:
    """``instance``: the template arguments (``<128, 8>``) of the instantiation the wrapper launches; the
    wrapper is then named :func:`A.instance_symbol` of it."""
    if instance and kernel.template is not None and (bindings := _instance_bindings(kernel.template, instance)):
        kernel = _with_types(kernel, bindings[0])  # the wrapper's parameters spell the instance's types
    params = tuple(p for p in kernel.params if isinstance(p, A.Param))
    args = tuple(A.Name(p.name) for p in params if p.name)
    params = (*params, *(A.Param(e, A.ctype("int")) for e in extra))
    call = A.Call(A.Name(f"{kernel.name}_blocks{instance}"), (A.call("dim3", *grid), A.call("dim3", *block),
                                                              A.Cast(A.ctype("size_t"), smem), *args))
    name = A.instance_symbol(kernel.name + instance)
    return A.Function(name, A.ctype("void"), params, A.Block((A.ExprStmt(call),)), linkage="C")


def _wrap_kernel(target: A.Function, module: A.Module, params: dict[str, Any], new_kernels: dict[str, A.Function],
                 ctx: PassContext, explicit: bool, instance: str = "") -> list[A.Function]:
    """An ``extern "C"`` function with the kernel's own parameters that launches it over its derived extents
    (preceded by the instance's own block function when ``instance`` names one); the block loops are renamed
    ``NAME_blocks``. Refuses when block or grid cannot be derived."""
    block = _split_dims(str(params.get("block") or "")) or infer_block(target, module)
    if not block:
        raise PassRefused(f"cannot infer the block size of '{target.name}': no launch site, spec or "
                          "__launch_bounds__; pass block=...")
    grid = _split_dims(str(params.get("grid") or "")) or infer_grid(target, block)
    if not grid:
        raise PassRefused(f"cannot infer the grid of '{target.name}' from its guards; pass grid=...")
    if not params.get("block") and not target.launch_bounds:
        ctx.notes.append(f"loop recovery: no launch of '{target.name}' is given and its result does not depend "
                         f"on the block shape; chose {' x '.join(str(A.const_int(b)) for b in block)} threads "
                         "per block")
    smem = (_split_dims(str(params.get("shared_bytes") or "0")) or [A.lit(0)])[0]
    new_kernels[target.name] = A.replace(new_kernels[target.name], name=f"{target.name}_blocks")
    extra = [e.strip() for e in str(params.get("launch_params") or "").split(",") if e.strip()] if explicit else []
    wrapper = _wrapper(target, grid, block, smem, extra, instance)
    special = _instantiated(new_kernels[target.name], instance) if instance else None
    if special is None:
        return [wrapper]
    # the wrapper launches the instance's own copy, its template's values written in (later passes see them)
    call = A.rewrite(wrapper.body, lambda n: A.replace(n, func=A.Name(special.name)) if isinstance(n, A.Call) and isinstance(
        n.func, A.Name) and n.func.id == f"{target.name}_blocks{instance}" else None)
    assert isinstance(call, A.Block)
    return [special, A.replace(wrapper, body=call)]


# a template's type argument the inliner and instances write in: a plain (possibly qualified) type name
_TYPE_ARGUMENT = re.compile(r"(?:(?:unsigned|signed|long|short|const)\s+)*[A-Za-z_]\w*(?:::\w+)*")


def _instance_bindings(template: str, instance: str) -> tuple[dict[str, A.Type], dict[str, A.Expr]] | None:
    """What ``instance`` (``<float, 128, 8>``) gives each parameter of ``template``: type parameters a plain
    type name, value parameters an integer or boolean literal (default arguments fill the ones it leaves out);
    None when it gives anything else."""
    formals = template_formals(template)
    actuals = template_actuals(template, "t" + instance.strip())
    if len(actuals) != len(formals):
        return None
    types: dict[str, A.Type] = {}
    values: dict[str, A.Expr] = {}
    for (declaration, _default), actual in zip(formals, actuals, strict=True):
        words = declaration.split()
        if len(words) < 2:
            return None
        if words[0] in ("typename", "class"):
            if not _TYPE_ARGUMENT.fullmatch(actual):
                return None
            types[words[-1]] = A.Type(actual)
        elif re.fullmatch(r"-?\d+[uUlL]*|true|false", actual):
            values[words[-1]] = A.Name(actual) if actual in ("true", "false") else A.lit(
                int(re.sub(r"[uUlL]+$", "", actual)))
        else:
            return None
    return types, values


def _with_types(node: A.N, types: dict[str, A.Type]) -> A.N:
    """``node`` with the type parameters in ``types`` written as their arguments."""
    def specialize(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Type) and n.base in types:
            t = types[n.base]
            return A.Type(t.base, tuple(dict.fromkeys((*t.quals, *n.quals))), (*t.pointers, *n.pointers),
                          n.reference)
        if isinstance(n, A.Call) and n.callee and "<" in n.callee:
            # `static_cast<T>(0)`, `f<T, 4>(x)`: template arguments spelled in the callee
            callee = n.callee
            for name, t in types.items():
                callee = re.sub(rf"\b{re.escape(name)}\b", " ".join((*t.quals, t.base)) + "*" * len(t.pointers),
                                callee)
            return A.replace(n, func=A.Name(callee), args=tuple(A.rewrite(a, specialize) for a in n.args))
        return None

    return A.rewrite(node, specialize)


def _without_static_asserts(node: A.N) -> A.N:
    """``node`` without its ``static_assert`` statements: checks the source's compiler already made (nvcc
    built it), written in template parameters a copy for one instance or an inlined call no longer declares."""
    def drop(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Block) and any(_is_static_assert(s) for s in n.stmts):
            return A.replace(n, stmts=tuple(A.rewrite(s, drop) for s in n.stmts if not _is_static_assert(s)))
        return None

    return A.rewrite(node, drop)


def _is_static_assert(s: A.Stmt) -> bool:
    # (kept verbatim: as opaque text, or as the frontend's text-only statement)
    return isinstance(s, (A.Opaque, A.Comment)) and s.text.lstrip().startswith("static_assert")


def _instantiated(fn: A.Function, instance: str) -> A.Function | None:
    """A non-template copy of the template block function ``fn`` for ``instance`` (``<float, 128, 8>``) when
    the instance gives every type parameter a type name and every value parameter an integer or boolean
    literal; None otherwise."""
    if fn.template is None:
        return None
    bindings = _instance_bindings(fn.template, instance)
    if bindings is None:
        return None
    types, values = bindings
    spelled = {name: v.id if isinstance(v, A.Name) else str(A.const_int(v)) for name, v in values.items()}

    def callee_values(n: A.Node) -> A.Node | None:
        # a call that names the template's values in its own template arguments (`load<T, TILE>(...)`)
        if isinstance(n, A.Call) and n.callee and "<" in n.callee:
            callee = n.callee
            for name, text in spelled.items():
                callee = re.sub(rf"\b{re.escape(name)}\b", text, callee)
            return A.replace(n, func=A.Name(callee), args=tuple(A.rewrite(a, callee_values) for a in n.args))
        return None

    special = A.substitute(_with_types(_without_static_asserts(fn), types), values)
    return A.replace(A.rewrite(special, callee_values), name=A.instance_symbol(fn.name + instance), template=None)


_USING_NVCUDA = re.compile(r"\s*using\s+namespace\s+nvcuda\s*;\s*")


def _without_unused_wmma_namespace(module: A.Module) -> A.Module:
    """``using namespace nvcuda;`` in a file that uses no wmma (a prelude that includes every header it might
    need) names a namespace the CPU has no use for: dropped; with fragments in use it stays (and is refused)."""
    directives = [i for i in module.items if isinstance(i, A.Opaque) and _USING_NVCUDA.fullmatch(i.text)]
    if not directives:
        return module
    used = any((isinstance(n, A.Opaque) and ("wmma" in n.text or "nvcuda::" in n.text) and n not in directives)
               or (isinstance(n, A.Name) and ("wmma" in n.id or "nvcuda" in n.id))
               or (isinstance(n, A.Type) and ("wmma" in n.base or "nvcuda" in n.base))
               for n in A.walk(module))
    return module if used else A.replace(module, items=tuple(i for i in module.items if i not in directives))


# libcu++'s synchronization objects: a barrier's or pipeline's wait orders the block's threads, which a loop over
# the threads cannot keep; its atomics have no CPU prelude form (the portable tier runs all of them on the
# runtime's model).
_BLOCK_SCOPE_OBJECTS = re.compile(r"\bcuda::(?:std::)?(barrier|pipeline|pipeline_shared_state|make_pipeline|"
                                  r"memcpy_async|pipeline_consumer_wait_prior|pipeline_producer_commit|atomic|"
                                  r"atomic_ref|atomic_thread_fence)\b")


def _refuse_block_scope_objects(module: A.Module) -> None:
    for fn, node, text in named_spellings(module):
        if (m := _BLOCK_SCOPE_OBJECTS.search(text)) is not None:
            raise PassRefused(f"cuda::{m.group(1)} (libcu++ synchronization) is not lowered to loops over "
                              f"threads (in '{fn.name}')", node.span)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    warp = int_param(params, "warp_size", ctx.warp_size if ctx.source_dialect is not Dialect.HIP else 64, 1, 128)
    if any(isinstance(i, A.Opaque) and i.text.startswith(PRELUDE_MARK) for i in module.items):
        raise PassRefused("loop recovery already ran on this module")
    kernels = module.kernels()
    if not kernels:
        raise PassRefused("no __global__ kernel to recover loops from")
    if uses_cooperative_groups(module):
        module = lower_cooperative_groups(module)
        kernels = module.kernels()
    module = _without_unused_wmma_namespace(module)
    _refuse_block_scope_objects(module)
    for item in module.items:
        if isinstance(item, A.Opaque) and "nvcuda" in item.text:
            raise PassRefused("wmma fragments remain: run detensorization first", item.span)
    for k in kernels:
        aliases = {id(s) for s in _type_aliases(k)}
        bad = next((n for n in A.walk(k.body) if isinstance(n, A.Opaque) and id(n) not in aliases), None)
        if bad is not None:
            raise PassRefused(f"kernel '{k.name}' contains code the AST does not model: {bad.text[:60]!r}", bad.span)
    inliner = _Inliner(module)
    inlined = inliner.inline
    # by the kernel itself: overloads of one name (`fill(float*, int)` and `fill(float*, int, int)`) are two
    built = {id(k): _build_kernel(k, warp, inliner) for k in kernels}
    new_kernels = {k.name: built[id(k)] for k in kernels}
    # host code that launches a kernel says how (any host function, extern "C" or not); an extern "C" entry
    # without launches is the user's own interface and keeps its place too
    host_entries = [f for f in module.functions() if not f.is_kernel and not f.is_device
                    and (f.linkage == "C" or any(isinstance(n, A.Launch) for n in A.walk(f.body)))]
    entry_name = str(params.get("entry") or "")
    wrap = bool_param(params, "wrapper", True) and (bool(entry_name) or not host_entries)
    wrappers: list[A.Function] = []
    exported: list[str] = []
    if wrap:
        if entry_name:
            # a template kernel's instantiation (``gemm<128, 8>``): the wrapper launches that instance
            base, bracket, rest = entry_name.partition("<")
            instance = bracket + rest
            target = next((k for k in kernels if k.name == base.strip()), None)
            if target is None:
                raise PassRefused(f"entry={entry_name}: no __global__ kernel of that name")
            bindings = _instance_bindings(target.template, instance) if instance and target.template else None
            if instance and (bindings is None or any(
                    re.search(rf"\b{re.escape(formal)}\b", p.type.base) for p in _with_types(target, bindings[0]).params
                    if isinstance(p, A.Param) for formal in _template_formals(target.template or ""))):
                raise PassRefused(f"entry={entry_name}: not an instance of a template kernel whose parameter types "
                                  "its template arguments spell (a wrapper could not spell them)")
            wrappers.extend(_wrap_kernel(target, module, params, new_kernels, ctx, explicit=True, instance=instance))
        elif len(kernels) == 1:
            try:
                wrappers.extend(_wrap_kernel(kernels[0], module, params, new_kernels, ctx, explicit=True))
            except PassRefused:
                if ctx.target is not Dialect.C or params.get("block") or params.get("grid"):
                    raise
                # C target, nothing says how to launch it: the caller does, as with a CUDA launch
                k = kernels[0]
                new_kernels[k.name] = A.replace(new_kernels[k.name], qualifiers=tuple(
                    q for q in new_kernels[k.name].qualifiers if q != "static"))
                ctx.notes.append(f"loop recovery: no launch of '{k.name}' is given and its result depends on the "
                                 "launch shape; exported as NAME(dim3 grid, dim3 block, size_t shared_bytes, ...)")
        else:
            # several kernels and no host code: each derivable one gets a wrapper; the others stay callable with
            # their launch configuration as leading arguments, and the note says which.
            for k in kernels:
                try:
                    wrappers.extend(_wrap_kernel(k, module, {}, new_kernels, ctx, explicit=False))
                except PassRefused:
                    new_kernels[k.name] = A.replace(new_kernels[k.name], qualifiers=tuple(
                        q for q in new_kernels[k.name].qualifiers if q != "static"))
                    exported.append(k.name)
            if exported:
                ctx.notes.append("loop recovery: no launch derivable for " + ", ".join(exported) + "; exported as "
                                 "NAME(dim3 grid, dim3 block, size_t shared_bytes, ...)")
    renamed = {k.name: new_kernels[k.name].name for k in kernels if new_kernels[k.name].name != k.name}
    dropped: list[str] = []
    items: list[A.TopItem] = [A.Opaque(PRELUDE, reason="cpu prelude")]
    if _names_cublas(module):
        items.append(A.Opaque(cublas_section(), reason="cpu cublas"))
    graph_nodes_at = len(items)
    on_streams = _captures_streams(module)
    for item in module.items:
        if isinstance(item, A.Include) and is_gpu_header(item.path):
            continue  # the prelude stands in for the GPU toolchain's headers; the program's others stay
        if isinstance(item, A.Opaque) and _INCLUDE_DIRECTIVE.search(item.text):
            # a conditional block kept as text (`#ifndef NO_CUDA #include <cuda.h> #else ... #endif`): its GPU
            # includes go the same way
            item = A.replace(item, text=_INCLUDE_DIRECTIVE.sub(
                lambda m: m.group(0) if not is_gpu_header(m.group(2)) else f"// {m.group(0).strip()} (the prelude "
                "stands in for it)", item.text))
        if isinstance(item, A.Function):
            if item.name in inlined and item.name not in {k.name for k in kernels}:
                continue
            if _device_only(item):
                # a device function no kernel here called (a library header's helpers): it reads the thread
                # builtins, so it has no meaning outside a kernel on the CPU
                dropped.append(item.name)
                continue
            if id(item) in built:
                # the name's wrapper or rename (new_kernels), the overload's own parameters and body
                items.append(A.replace(built[id(item)], name=new_kernels[item.name].name,
                                       qualifiers=new_kernels[item.name].qualifiers))
                continue
            # kernels launched through function pointers: the pointers take the block functions' signature
            pointers = {n.kernel.id for n in A.walk(item) if isinstance(n, A.Launch) and isinstance(n.kernel, A.Name)
                        and n.kernel.id not in new_kernels} | _kernel_pointers(item, set(new_kernels))
            item = A.rewrite(item, functools.partial(_launch_to_call, on_streams=on_streams))
            item = _kernel_values(item, {k: new_kernels[k].name for k in new_kernels})
            item = A.rewrite(item, functools.partial(_opaque_launch_text, renamed=renamed, pointers=pointers))
            if renamed:
                # the file's own launches go to the block loops, not to the wrapper with the kernel's name
                # (a template's launch keeps its arguments: `k<128, 8>` → `k_blocks<128, 8>`)
                item = A.rewrite(item, lambda n: A.replace(n, func=A.Name(_renamed_callee(n.func.id, renamed)))
                                 if isinstance(n, A.Call) and isinstance(n.func, A.Name)
                                 and _renamed_callee(n.func.id, renamed) != n.func.id and len(n.args) >= 3
                                 and isinstance(n.args[0], A.Call) and n.args[0].callee == "dim3" else None)
                if pointers:
                    # a kernel's address taken for a pointer the host code launches: the block function's
                    item = A.rewrite(item, lambda n: A.Unary("&", A.Name(renamed[n.operand.id])) if isinstance(
                        n, A.Unary) and n.op == "&" and isinstance(n.operand, A.Name) and n.operand.id in renamed
                        else None)
            if item.is_device:
                # internal linkage, unless the function is part of the program's interface: callable from host
                # code or declared before (a prototype without static: static after it is an error)
                local = "static" not in item.qualifiers and "__host__" not in item.qualifiers and not any(
                    re.search(rf"\b{re.escape(item.name)}\s*\(", p.text) and "static" not in p.text
                    for p in module.items if isinstance(p, A.Opaque))
                item = A.replace(item, qualifiers=(*(q for q in item.qualifiers if q not in A.DEVICE_QUALIFIERS),
                                                   *(("static",) if local else ())))
        items.append(item)
    items.extend(wrappers)
    if _builds_graph_nodes(module) or any(isinstance(n, A.Call) and n.callee == "xp_host_kernel_value"
                                          for item in items for n in A.walk(item)):
        items.insert(graph_nodes_at, A.Opaque(GRAPH_NODES, reason="cpu graph nodes"))
    if dropped:
        ctx.notes.append(f"loop recovery: device functions no kernel calls left out ({', '.join(dropped)})")
    ctx.notes.append(f"loop recovery: {len(kernels)} kernel(s) as block/thread loops (warp {warp})"
                     + (f"; wrappers {', '.join(w.name for w in wrappers)}" if wrappers else ""))
    out = A.replace(module, items=tuple(items), dialect=Dialect.C)
    return leave(unit, out, ctx, Dialect.C)


__all__ = ["INFO", "apply"]
