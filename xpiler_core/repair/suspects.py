"""Suspect expressions of a kernel and their ranking from a failing run (fault localization).

A *site* is an expression of the kernel body addressed by its path (field names and tuple positions from
the function), with what is in scope there and the context it sits in (subscript, comparison, guard,
integer initializer). Localization runs the candidate on the interpreter with write instrumentation: the
statements that last wrote mismatching output elements (or the statements that should have written
elements nobody wrote, or the statement that faulted), their enclosing guards and loop headers, and the
integer declarations they read, rank first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from xpiler_core import ast as A

Path = tuple[Any, ...]
COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
_ARITH = frozenset({"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"})
_INT_CALLS = frozenset({"min", "max"})


def get_at(node: Any, path: Path) -> Any:
    for step in path:
        node = node[step] if isinstance(step, int) else getattr(node, step)
    return node


def replace_at(node: Any, path: Path, new: Any) -> Any:
    if not path:
        return new
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        items = list(node)
        items[step] = replace_at(items[step], rest, new)
        return tuple(items)
    return dataclasses.replace(node, **{step: replace_at(getattr(node, step), rest, new)})


@dataclass
class Site:
    path: Path  # from the Function node
    node: A.Expr
    ctx: str  # "index" | "cmp" | "cond" | "init" | "value"
    stmt: Path  # the statement the expression belongs to
    scope: dict[str, str]  # in-scope names → kind ("int", "float", "ptr-int", ...)
    is_int: bool


@dataclass
class FunctionSites:
    fn: A.Function
    sites: list[Site] = field(default_factory=list)
    stmt_paths: dict[int, Path] = field(default_factory=dict)  # id(stmt) → path
    parents: dict[Path, list[Path]] = field(default_factory=dict)  # stmt path → enclosing If/For paths
    decls: dict[str, list[Path]] = field(default_factory=dict)  # variable → declaring statement paths
    builtins: set[tuple[str, str]] = field(default_factory=set)


def _kind(t: A.Type, macros: dict[str, Any]) -> str:
    base = " ".join(q for q in t.base.split() if q not in ("const", "volatile"))
    from xpiler_core.repair.interp import INT_TYPES

    k = "int" if base in INT_TYPES else ("float" if base in ("float", "double", "half", "__half") else "other")
    return f"ptr-{k}" if t.pointers else k


def collect(fn: A.Function, macros: dict[str, Any]) -> FunctionSites:
    out = FunctionSites(fn)
    scope: dict[str, str] = {}
    for p in fn.params:
        if isinstance(p, A.Param) and p.name:
            scope[p.name] = _kind(p.type, macros)
    for n in A.walk(fn.body):
        ref = A.builtin_ref(n)
        if ref is not None:
            out.builtins.add(ref)
    int_macros = {k for k, v in macros.items() if isinstance(v, int) and not isinstance(v, bool)}
    _Walker(out, int_macros).stmt(fn.body, ("body",), dict(scope), [])
    return out


class _Walker:
    def __init__(self, out: FunctionSites, int_macros: set[str]) -> None:
        self.out = out
        self.int_macros = int_macros

    def stmt(self, s: A.Stmt, path: Path, scope: dict[str, str], parents: list[Path]) -> None:
        self.out.stmt_paths[id(s)] = path
        self.out.parents[path] = list(parents)
        if isinstance(s, A.Block):
            inner = dict(scope)
            for i, child in enumerate(s.stmts):
                self.stmt(child, (*path, "stmts", i), inner, parents)
        elif isinstance(s, A.DeclStmt):
            for i, d in enumerate(s.decls):
                kind = _kind(d.type, {}) if not d.dims else f"ptr-{_kind(d.type, {})}"
                if d.init is not None:
                    self.expr(d.init, (*path, "decls", i, "init"), "init" if kind == "int" else "value", path, scope)
                scope[d.name] = kind
                self.out.decls.setdefault(d.name, []).append(path)
        elif isinstance(s, A.ExprStmt):
            self.expr(s.expr, (*path, "expr"), "value", path, scope)
        elif isinstance(s, A.If):
            self.expr(s.cond, (*path, "cond"), "cond", path, scope)
            self.stmt(s.then, (*path, "then"), dict(scope), [*parents, path])
            if s.else_ is not None:
                self.stmt(s.else_, (*path, "else_"), dict(scope), [*parents, path])
        elif isinstance(s, A.For):
            inner = dict(scope)
            if s.init is not None:
                self.stmt(s.init, (*path, "init"), inner, parents)
            if s.cond is not None:
                self.expr(s.cond, (*path, "cond"), "cond", path, inner)
            if s.step is not None:
                self.expr(s.step, (*path, "step"), "init", path, inner)
            self.stmt(s.body, (*path, "body"), dict(inner), [*parents, path])
        elif isinstance(s, A.While):
            self.expr(s.cond, (*path, "cond"), "cond", path, scope)
            self.stmt(s.body, (*path, "body"), dict(scope), [*parents, path])
        elif isinstance(s, A.Return) and s.value is not None:
            self.expr(s.value, (*path, "value"), "value", path, scope)

    def is_int(self, e: A.Expr, scope: dict[str, str]) -> bool:
        if isinstance(e, A.Literal):
            return e.int_value is not None
        if isinstance(e, A.Name):
            return scope.get(e.id) == "int" or (e.id not in scope and e.id in self.int_macros)
        if isinstance(e, A.Member):
            return A.builtin_ref(e) is not None
        if isinstance(e, A.Binary):
            return e.op in _ARITH and self.is_int(e.left, scope) and self.is_int(e.right, scope)
        if isinstance(e, A.Unary):
            return e.op in ("-", "+", "~") and self.is_int(e.operand, scope)
        if isinstance(e, A.Cast):
            return not e.type.pointers and _kind(e.type, {}) == "int"
        if isinstance(e, A.Call):
            return e.callee in _INT_CALLS and all(self.is_int(a, scope) for a in e.args)
        if isinstance(e, A.Index):
            root: A.Expr = e
            while isinstance(root, A.Index):
                root = root.base
            return isinstance(root, A.Name) and scope.get(root.id) == "ptr-int"
        return False

    def expr(self, e: A.Expr, path: Path, ctx: str, stmt: Path, scope: dict[str, str]) -> None:
        self.out.sites.append(Site(path, e, ctx, stmt, dict(scope), self.is_int(e, scope)))
        if isinstance(e, A.Index):
            self.expr(e.base, (*path, "base"), ctx, stmt, scope)
            self.expr(e.index, (*path, "index"), "index", stmt, scope)
        elif isinstance(e, A.Binary):
            sub = "cmp" if e.op in COMPARISONS else ("cond" if e.op in ("&&", "||") else ctx)
            self.expr(e.left, (*path, "left"), sub, stmt, scope)
            self.expr(e.right, (*path, "right"), sub, stmt, scope)
        elif isinstance(e, A.Ternary):
            self.expr(e.cond, (*path, "cond"), "cond", stmt, scope)
            self.expr(e.then, (*path, "then"), ctx, stmt, scope)
            self.expr(e.else_, (*path, "else_"), ctx, stmt, scope)
        elif isinstance(e, A.Unary):
            self.expr(e.operand, (*path, "operand"), "cond" if e.op == "!" else ctx, stmt, scope)
        elif isinstance(e, A.Cast):
            self.expr(e.operand, (*path, "operand"), ctx, stmt, scope)
        elif isinstance(e, A.Assign):
            self.expr(e.target, (*path, "target"), ctx, stmt, scope)
            self.expr(e.value, (*path, "value"), "init" if self.is_int(e.target, scope) else ctx, stmt, scope)
        elif isinstance(e, A.Call):
            for i, a in enumerate(e.args):
                self.expr(a, (*path, "args", i), ctx, stmt, scope)


def implicated_statements(
    fs: FunctionSites, stmt_ids: set[int], missing_bases: set[str], faults: set[int] | None = None,
    levels: dict[Path, int] | None = None,
) -> tuple[list[Path], int]:
    """Statements to suspect first: writers of bad elements, stores to arrays with unwritten bad elements,
    their enclosing guards and loops, then the declarations of the integer variables they read.

    ``faults`` (ids among ``stmt_ids``) faulted rather than wrote a bad value: what went wrong there is an
    address or the control that reached it, not the values read, so data flow from them follows the
    integer scalars they read but not the memory (shared tiles) they load from.

    ``levels`` (when given) receives each suspected statement's distance in data-flow steps from the
    statements that wrote bad elements (their guards and loops share their level)."""
    level: dict[Path, int] = {}
    direct: list[Path] = [fs.stmt_paths[i] for i in stmt_ids if i in fs.stmt_paths]
    faulted = {fs.stmt_paths[i] for i in (faults or set()) if i in fs.stmt_paths}
    faulted -= {fs.stmt_paths[i] for i in stmt_ids - (faults or set()) if i in fs.stmt_paths}
    if missing_bases:
        for site in fs.sites:
            if isinstance(site.node, A.Assign) or (isinstance(site.node, A.Call) and site.node.callee and site.node.callee.startswith("atomic")):
                target = site.node.target if isinstance(site.node, A.Assign) else (site.node.args[0] if site.node.args else None)
                base = A._base_name(target.operand if isinstance(target, A.Unary) else target) if target is not None else None
                if base in missing_bases and site.stmt not in direct:
                    direct.append(site.stmt)
    # Memory def-use: statements that wrote the arrays (shared tiles, local accumulators) these read.
    # Data flow backwards, a few steps: statements that wrote the arrays (shared tiles, local buffers) or
    # assigned the scalars (accumulators) that these statements read.
    writers_of: dict[str, list[Path]] = {}
    assigners_of: dict[str, list[Path]] = {}
    for site in fs.sites:
        if isinstance(site.node, A.Assign):
            base = A._base_name(site.node.target)
            if isinstance(site.node.target, A.Name):
                assigners_of.setdefault(site.node.target.id, []).append(site.stmt)
            elif base is not None:
                writers_of.setdefault(base, []).append(site.stmt)
    for p in direct:
        level[p] = 0
    frontier = list(direct)
    for step in range(1, 4):
        nxt: list[Path] = []
        for p in frontier:
            rw = A.read_write(get_at(fs.fn, p))
            sources = [] if p in faulted else [w for b in sorted(rw.mem_reads) for w in writers_of.get(b, [])]
            sources += [w for n in sorted(rw.reads) for w in assigners_of.get(n, [])]
            for w in sources:
                if w not in direct:
                    direct.append(w)
                    nxt.append(w)
                    level[w] = step
        frontier = nxt
    ordered: list[Path] = []
    for p in direct:
        for q in [p, *reversed(fs.parents.get(p, []))]:
            if q not in ordered:
                ordered.append(q)
            level[q] = min(level.get(q, 9), level.get(p, 0))
            # A loop's header is its condition, its step and its init statement (``int k = 0``).
            node = get_at(fs.fn, q)
            if isinstance(node, A.For) and node.init is not None:
                if (*q, "init") not in ordered:
                    ordered.append((*q, "init"))
                level[(*q, "init")] = min(level.get((*q, "init"), 9), level[q])
    # Early exits (``if (...) return;`` / ``continue`` / ``break``) before a statement decide whether it runs.
    for p in list(ordered):
        for depth in range(len(p), 1, -1):
            if p[depth - 2] != "stmts" or not isinstance(p[depth - 1], int):
                continue
            block = p[: depth - 2]
            for j in range(p[depth - 1]):
                sib = (*block, "stmts", j)
                node = get_at(fs.fn, sib)
                if isinstance(node, A.If) and sib not in ordered and any(
                    isinstance(n, (A.Return, A.Break, A.Continue)) for n in A.walk(node)
                ):
                    ordered.append(sib)
                    level[sib] = level.get(p, 0)
    n_direct = len(ordered)
    if levels is not None:
        levels.update(level)
    # One level of def-use: declarations of the names these statements (and their guards) read.
    for p in list(ordered):
        node = get_at(fs.fn, p)
        heads = [node.cond] if isinstance(node, (A.If, A.For, A.While)) and node.cond is not None else [node]
        for h in heads:
            for name in sorted(A.free_names(h)):
                for d in fs.decls.get(name, []):
                    if d not in ordered:
                        ordered.append(d)
    return ordered, n_direct


def iter_int_sites(fs: FunctionSites) -> Iterator[Site]:
    for s in fs.sites:
        if s.is_int and s.ctx in ("index", "cmp", "init") and not isinstance(s.node, A.Assign):
            yield s
