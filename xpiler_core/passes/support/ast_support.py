"""What the structural (AST) passes share: entering and leaving the AST, and small analyses.

A pass may be handed a :class:`~xpiler_core.passes.base.SourceUnit` (the CLI, the server's "Run pass") or an
AST :class:`~xpiler_core.ast.Module` (plans chaining passes). :func:`enter` gives the module either way and
:func:`leave` returns the same kind the pass was given, printing in the context's target dialect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes.base import PassContext, PassRefused, SourceUnit
from xpiler_core.printer import print_module


def enter(unit: Any) -> A.Module:
    """The AST module of a pass input (a SourceUnit is parsed and lowered)."""
    if isinstance(unit, A.Module):
        return unit
    if isinstance(unit, SourceUnit):
        return lower_text(unit.text, unit.path, unit.dialect)
    raise PassRefused(f"an AST pass cannot work on {type(unit).__name__}")


def leave(original: Any, module: A.Module, ctx: PassContext, dialect: Dialect | None = None) -> Any:
    """The pass result in the kind it was given: a module, or a SourceUnit printed in ``dialect``."""
    if isinstance(original, SourceUnit):
        target = dialect or module.dialect
        return SourceUnit(print_module(module, target), target, original.path)
    return module


def int_param(params: dict[str, Any], key: str, default: int, low: int = 1, high: int = 1 << 20) -> int:
    """An integer parameter within [low, high]; a bad value is a refusal, not a crash."""
    raw = params.get(key, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise PassRefused(f"parameter {key}={raw!r} is not an integer") from None
    if not low <= value <= high:
        raise PassRefused(f"parameter {key}={value} is outside [{low}, {high}]")
    return value


def bool_param(params: dict[str, Any], key: str, default: bool) -> bool:
    raw = params.get(key, default)
    if isinstance(raw, bool):
        return raw
    return str(raw).strip().lower() in ("1", "true", "yes", "on")


# Calls without side effects whose value depends only on their arguments (C math, the CPU prelude's
# conversions and CUDA's math intrinsics as the prelude defines them): they may be reordered or hoisted.
PURE_CALLS = frozenset({
    "sqrtf", "expf", "logf", "fabsf", "fmaxf", "fminf", "fmaf", "sqrt", "exp", "log", "fabs", "fmax", "fmin",
    "tanhf", "sinf", "cosf", "powf", "min", "max", "rsqrtf", "rsqrt", "exp2f", "log2f", "erff", "tanh", "sin",
    "cos", "pow", "floorf", "ceilf", "truncf", "roundf", "floor", "ceil", "__expf", "__logf", "__sinf", "__cosf",
    "__tanhf", "__powf", "__fdividef", "__frcp_rn", "__fsqrt_rn", "__fmaf_rn", "__fadd_rn", "__fmul_rn",
    "__saturatef", "xp_min", "__half2float", "__float2half", "__float2half_rn", "__int2float_rn",
})


def subscript_root(e: A.Expr) -> str | None:
    """The array a subscript chain starts from: ``a[i][j]`` → ``a``, ``acc`` → ``acc`` (None otherwise)."""
    while isinstance(e, A.Index):
        e = e.base
    return e.id if isinstance(e, A.Name) else None


def side_effect_free(node: A.Node) -> bool:
    """No assignment, increment, address-of, opaque text or call outside the pure math functions."""
    for n in A.walk(node):
        if isinstance(n, (A.Assign, A.Opaque)):
            return False
        if isinstance(n, A.Unary) and n.op in ("++", "--", "&"):
            return False
        if isinstance(n, A.Call) and (n.callee or "") not in PURE_CALLS:
            return False
    return True


def scalar_writes(node: A.Node) -> set[str]:
    """Names assigned (``=``, compound, ``++``/``--``) or whose address is taken; declarations excluded."""
    out: set[str] = set()
    for n in A.walk(node):
        if isinstance(n, A.Assign) and isinstance(n.target, A.Name):
            out.add(n.target.id)
        elif isinstance(n, A.Unary) and n.op in ("++", "--", "&") and isinstance(n.operand, A.Name):
            out.add(n.operand.id)
    return out


def template_formals(template: str) -> list[tuple[str, str | None]]:
    """``<typename T, size_t S = 0U>`` → ``[("typename T", None), ("size_t S", "0U")]``: each parameter's
    declaration and its default argument's text."""
    out: list[tuple[str, str | None]] = []
    for formal in template.strip().strip("<>").split(","):
        declaration, eq, default = formal.partition("=")
        out.append((" ".join(declaration.split()), default.strip() if eq else None))
    return out


