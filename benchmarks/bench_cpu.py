"""CUDA → CPU speed: our translation vs numpy and vs PyTorch CPU, per operator at the suite's shapes.

For every suite operator: translate the CUDA source with the default CPU plan (spec-driven launch shape),
build it with g++ -O2 -fopenmp, load the shared object with ctypes into this process and time it on each
case's inputs; time the spec's numpy reference (float64 inside, as written in the suite) and a PyTorch CPU
implementation of the same operator on the same inputs. Each figure is the median of repeated runs
(``--min-time`` seconds, at least ``--min-runs`` runs) in one process, with 1 and with 2 threads on both
sides (the better median counts; see ``THREAD_COUNTS``) with ``--method phases``; by default (``--method
shared``) with the method every benchmark shares (``benchmarks/timing.py``: ours and the baseline interleaved in
this process, min of thread CPU time, 1 thread each side, the load recorded). Ratios are baseline time / our
time (> 1: ours is faster); per operator the geometric mean over cases, per group over operators.

    python benchmarks/bench_cpu.py [--group G ...] [--op NAME ...] [--min-time 0.2] [--json OUT]

PyTorch is a benchmark-only dependency (``pip install torch==2.13.0``); without it the torch column is
"n/a". Operators without a PyTorch formulation here are marked n/a and left out of the torch geomean.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import glob
import importlib.util
import inspect
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# the shared method times one thread on each side: numpy's BLAS too (its thread count is fixed when it loads)
if "phases" not in sys.argv:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from xpiler_core.dialect import Dialect  # noqa: E402
from xpiler_core.plans.cuda_to_cpu import _launch_params_used, translate_to_cpu  # noqa: E402
from xpiler_core.runtime.build import build_library  # noqa: E402
from xpiler_core.verify.expr import evaluate_int  # noqa: E402
from xpiler_core.verify.harness import _load_reference, reference_outputs  # noqa: E402
from xpiler_core.verify.inputs import case_inputs  # noqa: E402
from xpiler_core.verify.spec import load_spec  # noqa: E402

torch: Any  # the module, or None where it is not installed
try:
    import torch as _torch
    import torch.nn.functional as F  # noqa: N812

    _torch.set_num_threads(2)
    torch = _torch
except ImportError:  # the torch column becomes n/a
    torch = None

_CTYPES = {"int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint32": ctypes.c_uint32, "float32": ctypes.c_float,
           "float64": ctypes.c_double, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16}


# Both sides are timed with 1 and 2 threads and keep their better median: on a shared two-core machine a
# two-thread parallel region can wait a whole scheduler slice for its second core.
THREAD_COUNTS = (1, 2)
_GOMP: ctypes.CDLL | None = None


def _set_omp_threads(threads: int) -> None:
    """Thread count of the system libgomp that our shared objects use (PyTorch brings its own)."""
    global _GOMP
    if _GOMP is None:
        _GOMP = ctypes.CDLL("libgomp.so.1")
    _GOMP.omp_set_num_threads(ctypes.c_int(threads))


def _torch_impls() -> dict[str, Callable[..., Any]]:
    """PyTorch formulations of the suite operators (argument names as in each spec)."""
    if torch is None:
        return {}

    def blocks(x: Any, n: int, b: int) -> Any:
        nb = -(-n // b)
        return F.pad(x, (0, nb * b - n)).view(nb, b)

    return {
        "gelu": lambda x, n: F.gelu(x, approximate="tanh"),
        "relu": lambda data, n: torch.relu(data),
        "sigmoid": lambda x, n: torch.sigmoid(x),
        "silu": lambda x, y, n: F.silu(x),
        "conv2d_nchw": lambda data, kernel, n, c, h, w, k: F.conv2d(data, kernel, padding=1),
        "conv2d_nhwc": lambda x, wt, N, H, W, C, K, KH, KW, stride, OH, OW: F.conv2d(
            x.permute(0, 3, 1, 2), wt.permute(3, 2, 0, 1), stride=stride).permute(0, 2, 3, 1).contiguous(),
        "depthwise_conv2d": lambda x, filt, N, C, H, W: F.conv2d(x, filt[:, None], padding=1, groups=C),
        "add": lambda A, B, m: A + B,
        "polyval": lambda coeffs, x, y, n: _horner(coeffs, x),
        "sign": lambda x, n: torch.sign(x),
        "sin": lambda x, n: torch.sin(x),
        "sub": lambda a, b, n: a - b,
        "concat": lambda a, b, out, m, ca, cb: torch.cat([a, b], dim=1),
        "gather": lambda table, idx, num_idx, dim: torch.index_select(table, 0, idx),
        "scatter_add": lambda src, idx, out, num_idx, dim: out.index_add_(0, idx, src),
        "transpose": lambda src, rows, cols: src.t().contiguous(),
        "attention": lambda Q, K, V, S, D: F.scaled_dot_product_attention(Q, K, V),
        "gated_mlp": lambda x, w_gate, w_up, w_down, out, M, hidden, inter: (F.silu(x @ w_gate) * (x @ w_up)) @ w_down,
        "gqa_decode": lambda q, k, v, HQ, HKV, S, D: F.scaled_dot_product_attention(
            q[:, :, None, :], k.repeat_interleave(HQ // HKV, dim=1), v.repeat_interleave(HQ // HKV, dim=1))[:, :, 0],
        "rotary_embedding": lambda x, cos_t, sin_t, H, D: _rope(x, cos_t, sin_t, D),
        "batched_gemm": lambda A, B, M, N, K: torch.bmm(A, B),
        "gemm": lambda A, B, M, N, K: A @ B,
        "gemm_wmma": lambda A, B, M, N, K: A.float() @ B.float(),
        "gemv": lambda A, x, rows, cols: torch.mv(A, x),
        "gemv_int8": lambda A, x, rows, cols: torch.mv(A.to(torch.int32), x.to(torch.int32)),
        "batchnorm": lambda data, moving_mean, moving_var, gamma, beta, n, hw: F.batch_norm(
            data, moving_mean, moving_var, gamma, beta, False, 0.0, 1e-5),
        "layernorm": lambda x, gamma, beta, cols: F.layer_norm(x, (cols,), gamma, beta, 1e-5),
        "rmsnorm": lambda x, w, cols: F.rms_norm(x.float(), (cols,), w.float(), 1e-6).half(),
        "softmax": lambda x, rows, cols: torch.softmax(x, dim=1),
        "avgpool2d": lambda x, H, W: F.avg_pool2d(x, 2),
        "maxpool2d": lambda data, nc, h, w, oh, ow: F.max_pool2d(data, 3, stride=2, padding=1),
        "absmax": lambda x, result, n: torch.maximum(result, x.abs().max()),
        "argmax": lambda x, cols: torch.argmax(x, dim=1),
        "histogram": lambda values, bins, n: bins + torch.bincount(values, minlength=64),
        "l2norm": lambda x, cols: F.normalize(x, dim=1, eps=1e-12),
        "max": lambda x, out, n: torch.maximum(out, x.max()),
        "mean": lambda x, rows, cols: x.mean(dim=1),
        "sum": lambda x, n: x.sum(),
        "ballot_count": lambda x, n: (blocks(x, n, 256) > 0).sum(dim=1),
        "block_scan": lambda x, n: blocks(x, n, 256).cumsum(dim=1).flatten()[:n],
        "block_sum_warpsize": lambda x, n: blocks(x, n, 256).sum(dim=1),
        "warp_softmax": lambda x, rows, cols: torch.softmax(x, dim=1),
    }


def _horner(coeffs: Any, x: Any) -> Any:
    acc = torch.full_like(x, float(coeffs[-1]))
    for k in range(coeffs.numel() - 2, -1, -1):
        acc = acc * x + coeffs[k]
    return acc


def _rope(x: Any, cos_t: Any, sin_t: Any, d: int) -> Any:
    half = d // 2
    c, s = cos_t[:, None, :], sin_t[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def _to_torch(name: str, value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    t = torch.from_numpy(np.ascontiguousarray(value).copy())
    if name in ("idx",) or (t.dtype == torch.int32 and name in ("values",)) or value.dtype == np.uint32:
        t = torch.from_numpy(np.ascontiguousarray(value).astype(np.int64))
    return t


def median_time(fn: Callable[[], Any], min_time: float, min_runs: int) -> float:
    fn()  # warm-up (first-touch, lazy init)
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < min_runs or time.perf_counter() - started < min_time:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
        if len(samples) >= 2000:
            break
    return statistics.median(samples)


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def bench_ours(spec_path: str, workdir: Path, min_time: float, min_runs: int,
               shared: Callable[..., dict[str, Any]] | None = None) -> dict[str, Any]:
    """Translate, build, load and time our output on every case (phase 1: no other thread pool is alive)."""
    spec = load_spec(spec_path)
    row: dict[str, Any] = {"op": spec.name, "group": spec.group or Path(spec_path).parent.parent.name, "cases": [],
                           "spec": spec_path}
    candidate, records, _ctx = translate_to_cpu(spec.source.read_text(), str(spec.source), spec)
    if candidate is None:
        row["error"] = "translation refused: " + "; ".join(str(r["refused"]) for r in records if r["refused"])
        return row
    built = build_library(candidate, Dialect.C, workdir / spec.name, display_name=f"{spec.name}.cpp",
                          cplusplus_c=True)
    if not built.ok or built.library is None:
        row["error"] = "build failed"
        return row
    lib = ctypes.CDLL(str(built.library))
    entry = getattr(lib, spec.entry)
    launch = [n.strip() for n in _launch_params_used(records).split(",") if n.strip()]
    for index, case in enumerate(spec.cases):
        inputs = case_inputs(spec, case, index, 0)
        args: list[Any] = []
        for a in spec.args:
            value = inputs[a.name]
            if a.is_buffer:
                arr = np.ascontiguousarray(value)
                inputs[a.name] = arr
                args.append(arr.ctypes.data_as(ctypes.c_void_p))
            else:
                args.append(_CTYPES.get(a.dtype, ctypes.c_int32)(value))
        for expr in spec.grid[: len(launch)]:
            args.append(ctypes.c_int32(evaluate_int(str(expr), case)))
        ours = functools.partial(entry, *args)
        if shared is not None:
            row["cases"].append({"sizes": dict(case), **shared(spec, index, inputs, ours)})
            continue
        per_threads = {}
        for threads in THREAD_COUNTS:
            _set_omp_threads(threads)
            per_threads[threads] = median_time(ours, min_time, min_runs)
        _set_omp_threads(THREAD_COUNTS[-1])
        row["cases"].append({"sizes": dict(case), "ours_s": min(per_threads.values()),
                             "ours_by_threads": per_threads})
    if shared is not None:
        for which in ("numpy", "torch"):
            row[f"vs_{which}"] = geomean([c[f"vs_{which}"] for c in row["cases"] if c.get(f"vs_{which}")])
    return row


@functools.cache
def _reference_in_process(spec_dir: Path, reference: str) -> Callable[..., Any]:
    """The suite's numpy reference imported into this process (loaded once per operator), so the shared method
    times it here rather than through its sandbox child."""
    module_file, _, func = reference.partition(":")
    loaded = importlib.util.spec_from_file_location(f"xp_ref_{spec_dir.name}", spec_dir / module_file)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    fn: Callable[..., Any] = getattr(module, func)
    return fn


def torch_comparison(torch_fn: Callable[..., Any] | None, spec: Any, inputs: dict[str, Any], ours: Callable[[], Any],
                     rounds: int) -> Any:
    """PyTorch (one thread) against ``ours`` on the case's inputs with the shared method, or None without it."""
    from timing import compare

    if torch_fn is None or torch is None:
        return None
    accepted = inspect.signature(torch_fn).parameters
    tensors = {a.name: _to_torch(a.name, inputs[a.name]) for a in spec.args if a.name in accepted}
    torch.set_num_threads(1)
    with torch.inference_mode():
        return compare(functools.partial(torch_fn, **tensors), ours, names=("torch", "ours"), rounds=rounds)


