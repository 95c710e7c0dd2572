"""When the source program runs on the runtime and its own check fails, the runtime did not compute what the
GPU does: kernel tests against that same run would compare the translation with a wrong reference, so the
translation is not verified. The example is a classic warp-synchronous reduction (the last warp sums through
a volatile pointer without barriers, relying on lanes running in lockstep); its check is the exact sum."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate

LOCKSTEP_REDUCTION = """#include <cstdio>
__device__ void warp_reduce(volatile float* s, int tid) {
  s[tid] += s[tid + 32]; s[tid] += s[tid + 16]; s[tid] += s[tid + 8];
  s[tid] += s[tid + 4]; s[tid] += s[tid + 2]; s[tid] += s[tid + 1];
}
__global__ void reduce(const float* in, float* out, int n) {
  __shared__ float s[256];
  int tid = threadIdx.x, i = blockIdx.x * 256 + tid;
  s[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int k = 128; k > 32; k >>= 1) { if (tid < k) s[tid] += s[tid + k]; __syncthreads(); }
  if (tid < 32) warp_reduce(s, tid);
  if (tid == 0) out[blockIdx.x] = s[0];
}
int main() {
  const int n = 4096; float h[n];
  for (int i = 0; i < n; ++i) h[i] = (i % 17) * 0.25f;
  float *d, *o; cudaMalloc(&d, sizeof(h)); cudaMalloc(&o, 16 * 4);
  cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
  reduce<<<16, 256>>>(d, o, n);
  float r[16]; cudaMemcpy(r, o, sizeof(r), cudaMemcpyDeviceToHost);
  double t = 0, e = 0;
  for (int i = 0; i < 16; ++i) t += r[i];
  for (int i = 0; i < n; ++i) e += h[i];
  printf(t == e ? "PASS\\n" : "FAIL\\n");
  return t != e;
}
"""


def test_a_program_failing_its_own_check_on_the_runtime_is_not_verified_by_kernel_tests(tmp_path: Path) -> None:
    source = tmp_path / "reduce.cu"
    source.write_text(LOCKSTEP_REDUCTION)
    result = translate(LOCKSTEP_REDUCTION, str(source), TranslateOptions(target=Dialect.HIP))
    if result.status == "verified":  # the runtime runs warp-synchronous code in lockstep: then the program agrees
        assert result.evidence is not None and result.evidence.program is not None
        assert result.evidence.program.matched
        return
    assert result.status == "compiled-not-executed", result.summary
    assert "its own check" in result.reason
