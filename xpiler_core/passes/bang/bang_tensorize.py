"""BANG tensorization: element-wise kernels become NRAM tiles, ``__memcpy`` and ``__bang_*`` intrinsics.

Input: the output of ``bang_binding``. A block function qualifies when its task loop holds exactly one
thread loop nest whose body is *element-wise in one global index* ``G = xp_bx * C + xp_tx``:

* shape 1: ``[if (G < N)] { body }`` (also TVM's ``if (uniform) body else if (G < N) body``);
* shape 2: a grid-stride loop ``for (int i = G; i < N; i += S) body``;

where ``body`` is straight-line code whose every array access is ``P[G]`` for a pointer parameter ``P``
(so elements never see each other) and which calls nothing with side effects. The pass then emits, before
the task loop, a path taken when runtime preconditions hold (1-D launch, ``C == blockDim.x``, the stride is
the whole grid, TVM's uniform condition never admits an out-of-range element):

``task's contiguous range of [0, total) → tiles of TILE elements: __memcpy GDRAM2NRAM per array read →
each statement as __bang_* calls (table ``tables/bang_intrinsics.toml``) or, where an operation has no
intrinsic, a scalar loop over the NRAM tile → __memcpy NRAM2GDRAM per array written``. The tiles of the
arrays read are budgeted twice so that ``bang_pipeline`` can double-buffer them (``__memcpy_async`` of the
next tile while this one computes). TILE comes from ``nram_bytes`` (the generation's NRAM capacity) minus a
128 KiB stack margin, shared by all tiles, capped by ``onchip_budget`` (48 KiB by default, so the BANG →
CUDA round trip fits static shared memory) and ``max_tile``; the buffers are function-scope
``__nram__`` arrays, so the model's capacity check sees them. The original scalar code stays as the fallback path.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, int_param, leave, parse_expr, parse_stmts
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="bang_tensorize",
    summary="Element-wise kernels → NRAM tiles (__memcpy), __bang_* intrinsics, scalar-tile fallback",
    kind="ast",
    directions=("cuda->bang",),
    params=(
        ParamSpec("nram_bytes", "int", 768 * 1024, "NRAM capacity of the target generation (bytes)"),
        ParamSpec("stack_margin", "int", 128 * 1024, "NRAM kept free for the stack (bytes)"),
        ParamSpec("max_tile", "int", 2048, "upper bound on elements per tile"),
        ParamSpec("onchip_budget", "int", 48 * 1024, "bytes of NRAM all tiles of one kernel may use (48 KiB keeps "
                  "them within the static shared memory the BANG -> CUDA round trip maps NRAM onto)"),
    ),
)

STACK_MARGIN = 128 * 1024
VECTOR_TYPES = ("float",)
PLAIN_TYPES = ("float", "double", "int", "unsigned", "unsigned int", "short", "char", "signed char", "unsigned char",
               "int8_t", "uint8_t", "int64_t", "long", "long long", "bool", "half")
SIDE_EFFECTS = ("atomic", "__sync", "xp_shfl", "xp_ballot", "xp_any", "xp_all", "printf", "malloc", "free",
                "__memcpy", "__bang")


def _table() -> dict[str, Any]:
    with resources.files("xpiler_core.tables").joinpath("bang_intrinsics.toml").open("rb") as f:
        return tomllib.load(f)


# ----- analysis ----------------------------------------------------------------------------------------
def _strip_casts(e: A.Expr) -> A.Expr:
    while isinstance(e, A.Cast) and e.type.base in ("int", "unsigned", "unsigned int", "size_t", "long"):
        e = e.operand
    return e


def _uses(node: A.Node, names: set[str]) -> bool:
    return any(isinstance(n, A.Name) and n.id in names for n in A.walk(node))


THREAD_NAMES = {"xp_tx", "xp_ty", "xp_tz", "xp_t", "xp_done"}


def _global_index(e: A.Expr) -> A.Expr | None:
    """``C`` when ``e`` is ``xp_bx * C + xp_tx`` (any order, int casts ignored), else None."""
    e = _strip_casts(e)
    if not (isinstance(e, A.Binary) and e.op == "+"):
        return None
    for prod, tx in ((e.left, e.right), (e.right, e.left)):
        prod, tx = _strip_casts(prod), _strip_casts(tx)
        if not (isinstance(tx, A.Name) and tx.id == "xp_tx"):
            continue
        if isinstance(prod, A.Binary) and prod.op == "*":
            for bx, c in ((prod.left, prod.right), (prod.right, prod.left)):
                base = _strip_casts(bx)
                if isinstance(base, A.Name) and base.id == "xp_bx":
                    if not _uses(c, THREAD_NAMES | {"xp_bx"}):
                        return c
    return None


@dataclass
class ElementKernel:
    """What the analysis found: the element body over index ``index`` (a name or G itself)."""

    body: list[A.Stmt]
    index: A.Expr  # the index expression used in P[index]
    block_size: A.Expr  # C of G
    total: str  # C expression: number of elements [0, total)
    preconditions: list[str] = field(default_factory=list)
    prologue: list[A.Stmt] = field(default_factory=list)  # uniform decls kept before the tile loop


def _single(stmt: A.Stmt) -> A.Stmt:
    while isinstance(stmt, A.Block) and len(stmt.stmts) == 1:
        stmt = stmt.stmts[0]
    return stmt


def _stmts(stmt: A.Stmt) -> list[A.Stmt]:
    return list(stmt.stmts) if isinstance(stmt, A.Block) else [stmt]


def _inline_index_decls(body: list[A.Stmt]) -> tuple[list[A.Stmt], dict[str, A.Expr]]:
    """Leading ``int i = <no array access>`` decls that are never reassigned are substituted away."""
    mapping: dict[str, A.Expr] = {}
    rest = list(body)
    while rest and isinstance(rest[0], A.DeclStmt):
        decls = rest[0].decls
        if not all(d.init is not None and not d.dims and d.type.base in ("int", "const int", "size_t", "long")
                   and not d.type.pointers and not any(isinstance(n, A.Index) for n in A.walk(d.init))
                   for d in decls):
            break
        names = {d.name for d in decls}
        if any(isinstance(n, A.Assign) and isinstance(n.target, A.Name) and n.target.id in names
               for s in rest[1:] for n in A.walk(s)) or any(
               isinstance(n, A.Unary) and n.op in ("++", "--") and isinstance(n.operand, A.Name)
               and n.operand.id in names for s in rest[1:] for n in A.walk(s)):
            break
        for d in decls:
            assert d.init is not None
            mapping[d.name] = A.substitute(d.init, mapping)
        rest = rest[1:]
    return [A.substitute(s, mapping) for s in rest], mapping


def _analyse(thread_body: list[A.Stmt], params: dict[str, A.Param]) -> ElementKernel:
    body = [s for s in thread_body if not (isinstance(s, A.DeclStmt) and s.decls[0].name == "xp_t")]
    body, _ = _inline_index_decls(body)
    if len(body) == 1 and isinstance(_single(body[0]), A.For):
        loop = _single(body[0])
        assert isinstance(loop, A.For)
        view = loop.canonical()
        if view is None or not isinstance(loop.cond, A.Binary) or loop.cond.op != "<":
            raise PassRefused("thread loop holds a loop that is not a canonical grid-stride loop")
        c = _global_index(view.start)
        if c is None:
            raise PassRefused("grid-stride loop does not start at blockIdx.x * C + threadIdx.x")
        if _uses(view.step, THREAD_NAMES | {"xp_bx"}) or _uses(loop.cond.right, THREAD_NAMES | {"xp_bx"}):
            raise PassRefused("grid-stride loop bound or stride depends on the thread")
        step = print_expr(view.step, Dialect.BANG)
        ek = ElementKernel(_stmts(loop.body), A.name(view.var), c,
                           f"({print_expr(loop.cond.right, Dialect.BANG)})")
        ek.preconditions.append(f"({step}) == xp_gdx * xp_bdx")
        _check_body(ek, params)
        return ek
    guard: A.Expr | None = None
    uniform_cond: A.Expr | None = None
    if len(body) == 1 and isinstance(_single(body[0]), A.If):
        branch = _single(body[0])
        assert isinstance(branch, A.If)
        if branch.else_ is None:
            guard, body = branch.cond, _stmts(branch.then)
        else:
            inner = _single(branch.else_)
            if (isinstance(inner, A.If) and inner.else_ is None and _stmts(inner.then) == _stmts(branch.then) and not _uses(branch.cond, THREAD_NAMES)):
                guard, uniform_cond, body = inner.cond, branch.cond, _stmts(branch.then)
            else:
                raise PassRefused("thread body branches on more than a bounds guard")
    index: A.Expr | None = None
    for n in (x for s in body for x in A.walk(s)):
        if isinstance(n, A.Index):
            index = n.index
            break
    if index is None:
        raise PassRefused("thread body reads and writes no array")
    c = _global_index(index)
    if c is None:
        raise PassRefused("array index is not blockIdx.x * C + threadIdx.x")
    total = "xp_gdx * xp_bdx"
    if guard is not None:
        g = _strip_casts(guard) if isinstance(guard, A.Expr) else guard
        if not (isinstance(g, A.Binary) and g.op == "<" and g.left == index
                and not _uses(g.right, THREAD_NAMES | {"xp_bx"})):
            raise PassRefused("bounds guard is not G < N")
        total = f"xp_min_int(({print_expr(g.right, Dialect.BANG)}), xp_gdx * xp_bdx)"
    ek = ElementKernel(body, index, c, total)
    if uniform_cond is not None:
        # TVM's fast path runs whole blocks unguarded: only equivalent when it never admits an element
        # past the guard, checked for every block before the tiled path is taken.
        assert guard is not None and isinstance(guard, A.Binary)
        ek.preconditions.append("xp_fast_path_in_bounds")
        ek.prologue += _parse_stmts([
            "int xp_fast_path_in_bounds = 1;",
            f"for (int xp_bx = 0; xp_bx < xp_gdx; ++xp_bx) if (({print_expr(uniform_cond, Dialect.BANG)}) && "
            f"(xp_bx + 1) * xp_bdx > ({print_expr(guard.right, Dialect.BANG)})) xp_fast_path_in_bounds = 0;"])
    _check_body(ek, params)
    return ek


def _check_body(ek: ElementKernel, params: dict[str, A.Param]) -> None:
    def hide_index(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Index) and n.index == ek.index:
            return A.Index(A.rewrite(n.base, hide_index), A.name("xp_elem"))
        return None

    declared: set[str] = set()
    for stmt in (A.rewrite(s, hide_index) for s in ek.body):
        pointer_uses = sum(1 for n in A.walk(stmt) if isinstance(n, A.Name) and n.id in params)
        element_uses = sum(1 for n in A.walk(stmt) if isinstance(n, A.Index) and isinstance(n.base, A.Name)
                           and n.base.id in params)
        if pointer_uses != element_uses:
            raise PassRefused("element body uses a pointer parameter other than as P[G] (a gather or a call "
                              "that may read or write other elements)")
        if not isinstance(stmt, A.DeclStmt | A.ExprStmt):
            raise PassRefused("element body is not straight-line code")
        if isinstance(stmt, A.ExprStmt) and not isinstance(stmt.expr, A.Assign):
            raise PassRefused("element body has an expression statement that is not an assignment")
        if isinstance(stmt, A.DeclStmt) and any(d.dims or d.type.pointers for d in stmt.decls):
            raise PassRefused("element body declares arrays or pointers")
        for n in A.walk(stmt):
            if isinstance(n, A.Name) and (n.id in THREAD_NAMES or n.id == "xp_bx"):
                raise PassRefused(f"element body uses {n.id} outside the index")
            if isinstance(n, A.Call) and isinstance(n.func, A.Name) and n.func.id.startswith(SIDE_EFFECTS):
                raise PassRefused(f"element body calls {n.func.id}")
            if isinstance(n, A.Index):
                if not (isinstance(n.base, A.Name) and n.base.id in params and n.index == A.name("xp_elem")):
                    raise PassRefused("element body accesses an array other than P[G] for a pointer parameter P")
            if isinstance(n, A.Unary) and n.op in ("&",):
                raise PassRefused("element body takes an address")
        if isinstance(stmt, A.DeclStmt):
            declared.update(d.name for d in stmt.decls)
        if isinstance(stmt, A.ExprStmt):
            assert isinstance(stmt.expr, A.Assign)
            target = stmt.expr.target
            if isinstance(target, A.Name) and target.id not in declared:
                raise PassRefused(f"element body assigns {target.id}, declared outside it")
            if not (isinstance(target, A.Index) or isinstance(target, A.Name)):
                raise PassRefused("element body assigns through something other than P[G] or a local")


# ----- code generation ---------------------------------------------------------------------------------
@dataclass
class Emitter:
    arrays: dict[str, str]  # pointer param -> element type
    locals_: dict[str, str]  # element-local scalar -> type
    table: dict[str, Any]
    read: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    temps: int = 0
    lines: list[str] = field(default_factory=list)
    intrinsics: set[str] = field(default_factory=set)

    def tile(self, name: str) -> str:
        return f"xp_tile_{name}"

    def new_temp(self) -> str:
        self.temps += 1
        return f"xp_tmp{self.temps}"

    def is_tile_expr(self, e: A.Expr, index: A.Expr) -> bool:
        return any(isinstance(n, A.Index) or (isinstance(n, A.Name) and (n.id in self.locals_ or n == index))
                   for n in A.walk(e))

    def vector(self, e: A.Expr, index: A.Expr) -> str | None:
        """Name of a float tile holding ``e`` (emitting intrinsic calls), or None when some op has none."""
        if isinstance(e, A.Index) and isinstance(e.base, A.Name):
            return self.tile(e.base.id) if self.arrays.get(e.base.id) in VECTOR_TYPES else None
        if isinstance(e, A.Name) and e.id in self.locals_:
            return self.tile(e.id) if self.locals_[e.id] in VECTOR_TYPES else None
        if isinstance(e, A.Name) and e == index:
            return None  # the element index as a value: scalar loop
        if isinstance(e, A.Cast) and e.type.base == "float" and not e.type.pointers:
            return self.vector(e.operand, index)
        if isinstance(e, A.Binary):
            lt, rt = self.is_tile_expr(e.left, index), self.is_tile_expr(e.right, index)
            if lt and rt and e.op in self.table["tile_tile"]:
                a, b = self.vector(e.left, index), self.vector(e.right, index)
                if a is None or b is None:
                    return None
                return self.call(self.table["tile_tile"][e.op], a, b)
            if lt and not rt and e.op in self.table["tile_scalar"]:
                a = self.vector(e.left, index)
                return None if a is None else self.call(self.table["tile_scalar"][e.op], a, self.scalar(e.right))
            if rt and not lt and e.op in self.table["scalar_tile"]:
                b = self.vector(e.right, index)
                return None if b is None else self.call(self.table["scalar_tile"][e.op], b, self.scalar(e.left))
            return None
        if isinstance(e, A.Unary) and e.op == "-" and not e.postfix:
            a = self.vector(e.operand, index)
            return None if a is None else self.call("__bang_mul_scalar", a, "-1.0f")
        if isinstance(e, A.Call) and isinstance(e.func, A.Name):
            fname = e.func.id
            if fname in self.table["unary_calls"] and len(e.args) == 1:
                a = self.vector(e.args[0], index)
                return None if a is None else self.call(self.table["unary_calls"][fname], a)
            if len(e.args) == 2 and fname in self.table["relu_calls"]["names"]:
                x, y = e.args
                for tile_arg, zero in ((x, y), (y, x)):
                    if isinstance(zero, A.Literal) and _is_zero(zero.text) and self.is_tile_expr(tile_arg, index):
                        a = self.vector(tile_arg, index)
                        return None if a is None else self.call("__bang_active_relu", a)
                if self.is_tile_expr(x, index) and self.is_tile_expr(y, index):
                    a, b = self.vector(x, index), self.vector(y, index)
                    return None if a is None or b is None else self.call("__bang_maxequal", a, b)
        return None

    def scalar(self, e: A.Expr) -> str:
        return f"(float)({print_expr(e, Dialect.BANG)})"

    def call(self, intrinsic: str, *operands: str) -> str:
        dst = self.new_temp()
        self.intrinsics.add(intrinsic)
        self.lines.append(f"{intrinsic}({dst}, {', '.join(operands)}, xp_nv);")
        return dst

    def scalar_loop(self, target: str, target_type: str, value: A.Expr, index: A.Expr) -> None:
        def to_tile(n: A.Node) -> A.Node | None:
            if isinstance(n, A.Name) and n == index:
                return A.binop("+", A.name("xp_o"), A.name("xp_j"))  # the element's global index
            if isinstance(n, A.Index) and isinstance(n.base, A.Name):
                return A.index(A.name(self.tile(n.base.id)), A.name("xp_j"))
            if isinstance(n, A.Name) and n.id in self.locals_:
                return A.index(A.name(self.tile(n.id)), A.name("xp_j"))
            return None

        expr = print_expr(A.rewrite(value, to_tile), Dialect.BANG)
        self.lines.append(f"for (int xp_j = 0; xp_j < xp_n; ++xp_j) {target}[xp_j] = ({target_type})({expr});")

    def statement(self, target: str, target_type: str, value: A.Expr, index: A.Expr) -> None:
        if target_type in VECTOR_TYPES:
            mark = (len(self.lines), self.temps, set(self.intrinsics))
            result = self.vector(value, index)
            if result is not None and len(self.lines) > mark[0]:
                # the last call writes straight into the target instead of a temporary
                last = self.lines[-1]
                self.lines[-1] = last.replace(f"({result}, ", f"({target}, ", 1)
                return
            del self.lines[mark[0]:]
            self.temps, self.intrinsics = mark[1], mark[2]
        self.scalar_loop(target, target_type, value, index)


def _is_zero(text: str) -> bool:
    try:
        return float(text.rstrip("fFlLuU")) == 0.0
    except ValueError:
        return False


def _element_type(t: A.Type) -> str:
    return t.base.replace("const ", "").replace("volatile ", "").strip()


def _emit(ek: ElementKernel, params: dict[str, A.Param], table: dict[str, Any], nram_bytes: int,
          max_tile: int, onchip_budget: int = 48 * 1024) -> tuple[list[str], list[str], set[str], int]:
    arrays = {name: _element_type(p.type) for name, p in params.items()}
    locals_: dict[str, str] = {}
    for stmt in ek.body:
        if isinstance(stmt, A.DeclStmt):
            for d in stmt.decls:
                locals_[d.name] = _element_type(d.type)
    em = Emitter(arrays, locals_, table)
    # arrays whose elements are read (a plain store target is not a read)
    read_roots: list[A.Node] = []
    for stmt in ek.body:
        if isinstance(stmt, A.DeclStmt):
            read_roots += [d.init for d in stmt.decls if d.init is not None]
        elif isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Assign):
            read_roots.append(stmt.expr.value)
            if stmt.expr.op != "=":
                read_roots.append(stmt.expr.target)
    for n in (x for root in read_roots for x in A.walk(root)):
        if isinstance(n, A.Index) and isinstance(n.base, A.Name) and n.base.id not in em.read:
            em.read.append(n.base.id)
    for stmt in ek.body:
        if isinstance(stmt, A.DeclStmt):
            for d in stmt.decls:
                if d.init is not None:
                    em.statement(em.tile(d.name), locals_[d.name], d.init, ek.index)
            continue
        assert isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Assign)
        asg = stmt.expr
        value = asg.value if asg.op == "=" else A.Binary(asg.op[:-1], asg.target, asg.value)
        if isinstance(asg.target, A.Index):
            assert isinstance(asg.target.base, A.Name)
            name = asg.target.base.id
            if name not in em.written:
                em.written.append(name)
            em.statement(em.tile(name), arrays[name], value, ek.index)
        else:
            assert isinstance(asg.target, A.Name)
            em.statement(em.tile(asg.target.id), locals_[asg.target.id], value, ek.index)
    # NRAM: room for double-buffered inputs (bang_pipeline), everything else single; tile elements a multiple
    # of 32 (128 bytes)
    sizes = {**{a: arrays[a] for a in em.read + em.written}, **{v: t for v, t in locals_.items()}}
    bytes_per_elem = sum(_sizeof(t) * (2 if n in em.read else 1) for n, t in sizes.items())
    # the last call of a vectorized statement writes its target directly: its temporary is never used
    used_temps = [k for k in range(1, em.temps + 1) if any(f"xp_tmp{k}," in line or f"xp_tmp{k})" in line
                                                           for line in em.lines)]
    bytes_per_elem += 4 * len(used_temps)
    budget = min(nram_bytes - STACK_MARGIN, onchip_budget)
    tile = min(max_tile, budget // max(1, bytes_per_elem)) // 32 * 32
    if tile < 32:
        raise PassRefused("the element body needs more NRAM per element than the generation has")
    lines: list[str] = []
    carve: list[str] = []
    offset = 0
    for name, t in sizes.items():
        copies = 1
        if t in PLAIN_TYPES:
            carve.append(f"__nram__ {t} {em.tile(name)}_buf[{copies * tile}];")
        else:  # a class type (CUDA's __half struct): raw NRAM bytes, no static constructor
            carve.append(f"__nram__ char {em.tile(name)}_raw[{copies * tile * _sizeof(t)}];")
            carve.append(f"{t} *{em.tile(name)}_buf = ({t} *){em.tile(name)}_raw;")
        offset += copies * tile * _sizeof(t)
    for k in used_temps:
        carve.append(f"__nram__ float xp_tmp{k}[{tile}];")
        offset += tile * 4
    lines.append(f"const int xp_total = xp_max_int(0, {ek.total});")
    lines.append("const int xp_per = (xp_total + taskDim - 1) / taskDim;")
    lines.append("const int xp_lo = xp_min_int(xp_total, taskId * xp_per);")
    lines.append("const int xp_hi = xp_min_int(xp_total, xp_lo + xp_per);")

    lines.append(f"for (int xp_o = xp_lo; xp_o < xp_hi; xp_o += {tile}) {{")
    lines.append(f"const int xp_n = xp_min_int({tile}, xp_hi - xp_o);")
    lines.append("const int xp_nv = (xp_n + 31) / 32 * 32;")
    for name in sizes:
        lines.append(f"{sizes[name]} *{em.tile(name)} = {em.tile(name)}_buf;")
    for name in em.read:
        lines.append(f"__memcpy({em.tile(name)}_buf, {name} + xp_o, xp_n * {_sizeof(sizes[name])}, GDRAM2NRAM);")
    lines += em.lines
    for name in em.written:
        lines.append(f"__memcpy({name} + xp_o, {em.tile(name)}, xp_n * {_sizeof(arrays[name])}, NRAM2GDRAM);")
    lines.append("}")
    return carve, lines, em.intrinsics, offset


def _sizeof(t: str) -> int:
    return A.SCALAR_BYTES.get(t, 0) or _refuse_type(t)


def _refuse_type(t: str) -> int:
    raise PassRefused(f"element type {t!r} has no known size for an NRAM tile")


def _parse_stmts(lines: list[str]) -> list[A.Stmt]:
    return parse_stmts(lines, Dialect.BANG)


def _task_loop_index(fn: A.Function) -> int | None:
    for i, s in enumerate(fn.body.stmts):
        if isinstance(s, A.For):
            view = s.canonical()
            if view is not None and view.var == "xp_b":
                return i
    return None


def _thread_body(task_loop: A.For) -> list[A.Stmt]:
    stmts = _stmts(task_loop.body)
    rest = stmts[3:]  # xp_bx/xp_by/xp_bz and the two (void) casts from bang_binding
    # block-uniform scalars hoisted by loop recovery (const int stride = ...) are substituted into the body
    mapping: dict[str, A.Expr] = {}
    while len(rest) > 1 and isinstance(rest[0], A.DeclStmt):
        for d in rest[0].decls:
            if (d.init is None or d.dims or d.type.pointers or "const" not in (d.type.quals + (d.type.base,))
                    and not d.type.base.startswith("const")
                    or _uses(d.init, THREAD_NAMES | {"xp_bx", "xp_by", "xp_bz"})
                    or any(isinstance(n, A.Index) for n in A.walk(d.init))):
                raise PassRefused("the block body declares block-level state before its thread loop")
            mapping[d.name] = A.substitute(d.init, mapping)
        rest = rest[1:]
    if len(rest) != 1:
        raise PassRefused("the block body is more than one thread loop (barriers or block-level state)")
    node = _single(A.substitute(rest[0], mapping))
    for var in ("xp_tz", "xp_ty", "xp_tx"):
        if not isinstance(node, A.For) or node.canonical() is None or node.canonical().var != var:  # type: ignore[union-attr]
            raise PassRefused("no thread loop nest xp_tz/xp_ty/xp_tx in the block body")
        node = _single(node.body)
    return _stmts(node)


def expression_functions(module: A.Module) -> dict[str, tuple[list[str], A.Expr]]:
    """Device helpers whose body is ``[const T v = e;]* return e;`` (no template): name → (params, expr)."""
    out: dict[str, tuple[list[str], A.Expr]] = {}
    for fn in module.functions():
        if fn.template or fn.is_kernel or not fn.body.stmts:
            continue
        *decls, last = fn.body.stmts
        if not isinstance(last, A.Return) or last.value is None:
            continue
        mapping: dict[str, A.Expr] = {}
        ok = True
        for st in decls:
            if not (isinstance(st, A.DeclStmt) and all(d.init is not None and not d.dims for d in st.decls)):
                ok = False
                break
            for d in st.decls:
                assert d.init is not None
                mapping[d.name] = A.substitute(d.init, mapping)
        names = [p.name for p in fn.params if isinstance(p, A.Param) and p.name]
        if ok and len(names) == len(fn.params) and not any(isinstance(n, A.Assign | A.Call) and _is_call_to(n, fn.name)
                                                           for n in A.walk(last.value)):
            out[fn.name] = (names, A.substitute(last.value, mapping))
    return out


def _is_call_to(node: A.Node, name: str) -> bool:
    return isinstance(node, A.Call) and isinstance(node.func, A.Name) and node.func.id == name


def _inline_calls(stmt: A.Stmt, functions: dict[str, tuple[list[str], A.Expr]]) -> A.Stmt:
    """Calls of expression helpers replaced by their expression (arguments are pure element reads)."""
    def visit(node: A.Node) -> A.Node | None:
        if isinstance(node, A.Call) and isinstance(node.func, A.Name) and node.func.id in functions:
            names, expr = functions[node.func.id]
            if len(names) == len(node.args):
                args = [_inline_calls(A.ExprStmt(a), functions) for a in node.args]
                return A.substitute(expr, {n: a.expr for n, a in zip(names, args, strict=True)
                                           if isinstance(a, A.ExprStmt)})
        return None

    return A.rewrite(stmt, visit)


def tensorize_function(fn: A.Function, table: dict[str, Any], nram_bytes: int, max_tile: int,
                       functions: dict[str, tuple[list[str], A.Expr]] | None = None,
                       onchip_budget: int = 48 * 1024) -> tuple[A.Function, set[str], int]:
    i = _task_loop_index(fn)
    if i is None:
        raise PassRefused(f"{fn.name}: no task loop (run bang_binding first)")
    loop = fn.body.stmts[i]
    assert isinstance(loop, A.For)
    params = {p.name: p for p in fn.params if isinstance(p, A.Param) and p.name and len(p.type.pointers) == 1}
    ek = _analyse(_thread_body(loop), params)
    if functions:
        local_names = {d.name for st in ek.body if isinstance(st, A.DeclStmt) for d in st.decls}
        usable = {name: (names, expr) for name, (names, expr) in functions.items()
                  if not (A.free_names(expr) - set(names)) & local_names}  # no capture by element locals
        ek.body = [_inline_calls(st, usable) for st in ek.body]
        _check_body(ek, params)  # the inlined expressions obey the same element-wise rules
    carve, lines, intrinsics, pool_bytes = _emit(ek, params, table, nram_bytes, max_tile, onchip_budget)
    # on-chip buffers at function scope (where BANG C declares them and the frontend models them)
    ek.prologue[:0] = _parse_stmts(carve)
    pre = " && ".join(["xp_bdy == 1", "xp_bdz == 1", "xp_gdy == 1", "xp_gdz == 1",
                       f"({print_expr(ek.block_size, Dialect.BANG)}) == xp_bdx", *ek.preconditions])
    tiled = _parse_stmts(["{", *lines, "return;", "}"])
    guard = A.If(_parse_expr(pre), A.Block(tuple(tiled)), None)
    new_stmts = list(fn.body.stmts[:i]) + list(ek.prologue) + [guard] + list(fn.body.stmts[i:])
    return A.replace(fn, body=A.replace(fn.body, stmts=tuple(new_stmts))), intrinsics, pool_bytes


def _parse_expr(text: str) -> A.Expr:
    return parse_expr(text, Dialect.BANG)


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    nram = int_param(params, "nram_bytes", 768 * 1024, 64 * 1024, 1 << 24)
    max_tile = int_param(params, "max_tile", 2048, 32, 1 << 20)
    budget = int_param(params, "onchip_budget", 48 * 1024, 4 * 1024, 1 << 24)
    table = _table()
    functions = expression_functions(module)

    def rewrite(fn: A.Function) -> A.Function:
        new_fn, intrinsics, _ = tensorize_function(fn, table, nram, max_tile, functions, budget)
        ctx.notes.append(f"{fn.name}: tiled in NRAM with {', '.join(sorted(intrinsics)) or 'scalar tile loops'}")
        return new_fn

    result = rewrite_each(module, is_bound_kernel, rewrite, nothing="no bound kernels to tensorize",
                          tolerate=(AssertionError, KeyError, ValueError))  # an unforeseen shape stays scalar
    items = list(result.module.items)
    reasons = result.reasons
    helpers = A.Opaque(
        "__mlu_func__ int xp_min_int(int a, int b) { return a < b ? a : b; }\n"
        "__mlu_func__ int xp_max_int(int a, int b) { return a > b ? a : b; }")
    first_fn = next(k for k, it in enumerate(items) if isinstance(it, A.Function))
    items.insert(first_fn, helpers)
    for r in reasons:
        ctx.notes.append(f"kept scalar: {r}")
    return leave(unit, dataclasses.replace(module, items=tuple(items)), ctx, Dialect.BANG)
