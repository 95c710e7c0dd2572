"""Sketches: one suspect replaced by a hole from a small grammar, with z3 unknowns and a decoder.

Grammar (bounded so the search stays local):

* ``const``   — an integer literal becomes an unknown integer ``c`` (|c - old| ≤ max(64, |old|)).
* ``affine``  — an integer expression becomes ``c0 + Σ ci·ai`` over atoms: in-scope integer variables,
  builtins (``threadIdx.x`` ...), integer parameters, and for expressions that multiply two variables the
  products of their variables with the parameters; coefficients stay within 4 of the original's.
* ``compare`` — a comparison ``L op R`` becomes ``L op' H`` with ``op'`` one of ``< <= > >= == !=`` and ``H``
  an affine hole seeded from ``R``.
* ``swap``    — two variables of one subscript, or two subscripts of one access, exchange places.
* ``rename``  — an integer variable becomes another integer name in scope (a variable, parameter or
  ``#define`` constant); names of the same role (parameter for parameter, local for local) are nearer.

Every sketch minimizes its distance to the original expression (z3 ``Optimize``), so the repair is the
smallest change the examples force.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3

from xpiler_core import ast as A
from xpiler_core.diagnostics import Span
from xpiler_core.repair.interp import Hole, Thread, truth
from xpiler_core.repair.suspects import COMPARISONS, FunctionSites, Path, Site

COEF_RADIUS = 4
CONST_RADIUS = 64
MAX_ATOMS = 14
MAX_PRODUCTS = 8
CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass
class Edit:
    """Replace the source text ``old`` at ``span`` by ``new``."""

    span: Span
    old: str
    new: str


_INT = re.compile(rb"^\(?\s*(-?\s*\d+)\s*\)?$")
_AFTER = re.compile(rb"^(\s*)([+-])(\s*)(\d+)\b(?![\w.])")
# tokens after which ``X op M`` groups as ``(X op M)`` (nothing binds X more tightly from the left)
_OPEN_BEFORE = (b"(", b"[", b",", b"=", b"<", b">", b"?", b":", b"{", b";", b"return", b"&&", b"||")


def _span_at(data: bytes, start: int, end: int) -> Span:
    def point(offset: int) -> tuple[int, int]:
        line = data.count(b"\n", 0, offset)
        return line, offset - (data.rfind(b"\n", 0, offset) + 1)

    (sl, sc), (el, ec) = point(start), point(end)
    return Span(start, end, sl, sc, el, ec)


def tidy(text: str, edit: Edit) -> Edit:
    """The edit as a person would write it: an integer constant that lands next to another one is folded
    (``0 + 1`` edited to ``(-1) + 1`` reads ``0``), and ``x - (-1)`` reads ``x + 1`` (``x + (-1)``: ``x - 1``).
    Only where C's grouping makes the two spellings equal; otherwise the edit as it was."""
    data = text.encode("utf-8")
    new = _INT.match(edit.new.encode("utf-8"))
    if new is None:
        return edit
    value = int(new.group(1).replace(b" ", b""))
    start, end = edit.span.start_byte, edit.span.end_byte
    before = data[:start].rstrip()
    after = _AFTER.match(data[end:])
    if after is not None and before.endswith(_OPEN_BEFORE) and not before.endswith((b"->", b">>", b"<<")):
        rest = data[end + after.end():].lstrip()
        if not rest[:1] or rest[:1] not in b"*/%[(.":
            folded = value + int(after.group(4)) * (1 if after.group(2) == b"+" else -1)
            text_new = str(folded) if folded >= 0 or before.endswith((b"(", b"[", b",", b"=")) else f"({folded})"
            return Edit(_span_at(data, start, end + after.end()), text[start:end] + data[end:end + after.end()]
                        .decode("utf-8"), text_new)
    if value < 0 and before.endswith((b"-", b"+")) and not before.endswith((b"--", b"++", b"->")):
        op_at = len(before) - 1
        flipped = "+" if before.endswith(b"-") else "-"
        old = data[op_at:end].decode("utf-8")
        return Edit(_span_at(data, op_at, end), old, f"{flipped} {-value}")
    return edit


