"""The launch / extern __shared__ rewrite, checked on text and by compiling the result with g++."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.runtime.rewrite import rewrite_for_cpu


def test_launch_forms() -> None:
    src = (
        "void f() {\n"
        "  k<<<g, b>>>(x);\n"
        "  ns::k<float, 4><<<dim3(1, 2), 256, smem, stream>>>(x, y);\n"
        "  k<<<(n + 255) / 256,\n      256>>>(a,\n b);\n"
        '  printf("<<<not a launch>>>"); // k<<<1, 1>>>(x);\n'
        "  int z = a << 2 >> 1;\n"
        "}\n"
    )
    out = rewrite_for_cpu(src)
    # a plain name is called through a generic lambda (it may be an overload set, e.g. a kernel named `sin`)
    deduced_k = '::xpiler::deduced_kernel("k", [&](auto... xpiler_args) { k(xpiler_args...); })'
    assert f"::xpiler::launch({deduced_k}, g, b)(x);" in out.text
    assert "::xpiler::launch(ns::k<float, 4>, dim3(1, 2), 256, smem, stream)(x, y);" in out.text
    assert f"::xpiler::launch({deduced_k}, (n + 255) / 256, 256)" in out.text
    assert '"<<<not a launch>>>"' in out.text and "// k<<<1, 1>>>(x);" in out.text
    assert "a << 2 >> 1" in out.text
    assert out.text.count("\n") == src.count("\n")
    assert [launch.line for launch in out.launches] == [1, 2, 3]


def test_extern_shared_in_function_and_file_scope() -> None:
    src = (
        "extern __shared__ float gbuf[];\n"
        "__global__ void k() {\n"
        "  extern __shared__ __align__(16) unsigned char raw[];\n"
        "  extern __shared__ volatile int counts[][32];\n"
        "  __shared__ float t[4];\n"
        "  static __shared__ int u[2];\n"
        "}\n"
    )
    out = rewrite_for_cpu(src)
    lines = out.text.splitlines()
    assert lines[0].startswith("#define gbuf (reinterpret_cast<float*>(")
    assert (
        "unsigned char * const raw = reinterpret_cast<unsigned char*>(::xpiler::dynamic_shared_memory());"
        in lines[2]
    )
    assert "volatile int (* const counts)[32] = reinterpret_cast<volatile int (*)[32]>(" in lines[3]
    assert "__shared__ float t[4];" in lines[4]
    assert lines[5].startswith("         __shared__ int u[2];")  # `static` blanked: __shared__ is static already
    assert sorted(out.dynamic_shared) == ["counts", "gbuf", "raw"]
    assert out.static_shared == ["t", "u"]


def test_static_shared_declarations_get_a_per_block_fill_hook_on_the_same_line() -> None:
    src = (
        "__shared__ float tile[32];\n"
        "template <class T> __global__ void k(T* x) {\n"
        "  __shared__ __align__(16) float a[4][4], b;\n"
        "  volatile __shared__ T c[8];\n"
        "  __shared__ typename T::Storage st;\n"
        "}\n"
    )
    out = rewrite_for_cpu(src)
    lines = out.text.splitlines()
    assert out.text.count("\n") == src.count("\n")
    assert lines[0].startswith("__shared__ float tile[32]; static const bool xpiler_smem_filler_")
    assert "::xpiler::register_shared([] { ::xpiler::poison_shared(tile); })" in lines[0]
    for line, names in ((lines[2], "a, b"), (lines[3], "c"), (lines[4], "st")):
        stamp = line.split("static thread_local unsigned long long ")[1].split(";")[0]
        assert line.endswith(f"::xpiler::fresh_shared({stamp}, {names});")
    assert out.static_shared == ["tile", "a", "b", "c", "st"]


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(r"k[a-z0-9_]{0,8}", fullmatch=True),
    config=st.lists(st.sampled_from(["1", "n", "(n+1)/2", "dim3(2, 3)", "s", "0"]), min_size=2, max_size=4),
    args=st.lists(st.sampled_from(["x", "y + 1", "p[2]", "f(a, b)"]), max_size=4),
    newlines=st.booleans(),
)
def test_rewrite_property(name: str, config: list[str], args: list[str], newlines: bool) -> None:
    sep = ",\n  " if newlines else ", "
    call = f"{name}<<<{sep.join(config)}>>>({', '.join(args)});"
    src = f"void host() {{\n  {call}\n}}\n"
    out = rewrite_for_cpu(src)
    assert "<<<" not in out.text and ">>>" not in out.text
    assert out.text.count("\n") == src.count("\n")
    flat = "".join(out.text.split())
    kernel = f'::xpiler::deduced_kernel("{name}", [&](auto... xpiler_args) {{ {name}(xpiler_args...); }})'
    expected = f"::xpiler::launch({kernel}, {', '.join(config)})({', '.join(args)});"
    assert "".join(expected.split()) in flat


def test_launch_inside_a_macro_body() -> None:
    src = (
        "#define LAUNCH(k, n) k<<<(n + 255) / 256, 256>>>(x, n)\n"
        "#define RUN_T(T) \\\n  scale<T><<<g, b, 0, s>>>(p)\n"
        "void f() { LAUNCH(add, 10); }\n"
    )
    out = rewrite_for_cpu(src)
    assert "#define LAUNCH(k, n) ::xpiler::launch(k, (n + 255) / 256, 256)(x, n)" in out.text
    assert "::xpiler::launch(scale<T>, g, b, 0, s)(p)" in out.text
    assert "<<<" not in out.text and out.text.count("\n") == src.count("\n")
