"""Translate + verify latency as a user meets it: ``xpiler translate FILE --to T`` in a fresh process per file,
the wall time of the whole command and its manifest's split by phase (passes, compile, tests).

    python benchmarks/bench_latency.py [--to hip --to cpu] [--set suite --set examples] [--json OUT]

Each file is translated three times: first with an empty cache (``XPILER_CACHE_DIR`` pointed at a new folder: the
first use of the tool on a machine, precompiled runtime headers included), then again with that cache warm (an
edit-and-retranslate loop hits it for the compiles and tests of unchanged text), then as a new file on a machine
that has translated before (a fresh cache holding only the runtime artefacts another file's translation left:
precompiled headers, the engine library). Prints, per direction and
cache state, the median and 90th percentile of the command's wall time (process start included) and of each
phase (translate: parse, passes and writing; compile; tests), and the machine's load before and after (a figure
taken on a busy machine is flagged). ``--report JSON`` prints the table of a saved run.

``--baseline TREE`` (a work tree of another commit: ``git worktree add /tmp/base COMMIT``) runs that tree's tool
beside this one, interleaved file by file and state by state (which goes first alternates), each with its own
caches: the table gains a row per tree and the ratio of the medians (baseline / current), so a before → after
figure comes from one run on one machine in one load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SETS = {"suite": HERE / "suite", "examples": ROOT / "examples"}
PHASES = ("passes", "compile", "tests", "total")
# cold: the first translation on a machine; warm: the same file again; new file: another file on a machine that
# has translated before (its runtime artefacts kept, nothing of this file's text cached)
STATES = ("cold", "warm", "new file")
MACHINE_FOLDERS = ("pch", "engine")


def sources(name: str) -> list[Path]:
    folder = SETS[name]
    return sorted(p for p in folder.rglob("*") if p.suffix in (".cu",) and p.is_file())


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def translate_once(source: Path, target: str, cache: Path, out_dir: Path, tree: Path = ROOT) -> dict[str, float] | str:
    out = out_dir / (source.stem + (".hip" if target == "hip" else ".cpp"))
    # the tree's own package first on the path: a baseline tree runs its own tool, not the installed one
    env = {**os.environ, "XPILER_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    started = time.perf_counter()
    # run in the tree: `python -m` puts the working folder first on the path, ahead of PYTHONPATH
    done = subprocess.run([sys.executable, "-m", "xpiler_core", "translate", str(source), "--to", target, "-o",
                           str(out), "--json"], capture_output=True, text=True, env=env, timeout=900, check=False,
                          cwd=tree)
    wall = time.perf_counter() - started
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        return (done.stderr.strip().splitlines() or ["no output"])[-1][:120]
    manifest_path = out.parent / ".xpiler" / (out.name + ".json")
    timings = json.loads(manifest_path.read_text())["timings"] if manifest_path.exists() else {}
    row = {phase: float(timings.get(phase, 0.0)) for phase in PHASES}
    # what is neither compiling nor testing: parse, passes, writing (not every plan times its passes apart);
    # "checks" is the compile-and-test phase's own wall time (the two run side by side since 9be1c91)
    checks = float(timings["checks"]) if "checks" in timings else row["compile"] + row["tests"]
    row["translate"] = max(0.0, row["total"] - checks)
    row["wall"] = wall
    row["status"] = result.get("status", "?")
    return row


def table(rows: list[dict[str, object]], targets: list[str], load_before: float, load_after: float) -> None:
    cores = os.cpu_count() or 1
    busy = max(load_before, load_after) > cores
    print(f"load average {load_before:.2f} before, {load_after:.2f} after, {cores} cores"
          + (" — BUSY MACHINE: figures flagged, not results" if busy else ""))
    print("| direction | cache | files | wall med / p90 (s) | translate med / p90 | compile med / p90 | "
          "tests med / p90 |")
    print("|---|---|---|---|---|---|---|")
    trees = sorted({str(r.get("tree", "current")) for r in rows}, key=lambda t: t != "baseline")
    for target in targets:
        for state in STATES:
            medians: dict[str, float] = {}
            for tree in trees:
                ok = [r for r in rows if r["to"] == target and r["cache"] == state and "error" not in r
                      and r.get("tree", "current") == tree]
                if not ok:
                    continue

                def col(phase: str, subset: list[dict[str, object]] = ok) -> str:
                    values = [float(str(r[phase])) for r in subset]
                    return f"{statistics.median(values):.2f} / {p90(values):.2f}"

                medians[tree] = statistics.median(float(str(r["wall"])) for r in ok)
                label = target if len(trees) == 1 else f"{target} ({tree})"
                print(f"| {label} | {state} | {len(ok)} | {col('wall')} | {col('translate')} | {col('compile')} | "
                      f"{col('tests')} |")
            if len(medians) == 2 and medians.get("current"):
                print(f"| {target} | {state} | | baseline / current wall median: "
                      f"{medians['baseline'] / medians['current']:.2f}x | | | |")
    for r in rows:
        if "error" in r:
            print(f"error: {r['file']} → {r['to']} ({r['cache']}): {r['error']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", action="append", choices=["hip", "cpu"], help="directions (default: both)")
    parser.add_argument("--set", action="append", choices=sorted(SETS), help="file sets (default: both)")
    parser.add_argument("--json", type=Path, help="also write every row here")
    parser.add_argument("--report", type=Path, help="only print the table of an earlier --json run")
    parser.add_argument("--baseline", type=Path, help="a work tree of another commit, run interleaved beside this one")
    parser.add_argument("--state", action="append", choices=STATES,
                        help="cache states to record (default: all; warm alone still runs the file once first)")
    args = parser.parse_args(argv)
    recorded = set(args.state or STATES)
    if args.report:
        saved = json.loads(args.report.read_text())
        for r in saved["rows"]:
            if "error" not in r:
                r.setdefault("translate", max(0.0, r["total"] - r["compile"] - r["tests"]))
        table(saved["rows"], args.to or ["hip", "cpu"], *saved["load"])
        return 0
    load_before = os.getloadavg()[0]
    rows: list[dict[str, object]] = []
    files = [f for name in (args.set or sorted(SETS)) for f in sources(name)]
    trees = {"current": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    machines = {name: Path(tempfile.mkdtemp(prefix=f"xpiler-latency-machine-{name}-")) for name in trees}
    for target in args.to or ["hip", "cpu"]:
        # what the machine keeps after any first translation (precompiled runtime headers, the engine library):
        # made once by translating another file, copied into each "new file" cache
        for name, tree in trees.items():
            with tempfile.TemporaryDirectory(prefix="xpiler-latency-") as tmp:
                translate_once(ROOT / "examples" / "vector_add.cu", target, machines[name], Path(tmp), tree)
        for number, source in enumerate(files):
            order = list(trees) if number % 2 == 0 else list(reversed(trees))
            with tempfile.TemporaryDirectory(prefix="xpiler-latency-") as tmp:
                caches = {name: Path(tmp) / name / "cache" for name in trees}
                for state in STATES:
                    if state not in recorded and not (state == "cold" and "warm" in recorded):
                        continue
                    for name in order:
                        out_dir = Path(tmp) / name / "out"
                        out_dir.mkdir(parents=True, exist_ok=True)
                        if state == "new file":
                            caches[name] = Path(tmp) / name / "new-file-cache"
                            for folder in MACHINE_FOLDERS:
                                if (machines[name] / folder).is_dir():
                                    shutil.copytree(machines[name] / folder, caches[name] / folder)
                        got = translate_once(source, target, caches[name], out_dir, trees[name])
                        if state not in recorded:
                            continue
                        row: dict[str, object] = {"file": str(source.relative_to(ROOT)), "to": target, "cache": state,
                                                  "tree": name}
                        if isinstance(got, str):
                            row["error"] = got
                        else:
                            row.update(got)
                        rows.append(row)
                        print(json.dumps(row), file=sys.stderr, flush=True)
    for machine in machines.values():
        shutil.rmtree(machine, ignore_errors=True)
    load_after = os.getloadavg()[0]
    table(rows, args.to or ["hip", "cpu"], load_before, load_after)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load": [load_before, load_after]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