@dataclass
class Sketch:
    kind: str
    site: Site
    holes: dict[Path, Callable[[Thread], Any]]  # site path → evaluator (installed as Hole nodes)
    variables: list[Any]
    constraints: list[Any]
    objective: Any
    decode: Callable[[z3.ModelRef], list[Edit]]
    describe: Callable[[z3.ModelRef], dict[str, Any]]
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)  # unknown name → (lo, hi)
    # among completions as near as each other, which to run first (smaller first): a comparison's operator
    # flipped before a term added to its bound
    tiebreak: Any = None


class SourceText:
    """Byte-addressed source text (spans are byte offsets)."""

    def __init__(self, text: str) -> None:
        self.data = text.encode("utf-8")

    def of(self, node: A.Node) -> str:
        if node.span is None:
            from xpiler_core.printer import print_expr

            assert isinstance(node, A.Expr)
            return print_expr(node)
        return self.data[node.span.start_byte : node.span.end_byte].decode("utf-8")


def _strip(e: A.Expr) -> A.Expr:
    while isinstance(e, A.Cast) and not e.type.pointers:
        e = e.operand
    return e


def _atom_key(e: A.Expr) -> str | None:
    e = _strip(e)
    if isinstance(e, A.Name):
        return e.id
    ref = A.builtin_ref(e)
    if ref is not None:
        return f"{ref[0]}.{ref[1]}"
    return None


Linear = tuple[dict[str, int], int]


def linearize(e: A.Expr, int_names: set[str], macros: dict[str, Any]) -> Linear | None:
    """``e`` as Σ coef·atom + const over atoms (variables, builtins, products ``a*b``), or None."""
    e = _strip(e)
    if isinstance(e, A.Literal):
        v = e.int_value
        return None if v is None else ({}, v)
    if isinstance(e, A.Name):
        if e.id in int_names:
            return ({e.id: 1}, 0)
        v = macros.get(e.id)
        return ({}, v) if isinstance(v, int) and not isinstance(v, bool) else None
    key = _atom_key(e)
    if key is not None:
        return ({key: 1}, 0)
    if isinstance(e, A.Unary) and e.op in ("-", "+"):
        inner = linearize(e.operand, int_names, macros)
        if inner is None:
            return None
        return inner if e.op == "+" else ({k: -v for k, v in inner[0].items()}, -inner[1])
    if isinstance(e, A.Binary) and e.op in ("+", "-"):
        a, b = linearize(e.left, int_names, macros), linearize(e.right, int_names, macros)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        coefs = dict(a[0])
        for k, v in b[0].items():
            coefs[k] = coefs.get(k, 0) + sign * v
        return ({k: v for k, v in coefs.items() if v}, a[1] + sign * b[1])
    if isinstance(e, A.Binary) and e.op == "*":
        a, b = linearize(e.left, int_names, macros), linearize(e.right, int_names, macros)
        if a is None or b is None:
            return None
        prod: dict[str, int] = {}
        terms_a = [*a[0].items(), ("", a[1])]
        terms_b = [*b[0].items(), ("", b[1])]
        for (ka, va), (kb, vb) in itertools.product(terms_a, terms_b):
            if not va or not vb:
                continue
            if ka and kb:
                if "*" in ka or "*" in kb:
                    return None
                key = "*".join(sorted((ka, kb)))
            else:
                key = ka or kb
            prod[key] = prod.get(key, 0) + va * vb
        const = prod.pop("", 0)
        return ({k: v for k, v in prod.items() if v}, const)
    return None


def _atom_expr(key: str) -> A.Expr:
    if "*" in key:
        a, b = key.split("*")
        return A.Binary("*", _atom_expr(a), _atom_expr(b))
    if "." in key:
        base, fld = key.split(".")
        return A.Member(A.Name(base), fld)
    return A.Name(key)


