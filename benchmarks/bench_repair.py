"""Mutation benchmark for local SMT repair (issue 8).

Takes correct kernels of suite operators, injects systematic single-site bugs (seeded), keeps the mutants
that build and fail their full spec cases, and runs ``repair_candidate`` on each. Reports the repair rate,
false repairs (solutions that fit the small examples but failed the full cases: counted, never landed;
"landed" false repairs would be returned repairs that fail the full cases, which re-verification prevents
and this script re-checks independently), and the median time per repair.

    python benchmarks/bench_repair.py                 # default: 14 operators, 2 mutants per family each
    python benchmarks/bench_repair.py --ops add,relu --per-family 1 --json out.json
    python benchmarks/bench_repair.py --suite benchmarks/repair_styles   # kernels in styles outside the suite
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from pathlib import Path

from xpiler_core.repair.engine import RepairResult, repair_candidate
from xpiler_core.repair.mutate import FAMILIES, sample
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parent / "suite"
DEFAULT_OPS = (
    "elementwise/add", "activation/relu", "elementwise/sign", "activation/gelu", "pooling/avgpool2d",
    "pooling/maxpool2d", "convolution/conv2d_nchw", "normalization/batchnorm", "matrix/gemm", "layout/transpose",
    "layout/gather", "layout/scatter_add", "llm/rotary_embedding", "convolution/conv2d_nhwc",
)


class _HardTimeout(Exception):
    pass


def _hard_timeout(signum: int, frame: object) -> None:
    raise _HardTimeout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, default=SUITE, help="folder of <op>/spec.toml (default: the suite)")
    ap.add_argument("--ops", default=None, help="comma-separated operators (folders under --suite; default: the "
                    "suite's 14 DEFAULT_OPS, or every folder of another --suite)")
    ap.add_argument("--per-family", type=int, default=2, help="mutants sampled per bug family per operator")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per repair")
    ap.add_argument("--json", type=Path, default=None, help="write every record here")
    ap.add_argument("--skip", type=Path, action="append", default=[],
                    help="a previous --json output: bugs recorded there are not run again (extend a sample)")
    args = ap.parse_args(argv)
    records = []
    done = {(r["op"], r["bug"]) for path in args.skip for r in json.loads(path.read_text())}
    if args.ops is not None:
        ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    elif args.suite.resolve() == SUITE:
        ops = list(DEFAULT_OPS)
    else:
        ops = sorted(p.parent.name for p in args.suite.glob("*/spec.toml"))
    constructs: dict[str, list[str]] = {}
    for op in ops:
        spec = load_spec(args.suite / op / "spec.toml")
        constructs[op] = list(spec.features)
        text = spec.source_text()
        if not run_spec(spec).passed:
            print(f"{op}: the unmutated source fails its spec; skipped", file=sys.stderr)
            continue
        for m in sample(text, str(spec.source), spec.entry, args.per_family, args.seed):
            if (op, m.describe()) in done:
                continue
            mutant = m.apply(text)
            report = run_spec(spec, candidate_text=mutant)
            if report.build_error or report.passed:
                continue  # does not build, or an equivalent mutant: not a bug the tests see
            started = time.monotonic()
            # A hard wall-clock stop on top of the repair's own budget, so one runaway case cannot stall the sweep.
            signal.signal(signal.SIGALRM, _hard_timeout)
            signal.alarm(int(args.budget * 2) + 15)
            try:
                result = repair_candidate(mutant, str(spec.source), spec, budget_s=args.budget, initial_report=report)
            except _HardTimeout:
                result = RepairResult("unrepaired", "hard timeout of the benchmark (the repair overran its budget)")
            finally:
                signal.alarm(0)
            seconds = time.monotonic() - started
            landed_false = False
            if result.repaired:
                assert result.text is not None
                landed_false = not run_spec(spec, candidate_text=result.text, seed=1).passed
            rec = {
                "op": op, "family": m.family, "bug": m.describe(), "status": result.status,
                "message": result.message, "fix": [f"{e.old} -> {e.new}" for e in result.edits],
                "restores_original": result.text == text if result.text else False,
                "false_repairs_rejected": result.false_repairs, "landed_false": landed_false,
                "suspects": result.suspects_tried, "seconds": round(seconds, 2),
            }
            records.append(rec)
            print(f"{op:28s} {m.describe()[:70]:70s} {result.status:10s} {seconds:5.1f}s {'; '.join(rec['fix'])[:50]}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    n = len(records)
    if not n:
        print("no mutants")
        return 1
    repaired = [r for r in records if r["status"] == "repaired"]
    print(f"\nbugs: {n} across {len({r['op'] for r in records})} operators")
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    print(f"repaired: {len(repaired)}/{n} = {100 * len(repaired) / n:.1f}%  "
          f"(restoring the original text exactly: {sum(r['restores_original'] for r in repaired)})")
    for fam in FAMILIES:
        sub = [r for r in records if r["family"] == fam]
        if sub:
            ok = sum(r["status"] == "repaired" for r in sub)
            print(f"  {fam:16s} {ok}/{len(sub)}")
    print("by kernel (its constructs): repaired / refused or unrepaired / false repairs landed")
    for op in ops:
        sub = [r for r in records if r["op"] == op]
        if sub:
            ok = sum(r["status"] == "repaired" for r in sub)
            print(f"  {op:28s} {ok}/{len(sub)}  {len(sub) - ok}  {sum(r['landed_false'] for r in sub)}  "
                  f"[{', '.join(constructs.get(op, []))}]")
    print(f"false repairs rejected by full re-verification: {sum(r['false_repairs_rejected'] for r in records)}")
    print(f"false repairs landed (re-checked with another seed): {sum(r['landed_false'] for r in records)}")
    print(f"median time per repair: all {statistics.median(r['seconds'] for r in records):.1f}s, "
          f"successful {statistics.median(r['seconds'] for r in repaired) if repaired else float('nan'):.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
