"""What the portable CPU tier costs against the structural tier, on kernels where both exist.

    python benchmarks/bench_tiers.py [--op group/op ...] [--threads N]

For each suite operator: ``xpiler translate --to cpu`` twice with the operator's spec, once as usual (the
structural tier) and once with ``--tier portable`` (the source on the SIMT header set); each output must be
verified by the tool, then both are built the same way (``g++ -O2 -fopenmp -std=c++17 -shared -fPIC``) and
timed on the spec's largest case by the tuner's worker (``tune/measure.py``), one library after the other. The table gives
each tier's median latency and the portable tier's slowdown (portable / structural).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from xpiler_core.tune.measure import MeasureError, largest_case, measure_libraries
from xpiler_core.verify.spec import load_spec

SUITE = Path(__file__).resolve().parent / "suite"
DEFAULT_OPS = ("elementwise/add", "activation/gelu", "normalization/softmax", "normalization/layernorm",
               "layout/transpose", "reduction/sum")


def translate(source: Path, spec: Path, out: Path, tier: str) -> dict[str, object]:
    command = [sys.executable, "-m", "xpiler_core", "translate", str(source), "--to", "cpu", "-o", str(out),
               "--spec", str(spec), "--tier", tier, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    try:
        result: dict[str, object] = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"status": "error", "reason": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return result


def build(source: Path, library: Path) -> str:
    done = subprocess.run(["g++", "-O2", "-fopenmp", "-std=c++17", "-shared", "-fPIC", "-fno-strict-aliasing",
                           f"-I{source.parent}", str(source), "-o", str(library)], capture_output=True, text=True,
                          timeout=600)
    return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["g++ failed"])[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", help="suite operator group/op (repeatable; default: six)")
    parser.add_argument("--threads", type=int, default=None, help="OpenMP threads (default: all cores)")
    args = parser.parse_args()
    print("| operator | case | structural | portable | portable / structural |")
    print("|---|---|---|---|---|")
    slowdowns: list[float] = []
    for op in args.op or DEFAULT_OPS:
        spec_path = SUITE / op / "spec.toml"
        spec = load_spec(spec_path)
        source = spec_path.parent / spec.source
        with tempfile.TemporaryDirectory(prefix="xpiler-tiers-") as tmp:
            libraries: list[Path] = []
            problem = ""
            for tier in ("auto", "portable"):
                out = Path(tmp) / tier / f"{source.stem}.cpp"
                result = translate(source, spec_path, out, tier)
                manifest = result.get("manifest_data")
                facts = manifest.get("facts") if isinstance(manifest, dict) else None
                tier_got = facts.get("tier") if isinstance(facts, dict) else None
                if result.get("status") != "verified" or tier_got != ("structural" if tier == "auto" else "portable"):
                    problem = f"{tier}: {result.get('status')} ({tier_got}) {str(result.get('reason', ''))[:80]}"
                    break
                library = Path(tmp) / f"lib{tier}.so"
                problem = build(out, library)
                if problem:
                    break
                libraries.append(library)
            if problem:
                print(f"| {op} | - | - | - | {problem} |", flush=True)
                continue
            case = largest_case(spec)
            # a bare kernel's portable output is called through its launcher (xp_launch_<kernel>), the structural
            # output through the kernel's name: two entries, so each library is timed in its own worker run
            portable_entry = f"xp_launch_{spec.entry}" if spec.kind == "kernel" else spec.entry
            try:
                (structural,) = measure_libraries(libraries[:1], spec, spec.entry, case, Path(tmp) / "t1",
                                                  threads=args.threads)
                (portable,) = measure_libraries(libraries[1:], spec, portable_entry, case, Path(tmp) / "t2",
                                                threads=args.threads)
            except MeasureError as exc:
                print(f"| {op} | - | - | - | timing failed: {str(exc)[:80]} |", flush=True)
                continue
            ratio = portable.median_s / structural.median_s
            slowdowns.append(ratio)
            values = ", ".join(f"{k}={v}" for k, v in spec.cases[case].items())
            print(f"| {op} | {values} | {structural.median_s * 1e6:.1f} µs | {portable.median_s * 1e6:.1f} µs | "
                  f"{ratio:.1f}× |", flush=True)
    if slowdowns:
        geomean = math.exp(sum(math.log(r) for r in slowdowns) / len(slowdowns))
        print(f"\nportable / structural, geometric mean over {len(slowdowns)} operators: {geomean:.1f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