def shared_method(impls: dict[str, Callable[..., Any]], rounds: int) -> Callable[..., dict[str, Any]]:
    """Per case: ours against numpy and against PyTorch with the method every benchmark shares
    (``benchmarks/timing.py``: one process, interleaved, min of thread CPU time, 1 thread each side)."""
    from timing import compare

    def timed(spec: Any, index: int, inputs: dict[str, Any], ours: Callable[[], Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        _set_omp_threads(1)
        if spec.reference:
            reference = _reference_in_process(spec.path.parent, spec.reference)
            got = compare(functools.partial(reference_outputs, reference, spec, inputs), ours,
                          names=("numpy", "ours"), rounds=rounds)
            out.update(vs_numpy=got.ratio, numpy_interval=got.interval, ours_s=got.b.cpu_min,
                       numpy_s=got.a.cpu_min, busy=got.busy)
        got = torch_comparison(impls.get(spec.name), spec, inputs, ours, rounds)
        if got is not None:
            out.update(vs_torch=got.ratio, torch_interval=got.interval, torch_s=got.a.cpu_min,
                       ours_s=got.b.cpu_min, busy=bool(out.get("busy")) or got.busy)
        return out

    return timed


def bench_baselines(row: dict[str, Any], min_time: float, min_runs: int, impls: dict[str, Callable[..., Any]],
                    which: str) -> None:
    """Time the numpy reference (``which="numpy"``) or PyTorch (``"torch"``) on the same inputs."""
    if row.get("error"):
        return
    spec = load_spec(row["spec"])
    reference = _load_reference(spec) if spec.reference else None
    torch_fn = impls.get(spec.name)
    for index, (case, result) in enumerate(zip(spec.cases, row["cases"], strict=True)):
        inputs = case_inputs(spec, case, index, 0)
        if which == "numpy" and reference is not None:
            result["numpy_s"] = median_time(functools.partial(reference_outputs, reference, spec, inputs),
                                           min_time, min_runs)
        if which == "torch" and torch_fn is not None:
            accepted = inspect.signature(torch_fn).parameters
            tensors = {a.name: _to_torch(a.name, inputs[a.name]) for a in spec.args if a.name in accepted}
            per_threads = {}
            with torch.inference_mode():
                for threads in THREAD_COUNTS:
                    torch.set_num_threads(threads)
                    per_threads[threads] = median_time(functools.partial(torch_fn, **tensors), min_time,
                                                       min_runs)
            torch.set_num_threads(THREAD_COUNTS[-1])
            result["torch_s"] = min(per_threads.values())
            result["torch_by_threads"] = per_threads
    ratios = [c[f"{which}_s"] / c["ours_s"] for c in row["cases"] if f"{which}_s" in c]
    row[f"vs_{which}"] = geomean(ratios)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--op", action="append", default=[])
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--min-runs", type=int, default=7)
    parser.add_argument("--json", default=None)
    parser.add_argument("--method", choices=("shared", "phases"), default="shared",
                        help="shared: benchmarks/timing.py (interleaved, min of thread CPU time, 1 thread each "
                             "side; the default); phases: the old medians of wall time, ours then numpy then "
                             "PyTorch, best of 1 and 2 threads")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds of the shared method")
    args = parser.parse_args(argv)
    impls = _torch_impls()
    shared = shared_method(impls, args.rounds) if args.method == "shared" else None
    rows: list[dict[str, Any]] = []
    # Phases keep thread pools apart: our OpenMP threads, then numpy, then PyTorch's own OpenMP runtime
    # (two spinning runtimes on two cores distort each other's timings).
    with tempfile.TemporaryDirectory(prefix="xpiler-bench-cpu-") as tmp:
        for spec_path in sorted(glob.glob(str(ROOT / "suite" / "*" / "*" / "spec.toml"))):
            group, op = Path(spec_path).parent.parent.name, Path(spec_path).parent.name
            if (args.group and group not in args.group) or (args.op and op not in args.op):
                continue
            rows.append(bench_ours(spec_path, Path(tmp), args.min_time, args.min_runs, shared))
        for which in ("numpy", "torch") if shared is None else ():
            for row in rows:
                bench_baselines(row, args.min_time, args.min_runs, impls, which)
        for row in rows:
            fmt = lambda v: f"{v:6.2f}x" if v else "   n/a"  # noqa: E731
            largest = row["cases"][-1] if row.get("cases") else {}
            print(f"{row['group']:14s} {row['op']:20s} vs numpy {fmt(row.get('vs_numpy'))}  vs torch "
                  f"{fmt(row.get('vs_torch'))}   largest case: ours {largest.get('ours_s', 0) * 1e6:9.1f} us, torch "
                  f"{largest.get('torch_s', float('nan')) * 1e6:9.1f} us  {row.get('error', '')}", flush=True)
    busy = any(c.get("busy") for r in rows for c in r.get("cases", []))
    print(f"\nmethod: {args.method}" + (" (benchmarks/timing.py: interleaved, min of 31 rounds of thread CPU "
                                        "time, 1 thread each side)" if shared else " (medians of wall time)")
          + (" -- MACHINE BUSY during some comparisons: not a result" if busy else ""))
    print("group geomeans (baseline time / our time; > 1 means ours is faster):")
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    summary = {}
    for group, members in sorted(groups.items()):
        g_np = geomean([r["vs_numpy"] for r in members if r.get("vs_numpy")])
        g_t = geomean([r["vs_torch"] for r in members if r.get("vs_torch")])
        summary[group] = {"vs_numpy": g_np, "vs_torch": g_t, "ops": len(members)}
        print(f"  {group:14s} ops {len(members):2d}   vs numpy {g_np or float('nan'):7.2f}x   vs torch "
              f"{g_t or float('nan'):7.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "groups": summary}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
