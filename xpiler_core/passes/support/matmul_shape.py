"""The matrix product one symbolic thread computes (see ``bang_thread``), recognized from its dataflow.

Shared by the targets that replace such threads with a tiled matrix unit or micro-kernel (``bang_matmul``,
``cpu_gemm``). The thread's whole effect must be one store

    ``P[c0 + b*sc + gy*ldc + gx] = E(sum_{k in [lo, hi)} X[a0 + b*sa + gy*lda + k] * Y_i[...])``

guarded by nothing but ``gy < M`` / ``gx < N``, where ``gx = xp_bx*Cx + xp_tx``, ``gy = xp_by*Cy + xp_ty``,
``b = xp_bz`` (optional batch), each ``Y_i`` is ``Y_i[b0 + b*sb + k*ldb + gx]`` (row-major) or
``Y_i[b0 + b*sb + gx*ldb + k]`` (``[N][K]``), and ``E`` an optional element-wise epilogue over the sums.
Any spelling that computes the same values is found; anything else is refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassRefused
from xpiler_core.passes.support.bang_thread import (
    DIGIT,
    RAW_THREAD_ATOMS,
    Add,
    Epilogue,
    Guard,
    Load,
    Mul,
    Poly,
    RegFn,
    Select,
    Store,
    Sum,
    ThreadEvaluator,
    free_of,
    linear,
    subst_poly,
    subst_value,
)
from xpiler_core.printer import print_expr


@dataclass
class Operand:
    base: str
    origin: Poly  # offset at b = 0, row/col 0, k = 0
    batch_stride: Poly
    lead: Poly  # leading dimension (row stride)


@dataclass(frozen=True)
class LaunchGeometry:
    """How the launch's threads cover the output: ``rows`` and ``cols`` (C text over ``xp_gd?``/``xp_bd?``)
    are the extents the row and column indices run over, ``checks`` (C conditions) make every thread of a
    block a distinct (row, column) of its block's tile, the tile's extents being the ones assumed."""

    rows: str
    cols: str
    checks: tuple[str, ...]


@dataclass
class MatmulShape:
    out: Operand
    lhs: Operand
    rhs: list[Operand]  # one right operand per accumulated product (same left operand, same K range)
    rhs_filter_layout: bool  # rhs[j*ld + k]: already [N][K]
    k_lo: Poly
    k_hi: Poly
    rows: Poly | None  # guard bound on gy
    cols: Poly | None  # guard bound on gx
    batched: bool
    launch: LaunchGeometry
    epilogue: A.Expr | None = None  # element-wise expression of xp_mm_acc<i>[xp_e], or the plain product
    preconditions: tuple[str, ...] = ()  # C conditions (over the block function's names) the shape needs


# pure math an epilogue may call (besides the module's pure helpers)
MATH_FUNCS = frozenset({"expf", "__expf", "exp", "tanhf", "tanh", "sqrtf", "sqrt", "rsqrtf", "fabsf", "fabs",
                        "fmaxf", "fminf", "max", "min", "logf", "__logf", "log", "powf", "erff", "erf", "sinf",
                        "cosf", "__fdividef", "fmaf", "__saturatef"})


def _pure_helper(fn: A.Function, helpers: dict[str, A.Function], depth: int = 0) -> bool:
    """A helper that computes from its arguments only: no memory access, no calls but pure ones."""
    if depth > 3:
        return False
    for n in A.walk(fn.body):
        if isinstance(n, A.Index | A.Opaque) or (isinstance(n, A.Unary) and n.op in ("*", "&")):
            return False
        if isinstance(n, A.Call):
            name = print_expr(n.func, Dialect.BANG).split("<")[0].strip()
            if name not in MATH_FUNCS and not (name in helpers and _pure_helper(helpers[name], helpers, depth + 1)):
                return False
    return True


def stored_epilogue(ep: Epilogue, ev: ThreadEvaluator, store: Store | None = None) -> tuple[list[Sum], A.Expr]:
    """The accumulated sums an epilogue reads, and the epilogue over ``xp_mm_acc<i>[xp_e]``; a read of the
    element the thread stores (``beta * C[i]``) is ``xp_mm_out[xp_eo]``, what that element held before."""
    sums: list[Sum] = []
    slots: dict[str, int] = {}

    def stored_state_value(n: A.Expr) -> object:
        """``n`` evaluated with the thread's values when it stored."""
        saved = ev.env
        ev.env = dict(ep.env)
        try:
            return ev.value(n)
        finally:
            ev.env = saved

    def own_element(n: A.Expr) -> bool:
        if store is None:
            return False
        try:
            value = stored_state_value(n)
        except PassRefused:
            return False
        return isinstance(value, Load) and value.base == store.base and value.offset == store.offset

    def slot(name: str, held: Sum | None = None) -> A.Expr:
        value = ep.env.get(name) if held is None else held
        if not isinstance(value, Sum):
            raise PassRefused(f"the stored expression reads {name}, which is not an accumulated product")
        if name not in slots:
            slots[name] = len(sums)
            sums.append(value)
        return A.Index(A.name(f"xp_mm_acc{slots[name]}"), A.name("xp_e"))

    def register_sum(n: A.Index) -> Sum | None:
        """The accumulated product a thread-local array's element holds (``acc[xp_t][8 * i + j]``)."""
        ref = ev.register_ref(n)
        if ref is None or not isinstance(ep.env.get(ref[0]), RegFn):
            return None
        value = stored_state_value(n)
        return value if isinstance(value, Sum) else None

    def visit(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Member) and own_element(n):  # a component of the stored vector as it was loaded
            return A.Index(A.name("xp_mm_out"), A.name("xp_eo"))
        if isinstance(n, A.Index):
            if isinstance(n.base, A.Name) and n.base.id in ep.thread_arrays and n.index == A.name("xp_t"):
                return slot(n.base.id)
            held = register_sum(n)
            if held is not None:
                return slot(print_expr(n, Dialect.C), held)
            if own_element(n):
                return A.Index(A.name("xp_mm_out"), A.name("xp_eo"))
            raise PassRefused("the stored expression reads memory besides the accumulators and the stored element")
        if isinstance(n, A.Call):
            name = print_expr(n.func, Dialect.BANG).split("<")[0].strip()
            if name not in MATH_FUNCS and not (name in ev.helpers and _pure_helper(ev.helpers[name], ev.helpers)):
                raise PassRefused(f"the stored expression calls {name}, not a pure function")
            return A.replace(n, args=tuple(A.rewrite(a, visit) for a in n.args))
        if isinstance(n, A.Assign) or (isinstance(n, A.Unary) and n.op in ("++", "--", "*", "&")):
            raise PassRefused("the stored expression has side effects or pointers")
        if isinstance(n, A.Name):
            if n.id in ep.env:
                return slot(n.id)
            if n.id not in ev.int_params:
                raise PassRefused(f"the stored expression reads {n.id}")
        return None

    expr = A.rewrite(ep.expr, visit)
    if not sums:
        raise PassRefused("the stored expression reads no accumulated product")
    return sums, expr