def _names_in(node: A.Node) -> list[str]:
    out: list[str] = []
    for n in A.walk(node):
        if isinstance(n, A.Name) and n.id not in out:
            out.append(n.id)
        ref = A.builtin_ref(n)
        if ref is not None and f"{ref[0]}.{ref[1]}" not in out:
            out.append(f"{ref[0]}.{ref[1]}")
    return out


class AffineHole:
    """``c0 + Σ ci·ai`` with unknowns near the original's coefficients."""

    counter = itertools.count()

    def __init__(self, site: Site, fs: FunctionSites, macros: dict[str, Any], seed_expr: A.Expr) -> None:
        n = next(self.counter)
        int_names = {k for k, v in site.scope.items() if v == "int"}
        lin = linearize(seed_expr, int_names, macros)
        orig: dict[str, int] = dict(lin[0]) if lin else {}
        self.opaque = None if lin else seed_expr  # not linear: keep it whole as one atom (coefficient 1)
        const0 = lin[1] if lin else 0
        stmt = fs.fn if not site.stmt else _get(fs.fn, site.stmt)
        candidates = [k for k in _names_in(seed_expr) if k in int_names or "." in k]
        candidates += [k for k in _names_in(stmt) if (k in int_names or "." in k) and k not in candidates]
        params = [p.name for p in fs.fn.params if isinstance(p, A.Param) and p.name and site.scope.get(p.name) == "int"]
        candidates += [k for k in params if k not in candidates]
        candidates += [k for k, v in site.scope.items() if v == "int" and k not in candidates]
        atoms = [k for k in orig if "*" not in k]
        atoms += [k for k in candidates if k not in atoms][: max(0, MAX_ATOMS - len(atoms))]
        products = [k for k in orig if "*" in k]
        if products:
            factors = {f for k in products for f in k.split("*")}
            extra = []
            for f in sorted(factors):
                for other in _names_in(seed_expr) + params + [f"blockDim.{d}" for d in "xyz"]:
                    key = "*".join(sorted((f, other)))
                    if other != f and (other in int_names or "." in other) and key not in products and key not in extra:
                        extra.append(key)
            products += extra[:MAX_PRODUCTS]
        self.keys = atoms + products
        self.exprs = [_atom_expr(k) for k in self.keys]
        self.orig = [orig.get(k, 0) for k in self.keys]
        self.const0 = const0
        self.coefs = [z3.Int(f"c{n}_{i}") for i in range(len(self.keys))]
        self.c0 = z3.Int(f"c{n}_const")
        self.constraints = [z3.And(c >= o - COEF_RADIUS, c <= o + COEF_RADIUS) for c, o in zip(self.coefs, self.orig, strict=True)]
        self.constraints.append(z3.And(self.c0 >= const0 - CONST_RADIUS, self.c0 <= const0 + CONST_RADIUS))
        self.cost = z3.Sum([_abs(c - o) for c, o in zip(self.coefs, self.orig, strict=True)] + [_abs(self.c0 - const0)])
        self.bounds = {str(c): (o - COEF_RADIUS, o + COEF_RADIUS) for c, o in zip(self.coefs, self.orig, strict=True)}
        self.bounds[str(self.c0)] = (const0 - CONST_RADIUS, const0 + CONST_RADIUS)

    def evaluate(self, th: Thread) -> Any:
        total: Any = self.c0
        for c, e in zip(self.coefs, self.exprs, strict=True):
            v = th.eval(e)
            total = total + c * (z3.IntVal(int(v)) if isinstance(v, (int, bool)) else v)
        if self.opaque is not None:
            v = th.eval(self.opaque)
            total = total + (int(v) if isinstance(v, (int, bool)) else v)
        return total

    def text(self, model: z3.ModelRef, src: SourceText) -> str:
        parts: list[tuple[int, str]] = []
        if self.opaque is not None:
            parts.append((1, _paren(src.of(self.opaque))))
        for c, k in zip(self.coefs, self.keys, strict=True):
            v = model.eval(c, model_completion=True).as_long()
            if v:
                atom = " * ".join(_atom_text(f, src) for f in k.split("*"))
                parts.append((v, atom))
        const = model.eval(self.c0, model_completion=True).as_long()
        out = ""
        for v, atom in parts:
            mag = atom if abs(v) == 1 else f"{atom} * {abs(v)}"
            out += (mag if v > 0 else f"-{mag}") if not out else (f" + {mag}" if v > 0 else f" - {mag}")
        if const or not out:
            out += str(const) if not out else (f" + {const}" if const > 0 else f" - {-const}")
        return out

    def values(self, model: z3.ModelRef) -> dict[str, int]:
        out = {k: model.eval(c, model_completion=True).as_long() for k, c in zip(self.keys, self.coefs, strict=True)}
        out["const"] = model.eval(self.c0, model_completion=True).as_long()
        return {k: v for k, v in out.items() if v or k == "const"}


