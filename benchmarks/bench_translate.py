"""CUDA → HIP over the benchmark suite: compile accuracy, compute accuracy, HIP → CUDA round trip, timing.

    python benchmarks/bench_translate.py                      # whole suite
    python benchmarks/bench_translate.py --group warp64       # one group
    python benchmarks/bench_translate.py --json out.json      # also write every row as JSON

For every ``benchmarks/suite/**/spec.toml``:
- CUDA → HIP with the full pipeline: hipcc compile verdict (compile accuracy) and the translation run on the
  SIMT-on-CPU runtime at warp size 64 against the spec's numpy reference (compute accuracy);
- round trip: that HIP output translated back to CUDA, compiled with nvcc and run at warp size 32 against
  the same reference;
- for the warp-64 hazard group, also a rename-only port (the ``api_map`` pass alone) at warp size 64.
Times are wall-clock seconds of ``translate`` (passes + compile + tests) per kernel; the median is printed.
Compiles are cached (diskcache): point ``XPILER_CACHE_DIR`` at an empty directory for cold-cache numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, max_error, translate
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parent / "suite"


def run_one(spec_path: Path, roundtrip: bool, rename_only: bool) -> dict[str, Any]:
    spec = load_spec(str(spec_path))
    source_path = Path(spec.source)
    text = source_path.read_text(encoding="utf-8")
    row: dict[str, Any] = {"kernel": spec.name, "group": spec.group or spec_path.parent.parent.name,
                           "cases": len(spec.cases)}
    started = time.perf_counter()
    result = translate(text, str(source_path), TranslateOptions(Dialect.HIP, spec_path=str(spec_path)))
    row["seconds"] = round(time.perf_counter() - started, 3)
    row["hip_compile"] = bool(result.compile is not None and result.compile.ok)
    row["hip_status"] = result.status
    row["hip_cases_passed"] = sum(c.passed for c in result.tests.cases) if result.tests else 0
    row["hip_max_abs_err"] = max_error(result.tests)
    row["passes"] = [r["name"] for r in result.passes_applied if r["changed"]]
    row["unresolved"] = [u.reason for u in result.unresolved]
    if result.status != "verified":
        row["hip_reason"] = result.summary.splitlines()[-1]
    if roundtrip:
        with tempfile.TemporaryDirectory(prefix="xpiler-rt-") as tmp:
            hip_path = Path(tmp) / (source_path.stem + ".hip")
            hip_path.write_text(result.output_text, encoding="utf-8")
            back = translate(result.output_text, str(hip_path), TranslateOptions(Dialect.CUDA, spec_path=str(spec_path)))
        row["rt_compile"] = bool(back.compile is not None and back.compile.ok)
        row["rt_status"] = back.status
        row["rt_max_abs_err"] = max_error(back.tests)
        if back.status != "verified":
            row["rt_reason"] = back.summary.splitlines()[-1]
    if rename_only:
        plain = translate(text, str(source_path),
                          TranslateOptions(Dialect.HIP, spec_path=str(spec_path), passes=["api_map"]))
        row["rename_compile"] = bool(plain.compile is not None and plain.compile.ok)
        row["rename_status"] = plain.status
        row["rename_cases_failed"] = sum(not c.passed for c in plain.tests.cases) if plain.tests else None
        row["rename_mismatches"] = sum(c.mismatches for c in plain.tests.cases) if plain.tests else None
    return row


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100.0 * n / d:.0f} %)" if d else "0/0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default=str(SUITE))
    parser.add_argument("--group", help="only this group (directory under the suite)")
    parser.add_argument("--no-roundtrip", action="store_true")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    specs = sorted(Path(args.suite).glob("**/spec.toml"))
    if args.group:
        specs = [s for s in specs if s.parent.parent.name == args.group]
    rows: list[dict[str, Any]] = []
    for spec_path in specs:
        is_hazard = spec_path.parent.parent.name == "warp64"
        try:
            row = run_one(spec_path, not args.no_roundtrip, is_hazard)
        except Exception as exc:  # noqa: BLE001 - a benchmark row records the failure and goes on
            row = {"kernel": spec_path.parent.name, "group": spec_path.parent.parent.name, "error": repr(exc)}
        rows.append(row)
        print(json.dumps(row, default=str), file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str), encoding="utf-8")

    print(f"\n{'kernel':<24} {'group':<14} {'hipcc':<6} {'HIP@64':<22} {'round trip nvcc/@32':<24} {'s':>6}")
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']:<24} {r['group']:<14} ERROR {r['error'][:60]}")
            continue
        rt = f"{'ok' if r.get('rt_compile') else 'FAIL'}/{r.get('rt_status', '-')}" if "rt_status" in r else "-"
        print(f"{r['kernel']:<24} {r['group']:<14} {'ok' if r['hip_compile'] else 'FAIL':<6} "
              f"{r['hip_status']:<22} {rt:<24} {r['seconds']:>6.2f}")
    ok_rows = [r for r in rows if "error" not in r]
    n = len(rows)
    print(f"\nCUDA → HIP compile accuracy (hipcc):        {pct(sum(r['hip_compile'] for r in ok_rows), n)}")
    print(f"CUDA → HIP compute accuracy (runtime @64):   {pct(sum(r['hip_status'] == 'verified' for r in ok_rows), n)}")
    if not args.no_roundtrip:
        print(f"HIP → CUDA round trip compile (nvcc):       {pct(sum(bool(r.get('rt_compile')) for r in ok_rows), n)}")
        print(f"HIP → CUDA round trip compute (runtime @32): {pct(sum(r.get('rt_status') == 'verified' for r in ok_rows), n)}")
    times = [r["seconds"] for r in ok_rows]
    if times:
        print(f"translate + verify time per kernel: median {statistics.median(times):.2f} s, "
              f"min {min(times):.2f} s, max {max(times):.2f} s (n = {len(times)})")
    hazards = [r for r in ok_rows if "rename_status" in r]
    if hazards:
        print(f"\nwarp-64 hazard set (runtime at warp size 64, vs numpy)\n{'kernel':<22} {'rename-only (api_map)':<36} "
              f"{'full pipeline':<16}")
        for r in hazards:
            plain = (f"{r['rename_status']}, {r['rename_cases_failed']}/{r['cases']} cases fail, "
                     f"{r['rename_mismatches']} wrong")
            print(f"{r['kernel']:<22} {plain:<36} {r['hip_status']:<16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
