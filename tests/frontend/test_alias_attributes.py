"""GNU attributes that open a type alias (``using v = __attribute__((vector_size(16))) float;``, valid GNU C++ and
HIP) parse without a syntax error, keep their text, keep every later position exact, and leave the loops around
them analysable."""

from __future__ import annotations

from xpiler_core import ast as A
from xpiler_core.frontend.lower import lower_text
from xpiler_core.frontend.source import mask_alias_attributes, parse_text

SOURCE = """__global__ void f(float* o, int n) {
  for (int i = 0; i < n; ++i) {
    using float4 = __attribute__((__vector_size__(4 * sizeof(float))))
        float;
    float4 d = {0};
    o[i] = d[0] + (float)i;
  }
  int oops = ;
}
"""


def test_alias_attribute_is_valid_code() -> None:
    parsed = parse_text(SOURCE, "k.hip")
    messages = [(d.message, d.span.start_line) for d in parsed.diagnostics]
    assert len(messages) == 1 and messages[0][1] == 7, messages  # only the real error, on its own line (0-based)


def test_masking_keeps_offsets_and_text() -> None:
    data = SOURCE.encode()
    masked = mask_alias_attributes(data)
    assert len(masked) == len(data) and masked.count(b"\n") == data.count(b"\n")
    assert b"__attribute__" not in masked and b"using float4 =" in masked
    module = lower_text(SOURCE, "k.hip")
    fn = module.function("f")
    assert fn is not None
    alias = next(n for n in A.walk(fn.body) if isinstance(n, A.Opaque))
    assert "__vector_size__(4 * sizeof(float))" in alias.text  # printed as written
    loop = next(n for n in A.walk(fn.body) if isinstance(n, A.For))
    assert loop.canonical() is not None  # a type alias writes no variable