def _atom_text(key: str, src: SourceText) -> str:
    return key


def _paren(text: str) -> str:
    simple = text.replace("_", "").replace(".", "").isalnum()
    return text if simple else f"({text})"


def _abs(e: Any) -> Any:
    return z3.If(e >= 0, e, -e)


def _get(node: Any, path: Path) -> Any:
    from xpiler_core.repair.suspects import get_at

    return get_at(node, path)


def const_sketch(site: Site) -> Sketch:
    assert isinstance(site.node, A.Literal)
    old = site.node.int_value or 0
    c = z3.Int(f"k{next(AffineHole.counter)}")
    radius = max(CONST_RADIUS, abs(old))
    span = site.node.span
    assert span is not None

    def decode(model: z3.ModelRef) -> list[Edit]:
        v = model.eval(c, model_completion=True).as_long()
        return [Edit(span, site.node.text if isinstance(site.node, A.Literal) else "", str(v) if v >= 0 else f"({v})")]

    return Sketch(
        "const", site, {site.path: lambda th: c}, [c], [z3.And(c >= old - radius, c <= old + radius)],
        _abs(c - old), decode, lambda m: {"value": m.eval(c, model_completion=True).as_long()},
        {str(c): (old - radius, old + radius)},
    )


def affine_sketch(site: Site, fs: FunctionSites, macros: dict[str, Any], src: SourceText) -> Sketch:
    hole = AffineHole(site, fs, macros, site.node)
    span = site.node.span
    assert span is not None
    old = src.of(site.node)
    return Sketch(
        "affine", site, {site.path: hole.evaluate}, [*hole.coefs, hole.c0], hole.constraints, hole.cost,
        lambda m: [Edit(span, old, _paren(hole.text(m, src)))], hole.values, hole.bounds,
    )


def compare_sketch(site: Site, fs: FunctionSites, macros: dict[str, Any], src: SourceText) -> Sketch:
    node = site.node
    assert isinstance(node, A.Binary) and node.op in COMPARISONS
    hole = AffineHole(site, fs, macros, node.right)
    sel = z3.Int(f"op{next(AffineHole.counter)}")
    orig_sel = CMP_OPS.index(node.op)
    left = node.left

    def evaluate(th: Thread) -> Any:
        lv = th.eval(left)
        if not isinstance(lv, (int, bool, z3.ArithRef)):
            from xpiler_core.repair.interp import Unsupported

            raise Unsupported("comparison of a non-integer")
        lhs = z3.IntVal(int(lv)) if isinstance(lv, (int, bool)) else lv
        rhs = hole.evaluate(th)
        out = lhs != rhs
        for i, op in reversed(list(enumerate(CMP_OPS[:-1]))):
            rel = {"<": lhs < rhs, "<=": lhs <= rhs, ">": lhs > rhs, ">=": lhs >= rhs, "==": lhs == rhs}[op]
            out = z3.If(sel == i, rel, out)
        return truth(out)

    span = node.span
    assert span is not None
    old = src.of(node)

    def decode(model: z3.ModelRef) -> list[Edit]:
        op = CMP_OPS[model.eval(sel, model_completion=True).as_long()]
        return [Edit(span, old, f"{src.of(left)} {op} {hole.text(model, src)}")]

    def describe(model: z3.ModelRef) -> dict[str, Any]:
        return {"op": CMP_OPS[model.eval(sel, model_completion=True).as_long()], **hole.values(model)}

    return Sketch(
        "compare", site, {site.path: evaluate}, [sel, *hole.coefs, hole.c0],
        [*hole.constraints, sel >= 0, sel < len(CMP_OPS)], hole.cost + z3.If(sel == orig_sel, 0, 1), decode, describe,
        {**hole.bounds, str(sel): (0, len(CMP_OPS) - 1)}, hole.cost,
    )


