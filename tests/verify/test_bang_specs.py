"""BANG C candidates on a spec's cases (``verify/bang.py``), as ``xpiler test --candidate X.mlu`` runs them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.plans.bang_to_cuda import translate_bang_to_cuda
from xpiler_core.verify.bang import run_bang_spec
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import KernelSpec, load_spec
from xpiler_core.verify.toolchains import compile_check

# a host entry that takes an index buffer the spec does not make: the spec's forwarder supplies it
SCATTER = r"""
#include <bang.h>
__mlu_global__ void reverse_rows(const float* in, const int* idx, float* out, int n) {
  if (taskId != 0) return;
  for (int i = 0; i < n; ++i) out[idx[i]] = in[i];
}
extern "C" void scatter_rows(const float* h_in, const int* h_idx, float* h_out, int n) {
  float *d_in, *d_out; int* d_idx;
  cnrtMalloc((void**)&d_in, n * sizeof(float));
  cnrtMalloc((void**)&d_out, n * sizeof(float));
  cnrtMalloc((void**)&d_idx, n * sizeof(int));
  cnrtMemcpy(d_in, (void*)h_in, n * sizeof(float), cnrtMemcpyHostToDev);
  cnrtMemcpy(d_idx, (void*)h_idx, n * sizeof(int), cnrtMemcpyHostToDev);
  cnrtDim3_t dim = {1, 1, 1};
  reverse_rows<<<dim, cnrtFuncTypeBlock, 0>>>(d_in, d_idx, d_out, n);
  cnrtMemcpy(h_out, d_out, n * sizeof(float), cnrtMemcpyDevToHost);
  cnrtFree(d_in); cnrtFree(d_out); cnrtFree(d_idx);
}
"""

SPEC = """
name = "scatter"
source = "scatter.mlu"
entry = "scatter_entry"
kind = "host"
reference = "ref.py:ref"
entry_shim = '''
extern "C" void scatter_entry(float* h_in, float* h_out) {
  static int idx[64];
  for (int i = 0; i < 64; ++i) idx[i] = 63 - i;
  scatter_rows(h_in, idx, h_out, 64);
}
'''

[[args]]
name = "h_in"
dtype = "float32"
shape = [64]
role = "in"

