"""Systematic single-site bug injection (for the repair benchmark and tests).

Each mutation is one text edit of one expression of the entry kernel, in one of five families:
``off-by-one`` (a comparison bound ±1 or ``<``⇄``<=``), ``wrong-stride`` (a multiplier in a subscript
becomes another integer parameter or ±1), ``swapped-indices`` (two variables of a subscript exchange, or two
subscripts of an access), ``wrong-constant`` (an integer literal in a subscript/bound/initializer ±1 or ×2),
``wrong-guard`` (a guard's comparison negated, or its bound replaced by another parameter).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from xpiler_core import ast as A
from xpiler_core.frontend.lower import lower_text
from xpiler_core.repair.interp import macro_values
from xpiler_core.repair.sketch import SourceText
from xpiler_core.repair.suspects import COMPARISONS, collect

FAMILIES = ("off-by-one", "wrong-stride", "swapped-indices", "wrong-constant", "wrong-guard")
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_OFF_BY_ONE = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}


@dataclass(frozen=True)
class Mutation:
    family: str
    start: int  # byte offsets in the original text
    end: int
    old: str
    new: str
    line: int

    def apply(self, text: str) -> str:
        data = text.encode("utf-8")
        return (data[: self.start] + self.new.encode("utf-8") + data[self.end :]).decode("utf-8")

    def describe(self) -> str:
        return f"{self.family} line {self.line + 1}: `{self.old}` -> `{self.new}`"


def _simple(text: str) -> bool:
    return text.replace("_", "").replace(".", "").isalnum()


def mutations(text: str, path: str, entry: str) -> list[Mutation]:
    """Every single-site mutation of the entry function (and, for a host entry, of the kernels in the file:
    a bug a user meets lives there), in source order."""
    module = lower_text(text, path)
    fn = next((f for f in module.items if isinstance(f, A.Function) and f.name == entry), None)
    if fn is None:
        return []
    targets = [fn] if fn.is_kernel else [fn, *(k for k in module.kernels() if k.name != entry)]
    src = SourceText(text)
    out: list[Mutation] = []
    for target in targets:
        out += _function_mutations(target, module, src)
    # Deduplicate identical edits.
    seen: set[tuple[int, int, str]] = set()
    unique = []
    for m in out:
        if (m.start, m.end, m.new) not in seen:
            seen.add((m.start, m.end, m.new))
            unique.append(m)
    return unique


def _function_mutations(fn: A.Function, module: A.Module, src: SourceText) -> list[Mutation]:
    fs = collect(fn, macro_values(module))
    params = [p.name for p in fn.params if isinstance(p, A.Param) and p.name and not p.type.pointers and p.type.base in ("int", "const int")]
    out: list[Mutation] = []

    def add(family: str, node: A.Node, new: str) -> None:
        assert node.span is not None
        old = src.of(node)
        if new != old:
            out.append(Mutation(family, node.span.start_byte, node.span.end_byte, old, new, node.span.start_line))

    by_path = {s.path: s for s in fs.sites}
    for site in fs.sites:
        node = site.node
        if node.span is None:
            continue
        int_operands = all(
            (sub := by_path.get((*site.path, side))) is not None and sub.is_int for side in ("left", "right")
        )
        if isinstance(node, A.Binary) and node.op in COMPARISONS and site.ctx in ("cond", "cmp") and int_operands:
            left, right = src.of(node.left), src.of(node.right)
            if node.op in _OFF_BY_ONE:
                add("off-by-one", node, f"{left} {_OFF_BY_ONE[node.op]} {right}")
            r = right if _simple(right) else f"({right})"
            add("off-by-one", node, f"{left} {node.op} {r} + 1")
            add("wrong-guard", node, f"{left} {_NEGATE[node.op]} {right}")
            if isinstance(node.right, A.Name) and node.right.id in params:
                for other in params:
                    if other != node.right.id:
                        add("wrong-guard", node, f"{left} {node.op} {other}")
                        break
        if site.ctx == "index" and isinstance(node, A.Binary) and node.op == "*":
            for side in (node.left, node.right):
                if isinstance(side, A.Name) and side.id in params:
                    for other in params:
                        if other != side.id:
                            add("wrong-stride", side, other)
                            break
                elif isinstance(side, A.Literal) and (side.int_value or 0) > 1:
                    add("wrong-stride", side, str((side.int_value or 0) + 1))
        if site.ctx == "index" and not isinstance(node, A.Literal):
            names: list[A.Name] = []
            for inner in A.walk(node):
                if isinstance(inner, A.Name) and site.scope.get(inner.id) == "int" and all(m.id != inner.id for m in names):
                    names.append(inner)
            if len(names) >= 2 and names[0].span is not None and names[1].span is not None and site.path[-1] == "index":
                a, b = names[0], names[1]
                assert a.span is not None and b.span is not None
                # Two edits in one: rewrite the whole subscript text with the two names exchanged.
                whole = src.of(node)
                base = node.span.start_byte
                ra = (a.span.start_byte - base, a.span.end_byte - base)
                rb = (b.span.start_byte - base, b.span.end_byte - base)
                raw = whole.encode("utf-8")
                first, second = sorted([(ra, b.id), (rb, a.id)])
                swapped = raw[: first[0][0]] + first[1].encode() + raw[first[0][1] : second[0][0]] + second[1].encode() + raw[second[0][1] :]
                add("swapped-indices", node, swapped.decode("utf-8"))
        if isinstance(node, A.Index) and isinstance(node.base, A.Index) and site.ctx != "index":
            outer, last = node.base.index, node.index
            if outer.span is not None and last.span is not None and src.of(outer) != src.of(last):
                root = src.of(node.base.base)
                add("swapped-indices", node, f"{root}[{src.of(last)}][{src.of(outer)}]")
        if isinstance(node, A.Literal) and site.is_int and site.ctx in ("index", "cmp", "init"):
            v = node.int_value or 0
            add("wrong-constant", node, str(v + 1))
            if v >= 2:
                add("wrong-constant", node, str(v * 2))
    return out


def sample(text: str, path: str, entry: str, per_family: int, seed: int) -> list[Mutation]:
    """Up to ``per_family`` mutations of each family, chosen with a seeded RNG."""
    rng = random.Random(seed)
    every = mutations(text, path, entry)
    picked: list[Mutation] = []
    for fam in FAMILIES:
        pool = [m for m in every if m.family == fam]
        rng.shuffle(pool)
        picked += pool[:per_family]
    return picked