def rename_sketch(site: Site, fs: FunctionSites, macros: dict[str, Any]) -> Sketch | None:
    """An integer name replaced by another integer name in scope (the wrong-variable bug).

    The candidates are every integer variable and parameter in scope and the integer macros; a name of
    the same role as the original (parameter for parameter, local variable for local variable, macro for
    macro) costs 1, any other 2, so the closest replacements are tried first."""
    node = site.node
    if not isinstance(node, A.Name) or node.span is None:
        return None
    params = {p.name for p in fs.fn.params if isinstance(p, A.Param) and p.name}
    int_macros = [k for k, v in macros.items() if isinstance(v, int) and not isinstance(v, bool) and k not in site.scope]
    if site.scope.get(node.id) != "int" and node.id not in int_macros:
        return None

    def role(name: str) -> str:
        return "param" if name in params else ("macro" if name not in site.scope else "local")

    names = [k for k, v in site.scope.items() if v == "int" and k != node.id]
    names += [k for k in int_macros if k != node.id]
    if not names:
        return None
    names = [node.id, *names]
    sel = z3.Int(f"name{next(AffineHole.counter)}")
    cost: Any = z3.IntVal(0)
    for i, k in reversed(list(enumerate(names))):
        if i:
            cost = z3.If(sel == i, 1 if role(k) == role(node.id) else 2, cost)
    exprs = [A.Name(k) for k in names]

    def evaluate(th: Thread) -> Any:
        out: Any = None
        for i, e in reversed(list(enumerate(exprs))):
            v = th.eval(e)
            if not isinstance(v, (int, bool, z3.ArithRef)):
                from xpiler_core.repair.interp import Unsupported

                raise Unsupported("rename to a non-integer")
            zv = z3.IntVal(int(v)) if isinstance(v, (int, bool)) else v
            out = zv if out is None else z3.If(sel == i, zv, out)
        return out

    span = node.span

    def chosen(model: z3.ModelRef) -> str:
        return names[model.eval(sel, model_completion=True).as_long()]

    return Sketch(
        "rename", site, {site.path: evaluate}, [sel], [sel >= 0, sel < len(names)], cost,
        lambda m: [] if chosen(m) == node.id else [Edit(span, node.id, chosen(m))],
        lambda m: {"name": chosen(m)}, {str(sel): (0, len(names) - 1)},
    )


def swap_sketches(site: Site, src: SourceText) -> list[Sketch]:
    """Exchange two variables inside a subscript, or two subscripts of a multi-dimensional access."""
    out: list[Sketch] = []
    node = site.node
    int_names = {k for k, v in site.scope.items() if v == "int"}
    if site.ctx == "index":
        occurrences: dict[str, list[Path]] = {}
        for rel, n in _walk_paths(node, ()):
            if isinstance(n, A.Name) and n.id in int_names:
                occurrences.setdefault(n.id, []).append(rel)
        for x, y in itertools.combinations(sorted(occurrences), 2):
            if _commuted(node, occurrences[x], occurrences[y]):
                continue  # `x * y` → `y * x`: the same value, not a repair
            pairs: list[tuple[Path, A.Expr]] = [(site.path + p, A.Name(y)) for p in occurrences[x]]
            pairs += [(site.path + p, A.Name(x)) for p in occurrences[y]]
            out.append(_swap(site, src, pairs, f"{x}<->{y}"))
    if isinstance(node, A.Index) and isinstance(node.base, A.Index) and site.ctx != "index":
        a, b = node.base.index, node.index
        out.append(_swap(site, src, [(site.path + ("base", "index"), b), (site.path + ("index",), a)], "subscripts", bracketed=True))
    return out