def template_actuals(template: str, callee: str) -> list[str]:
    """The explicit template arguments of ``callee`` (``f<a, b>``), completed with the template's default
    arguments for the parameters the call leaves out."""
    actuals = [" ".join(a.split()) for a in callee[callee.index("<") + 1 : callee.rindex(">")].split(",")]
    formals = template_formals(template)
    for _formal, default in formals[len(actuals):]:
        if default is None:
            break
        actuals.append(default)
    return actuals


def value_template_arguments(template: str, callee: str) -> dict[str, str]:
    """``f<256>`` against ``template <int BLOCK>`` → ``{"BLOCK": "256"}``: the text of each value argument
    (default arguments for those the call leaves out). ``ValueError`` says what is not understood: no explicit
    arguments, another count, a type parameter."""
    if "<" not in callee:
        raise ValueError("without explicit arguments")
    formals = [declaration for declaration, _default in template_formals(template)]
    actuals = template_actuals(template, callee)
    if len(formals) != len(actuals):
        raise ValueError("template arguments not understood")
    out: dict[str, str] = {}
    for formal, actual in zip(formals, actuals, strict=True):
        words = formal.split()
        if len(words) != 2 or words[0] in ("typename", "class"):
            raise ValueError("only value template parameters are supported")
        out[words[1]] = actual
    return out


def names_in(node: A.Node) -> set[str]:
    return {n.id for n in A.walk(node) if isinstance(n, A.Name)}


def contains(node: A.Node, predicate: Any) -> bool:
    return any(predicate(n) for n in A.walk(node))


def calls_in(node: A.Node) -> set[str]:
    return {n.callee for n in A.walk(node) if isinstance(n, A.Call) and n.callee}


def as_block(stmt: A.Stmt) -> A.Block:
    return stmt if isinstance(stmt, A.Block) else A.Block((stmt,))


def map_loops(node: A.Node, fn: Any) -> Any:
    """Apply ``fn(loop) -> Stmt | list[Stmt] | None`` bottom-up to every ``for`` loop (``None`` keeps it)."""

    class _Loops(A.Transformer):
        def visit_For(self, loop: A.For) -> Any:  # noqa: N802 - visitor naming
            inner = self.generic_visit(loop)
            out = fn(inner)
            return inner if out is None else out

        def visit_Block(self, block: A.Block) -> Any:  # noqa: N802
            new = self.generic_visit(block)
            if new is block:
                return block
            # a loop pragma (omp for/simd, unroll) whose loop was replaced by something else is dropped:
            # it would now apply to the wrong statement (or not compile)
            stmts = new.stmts
            kept = tuple(s for i, s in enumerate(stmts) if not (
                isinstance(s, A.Pragma) and (i + 1 >= len(stmts) or not isinstance(stmts[i + 1], A.For))))
            return A.replace(new, stmts=kept) if kept != stmts else new

    return _Loops().visit(node)


def find_loops(node: A.Node) -> list[A.For]:
    return [n for n in A.walk(node) if isinstance(n, A.For)]


def loop_by_var(node: A.Node, var: str) -> A.For | None:
    for loop in find_loops(node):
        view = loop.canonical()
        if view is not None and view.var == var:
            return loop
    return None


def has_jumps(stmts: Iterable[A.Node]) -> bool:
    """``break``/``continue``/``return``/``goto`` anywhere inside (loop bodies a pass would restructure)."""
    for s in stmts:
        for n in A.walk(s):
            if isinstance(n, (A.Break, A.Continue, A.Return)):
                return True
            if isinstance(n, A.Opaque) and ("goto" in n.text or "return" in n.text):
                return True
    return False


def target_function(module: A.Module, params: dict[str, Any]) -> A.Function:
    """The function a pass works on: ``function=NAME`` or the only/first function with loops."""
    wanted = str(params.get("function") or "")
    if wanted:
        fn = module.function(wanted)
        if fn is None:
            raise PassRefused(f"no function named '{wanted}'")
        return fn
    with_loops = [f for f in module.functions() if find_loops(f.body)]
    if not with_loops:
        raise PassRefused("no function with a for loop to transform")
    return with_loops[0]


