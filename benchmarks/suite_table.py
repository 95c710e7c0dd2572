"""Print the benchmark suite table: operators x shapes, runtime pass count vs numpy, nvcc compile count.

    python benchmarks/suite_table.py              # everything (compiles are cached; runs take a while)
    python benchmarks/suite_table.py --no-run     # nvcc verdicts and shapes only
    python benchmarks/suite_table.py --markdown   # the README's operator table (no compiling, no running)

Every number printed is measured here: nvcc's exit status per source, and the harness's per-case verdict
against the numpy reference on the SIMT-on-CPU runtime at warp size 32 (hazard set: also at 64).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_catalog import SuiteEntry, hazard_entries, nvcc_verdicts, operator_entries  # noqa: E402


def _shapes(entry: SuiteEntry) -> str:
    return "; ".join(entry.case_label(c) for c in entry.cases)


def _run(entry: SuiteEntry, warp_size: int) -> tuple[int, int, str]:
    """(cases passed, cases, note) for the entry on the runtime at this warp size."""
    from xpiler_core.verify.harness import run_spec
    from xpiler_core.verify.spec import load_spec

    try:
        report: Any = run_spec(load_spec(entry.spec_path), warp_size=warp_size, seed=0)
    except Exception as exc:  # the table reports what happened instead of stopping
        return 0, len(entry.cases), f"harness raised {type(exc).__name__}: {exc}"[:120]
    if report.build_error:
        return 0, len(entry.cases), "build error: " + report.build_error.strip().splitlines()[0][:100]
    passed = sum(1 for c in report.cases if c.passed)
    notes = [c.error for c in report.cases if c.error]
    return passed, len(report.cases), (notes[0][:100] if notes else "")


def markdown() -> str:
    rows = ["| group | op | style features | shapes |", "|---|---|---|---|"]
    for entry in operator_entries() + hazard_entries():
        rows.append(f"| {entry.group} | {entry.name} | {', '.join(entry.features)} | {_shapes(entry)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-run", action="store_true", help="skip the runtime; nvcc and shapes only")
    parser.add_argument("--markdown", action="store_true", help="print the README operator table and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0

    operators, hazards = operator_entries(), hazard_entries()
    start = time.perf_counter()
    verdicts = nvcc_verdicts([e.source_path for e in operators + hazards], jobs=2)
    compile_s = time.perf_counter() - start

    runs: dict[tuple[str, int], tuple[int, int, str]] = {}
    run_s = 0.0
    if not args.no_run:
        # Each case runs in its own child process (mostly start-up time): two runs in flight, the house -j2.
        jobs = [(e, 32) for e in operators] + [(e, w) for e in hazards for w in (32, 64)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda job: _run(*job), jobs))
        run_s = time.perf_counter() - t0
        runs = {(e.test_id, w): r for (e, w), r in zip(jobs, results, strict=True)}

    header = f"{'group':<14} {'op':<20} {'cases':>5} {'nvcc':>5} {'rt@32':>6}  shapes / notes"
    print(header)
    print("-" * len(header))
    totals = {"cases": 0, "passed": 0, "compiled": 0}
    for entry in operators:
        ok = verdicts[entry.source_path].ok
        totals["compiled"] += ok
        totals["cases"] += len(entry.cases)
        run_col, note = "-", ""
        if not args.no_run:
            passed, total, note = runs[(entry.test_id, 32)]
            totals["passed"] += passed
            run_col = f"{passed}/{total}"
        tail = _shapes(entry) + (f"  [{note}]" if note else "")
        print(f"{entry.group:<14} {entry.name:<20} {len(entry.cases):>5} {'ok' if ok else 'FAIL':>5} {run_col:>6}  {tail}")
    groups = len({e.group for e in operators})
    print("-" * len(header))
    print(
        f"operators: {len(operators)} in {groups} groups; shapes: {totals['cases']}; "
        f"nvcc -arch=sm_80 compiled: {totals['compiled']}/{len(operators)}"
        + ("" if args.no_run else f"; runtime @warp32 vs numpy: {totals['passed']}/{totals['cases']} cases")
    )

    print()
    header = f"{'warp-64 hazard':<22} {'cases':>5} {'nvcc':>5} {'rt@32':>6} {'rt@64':>6}  verdict"
    print(header)
    print("-" * len(header))
    caught = 0
    for entry in hazards:
        ok = verdicts[entry.source_path].ok
        if args.no_run:
            print(f"{entry.name:<22} {len(entry.cases):>5} {'ok' if ok else 'FAIL':>5} {'-':>6} {'-':>6}")
            continue
        p32, n32, _ = runs[(entry.test_id, 32)]
        p64, n64, note64 = runs[(entry.test_id, 64)]
        is_caught = p32 == n32 and p64 < n64
        caught += is_caught
        verdict = "caught (right@32, wrong@64)" if is_caught else "NOT CAUGHT"
        if note64:
            verdict += f" [{note64}]"
        print(f"{entry.name:<22} {len(entry.cases):>5} {'ok' if ok else 'FAIL':>5} {f'{p32}/{n32}':>6} {f'{p64}/{n64}':>6}  {verdict}")
    print("-" * len(header))
    if not args.no_run:
        print(f"hazards caught: {caught}/{len(hazards)}")
    print(f"time: nvcc {compile_s:.1f} s (cached verdicts are reused), runtime {run_s:.1f} s (2 runs in flight)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