def _commuted(node: A.Expr, xs: list[Path], ys: list[Path]) -> bool:
    """Each name occurs once, as the two operands of one ``+`` or ``*`` (through integer casts): swapping them
    changes nothing."""
    if len(xs) != 1 or len(ys) != 1:
        return False

    def at(path: Path) -> Any:
        out: Any = node
        for step in path:
            out = out[step] if isinstance(step, int) else getattr(out, step)
        return out

    def operand(path: Path) -> Path:
        while path and path[-1] == "operand" and isinstance(at(path[:-1]), A.Cast):
            path = path[:-1]
        return path

    x, y = operand(xs[0]), operand(ys[0])
    if not x or not y or x[:-1] != y[:-1] or {x[-1], y[-1]} != {"left", "right"}:
        return False
    parent = at(x[:-1])
    return isinstance(parent, A.Binary) and parent.op in ("+", "*")


def _swap(
    site: Site, src: SourceText, replacements: list[tuple[Path, A.Expr]], label: str, bracketed: bool = False
) -> Sketch:
    sel = z3.Bool(f"swap{next(AffineHole.counter)}")
    holes: dict[Path, Callable[[Thread], Any]] = {}
    edits: list[Edit] = []
    for path, new in replacements:
        old_node = _get_rel(site, path)

        def evaluate(th: Thread, old_node: A.Expr = old_node, new: A.Expr = new) -> Any:
            a, b = th.eval(new), th.eval(old_node)
            if not all(isinstance(v, (int, bool, z3.ArithRef)) for v in (a, b)):
                from xpiler_core.repair.interp import Unsupported

                raise Unsupported("swap of non-integers")
            za = z3.IntVal(int(a)) if isinstance(a, (int, bool)) else a
            zb = z3.IntVal(int(b)) if isinstance(b, (int, bool)) else b
            return z3.If(sel, za, zb)

        holes[path] = evaluate
        assert old_node.span is not None
        new_text = src.of(new) if new.span is not None else (new.id if isinstance(new, A.Name) else src.of(new))
        keep = bracketed or isinstance(new, A.Name)  # a whole subscript sits between brackets already
        edits.append(Edit(old_node.span, src.of(old_node), new_text if keep else _paren(new_text)))
    return Sketch(
        "swap", site, holes, [sel], [], z3.If(sel, 1, 0), lambda m: edits if z3.is_true(m.eval(sel, model_completion=True)) else [],
        lambda m: {"swap": label, "applied": z3.is_true(m.eval(sel, model_completion=True))},
    )


def _get_rel(site: Site, path: Path) -> A.Expr:
    rel = path[len(site.path):]
    node: Any = site.node
    for step in rel:
        node = node[step] if isinstance(step, int) else getattr(node, step)
    return node


def _walk_paths(node: Any, path: Path) -> list[tuple[Path, Any]]:
    import dataclasses

    out = [(path, node)]
    if isinstance(node, A.Node) and dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            if f.name == "span":
                continue
            v = getattr(node, f.name)
            if isinstance(v, A.Node):
                out += _walk_paths(v, (*path, f.name))
            elif isinstance(v, tuple):
                for i, item in enumerate(v):
                    if isinstance(item, A.Node):
                        out += _walk_paths(item, (*path, f.name, i))
    return out


def install(fn: A.Function, sketch: Sketch) -> tuple[A.Function, dict[int, Callable[[Thread], Any]]]:
    """The function with the sketch's holes in place, and the hole evaluators by hole id."""
    from xpiler_core.repair.suspects import replace_at

    evaluators: dict[int, Callable[[Thread], Any]] = {}
    out: Any = fn
    for i, (path, ev) in enumerate(sketch.holes.items()):
        out = replace_at(out, path, Hole(i))
        evaluators[i] = ev
    return out, evaluators
