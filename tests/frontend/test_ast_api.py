"""The AST API passes build on: lowering shapes, loop views, read/write sets, transformers, builders, bad input."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.printer import print_module, print_node

KERNEL = """
template <typename T, int BS>
__global__ void __launch_bounds__(256) k(const T* __restrict__ a, T* b, int n) {
    __shared__ float s[BS][2];
    extern __shared__ float dyn[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int t = 0; t < n; t += 2) { s[t][0] += (float)a[t] * 2.0f; }
    for (int g = i; g < n; g += blockDim.x * gridDim.x) b[g] = a[g];
    for (int j = 0; j <= n; ++j) { j += 1; }
    __syncthreads();
    switch (i) { case 0: break; default: break; }
}
"""


def _kernel() -> A.Function:
    module = lower_text(KERNEL, "k.cu")
    fn = module.function("k")
    assert fn is not None
    return fn


def test_function_shape() -> None:
    fn = _kernel()
    assert fn.is_kernel and fn.template == "<typename T, int BS>"
    assert [print_node(e) for e in fn.launch_bounds] == ["256"]
    a, b, n = fn.params
    assert isinstance(a, A.Param) and a.name == "a" and a.type.base == "T"
    assert a.type.is_const and a.type.is_pointer and a.type.is_restrict
    assert isinstance(b, A.Param) and not b.type.is_restrict
    shared, dyn = (s.decls[0] for s in fn.body.stmts[:2] if isinstance(s, A.DeclStmt))
    assert shared.is_shared and not shared.is_dynamic_shared and len(shared.dims) == 2
    assert dyn.is_dynamic_shared and dyn.dims == (None,)
    assert any(isinstance(s, A.Pragma) and s.text == "unroll" for s in fn.body.stmts)
    assert sum(A.is_barrier(s) for s in fn.body.stmts) == 1
    opaque = [s for s in fn.body.stmts if isinstance(s, A.Opaque)]
    assert len(opaque) == 1 and opaque[0].text.startswith("switch")
    assert all(n.span is not None for n in A.walk(fn) if not isinstance(n, A.Type))


def test_canonical_loops() -> None:
    loops = [s for s in _kernel().body.stmts if isinstance(s, A.For)]
    first, grid_stride, modified = (loop.canonical() for loop in loops)
    assert first is not None and first.var == "t" and first.step_value == 2
    assert first.stop == A.Name("n") and first.start == A.Literal("0")
    assert first.var_type is not None and first.var_type.base == "int"
    assert grid_stride is not None and grid_stride.start == A.Name("i")
    assert print_node(grid_stride.step) == "blockDim.x * gridDim.x"
    assert modified is None  # the body assigns the loop variable
    hidden = lower_text("void f(int n){ for (int i = 0; i < n; ++i) { switch (i) { case 0: i++; } } }", "a.c")
    loop = hidden.functions()[0].body.stmts[0]
    assert isinstance(loop, A.For) and A.read_write(loop).opaque
    assert loop.canonical() is None  # the switch is Opaque and does write i
    inclusive = A.For(A.decl("i", "int", A.lit(0)), A.binop("<=", A.name("i"), A.name("m")),
                      A.Unary("++", A.name("i"), postfix=True), A.block())
    view = inclusive.canonical()
    assert view is not None and print_node(view.stop) == "m + 1"


def test_a_loop_whose_body_redeclares_its_variable_is_counted_when_scoped() -> None:
    fn = lower_text("void f(int *p){ for (int i = 0; i < 3; i++) { for (int i = 0; i < 4; ++i) p[i] = 0;"
                    " int j = 0; { int i = 5; i++; j++; } p[i] = j; } }", "a.c").functions()[0]
    loop = fn.body.stmts[0]
    assert isinstance(loop, A.For)
    assert loop.canonical() is None  # unscoped: the inner writes look like writes of the outer i
    view = A.loop_view(loop, scoped=True)
    assert view is not None and view.var == "i"
    assert A.outer_writes(loop.body) == frozenset()  # j is declared inside too
    written = lower_text("void f(int *p){ for (int i = 0; i < 3; i++) { { int i = 5; } i++; } }", "a.c")
    outer = written.functions()[0].body.stmts[0]
    assert isinstance(outer, A.For) and A.loop_view(outer, scoped=True) is None  # i++ after the inner scope


def test_read_write_sets() -> None:
    stmt = lower_text("void f(){ c[i] += a[i] * s; x = y++; p->v = *q; }").functions()[0].body
    rw = A.read_write(stmt)
    assert {"i", "s", "y"} <= rw.reads
    assert rw.writes == {"x", "y"}
    assert rw.mem_writes == {"c", "p"}
    assert {"a", "c", "q"} <= rw.mem_reads
    accesses = A.array_accesses(stmt)
    assert [(x.base, x.write) for x in accesses] == [("c", False), ("c", True), ("a", False)]
    assert A.free_names(A.block(A.decl("t", "int", A.name("u")), A.expr_stmt(A.name("t")))) == {"u"}


def test_transformer_splices_and_deletes() -> None:
    fn = _kernel()

    class DropBarriersDuplicatePragmas(A.Transformer):
        def visit_ExprStmt(self, node: A.ExprStmt) -> A.Stmt | None:
            return None if A.is_barrier(node) else node

        def visit_Pragma(self, node: A.Pragma) -> list[A.Stmt]:
            return [A.Comment("// moved"), node]

    out = DropBarriersDuplicatePragmas().visit(fn)
    assert not any(A.is_barrier(s) for s in out.body.stmts)
    assert len(out.body.stmts) == len(fn.body.stmts)  # one removed, one added
    assert fn.body.stmts != out.body.stmts and out.params is fn.params  # unchanged parts shared


def test_substitute_and_rewrite() -> None:
    e = lower_text("void f(){ y = threadIdx.x + i * threadIdx.x; }").functions()[0].body.stmts[0]
    tid = A.rewrite(e, lambda n: A.name("tx") if A.builtin_ref(n) == ("threadIdx", "x") else None)
    assert print_node(tid) == "y = tx + i * tx;"
    assert print_node(A.substitute(tid, {"i": A.binop("+", A.name("a"), A.lit(1))})) == "y = tx + (a + 1) * tx;"


def test_builders_print_and_compile() -> None:
    body = A.block(A.expr_stmt(A.assign(A.index(A.name("c"), A.name("i")),
                                        A.binop("+", A.index(A.name("a"), A.name("i")),
                                                A.index(A.name("b"), A.name("i"))))))
    loop = A.for_range("i", A.lit(0), A.name("n"), body)
    params = tuple(A.Param(p, A.ctype("float", 1)) for p in "abc") + (A.Param("n", A.ctype("int")),)
    fn = A.Function("add", A.ctype("void"), params, A.block(A.pragma("omp parallel for"), loop),
                    linkage="C")
    text = print_module(A.Module((fn,), Dialect.C))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "add.cpp"
        src.write_text(text)
        proc = subprocess.run(["g++", "-fopenmp", "-Wall", "-Werror", "-c", str(src), "-o", str(src) + ".o"],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + text
    assert loop.canonical() is not None


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "__global__ void k(float* a) { a[0] = ", "}}}{{{", "int x = " + "(" * 100_000 + "1" + ")" * 100_000 + ";",
     "void f() { int x = " + "(" * 100_000 + "1" + ")" * 100_000 + "; }",
     "void f() {" + "{" * 5000 + "}" * 5000 + "}", "#if X\nvoid f() {\n#else\nvoid g() {\n#endif\n}\n"],
    ids=["empty", "blank", "truncated", "braces", "deep-parens-global", "deep-parens-local", "deep-blocks", "ifdef"],
)
def test_bad_input_keeps_text_without_raising(text: str) -> None:
    module = lower_text(text, "bad.cu")
    printed = print_module(module)
    assert not [d for d in module.diagnostics if d.code == "ast.internal"]
    # Nothing is lost: every non-blank character survives, in order (parentheses are grouping, which the
    # tree shape keeps; the printer re-derives them from precedence).
    def significant(s: str) -> str:
        return "".join(s.split()).replace("(", "").replace(")", "")

    assert significant(printed) == significant(text)


def test_deep_nesting_reports_a_diagnostic() -> None:
    module = lower_text("void f() { int x = " + "(" * 100_000 + "1" + ")" * 100_000 + "; }", "deep.cu")
    assert any(d.code == "ast.nesting" for d in module.diagnostics)


def test_bang_qualifiers_are_kept() -> None:
    src = "__mlu_global__ void k(float *x) {\n    __nram__ float buf[64];\n    buf[0] = x[0];\n}\n"
    module = lower_text(src, "k.mlu")
    fn = module.function("k")
    assert fn is not None and fn.is_kernel and fn.qualifiers == ("__mlu_global__",)
    decl = fn.body.stmts[0]
    assert isinstance(decl, A.DeclStmt) and decl.decls[0].storage == ("__nram__",)
    assert print_module(module) == src


def test_const_int_matches_c_semantics() -> None:
    # Reference values: C99 6.5.5 (division truncates toward zero, (a/b)*b + a%b == a).
    cases = {"-7 / 2": -3, "-7 % 2": -1, "7 / -2": -3, "7 % -2": 1, "(1 << 4) | 3": 19, "2 + 3 * 4": 14,
             "~0 & 0xff": 255, "(int)10 / 4": 2}
    for text, expected in cases.items():
        stmt = lower_text(f"void f() {{ x = {text}; }}", "c.c").functions()[0].body.stmts[0]
        assert isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Assign)
        assert A.const_int(stmt.expr.value) == expected, text
    assert A.const_int(A.binop("/", A.name("n"), A.lit(0))) is None
    assert A.const_int(A.binop("*", A.name("n"), A.lit(4)), {"n": 3}) == 12


def test_trip_count_and_fresh_name() -> None:
    loops = [s for s in _kernel().body.stmts if isinstance(s, A.For)]
    view = loops[0].canonical()
    assert view is not None
    # for (t = 0; t < n; t += 2) with n = 7 runs t = 0, 2, 4, 6
    assert view.trip_count({"n": 7}) == len(range(0, 7, 2))
    assert view.trip_count() is None
    fn = _kernel()
    assert fresh_name_is_new(fn, "t") and A.fresh_name(fn, "t") == "t_1"
    assert A.fresh_name(fn, "brand_new") == "brand_new"


def fresh_name_is_new(scope: A.Node, base: str) -> bool:
    name = A.fresh_name(scope, base)
    return name not in {n.id for n in A.walk(scope) if isinstance(n, A.Name)} | {
        n.name for n in A.walk(scope) if isinstance(n, A.VarDecl)
    }


def test_template_declaration_misread_as_comparison_is_kept_verbatim() -> None:
    # tree-sitter reads `T<32> t = ...` as `(T < 32) > (t = ...)`; nvcc reads a declaration.
    src = (
        "__global__ void k() {\n    cg::thread_block block = cg::this_thread_block();\n"
        "    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);\n}\n"
    )
    stmt = lower_text(src, "t.cu").functions()[0].body.stmts[1]
    assert isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Opaque)
    assert print_module(lower_text(src, "t.cu")) == src