[[args]]
name = "h_out"
dtype = "float32"
shape = [64]
role = "out"
"""


def test_a_spec_forwarder_is_built_with_a_bang_candidate(tmp_path: Path) -> None:
    (tmp_path / "scatter.mlu").write_text(SCATTER)
    (tmp_path / "ref.py").write_text("def ref(h_in):\n    return h_in[::-1].copy()\n")
    (tmp_path / "spec.toml").write_text(SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    assert run_bang_spec(spec, SCATTER).passed
    assert not run_bang_spec(spec, SCATTER.replace("out[idx[i]] = in[i]", "out[i] = in[i]")).passed


# every block writes its own index to out[0] (the last block to run wins) and doubles its own slice of y:
# out[0] depends on the schedule, y does not
LAST_WRITER = r"""
#include <cuda_runtime.h>
__global__ void last_writer(float* out, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) out[0] = (float)blockIdx.x;
  if (i < n) y[i] = 2.0f * y[i];
}
extern "C" void run(float* out, float* y, int n) {
  float *d_out, *d_y;
  cudaMalloc(&d_out, sizeof(float));
  cudaMalloc(&d_y, n * sizeof(float));
  cudaMemcpy(d_y, y, n * sizeof(float), cudaMemcpyHostToDevice);
  last_writer<<<(n + 63) / 64, 64>>>(d_out, d_y, n);
  cudaMemcpy(out, d_out, sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(y, d_y, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d_out); cudaFree(d_y);
}
"""


def test_an_output_the_schedule_decides_is_not_the_bang_translations_fault() -> None:
    from xpiler_core.dialect import Dialect
    from xpiler_core.pipeline import TranslateOptions, translate

    result = translate(LAST_WRITER, "last.cu", TranslateOptions(target=Dialect.BANG))
    assert "computes different results" not in result.summary, result.summary
    assert result.status == "verified", result.summary


# a kernel named like a C library function, in a file that includes <math.h> (cncc's device headers declare no
# `sin`; the model's host headers do), dividing by a number with the scalar form of __bang_div
NAMED_SIN = r"""
#include <bang.h>
#include <math.h>
extern "C" __mlu_global__ void KERNEL(float *x, float *y) {
  __nram__ float buf[256];
  __memcpy(buf, x + taskId * 256, 256 * sizeof(float), GDRAM2NRAM);
  __bang_sin(buf, buf, 256);
  __bang_div(buf, buf, DIVISOR, 256);
  __memcpy(y + taskId * 256, buf, 256 * sizeof(float), NRAM2GDRAM);
}
extern "C" void run_sin(float *h_x, float *h_y) {
  float *d_x, *d_y;
  cnrtMalloc((void **)&d_x, 1024 * sizeof(float));
  cnrtMalloc((void **)&d_y, 1024 * sizeof(float));
  cnrtMemcpy(d_x, h_x, 1024 * sizeof(float), cnrtMemcpyHostToDev);
  cnrtDim3_t dim = {4, 1, 1};
  KERNEL<<<dim, cnrtFuncTypeBlock, 0>>>(d_x, d_y);
  cnrtMemcpy(h_y, d_y, 1024 * sizeof(float), cnrtMemcpyDevToHost);
  cnrtFree(d_x);
  cnrtFree(d_y);
}
"""

NAMED_SIN_SPEC = """
name = "named_sin"
source = "named_sin.mlu"
entry = "run_sin"
kind = "host"
reference = "ref.py:ref"
tolerance = { atol = 1e-5, rtol = 1e-5 }

[[args]]
name = "h_x"
dtype = "float32"
shape = [1024]
role = "in"
init = "uniform(-4, 4)"

[[args]]
name = "h_y"
dtype = "float32"
shape = [1024]
role = "out"
"""


def _named_sin_spec(tmp_path: Path, divisor: str, kernel: str = "sin") -> KernelSpec:
    (tmp_path / "named_sin.mlu").write_text(NAMED_SIN.replace("DIVISOR", divisor).replace("KERNEL", kernel))
    (tmp_path / "ref.py").write_text(
        "import numpy as np\ndef ref(h_x):\n    return (np.sin(h_x.astype(np.float64)) / 4).astype(np.float32)\n")
    (tmp_path / "spec.toml").write_text(NAMED_SIN_SPEC)
    return load_spec(tmp_path / "spec.toml")


def test_a_bang_source_runs_on_the_mlu_model_as_the_specs_own_source(tmp_path: Path) -> None:
    """``xpiler test spec.toml`` on a BANG source (no --candidate): the model runs it, a kernel named ``sin``
    beside <math.h> builds and launches, and ``__bang_div(d, s, 4, n)`` divides by the number 4 (numpy)."""
    report = run_spec(_named_sin_spec(tmp_path, "4"))
    assert report.passed, report.summary()
    wrong = run_spec(_named_sin_spec(tmp_path, "2"))
    assert not wrong.passed and wrong.build_error is None and wrong.cases, wrong.summary()


@pytest.mark.parametrize(("kernel", "divisor"), [("scaled_sin", "4"), ("sin", "sqrt(16)")])
def test_the_scalar_division_translates_to_cuda_as_a_division_by_the_number(tmp_path: Path, kernel: str,
                                                                              divisor: str) -> None:
    """The CUDA translation runs against numpy; a kernel named ``sin``, launched by the file, gets a name of its
    own there (CUDA's math_functions.h declares ``sin`` with C linkage; nvcc rejected the overload); a divisor
    computed by a math function is a number too."""
    spec = _named_sin_spec(tmp_path, divisor, kernel=kernel)
    cuda, reason = translate_bang_to_cuda(spec.source_text(), "named_sin.mlu")
    assert cuda is not None, reason
    report = run_spec(spec, candidate_text=cuda, candidate_dialect=Dialect.CUDA)
    assert report.passed, report.summary()
    if shutil.which("nvcc"):  # the real toolchain takes it too
        verdict = compile_check(cuda, Dialect.CUDA)
        assert verdict.ok, verdict.stderr[-2000:]
