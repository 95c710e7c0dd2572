"""Loop recovery on files whose prelude includes every header it might need: a `using namespace nvcuda;` with no
wmma in use is dropped (the CPU output verifies against the source), while fragments in use are still refused."""

from __future__ import annotations

from pathlib import Path

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes.method.loop_recovery import _without_unused_wmma_namespace
from xpiler_core.pipeline import TranslateOptions, translate

REPO = Path(__file__).resolve().parents[2]
PRELUDE = "#include <mma.h>\n#include <cuda_fp16.h>\nusing namespace nvcuda;\n"


def test_an_unused_wmma_namespace_directive_does_not_stop_loop_recovery(tmp_path: Path) -> None:
    text = PRELUDE + (REPO / "examples" / "vector_add.cu").read_text()
    result = translate(text, str(tmp_path / "vector_add.cu"), TranslateOptions(Dialect.C))
    assert result.status == "verified", result.summary
    assert "nvcuda" not in result.output_text


def test_fragments_in_use_keep_the_directive() -> None:
    used = lower_text(PRELUDE + """
__global__ void k(const half* a, float* out) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, 16);
  out[threadIdx.x] = 0.0f;
}
""", "k.cu", Dialect.CUDA)
    unused = lower_text(PRELUDE + "__global__ void k(float* out) { out[threadIdx.x] = 0.0f; }\n", "k.cu", Dialect.CUDA)

    def directives(module: A.Module) -> int:
        return sum(1 for i in module.items if isinstance(i, A.Opaque) and "namespace nvcuda" in i.text)

    assert directives(used) == directives(unused) == 1
    assert directives(_without_unused_wmma_namespace(used)) == 1
    assert directives(_without_unused_wmma_namespace(unused)) == 0
