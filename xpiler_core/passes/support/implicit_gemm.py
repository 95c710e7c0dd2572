"""Implicit GEMM: a thread whose stored value is a (possibly nested) sum of products of two gathered loads,
recognized from the dataflow of one symbolic thread (``bang_thread``) — convolutions of any layout, and matrix
products indexed through a split global index.

The thread is identified by coordinates: the digits of a global index split by ``/`` and ``%``
(``k = idx % K; ow = idx / K % OW; ...``), the last quotient, or an unsplit ``xp_gx``/``xp_gy``/``xp_bz``. Its
whole effect must be one store ``P[o(coords)] = E(sum_{r1..rn} [g] X[f(rows, r)] * W[h(cols, r)])``: every
coordinate is read by exactly one operand (``rows`` by one, ``cols`` by the other), the summation ranges are
rectangular and thread-free, guards ``g`` on the product (zero padding) bound one operand's indices, and the
store's guards bound the coordinates or the global index. Then the launch's output is ``M x N`` entries of
``A . B`` with ``A[i][p] = [g] X[...]`` (an im2col matrix) and ``B[p][j] = [g] W[...]``, ``i``, ``j``, ``p``
enumerating rows, columns and summation indices — gathered, multiplied, scattered through ``o``.
Anything else is refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import PassRefused
from xpiler_core.passes.support.bang_thread import (
    DIGIT,
    RAW_THREAD_ATOMS,
    Guard,
    Load,
    Mul,
    Poly,
    Select,
    Sum,
    ThreadEvaluator,
    exact_div,
    subst_poly,
)
from xpiler_core.passes.support.matmul_shape import stored_epilogue
from xpiler_core.printer import print_expr


@dataclass(frozen=True)
class Coord:
    atom: str  # the C name the gather and scatter loops give it
    extent: str  # C expression of its count


@dataclass(frozen=True)
class Gathered:
    """One operand as read by the thread: ``guards ? base[offset] : 0``."""

    base: str
    offset: Poly
    guards: tuple[Guard, ...]

    def c_value(self) -> str:
        load = f"{self.base}[{self.offset.c_text()}]"
        if not self.guards:
            return load
        test = " && ".join(f"{g.index.c_text()} < {g.bound.c_text()}" for g in self.guards)
        return f"(({test}) ? {load} : 0.0f)"


@dataclass(frozen=True)
class ImplicitGemm:
    rows: tuple[Coord, ...]  # outermost first
    cols: tuple[Coord, ...]
    sums: tuple[tuple[str, Poly, Poly], ...]  # (atom, lo, hi), outermost first
    lhs: Gathered  # rows x sums
    rhs: Gathered  # sums x cols
    out_base: str
    out_offset: Poly
    epilogue: A.Expr | None  # over ``xp_mm_acc0[xp_e]``
    preconditions: tuple[str, ...]


def _flatten(value: Sum) -> tuple[list[tuple[str, Poly, Poly]], object]:
    sums: list[tuple[str, Poly, Poly]] = []
    body: object = value
    while isinstance(body, Sum):
        sums.append((body.var, body.lo, body.hi))
        body = body.body
    return sums, body


def _min(values: list[str]) -> str:
    out = values[0]
    for v in values[1:]:
        out = f"xp_gemm_min({out}, {v})"
    return out


def _launch(axis: str) -> str:
    return f"(long)xp_gd{axis} * xp_bd{axis}"


def recognize(ev: ThreadEvaluator) -> ImplicitGemm:
    if len(ev.stores) != 1:
        raise PassRefused(f"the thread stores {len(ev.stores)} values (an implicit GEMM stores one)")
    st = ev.stores[0]
    epilogue: A.Expr | None = None
    if isinstance(st.value, Sum):
        total = st.value
    elif st.source is not None:
        found, epilogue = stored_epilogue(st.source, ev)
        if len(found) != 1:
            raise PassRefused("the stored expression combines several sums")
        total = found[0]
    else:
        raise PassRefused("the stored value is not a sum of products")
    sums, body = _flatten(total)
    product_guards: tuple[Guard, ...] = ()
    if isinstance(body, Select):
        product_guards, body = body.guards, body.value
    if not (isinstance(body, Mul) and isinstance(body.left, Load) and isinstance(body.right, Load)):
        raise PassRefused("the summed term is not a product of two loads")
    sum_atoms = {a for a, _, _ in sums}
    for _, lo, hi in sums:
        if (lo.atoms() | hi.atoms()) & (sum_atoms | ev.index_atoms() | RAW_THREAD_ATOMS):
            raise PassRefused("a summation range depends on the thread or another summation index")

    # the thread's coordinates, outermost first, with their extents
    expand = ev.coordinates()
    pre: list[str] = list(ev.preconditions)
    used = set().union(*(p.atoms() for p in _polys(st.offset, st.guards, body, product_guards)))
    for axis in "yx":  # blockIdx and threadIdx also read on their own: the global index is made of them
        size = ev.block_sizes.get(axis)
        if size is not None and f"xp_g{axis}" in used and not ev.radices.get(f"xp_g{axis}") and (
                {f"xp_b{axis}", f"xp_t{axis}"} & used):
            width = ev.value(size)
            assert isinstance(width, Poly)
            # exact: the evaluator folds only a literal blockIdx * size + threadIdx into the global index
            expand[f"xp_g{axis}"] = Poly.atom(f"xp_b{axis}") * width + Poly.atom(f"xp_t{axis}")
            used = (used - {f"xp_g{axis}"}) | {f"xp_b{axis}", f"xp_t{axis}"}
    order: list[str] = []
    radix: dict[str, str] = {}  # digit → its radix
    raw: dict[str, str] = {}  # a blockIdx/threadIdx coordinate → the launch's extent along it
    tops: dict[str, tuple[str, Poly]] = {}  # axis → (last quotient, product of the radices)
    if "xp_bz" in used:
        order.append("xp_bz")
    else:
        pre.append("xp_gdz == 1")
    pre.append("xp_bdz == 1")
    for axis in "yx":
        base = f"xp_g{axis}"
        radices = ev.radices.get(base, [])
        top = ev.quotient(base, len(radices))
        digits = [f"{DIGIT[base]}{i}" for i in range(len(radices) - 1, -1, -1)]
        raw_used = [a for a in (f"xp_b{axis}", f"xp_t{axis}") if a in used]
        if not ({ev.quotient(base, i) for i in range(len(radices) + 1)} | set(digits)) & used:
            # blockIdx and threadIdx read on their own (``ow = blockIdx.x; oc = threadIdx.x``): two coordinates
            for atom, extent in ((f"xp_b{axis}", f"xp_gd{axis}"), (f"xp_t{axis}", f"xp_bd{axis}")):
                if atom in raw_used:
                    order.append(atom)
                    raw[atom] = f"(long){extent}"
                else:
                    pre.append(f"{extent} == 1")
            continue
        if raw_used:
            raise PassRefused(f"blockIdx.{axis} or threadIdx.{axis} is read besides the global index it makes")
        if axis not in ev.block_sizes:
            raise PassRefused(f"the {axis} index is not blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}")
        product = Poly.const(1)
        for r in radices:
            product = product * r
        tops[axis] = (top, product)
        order += [top, *digits]
        radix.update({f"{DIGIT[base]}{i}": r.c_text() for i, r in enumerate(radices)})

    # the store's guards bound coordinates (or a whole global index)
    bounds: dict[str, list[str]] = {atom: [] for atom in order}
    for g in st.guards:
        if g.bound.atoms() & (ev.index_atoms() | RAW_THREAD_ATOMS):
            raise PassRefused("a guard bound depends on the thread")
        split = next((a for a, (top, prod) in tops.items()
                      if g.index == Poly.atom(f"xp_g{a}") and top != f"xp_g{a}"), None)
        if split is not None:  # idx < total: the last quotient below total / (product of the radices)
            top, prod = tops[split]
            quotient = exact_div(g.bound, prod)
            if quotient is None:
                raise PassRefused("the global index is bounded by a size that is not a multiple of its split")
            bounds[top].append(quotient.c_text())
            continue
        bounded = next((a for a in order if g.index == Poly.atom(a)), None)
        if bounded is None:
            raise PassRefused("a guard bounds something other than an output coordinate")
        bounds[bounded].append(g.bound.c_text())
    extents: dict[str, str] = {}
    for atom in order:
        top_axis = next((a for a, (top, _) in tops.items() if top == atom), None)
        if atom in radix:
            first = radix[atom]
        elif atom in raw:
            first = raw[atom]
        elif atom == "xp_bz":
            first = "(long)xp_gdz"
        else:
            assert top_axis is not None
            axis = top_axis
            prod = tops[axis][1]
            if prod == Poly.const(1):
                first = _launch(axis)
            elif bounds[atom]:
                first = bounds[atom].pop(0)
                limit = first if not bounds[atom] else _min([first, *bounds[atom]])
                pre.append(f"{_launch(axis)} >= {prod.c_text()} * {limit}")  # every guarded index has a thread
            else:  # no bound: every launched thread stores
                pre.append(f"{_launch(axis)} % {prod.c_text()} == 0")
                first = f"{_launch(axis)} / {prod.c_text()}"
        extents[atom] = _min([first, *bounds[atom]])
    coords = [Coord(atom, extents[atom]) for atom in order]
    names = {c.atom for c in coords}

    def coordinates_of(p: Poly) -> Poly:
        q = subst_poly(p, expand)
        stray = q.atoms() & ((RAW_THREAD_ATOMS | ev.index_atoms()) - names - sum_atoms)
        if stray:
            raise PassRefused(f"an index uses {sorted(stray)[0]}, not a coordinate of the output")
        return q

    left, right = body.left, body.right
    lhs_offset, rhs_offset = coordinates_of(left.offset), coordinates_of(right.offset)
    out_offset = coordinates_of(st.offset)
    guards = [Guard(coordinates_of(g.index), coordinates_of(g.bound)) for g in product_guards]
    l_coords, r_coords = lhs_offset.atoms() & names, rhs_offset.atoms() & names
    if l_coords & r_coords:
        raise PassRefused("both operands depend on the same output coordinate (a batched product)")
    l_guards: list[Guard] = []
    r_guards: list[Guard] = []
    for g in guards:
        g_coords = (g.index.atoms() | g.bound.atoms()) & names
        if g_coords & l_coords or not g_coords:
            l_guards.append(g)
        elif g_coords & r_coords:
            r_guards.append(g)
        else:
            raise PassRefused("a guard of the product bounds a coordinate neither operand reads")
        if g_coords & l_coords and g_coords & r_coords:
            raise PassRefused("a guard of the product ties the two operands' coordinates")
    lhs_all = l_coords | {a for g in l_guards for a in (g.index.atoms() | g.bound.atoms()) & names}
    rhs_all = r_coords | {a for g in r_guards for a in (g.index.atoms() | g.bound.atoms()) & names}
    if lhs_all & rhs_all:
        raise PassRefused("both operands depend on the same output coordinate (a batched product)")
    if not lhs_all or not rhs_all:
        raise PassRefused("one operand does not depend on the output coordinates (a matrix-vector product)")
    if out_offset.atoms() & sum_atoms:
        raise PassRefused("the output index depends on the summation index")
    missing = names - lhs_all - rhs_all
    if missing:
        raise PassRefused(f"the output varies along {sorted(missing)[0]} but the product does not")
    if st.base in (left.base, right.base):
        raise PassRefused("the output array is also an operand")
    lhs = Gathered(left.base, lhs_offset, tuple(l_guards))
    rhs = Gathered(right.base, rhs_offset, tuple(r_guards))
    rows = tuple(c for c in coords if c.atom in lhs_all)
    cols = tuple(c for c in coords if c.atom in rhs_all)
    # the output's unit-stride coordinate runs along columns, so the scatter writes contiguous memory
    unit = {a for (m, c) in out_offset.terms if len(m) == 1 and c == 1 for a in m}
    if unit & {c.atom for c in rows} and not unit & {c.atom for c in cols}:
        rows, cols, lhs, rhs = cols, rows, rhs, lhs
    for axis, size in sorted(ev.block_sizes.items()):
        if axis in tops:
            pre.append(f"({print_expr(size, Dialect.C)}) == xp_bd{axis}")
    return ImplicitGemm(rows=rows, cols=cols, sums=tuple(sums), lhs=lhs, rhs=rhs, out_base=st.base,
                        out_offset=out_offset, epilogue=epilogue, preconditions=tuple(dict.fromkeys(pre)))


def _polys(offset: Poly, guards: tuple[Guard, ...], body: Mul, product_guards: tuple[Guard, ...]) -> list[Poly]:
    out = [offset]
    out += [p for g in (*guards, *product_guards) for p in (g.index, g.bound)]
    for v in (body.left, body.right):
        if isinstance(v, Load):
            out.append(v.offset)
    return out

