"""Launch arguments convert to the kernel's parameter types as in a call: a literal 0 (or NULL) for a pointer
parameter is a null pointer there (the CUDA Handbook's `scanAndWritePartials<T, false><<<1, b>>>(out, 0, in, N,
1)`), an int for a size_t widens. Judged by the values the kernel sees."""

from __future__ import annotations

from pathlib import Path

from xpiler_core.api import run_program

PROGRAM = r"""#include <cstdio>
#include <cstddef>
template <class T, bool kWrite>
__global__ void partials(T* out, T* spine, const T* in, size_t n, size_t blocks) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2;
  if (kWrite && spine != 0 && i == 0) spine[0] = (T)blocks;
  if (i == 0) out[n] = spine == 0 ? -1 : 1;
}
template <class T> void run(T* out, T* spine, const T* in, size_t n) {
  partials<T, false><<<1, 32>>>(out, 0, in, n, 1);
  partials<T, true><<<1, 32>>>(out + n + 1, spine, in, n, 7);
  partials<T, true><<<1, 32>>>(out + 2 * (n + 1), NULL, in, n, 3);
}
int main() {
  const size_t n = 20;
  int h[n], r[3 * (n + 1)], s = 0;
  for (size_t i = 0; i < n; ++i) h[i] = (int)i;
  int *in, *out, *spine;
  cudaMalloc(&in, sizeof h); cudaMalloc(&out, sizeof r); cudaMalloc(&spine, sizeof(int));
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  run(out, spine, in, n);
  cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
  cudaMemcpy(&s, spine, sizeof s, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < 3 * (n + 1); ++i) printf("%d ", r[i]);
  printf("| %d\n", s);
  return 0;
}
"""


def test_a_literal_zero_for_a_pointer_parameter_is_a_null_pointer(tmp_path: Path) -> None:
    outcome = run_program(PROGRAM, str(tmp_path / "args.cu"))
    assert outcome.built and outcome.exit_code == 0, outcome.build_log + outcome.stderr
    doubled = [str(2 * i) for i in range(20)]
    assert outcome.stdout.split() == [*doubled, "-1", *doubled, "1", *doubled, "-1", "|", "7"]
