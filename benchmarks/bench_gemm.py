"""Matrix and convolution operators at sizes where the arithmetic dominates: ours vs PyTorch and numpy, GFLOP/s
next to this machine's measured FMA peak.

The suite's matrix and convolution kernels (``benchmarks/suite``) run at the suite's own small shapes in
``bench_cpu.py``; here each runs at large, ragged shapes (no size a multiple of a register tile or cache block):
the spec is copied with those cases, translated with the default CPU plan (``cpu_gemm`` takes the matrix
products), built and timed like ``bench_cpu.py`` (1 and 2 threads, the better median counts), and compared with
PyTorch (oneDNN) and numpy (its BLAS, float32 ``@`` for the matrix products) on the same inputs. The FMA peak is
measured by a C++ loop of independent fused multiply-adds of the widest vectors (8 or 16 floats) on every core
(what the ISA can retire, not a datasheet figure).

    python benchmarks/bench_gemm.py [--op NAME ...] [--min-time 0.3] [--json OUT]

PyTorch is a benchmark-only dependency (``pip install torch==2.13.0``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

# the shared method times one thread on each side: numpy's BLAS too (its thread count is fixed when it loads)
if "phases" not in sys.argv:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from bench_cpu import (  # noqa: E402
    _set_omp_threads,
    _torch_impls,
    bench_baselines,
    bench_ours,
    geomean,
    median_time,
    torch_comparison,
)

from xpiler_core.verify.inputs import case_inputs  # noqa: E402
from xpiler_core.verify.spec import load_spec  # noqa: E402

# operator → (suite group, large ragged cases)
SHAPES: dict[str, tuple[str, list[dict[str, int]]]] = {
    "gemm": ("matrix", [{"M": 509, "N": 517, "K": 523}, {"M": 1021, "N": 1019, "K": 1031}]),
    "batched_gemm": ("matrix", [{"batch": 8, "M": 255, "N": 257, "K": 253}]),
    "gemv": ("matrix", [{"rows": 4093, "cols": 4099}]),
    "conv2d_nchw": ("convolution", [{"n": 1, "c": 64, "h": 55, "w": 57, "k": 64}]),
    "conv2d_nhwc": ("convolution", [{"N": 1, "H": 57, "W": 55, "C": 64, "K": 64, "KH": 3, "KW": 3, "stride": 1}]),
    "depthwise_conv2d": ("convolution", [{"N": 1, "C": 128, "H": 113, "W": 111}]),
}


def multiply_adds(op: str, c: dict[str, int]) -> float:
    if op == "gemm":
        return c["M"] * c["N"] * c["K"]
    if op == "batched_gemm":
        return c["batch"] * c["M"] * c["N"] * c["K"]
    if op == "gemv":
        return c["rows"] * c["cols"]
    if op == "conv2d_nchw":
        return c["n"] * c["k"] * c["h"] * c["w"] * c["c"] * 9
    if op == "conv2d_nhwc":
        oh, ow = (c["H"] - c["KH"]) // c["stride"] + 1, (c["W"] - c["KW"]) // c["stride"] + 1
        return c["N"] * oh * ow * c["K"] * c["C"] * c["KH"] * c["KW"]
    if op == "depthwise_conv2d":
        return c["N"] * c["C"] * c["H"] * c["W"] * 9
    raise KeyError(op)


def blas_call(op: str, inputs: dict[str, Any]) -> Any:
    """The float32 numpy formulation of a matrix product on the case's inputs (its BLAS), None for others."""
    if op in ("gemm", "batched_gemm"):
        a, b = inputs["A"].astype(np.float32), inputs["B"].astype(np.float32)
        return lambda: np.matmul(a, b)
    if op == "gemv":
        a, x = inputs["A"].astype(np.float32), inputs["x"].astype(np.float32)
        return lambda: a @ x
    return None


def numpy_blas(op: str, spec_path: str, case: dict[str, int]) -> float | None:
    """Median seconds of :func:`blas_call` (the phases method)."""
    fn = blas_call(op, case_inputs(load_spec(spec_path), case, 0, 0))
    return median_time(fn, 0.3, 5) if fn is not None else None


PEAK_SOURCE = r"""
#include <chrono>
#include <cstdio>
#include <omp.h>
#ifndef WIDTH
#define WIDTH 8
#endif
typedef float vw __attribute__((vector_size(4 * WIDTH)));
int main() {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    long iters = 20000000;
    auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
      vw a[10], m, c;
      for (int l = 0; l < WIDTH; ++l) { m[l] = 1.0000001f; c[l] = 1e-7f; }
      for (int i = 0; i < 10; ++i) a[i] = c * (float)(i + omp_get_thread_num());
      for (long it = 0; it < iters; ++it)
#pragma GCC unroll 10
        for (int i = 0; i < 10; ++i) a[i] = a[i] * m + c;
      for (int i = 0; i < 10; ++i) sink += a[i][0];
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double flops = 2.0 * WIDTH * 10 * iters * omp_get_max_threads();
    if (flops / s > best) best = flops / s;
    if (sink == 12345.f) std::printf("!");
  }
  std::printf("%.3f\n", best / 1e9);
}
"""


def fmt(value: float | None, width: int) -> str:
    return f"{value:{width}.2f}" if value else f"{'n/a':>{width}s}"


def fma_peak_gflops(workdir: Path) -> float | None:
    """This machine's fused multiply-add throughput on all cores (GFLOP/s), measured."""
    src, exe = workdir / "peak.cpp", workdir / "peak"
    src.write_text(PEAK_SOURCE)
    # the widest vectors the CPU has (the micro-kernel takes 16-float vectors where it has AVX-512)
    flags = Path("/proc/cpuinfo").read_text()
    isa = "-mavx512f -mfma -DWIDTH=16" if "avx512f" in flags else "-mavx2 -mfma" if "avx2" in flags else ""
    build = subprocess.run(f"g++ -O2 -fopenmp {isa} {src} -o {exe}", shell=True, capture_output=True, text=True)
    if build.returncode != 0:
        return None
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    try:
        return float(run.stdout.strip())
    except ValueError:
        return None