def _product(value: Sum, store_guards: tuple[Guard, ...]) -> tuple[Load, Load]:
    body = value.body
    if isinstance(body, Select):  # zero padding the output's own guards already exclude
        if any(g not in store_guards for g in body.guards):
            raise PassRefused("the product is guarded by bounds the output store does not have")
        body = body.value
    if not isinstance(body, Mul) or not (isinstance(body.left, Load) and isinstance(body.right, Load)):
        raise PassRefused("the stored value is not a sum of products of two loads")
    return body.left, body.right


@dataclass(frozen=True)
class _Coordinate:
    """One output coordinate of a thread: ``atom`` (a formed global index, or a thread part ``T`` whose
    coordinate is ``scale * B + T`` for the block index along ``block_axis``)."""

    atom: str
    block_axis: str
    thread_axis: str
    extent: str  # C text: how far the coordinate runs over the launch
    coefficient: Poly  # in the output offset
    checks: tuple[str, ...]
    scale: int = 0  # 0 for a formed global index
    others: tuple[tuple[str, int], ...] = ()  # further parts of the coordinate and their weights (``T + w * P``)


def _paired_coordinates(ev: ThreadEvaluator, offset: Poly) -> tuple[dict[str, Poly], LaunchGeometry] | None:
    """The output index as ``row * ld + col`` where a coordinate is a block index times a constant tile extent
    plus a part of the thread index, written apart (``C += blockIdx.x * 32 * N; C[threadIdx.x / 32 * N +
    threadIdx.x % 32]``: row ``32 bx + tx / 32``, column ``32 by + tx % 32``): each thread part ``T`` is paired
    with the block index ``B`` whose coefficient is ``T``'s times ``C``; the other coordinate may be a global
    index the evaluator already formed (``xp_gx``). Returns the substitution (``T -> g - C B``, and a renaming
    of a formed index) that names the coordinates ``xp_gy`` (the row) and ``xp_gx`` (the column, coefficient
    1), with the launch they need: every part ranges over ``[0, C)`` and the parts of each thread index are all
    of it (else two threads would compute one output); None when the offset is not of this form."""
    coordinates: list[_Coordinate] = []
    for formed in ("xp_gx", "xp_gy"):
        if formed in offset.atoms():
            axis = formed[-1]
            size = ev.block_sizes.get(axis)
            if size is None:
                return None
            coordinates.append(_Coordinate(formed, axis, axis, f"(long)xp_gd{axis} * xp_bd{axis}",
                                           offset.split(formed)[0], (f"({print_expr(size, Dialect.C)}) == xp_bd{axis}",)))
    # each thread part pairs with the block index whose coefficient is a multiple of its own; the parts of one
    # block axis (a thread's row ``8 * (tx / 16)`` and the row ``i`` of its 8x8 outputs) make one coordinate
    paired: dict[str, list[tuple[str, Poly, int]]] = {}
    for part in sorted(a for a in offset.atoms() if ev.thread_part(a) is not None):
        coeff, _ = offset.split(part)
        found = [(axis, ratio) for axis in "xy" if (ratio := _multiple(offset.split(f"xp_b{axis}")[0], coeff))]
        if len(found) != 1:
            return None
        paired.setdefault(found[0][0], []).append((part, coeff, found[0][1]))
    parts_of: dict[str, str] = {}  # every part of a coordinate → its thread axis
    for axis, members in sorted(paired.items()):
        members.sort(key=lambda m: -m[2])
        unit, coeff, scale = members[0]
        others: list[tuple[str, int]] = []
        checks: list[str] = []
        weight = 1
        for k, (part, _, ratio) in enumerate(members):
            if scale % ratio or scale // ratio != weight:
                return None  # the parts are not a mixed radix that covers the tile once
            following = scale // members[k + 1][2] if k + 1 < len(members) else scale
            try:
                condition = ev.part_range(part, following // weight, "the output")
            except PassRefused:
                return None
            if condition is not None and condition not in ev.preconditions and condition not in checks:
                checks.append(condition)
            if part != unit:
                others.append((part, weight))
            parts_of[part] = (ev.thread_part(part) or ("",))[0]
            weight = following
        if weight != scale:
            return None
        coordinates.append(_Coordinate(unit, axis, parts_of[unit], f"(long)xp_gd{axis} * {scale}L", coeff,
                                       tuple(checks), scale, tuple(others)))
    if len(coordinates) != 2 or coordinates[0].block_axis == coordinates[1].block_axis:
        return None
    columns = [x for x in coordinates if x.coefficient == Poly.const(1)]
    if len(columns) != 1:
        return None
    mapping: dict[str, Poly] = {}
    extents: dict[str, str] = {}
    checks_all: list[str] = []
    for x in coordinates:
        name = "xp_gx" if x is columns[0] else "xp_gy"
        mapping[x.atom] = Poly.atom(name) - Poly.atom(f"xp_b{x.block_axis}") * Poly.const(x.scale) - sum(
            (Poly.atom(part) * Poly.const(weight) for part, weight in x.others), Poly())
        extents[name] = x.extent
        checks_all += [c for c in x.checks if c not in checks_all]
    # the parts of each thread index must make it whole: all of it, or all its digits and its last quotient
    for axis in "xyz":
        base = f"xp_t{axis}"
        formed_here = any(not x.scale and x.thread_axis == axis for x in coordinates)
        mine = {part for part, thread_axis in parts_of.items() if thread_axis == axis}
        radices = ev.radices.get(base, [])
        whole = {ev.quotient(base, len(radices)), *(f"{DIGIT[base]}{i}" for i in range(len(radices)))}
        if formed_here and mine:
            return None
        if not mine and not formed_here:
            checks_all.append(f"xp_bd{axis} == 1")
        elif mine and mine != whole and mine != {base}:
            return None
    return mapping, LaunchGeometry(extents["xp_gy"], extents["xp_gx"], tuple(checks_all))


def _multiple(block: Poly, coeff: Poly) -> int | None:
    """The positive integer ``c`` with ``block == c * coeff``, if there is one."""
    if not coeff.terms:
        return None
    monomial, unit = coeff.terms[0]
    scaled = dict(block.terms).get(monomial)
    if scaled is None or scaled % unit:
        return None
    ratio = scaled // unit
    return ratio if ratio > 0 and coeff * Poly.const(ratio) == block else None


def _stored_sums(ev: ThreadEvaluator, st: Store) -> tuple[list[Sum], A.Expr | None]:
    """The accumulated products one store writes and the element-wise expression over them."""
    if isinstance(st.value, Sum):
        return [st.value], None
    if st.source is None:
        raise PassRefused("the stored value is not a sum of products")
    try:
        return stored_epilogue(st.source, ev, st)
    except PassRefused as refusal:  # say why the value itself was not modelled too
        why = st.source.reason or "not a sum of products"
        raise PassRefused(f"{refusal.reason}; the stored value: {why}") from None


def _one_store(ev: ThreadEvaluator) -> tuple[Store, list[Sum], A.Expr | None]:
    """The thread's one store; several stores of one expression at consecutive elements (a ``float4`` store's
    components) are one store over a lane, checked element by element."""
    if not ev.stores:
        raise PassRefused("the thread stores nothing")
    each = [(st, *_stored_sums(ev, st)) for st in ev.stores]
    st, sums, epilogue = each[0]
    if len(each) == 1:
        return st, sums, epilogue
    if any(x.base != st.base or x.guards != st.guards or len(xs) != len(sums) or e != epilogue
           for x, xs, e in each):
        raise PassRefused(f"the thread stores {len(each)} values (a matrix product stores one)")
    merged = ev.lane_of([(x.offset,) for x, _, _ in each], [Add(tuple(xs)) for _, xs, _ in each])
    if merged is None or merged[1] not in merged[0][0][0].atoms():
        raise PassRefused(f"the thread stores {len(each)} values that are not one vector of a matrix product")
    ((offset,), total), _lane = merged
    assert isinstance(total, Add)
    return Store(st.base, offset, total.terms[0], st.guards, st.source), list(total.terms), epilogue


def recognize(ev: ThreadEvaluator) -> MatmulShape:
    st, sums, epilogue = _one_store(ev)
    launch = LaunchGeometry("(long)xp_gdy * xp_bdy", "(long)xp_gdx * xp_bdx", tuple(
        f"({print_expr(c, Dialect.C)}) == xp_bd{axis}" for axis, c in sorted(ev.block_sizes.items())))
    paired = None if {"xp_gx", "xp_gy"} <= st.offset.atoms() else _paired_coordinates(ev, st.offset)
    if paired is not None:
        mapping, launch = paired
        st = Store(st.base, subst_poly(st.offset, mapping), st.value, tuple(
            Guard(subst_poly(g.index, mapping), subst_poly(g.bound, mapping)) for g in st.guards), st.source)
        sums = [subst_value(x, mapping) for x in sums]
    elif set(ev.block_sizes) != {"x", "y"}:
        raise PassRefused("the output is not indexed by both blockIdx.x/threadIdx.x and blockIdx.y/threadIdx.y")
    first = sums[0]
    k = first.var
    if any(x.var != k or x.lo != first.lo or x.hi != first.hi for x in sums):
        raise PassRefused("the accumulated products run over different K ranges")
    thread = {"xp_gx", "xp_gy", "xp_bz", k} | RAW_THREAD_ATOMS | ev.index_atoms()
    axes = ["xp_gx", "xp_gy", "xp_bz", k]
    oc, orest = linear(st.offset, axes)
    if oc[k] != Poly() or oc["xp_gx"] != Poly.const(1) or oc["xp_gy"] == Poly():
        raise PassRefused("the output index is not row * ld + column")
    lhs: Operand | None = None
    rhs: list[Operand] = []
    layouts: set[bool] = set()
    batch_used = oc["xp_bz"] != Poly()
    for value in sums:
        left, right = _product(value, st.guards)
        lc, lrest = linear(left.offset, axes)
        rc, rrest = linear(right.offset, axes)
        if lc["xp_gx"] != Poly() and rc["xp_gy"] != Poly():
            left, right, lc, rc, lrest, rrest = right, left, rc, lc, rrest, lrest
        if lc["xp_gx"] != Poly() or lc[k] != Poly.const(1) or lc["xp_gy"] == Poly():
            raise PassRefused("the left operand is not X[row * ld + k]")
        if rc["xp_gy"] != Poly():
            raise PassRefused("the right operand depends on the output row")
        if rc["xp_gx"] == Poly.const(1) and rc[k] != Poly():
            filter_layout, rlead = False, rc[k]
        elif rc[k] == Poly.const(1) and rc["xp_gx"] != Poly():
            filter_layout, rlead = True, rc["xp_gx"]
        else:
            raise PassRefused("the right operand is neither Y[k * ld + column] nor Y[column * ld + k]")
        for p, what in ((lrest, "left offset"), (lc["xp_gy"], "left stride"), (lc["xp_bz"], "left batch stride"),
                        (rrest, "right offset"), (rlead, "right stride"), (rc["xp_bz"], "right batch stride")):
            free_of(p, thread, what)
        if st.base in (left.base, right.base):
            raise PassRefused("the output array is also an operand")
        this_lhs = Operand(left.base, lrest, lc["xp_bz"], lc["xp_gy"])
        if lhs is not None and this_lhs != lhs:
            raise PassRefused("the accumulated products have different left operands")
        lhs = this_lhs
        rhs.append(Operand(right.base, rrest, rc["xp_bz"], rlead))
        layouts.add(filter_layout)
        batch_used = batch_used or lc["xp_bz"] != Poly() or rc["xp_bz"] != Poly()
    if len(layouts) != 1 or lhs is None:
        raise PassRefused("the right operands have different layouts")
    for p, what in ((orest, "output offset"), (oc["xp_gy"], "output stride"), (oc["xp_bz"], "output batch stride"),
                    (first.lo, "sum start"), (first.hi, "sum end")):
        free_of(p, thread, what)
    rows: Poly | None = None
    cols: Poly | None = None
    for g in st.guards:
        free_of(g.bound, thread, "a guard bound")
        if g.index == Poly.atom("xp_gy"):
            rows = g.bound if rows is None else _refuse("two bounds on the row")
        elif g.index == Poly.atom("xp_gx"):
            cols = g.bound if cols is None else _refuse("two bounds on the column")
        else:
            raise PassRefused("a guard bounds something other than the output row or column")
    return MatmulShape(
        out=Operand(st.base, orest, oc["xp_bz"], oc["xp_gy"]), lhs=lhs, rhs=rhs,
        rhs_filter_layout=layouts.pop(), k_lo=first.lo, k_hi=first.hi, rows=rows, cols=cols, batched=batch_used,
        launch=launch, epilogue=epilogue, preconditions=tuple(ev.preconditions))


def _refuse(reason: str) -> Poly:
    raise PassRefused(reason)
