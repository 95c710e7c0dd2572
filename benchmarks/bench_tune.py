"""Auto-tuning on the CPU suite: untuned vs tuned latency per operator, and tuned vs PyTorch CPU.

For every selected suite operator: ``xpiler_core.tune.tune`` (default budget 60 s / 48 trials; every
candidate verified against the spec's numpy reference on all cases before its time counts), on the
operator's largest case. The tuner's own figures (untuned latency, re-timed best, paired speedup, tuning
time) come from its timing child. Then, in this process, the untuned library, the tuned library and the
PyTorch CPU formulation of the operator (``benchmarks/bench_cpu.py``, at its default thread count and at one
thread; the faster of the two is the baseline) are timed round-robin on the same inputs (median of rounds,
each round the mean of back-to-back calls), so all see the same machine load. Ratios: > 1 means the tuned
translation is faster.

    python benchmarks/bench_tune.py [--group G ...] [--op NAME ...] [--budget 60] [--trials 48] [--json OUT]

PyTorch is a benchmark-only dependency (``pip install torch==2.13.0``).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
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

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from bench_cpu import _CTYPES, _to_torch, _torch_impls, torch  # noqa: E402

from xpiler_core.diagnostics import XpilerError  # noqa: E402
from xpiler_core.frontend.dialect import Dialect  # noqa: E402
from xpiler_core.runtime.build import build_library  # noqa: E402
from xpiler_core.tune import TuneOptions, tune  # noqa: E402
from xpiler_core.verify.inputs import case_inputs  # noqa: E402
from xpiler_core.verify.spec import load_spec  # noqa: E402

DEFAULT_GROUPS = ("elementwise", "activation", "reduction", "normalization", "matrix", "convolution")
GOAL_GROUPS = ("elementwise", "reduction", "normalization")
TORCH_THREADS = torch.get_num_threads() if torch is not None else 1
SKIP = {"gemm_wmma", "gemv_int8", "histogram"}  # int8/half tensor-core inputs or integer atomics: no fair torch twin


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _c_args(spec: Any, inputs: dict[str, Any]) -> list[Any]:
    args: list[Any] = []
    for a in spec.args:
        if a.is_buffer:
            arr = np.ascontiguousarray(inputs[a.name])
            inputs[a.name] = arr
            args.append(arr.ctypes.data_as(ctypes.c_void_p))
        else:
            args.append(_CTYPES.get(a.dtype, ctypes.c_int32)(inputs[a.name]))
    return args


Timed = tuple[Callable[[], Any], Callable[[], Any]] | None  # (untimed setup before each sample, the call)


def interleaved(fns: list[Timed], rounds: int = 15, sample_s: float = 0.01) -> list[float | None]:
    """Median per-call seconds of each function, timed round-robin (warm-up first)."""
    inner: list[int] = []
    for pair in fns:
        if pair is None:
            inner.append(0)
            continue
        setup, fn = pair
        setup()
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        single = (time.perf_counter() - t0) / 3
        inner.append(max(1, min(20000, int(sample_s / max(single, 1e-9)))))
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, pair in enumerate(fns):
            if pair is None:
                continue
            setup, fn = pair
            setup()
            t0 = time.perf_counter()
            for _ in range(inner[i]):
                fn()
            samples[i].append((time.perf_counter() - t0) / inner[i])
    return [statistics.median(s) if s else None for s in samples]


def bench_one(spec_path: str, options: TuneOptions, workdir: Path, impls: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    spec = load_spec(spec_path)
    group = spec.group or Path(spec_path).parent.parent.name
    row: dict[str, Any] = {"op": spec.name, "group": group}
    source = spec.source.read_text(encoding="utf-8")
    try:
        result = tune(source, str(spec.source), TuneOptions(spec_path=spec_path, budget_s=options.budget_s,
                                                            max_trials=options.max_trials, seed=options.seed))
    except XpilerError as exc:
        row["error"] = exc.message.splitlines()[0][:120]
        return row
    row.update(case=result.case, untuned_s=result.baseline_latency_s, tuned_s=result.best.latency_s,
               speedup=result.best.speedup, confirmed=result.confirmed, tune_s=result.seconds,
               trials=result.trials_measured, resumed=result.trials_resumed, best=result.best.description)
    # in-process, round-robin: untuned, tuned, torch on the same inputs
    mspec = result.measured_spec
    libs = []
    for tag, text in (("untuned", result.baseline_text), ("tuned", result.best_text)):
        built = build_library(text, Dialect.C, workdir / spec.name / tag, display_name=f"{tag}.cpp", cplusplus_c=True)
        if not built.ok or built.library is None:
            row["error"] = f"{tag} build failed"
            return row
        libs.append(getattr(ctypes.CDLL(str(built.library)), spec.entry))
    inputs_c = [case_inputs(mspec, mspec.cases[result.case_index], result.case_index, 0) for _ in libs]
    calls: list[Timed] = []
    for entry, inputs in zip(libs, inputs_c, strict=True):
        args = _c_args(mspec, inputs)
        calls.append((lambda: None, lambda entry=entry, args=args: entry(*args)))
    torch_fn = impls.get(spec.name)
    if torch_fn is not None:
        inputs = case_inputs(spec, spec.cases[result.case_index], result.case_index, 0)
        accepted = inspect.signature(torch_fn).parameters
        tensors = {a.name: _to_torch(a.name, inputs[a.name]) for a in spec.args if a.name in accepted}

        def run_torch() -> Any:
            with torch.inference_mode():
                return torch_fn(**tensors)

        # PyTorch at its default thread count and at one thread; the faster is the baseline we compare with
        calls.append((lambda: torch.set_num_threads(TORCH_THREADS), run_torch))
        calls.append((lambda: torch.set_num_threads(1), run_torch))
    else:
        calls += [None, None]
    untuned, tuned, torch_n, torch_1 = interleaved(calls)
    if torch is not None:
        torch.set_num_threads(TORCH_THREADS)
    torch_s = min((t for t in (torch_n, torch_1) if t), default=None)
    row.update(inproc_untuned_s=untuned, inproc_tuned_s=tuned, torch_s=torch_s, torch_default_threads_s=torch_n,
               torch_1_thread_s=torch_1)
    if torch_s and tuned:
        row["vs_torch"] = torch_s / tuned
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--op", action="append", default=[])
    parser.add_argument("--budget", type=float, default=60.0, help="tuning seconds per operator (default 60)")
    parser.add_argument("--trials", type=int, default=48, help="most measured trials per operator (default 48)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    groups = args.group or list(DEFAULT_GROUPS)
    impls = _torch_impls()
    options = TuneOptions(budget_s=args.budget, max_trials=args.trials, seed=args.seed)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; torch "
          f"{torch.__version__ if torch is not None else 'absent'} with {torch.get_num_threads() if torch else 0} threads")
    print(f"{'group':13s} {'op':18s} {'untuned':>10s} {'tuned':>10s} {'speedup':>8s} {'torch':>10s} {'vs torch':>8s} "
          f"{'tune s':>7s} {'trials':>6s}  best config")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xpiler-bench-tune-") as tmp:
        for spec_path in sorted(glob.glob(str(ROOT / "suite" / "*" / "*" / "spec.toml"))):
            group, op = Path(spec_path).parent.parent.name, Path(spec_path).parent.name
            if group not in groups or (args.op and op not in args.op) or (not args.op and op in SKIP):
                continue
            row = bench_one(spec_path, options, Path(tmp), impls)
            rows.append(row)
            us = lambda v: f"{v * 1e6:8.1f}us" if v else "       n/a"  # noqa: E731
            x = lambda v: f"{v:7.2f}x" if v else "     n/a"  # noqa: E731
            if row.get("error"):
                print(f"{group:13s} {op:18s} error: {row['error']}", flush=True)
                continue
            print(f"{group:13s} {op:18s} {us(row['inproc_untuned_s'])} {us(row['inproc_tuned_s'])} "
                  f"{x(row['speedup'])} {us(row.get('torch_s'))} {x(row.get('vs_torch'))} {row['tune_s']:7.1f} "
                  f"{row['trials']:6d}  {row['best'][:110]}", flush=True)
    print("\ngroup geomeans (tuner's re-timed paired speedup over untuned; in-process tuned vs torch, > 1 = ours faster):")
    summary: dict[str, Any] = {}
    for group in groups:
        members = [r for r in rows if r["group"] == group and not r.get("error")]
        if not members:
            continue
        g_speed = geomean([r["speedup"] for r in members])
        g_inproc = geomean([r["inproc_untuned_s"] / r["inproc_tuned_s"] for r in members if r.get("inproc_tuned_s")])
        g_torch = geomean([r["vs_torch"] for r in members if r.get("vs_torch")])
        summary[group] = {"speedup": g_speed, "inproc_speedup": g_inproc, "vs_torch": g_torch, "ops": len(members),
                          "max_tune_s": max(r["tune_s"] for r in members)}
        print(f"  {group:13s} ops {len(members):2d}  tuned/untuned {g_speed or float('nan'):6.2f}x (in-process "
              f"{g_inproc or float('nan'):6.2f}x)  vs torch {g_torch or float('nan'):6.2f}x  "
              f"max tuning time {summary[group]['max_tune_s']:.1f} s")
    goal = geomean([r["vs_torch"] for r in rows if r["group"] in GOAL_GROUPS and r.get("vs_torch")])
    print(f"\nelementwise+reduction+normalization vs torch geomean: {goal or float('nan'):.2f}x (goal >= 1.2x)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "groups": summary, "goal_vs_torch": goal}, indent=2,
                                              default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