def split_loop_pragma(pragma: A.Pragma | None) -> tuple[A.Pragma | None, A.Pragma | None]:
    """A loop's pragma split for the (outer, inner) loops that replace it: work sharing outside, simd inside."""
    if pragma is None:
        return None, None
    text = pragma.text.strip()
    if not text.startswith("omp"):
        return None, A.Pragma(text)
    reductions = " ".join(re.findall(r"reduction\([^)]*\)", text))
    if re.match(r"omp\s+(parallel\s+)?for\b", text):
        outer = re.sub(r"\s+simd\b", "", text, count=1)
        outer = re.sub(r"\s*collapse\(\d+\)", "", outer)
        inner = A.Pragma(f"omp simd {reductions}".strip()) if re.search(r"\bsimd\b", text) else None
        return A.Pragma(outer), inner
    return None, A.Pragma(text)


def declares_prefix(node: A.Node, prefix: str) -> bool:
    """Whether ``node`` declares a variable whose name starts with ``prefix`` (a pass's own generated code)."""
    return any(isinstance(n, A.VarDecl) and n.name.startswith(prefix) for n in A.walk(node))


def map_loops_with_pragmas(node: A.Node, rewrite: Any, skip: Any = None) -> Any:
    """Apply ``rewrite(loop, pragma) -> list[Stmt] | None`` bottom-up to every ``for`` loop, with the loop's
    preceding ``#pragma`` (or None): the returned statements replace both (``None`` keeps them). ``skip(if_)``
    true leaves an ``if`` statement untouched (a pass's own fallback branch)."""

    class _Loops(A.Transformer):
        def visit_If(self, stmt: A.If) -> Any:  # noqa: N802
            return stmt if skip is not None and skip(stmt) else self.generic_visit(stmt)

        def visit_Block(self, block: A.Block) -> Any:  # noqa: N802
            new = self.generic_visit(block)
            out: list[A.Stmt] = []
            changed = new is not block
            stmts = new.stmts
            i = 0
            while i < len(stmts):
                s = stmts[i]
                pragma = s if isinstance(s, A.Pragma) and i + 1 < len(stmts) and isinstance(stmts[i + 1], A.For) \
                    else None
                loop = stmts[i + 1] if pragma is not None else s
                if isinstance(loop, A.For):
                    replaced = rewrite(loop, pragma)
                    if replaced is not None:
                        out.extend(replaced)
                        changed = True
                    else:  # kept with its pragma: the loop is not offered again as if it had none
                        out.extend([s, loop] if pragma is not None else [s])
                    i += 2 if pragma is not None else 1
                    continue
                out.append(s)
                i += 1
            return A.replace(new, stmts=tuple(out)) if changed else new

        def visit_For(self, loop: A.For) -> Any:  # noqa: N802
            # a loop whose body is a single loop: wrapped in a block so the inner one can be replaced
            inner = self.generic_visit(loop)
            if isinstance(inner.body, A.For):
                wrapped = self.visit_Block(A.Block((inner.body,)))
                if wrapped.stmts != (inner.body,):
                    return A.replace(inner, body=wrapped)
            return inner

    return _Loops().visit(node)


def offset_from(index: A.Expr, var: str) -> A.Expr | None:
    """``e`` when ``index`` is ``var``, ``e + var`` or ``var + e`` with ``e`` free of ``var`` (``0`` for ``var``)."""
    if index == A.Name(var):
        return A.lit(0)
    if isinstance(index, A.Binary) and index.op == "+":
        if index.right == A.Name(var) and var not in names_in(index.left):
            return index.left
        if index.left == A.Name(var) and var not in names_in(index.right):
            return index.right
    return None


def fresh_namer(scope: A.Node) -> Callable[[str], str]:
    """``fresh(base)`` gives names unused in ``scope`` and distinct from each other (the scope is read once)."""
    used = A.used_names(scope)

    def fresh(base: str) -> str:
        candidate, k = base, 0
        while candidate in used:
            k += 1
            candidate = f"{base}_{k}"
        used.add(candidate)
        return candidate

    return fresh


