"""Auto-tuning on the CPU suite: untuned vs tuned latency per operator, and tuned vs PyTorch CPU and numpy.

For every selected suite operator: ``xpiler_core.tune.tune`` (default budget 60 s / 48 trials; every
candidate verified against the spec's numpy reference on all cases before its time counts), on the
operator's largest case. The tuner's own figures (untuned latency, re-timed best, paired speedup, tuning
time) come from its timing child. Then the untuned and tuned libraries (timed round-robin in one timing
child) and the PyTorch CPU formulation of the operator (``benchmarks/bench_cpu.py``; in a child process of
its own, at its default thread count and at one thread, the faster kept) are timed alternately: ours,
torch, torch, ours (medians), so a change of machine load shows up on both sides and no thread pool spins
against another in the same process; the spec's numpy reference (numpy's BLAS for the matrix operators) is timed
the same way in a child of its own. Ratios: > 1 means the tuned translation is faster.

    python benchmarks/bench_tune.py [--group G ...] [--op NAME ...] [--budget 60] [--trials 48] [--json OUT]

PyTorch is a benchmark-only dependency (``pip install torch==2.13.0``).
"""

from __future__ import annotations

import argparse
import functools
import glob
import inspect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from bench_cpu import _to_torch, _torch_impls, torch  # noqa: E402

from xpiler_core.diagnostics import XpilerError  # noqa: E402
from xpiler_core.dialect import Dialect  # noqa: E402
from xpiler_core.runtime.build import build_library  # noqa: E402
from xpiler_core.tune import TuneOptions, tune  # noqa: E402
from xpiler_core.tune.measure import MeasureSettings, measure_libraries  # noqa: E402
from xpiler_core.verify.harness import _load_reference, reference_outputs  # noqa: E402
from xpiler_core.verify.inputs import case_inputs  # noqa: E402
from xpiler_core.verify.spec import load_spec  # noqa: E402