def scaled_spec(op: str, workdir: Path) -> str:
    """A copy of the suite spec folder of ``op`` whose cases are the large ones."""
    group, cases = SHAPES[op]
    folder = workdir / op
    shutil.copytree(ROOT / "suite" / group / op, folder)
    spec_file = folder / "spec.toml"
    text = spec_file.read_text()
    head = text.split("[[cases]]", 1)[0]
    rows = "".join("[[cases]]\n" + "".join(f"{k} = {v}\n" for k, v in c.items()) + "\n" for c in cases)
    spec_file.write_text(head + rows)
    tomllib.loads(spec_file.read_text())  # still a valid spec
    return str(spec_file)


def shared_gemm(impls: dict[str, Any], rounds: int) -> Any:
    """Per case, with the method every benchmark shares (``benchmarks/timing.py``: interleaved in this process,
    min of thread CPU time, 1 thread each side): ours against PyTorch and against numpy's BLAS."""
    from timing import compare

    def timed(spec: Any, index: int, inputs: dict[str, Any], ours: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        _set_omp_threads(1)
        got = torch_comparison(impls.get(spec.name), spec, inputs, ours, rounds)
        if got is not None:
            out.update(torch_s=got.a.cpu_min, ours_s=got.b.cpu_min, torch_interval=got.interval, busy=got.busy)
        blas = blas_call(spec.name, inputs)
        if blas is not None:
            got = compare(blas, ours, names=("numpy", "ours"), rounds=rounds)
            out.update(numpy_blas_s=got.a.cpu_min, ours_s=min(out.get("ours_s", got.b.cpu_min), got.b.cpu_min),
                       busy=bool(out.get("busy")) or got.busy)
        return out

    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", action="append", default=[])
    parser.add_argument("--min-time", type=float, default=0.3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--method", choices=("shared", "phases"), default="shared",
                        help="shared: benchmarks/timing.py (interleaved, min of thread CPU time, 1 thread each side; "
                             "the default); phases: the old medians of wall time, best of 1 and 2 threads")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds of the shared method")
    args = parser.parse_args(argv)
    ops = args.op or list(SHAPES)
    impls = _torch_impls()
    shared = shared_gemm(impls, args.rounds) if args.method == "shared" else None
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xpiler-bench-gemm-") as tmp:
        work = Path(tmp)
        peak = fma_peak_gflops(work)
        for op in ops:
            spec_path = scaled_spec(op, work)
            row = bench_ours(spec_path, work / "build", args.min_time, 3, shared)
            row["op"] = op
            rows.append(row)
        for row in rows if shared is None else ():
            bench_baselines(row, args.min_time, 3, impls, "torch")
            for case in row.get("cases", []):
                case["numpy_blas_s"] = numpy_blas(row["op"], row["spec"], case["sizes"])
    busy = any(c.get("busy") for r in rows for c in r.get("cases", []))
    print(f"method: {args.method}" + (" (benchmarks/timing.py: interleaved, min of thread CPU time, 1 thread each side)"
                                       if shared else " (medians of wall time, best of 1 and 2 threads)")
          + (" -- MACHINE BUSY during some comparisons: not a result" if busy else ""))
    cores = os.environ.get("OMP_NUM_THREADS", "all")  # the shared method measures one core, like its timings
    print(f"machine FMA peak (measured, {cores} core(s)): {peak:.1f} GFLOP/s" if peak else "FMA peak: not measured")
    print(f"{'op':18s} {'case':44s} {'ours ms':>9s} {'GFLOP/s':>8s} {'% peak':>7s} {'torch ms':>9s} "
          f"{'vs torch':>8s} {'numpy ms':>9s} {'vs numpy':>8s}")
    for row in rows:
        if row.get("error"):
            print(f"{row['op']:18s} {row.get('error')}")
            continue
        for case in row["cases"]:
            flops = 2.0 * multiply_adds(row["op"], case["sizes"])
            ours = case.get("ours_s")
            if not ours:
                print(f"{row['op']:18s} {case.get('error') or 'not timed: ' + str(sorted(case))}")
                continue
            gflops = flops / ours / 1e9
            case["gflops"] = gflops
            torch_s, numpy_s = case.get("torch_s"), case.get("numpy_blas_s")
            case["vs_torch"] = torch_s / ours if torch_s else None
            case["vs_numpy_blas"] = numpy_s / ours if numpy_s else None
            sizes = ",".join(f"{k}={v}" for k, v in case["sizes"].items())
            print(f"{row['op']:18s} {sizes:44s} {ours * 1e3:9.2f} {gflops:8.1f} "
                  f"{(gflops / peak * 100 if peak else 0):6.1f}% {fmt((torch_s or 0) * 1e3, 9)} "
                  f"{fmt(case['vs_torch'], 7)}x {fmt((numpy_s or 0) * 1e3, 9)} {fmt(case['vs_numpy_blas'], 7)}x")
    for group in ("matrix", "convolution"):
        ratios = [c["vs_torch"] for r in rows if SHAPES[r["op"]][0] == group for c in r.get("cases", [])
                  if c.get("vs_torch")]
        g = geomean(ratios)
        low = min(ratios) if ratios else None
        print(f"{group}: geomean vs torch {g:.2f}x, lowest {low:.2f}x" if g and low else f"{group}: n/a")
    if args.json:
        Path(args.json).write_text(json.dumps({"peak_gflops": peak, "rows": rows}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