def conditionally_evaluated(body: A.Node) -> set[int]:
    """ids of the nodes of ``body`` evaluated only sometimes per execution of it: ``if``/``?:`` branches,
    right sides of ``&&``/``||``/``,``, and nested loops."""
    out: set[int] = set()
    for n in A.walk(body):
        parts: list[A.Node | None] = []
        if isinstance(n, (A.If, A.Ternary)):
            parts = [n.then, n.else_]
        elif isinstance(n, A.Binary) and n.op in ("&&", "||", ","):
            parts = [n.right]
        elif isinstance(n, (A.For, A.While, A.DoWhile)) and n is not body:
            parts = [n]
        for part in parts:
            if part is not None:
                out.update(id(m) for m in A.walk(part))
    return out


INT_TYPES = frozenset({"int", "unsigned int", "unsigned", "long", "long long", "unsigned long",
                       "unsigned long long", "size_t", "int64_t", "int32_t", "uint32_t", "uint64_t", "ptrdiff_t"})


def strip_int_casts(e: A.Expr) -> A.Expr:
    """``e`` without casts to integer types around it (``(int)i`` is ``i`` for index analysis)."""
    while isinstance(e, A.Cast) and not e.type.pointers and e.type.base in INT_TYPES:
        e = e.operand
    return e


def parse_stmts(lines: list[str], dialect: Dialect) -> list[A.Stmt]:
    """Statements written as code text (a pass's generated fragment), lowered in ``dialect``."""
    module = lower_text("void xp_f() {\n" + "\n".join(lines) + "\n}\n", "<generated>", dialect)
    fn = module.function("xp_f")
    assert fn is not None
    return list(fn.body.stmts)


def parse_expr(text: str, dialect: Dialect) -> A.Expr:
    stmt = parse_stmts([f"(void)({text});"], dialect)[0]
    assert isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Cast)
    return stmt.expr.operand


def guarded_fast_path(preconditions: list[str], lines: list[str], dialect: Dialect) -> A.If:
    """``if (all preconditions) { lines; return; }``: a generated path taken when the launch allows it, the
    original code after it as the fallback."""
    return A.If(parse_expr(" && ".join(preconditions), dialect),
                A.Block(tuple(parse_stmts(["{", *lines, "return;", "}"], dialect))), None)


def called_functions(module: A.Module, roots: Iterable[A.Function],
                     skip: Callable[[A.Function], bool] = lambda f: False) -> set[str]:
    """Names of the module's functions the ``roots`` call, directly or through one another (``skip``: functions
    neither counted nor followed)."""
    functions = {f.name: f for f in module.functions()}
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        f = stack.pop()
        for n in A.walk(f.body):
            name = n.callee.split("<")[0] if isinstance(n, A.Call) and n.callee else ""
            if name in functions and name not in seen and not skip(functions[name]):
                seen.add(name)
                stack.append(functions[name])
    return seen



SERIAL_MARK = "// below the threshold: serial (entering an OpenMP region costs more than the work)"


def parallel_or_serial(loop: A.Stmt, clause: str, worth_it: A.Expr) -> A.If:
    """``if (worth_it) { #pragma <clause> loop } else { loop }``: an OpenMP ``if(...)`` clause still enters
    the runtime (about 0.3 µs per call, more than a µs kernel takes), so small launches take a plain copy of
    the loop; a ``simd`` clause keeps its ``omp simd`` part (and reduction) on the serial copy."""
    serial: list[A.Stmt] = [A.Comment(SERIAL_MARK)]
    words = clause.split()
    if "simd" in words:
        kept = [w for w in words if w.startswith(("reduction(", "collapse(", "aligned(", "linear("))]
        serial.append(A.Pragma(" ".join(["omp", "simd", *kept])))
    return A.If(worth_it, A.Block((A.Pragma(clause), loop)), A.Block((*serial, loop)))


def is_serial_copy(stmts: tuple[A.Stmt, ...], index: int) -> bool:
    """The loop at ``stmts[index]`` is the serial copy :func:`parallel_or_serial` made (do not bind it)."""
    return any(isinstance(s, A.Comment) and s.text == SERIAL_MARK for s in stmts[:index])


def named_spellings(module: A.Module) -> Iterator[tuple[A.Function, A.Node, str]]:
    """Each function's names as written: a name's identifier, a declaration's or parameter's type, the text of
    code the AST keeps opaque (what a pass checks for constructs it cannot lower)."""
    for fn in module.functions():
        for node in A.walk(fn):
            if isinstance(node, A.Name):
                yield fn, node, node.id
            elif isinstance(node, A.VarDecl | A.Param):
                yield fn, node, node.type.base
            elif isinstance(node, A.Opaque):
                yield fn, node, node.text