DEFAULT_GROUPS = ("elementwise", "activation", "reduction", "normalization", "matrix", "convolution")
GOAL_GROUPS = ("elementwise", "reduction", "normalization")
TORCH_THREADS = torch.get_num_threads() if torch is not None else 1
SKIP = {"gemm_wmma", "gemv_int8", "histogram"}  # int8/half tensor-core inputs or integer atomics: no fair torch twin


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def torch_child(spec_path: str, case_index: int, threads: int, rounds: int = 15) -> float | None:
    """Median per-call seconds of the PyTorch formulation in a child process of its own (its thread pool
    cannot spin against ours), at ``threads`` intra-op threads."""
    proc = subprocess.run([sys.executable, __file__, "--torch-worker", spec_path, str(case_index), str(threads),
                           str(rounds)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return None
    value = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(value) if value is not None else None


def _burst_median(call: Callable[[], object], rounds: int, bursts: int) -> float:
    """Median per-call seconds of ``call`` timed as the timing child times ours: warm-up, then per round the
    fastest of ``bursts`` bursts of calls (preempted bursts dropped)."""
    for _ in range(3):
        call()
    t0 = time.perf_counter()
    calls = 0
    while calls < 3 or time.perf_counter() - t0 < 0.02:
        call()
        calls += 1
    single = (time.perf_counter() - t0) / calls
    inner = max(1, min(20000, int(0.002 / bursts / max(single, 1e-9))))
    samples = []
    for _ in range(rounds):
        fastest = math.inf
        for _ in range(bursts):
            t0 = time.perf_counter()
            for _ in range(inner):
                call()
            fastest = min(fastest, time.perf_counter() - t0)
        samples.append(fastest / inner)
    return statistics.median(samples)


def torch_worker(spec_path: str, case_index: int, threads: int, rounds: int, bursts: int = 4) -> None:
    """Times the PyTorch formulation at ``threads`` intra-op threads."""
    spec = load_spec(spec_path)
    fn = _torch_impls().get(spec.name)
    if fn is None:
        print(json.dumps(None))
        return
    torch.set_num_threads(threads)
    inputs = case_inputs(spec, spec.cases[case_index], case_index, 0)
    accepted = inspect.signature(fn).parameters
    tensors = {a.name: _to_torch(a.name, inputs[a.name]) for a in spec.args if a.name in accepted}
    with torch.inference_mode():
        print(json.dumps(_burst_median(functools.partial(fn, **tensors), rounds, bursts)))


def numpy_worker(spec_path: str, case_index: int, rounds: int, bursts: int = 4) -> None:
    """Times the spec's numpy reference (numpy's BLAS at its default threads for the matrix operators)."""
    spec = load_spec(spec_path)
    if not spec.reference:
        print(json.dumps(None))
        return
    reference = _load_reference(spec)
    inputs = case_inputs(spec, spec.cases[case_index], case_index, 0)
    print(json.dumps(_burst_median(functools.partial(reference_outputs, reference, spec, inputs), rounds, bursts)))


def numpy_child(spec_path: str, case_index: int, rounds: int = 15) -> float | None:
    proc = subprocess.run([sys.executable, __file__, "--numpy-worker", spec_path, str(case_index), str(rounds)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return None
    value = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(value) if value is not None else None


def bench_one(spec_path: str, options: TuneOptions, workdir: Path) -> dict[str, Any]:
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
    row.update(case=result.case, tuner_untuned_s=result.baseline_latency_s, tuner_tuned_s=result.best.latency_s,
               speedup=result.best.speedup, confirmed=result.confirmed, tune_s=result.seconds,
               trials=result.trials_measured, resumed=result.trials_resumed, best=result.best.description,
               changes=result.best.config.describe_changes(result.baseline_config or result.best.config),
               noise=result.noise, interval=result.best_interval, flags=list(result.flags),
               load=result.load_average, busy=result.loaded, load_detail=result.load)
    libs = []
    for tag, text, flags in (("untuned", result.baseline_text, ()), ("tuned", result.best_text, result.flags)):
        built = build_library(text, Dialect.C, workdir / spec.name / tag, display_name=f"{tag}.cpp", cplusplus_c=True,
                              extra_flags=flags)
        if not built.ok or built.library is None:
            row["error"] = f"{tag} build failed"
            return row
        libs.append(built.library)
    # ours, torch (default threads), torch (1 thread), ours again: each in its own child process, alternating
    # so a change of machine load shows up on both sides
    ours: list[tuple[float, float]] = []
    torch_times: dict[int, float | None] = {}
    settings = MeasureSettings(rounds=15, max_s=3.0)
    numpy_s = numpy_child(spec_path, result.case_index)
    for step in ("ours", TORCH_THREADS, 1, "ours"):
        if step == "ours":
            untuned, tuned = measure_libraries(libs, result.measured_spec, spec.entry, result.case_index,
                                               workdir / spec.name / f"m{len(ours)}", settings=settings)
            ours.append((untuned.median_s, tuned.median_s))
        elif torch is not None:
            torch_times[int(step)] = torch_child(spec_path, result.case_index, int(step))
    row["untuned_s"] = statistics.median(u for u, _ in ours)
    row["tuned_s"] = statistics.median(t for _, t in ours)
    row["torch_default_threads_s"] = torch_times.get(TORCH_THREADS)
    row["torch_1_thread_s"] = torch_times.get(1)
    best_torch = min((t for t in torch_times.values() if t), default=None)
    row["torch_s"] = best_torch
    if best_torch:
        row["vs_torch"] = best_torch / row["tuned_s"]
    row["numpy_s"] = numpy_s
    if numpy_s:
        row["vs_numpy"] = numpy_s / row["tuned_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--torch-worker"]:
        torch_worker(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
        return 0
    if argv[:1] == ["--numpy-worker"]:
        numpy_worker(argv[1], int(argv[2]), int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--op", action="append", default=[])
    parser.add_argument("--budget", type=float, default=60.0, help="tuning seconds per operator (default 60)")
    parser.add_argument("--trials", type=int, default=48, help="most measured trials per operator (default 48)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    groups = args.group or list(DEFAULT_GROUPS)
    options = TuneOptions(budget_s=args.budget, max_trials=args.trials, seed=args.seed)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; torch "
          f"{torch.__version__ if torch is not None else 'absent'} with {torch.get_num_threads() if torch else 0} threads")
    print(f"{'group':13s} {'op':18s} {'untuned':>10s} {'tuned':>10s} {'speedup':>8s} {'torch':>10s} {'vs torch':>8s} "
          f"{'numpy':>10s} {'vs numpy':>8s} {'tune s':>7s} {'trials':>6s} {'noise':>6s} {'load':>5s}  best config")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xpiler-bench-tune-") as tmp:
        for spec_path in sorted(glob.glob(str(ROOT / "suite" / "*" / "*" / "spec.toml"))):
            group, op = Path(spec_path).parent.parent.name, Path(spec_path).parent.name
            if group not in groups or (args.op and op not in args.op) or (not args.op and op in SKIP):
                continue
            row = bench_one(spec_path, options, Path(tmp))
            rows.append(row)
            us = lambda v: f"{v * 1e6:8.1f}us" if v else "       n/a"  # noqa: E731
            x = lambda v: f"{v:7.2f}x" if v else "     n/a"  # noqa: E731
            if row.get("error"):
                print(f"{group:13s} {op:18s} error: {row['error']}", flush=True)
                continue
            print(f"{group:13s} {op:18s} {us(row['untuned_s'])} {us(row['tuned_s'])} "
                  f"{x(row['speedup'])} {us(row.get('torch_s'))} {x(row.get('vs_torch'))} {us(row.get('numpy_s'))} "
                  f"{x(row.get('vs_numpy'))} {row['tune_s']:7.1f} "
                  f"{row['trials']:6d} {row['noise'] * 100:5.0f}% {row['load']:5.1f}  {row['changes'][:150]}", flush=True)
            if row.get("busy"):
                print(f"{'':32s} flagged: the tuner found the machine busy ({row['load_detail']}); "
                      "no parallelism change was crowned", flush=True)
    print("\ngroup geomeans (tuner's re-timed paired speedup over untuned; tuned vs best torch, > 1 = ours faster):")
    summary: dict[str, Any] = {}
    for group in groups:
        members = [r for r in rows if r["group"] == group and not r.get("error")]
        if not members:
            continue
        g_speed = geomean([r["speedup"] for r in members])
        g_inproc = geomean([r["untuned_s"] / r["tuned_s"] for r in members if r.get("tuned_s")])
        g_torch = geomean([r["vs_torch"] for r in members if r.get("vs_torch")])
        g_numpy = geomean([r["vs_numpy"] for r in members if r.get("vs_numpy")])
        summary[group] = {"speedup": g_speed, "remeasured_speedup": g_inproc, "vs_torch": g_torch,
                          "vs_numpy": g_numpy, "ops": len(members),
                          "max_tune_s": max(r["tune_s"] for r in members)}
        print(f"  {group:13s} ops {len(members):2d}  tuned/untuned {g_speed or float('nan'):6.2f}x (re-measured "
              f"{g_inproc or float('nan'):6.2f}x)  vs torch {g_torch or float('nan'):6.2f}x  "
              f"vs numpy {g_numpy or float('nan'):6.2f}x  "
              f"max tuning time {summary[group]['max_tune_s']:.1f} s")
    noises = sorted(r["noise"] for r in rows if not r.get("error"))
    if noises:
        print(f"\nnoise (untuned timed against itself at the start of each tuning, half-width of the 90 % interval of "
              f"the paired median): median ±{statistics.median(noises) * 100:.1f} %, worst ±{noises[-1] * 100:.1f} %")
    goal = geomean([r["vs_torch"] for r in rows if r["group"] in GOAL_GROUPS and r.get("vs_torch")])
    print(f"\nelementwise+reduction+normalization vs torch geomean: {goal or float('nan'):.2f}x (goal >= 1.2x)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "groups": summary, "goal_vs_torch": goal}, indent=2,
                                              default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
