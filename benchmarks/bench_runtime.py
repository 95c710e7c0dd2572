"""Runtime speed: 1M-thread kernels on the SIMT-on-CPU runtime, fast path vs fibers, fcontext vs ucontext.

    python benchmarks/bench_runtime.py [--threads 2] [--repeat 3]

Each row builds the kernel (cached), then calls a host function that launches it once to warm up and
then times ``--repeat`` launches with std::chrono inside the child process (process start-up and
Python are not in the figure); the table shows the best time and checks the result against numpy.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from xpiler_core.runtime.call import run_kernel

N = 1 << 20

SOURCE = r"""
#include <chrono>
__global__ void scale_add(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
__global__ void ten_barriers(const float* x, float* y, int n) {
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  float v = x[i];
  for (int k = 0; k < 5; ++k) {
    s[t] = v;
    __syncthreads();
    v = 0.5f * (v + s[(t + 1) & 255]);
    __syncthreads();
  }
  y[i] = v;
}
template <class F> static double best_of(int repeat, F f) {
  f();
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
extern "C" void bench(const float* x, float* y, double* seconds, int n, int which, int repeat) {
  if (which == 0)
    seconds[0] = best_of(repeat, [&] { scale_add<<<(n + 255) / 256, 256>>>(x, y, n); });
  else
    seconds[0] = best_of(repeat, [&] { ten_barriers<<<n / 256, 256>>>(x, y, n); });
}
"""


def expected(x: np.ndarray, which: int) -> np.ndarray:
    if which == 0:
        return 2.0 * x + 1.0
    v = x.reshape(-1, 256).astype(np.float32)
    for _ in range(5):
        v = np.float32(0.5) * (v + np.roll(v, -1, axis=1))
    return v.reshape(-1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    rows = []
    for which, label, goal in (
        (0, "elementwise, 1M threads", 0.5),
        (1, "10 barriers/block of 256, 1M threads", 5.0),
    ):
        for fibers in ("fcontext", "ucontext"):
            for mode in ("fast path", "fibers"):
                env = {"XPILER_FORCE_FIBERS": "1" if mode == "fibers" else "0"}
                y = np.zeros(N, np.float32)
                secs = np.zeros(1, np.float64)
                run = run_kernel(
                    SOURCE,
                    "bench",
                    grid=1,
                    block=1,
                    kind="host",
                    threads=args.threads,
                    fibers=fibers,
                    env=env,
                    args=[x, y, secs, np.int32(N), np.int32(which), np.int32(args.repeat)],
                    timeout_s=600,
                )
                if not run.ok:
                    print(f"{label} [{fibers}, {mode}] failed: {run.error}\n{run.build_log}", file=sys.stderr)
                    return 1
                out = run.arrays[1]
                assert out is not None
                ok = np.allclose(out, expected(x, which), rtol=1e-5, atol=1e-6)
                t = float(run.arrays[2][0])  # type: ignore[index]
                # A barrier kernel always leaves the fast path at its first barrier; "fast path" there means
                # "starts on the fast path and is promoted to fibers".
                rows.append((label, fibers, mode, t, goal, ok))
    print(f"{'kernel':40} {'context':9} {'mode':10} {'seconds':>9} {'goal':>6} {'vs goal':>8} {'vs numpy':>8}")
    for label, fibers, mode, t, goal, ok in rows:
        print(f"{label:40} {fibers:9} {mode:10} {t:9.4f} {('<' + str(goal)):>6} {'meets' if t < goal else 'MISSES':>8} "
              f"{'equal' if ok else 'WRONG':>8}")
    print(f"(OS threads: {args.threads}; best of {args.repeat} launches after one warm-up; fcontext is the default "
          "context switch, ucontext the portable fallback)")
    return 0 if all(r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
