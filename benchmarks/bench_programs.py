"""Real CUDA programs through xpiler, as a user runs it: the table of verified / compiled-not-executed /
unresolved / error per direction, with the reason of every program that did not verify.

    python benchmarks/corpus/build_corpus.py CORPUS --mirrors DIR     # once: fetch the programs
    python benchmarks/bench_programs.py CORPUS [--to hip --to cpu] [--only ID ...] [--timeout S] [--json OUT]

Each program is copied to a scratch folder (the corpus is never changed), its ``shrink`` edits applied (a
hard-coded problem size made small enough for the CPU runtime; the table marks them), then
``xpiler translate MAIN --to T -I … -D … --std … --arg …`` runs with the program's own build flags and small
run arguments. The tool's JSON result gives the status; a whole-program run says whether the source itself
runs on our runtime ("source runs"), which is the denominator of the goals. A traceback or a time-out of the
tool is counted apart: they are bugs.

``--ports`` compares each HIP output with the human HIP port the suite ships (``CORPUS/ports/<id>/hip``): does
the port compile with hipcc, and which HIP constructs (API names, warp intrinsics, warpSize) one uses and
the other does not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "corpus" / "programs.toml"
STATUSES = ("verified", "compiled-not-executed", "unresolved", "error")


@dataclass
class Row:
    program: str
    target: str
    status: str
    reason: str = ""
    source_runs: bool | None = None  # the whole-program run of the source on our runtime (None: not run)
    compiled: bool | None = None  # the target compiler's verdict on the output
    seconds: float = 0.0
    shrunk: bool = False
    traceback: bool = False
    timed_out: bool = False
    units: int = 1
    features: list[str] = field(default_factory=list)
    constructs: list[str] = field(default_factory=list)  # HIP constructs the output uses (HIP rows)
    tier: str = ""  # CPU rows: structural or portable
    structural_refusal: str = ""  # CPU rows on the portable tier: why the structural tier was not taken


# What a HIP port is made of, as far as comparing two ports goes: API calls/types, warp intrinsics, warpSize.
HIP_CONSTRUCT = re.compile(r"\b(hip[A-Z]\w*|HIP_\w+|__shfl\w*|__ballot\w*|__any\w*|__all\w*|__activemask|"
                           r"__syncwarp|__lane_id|warpSize|__popcll|__popc|__ffsll|__ffs|cooperative_groups|"
                           r"tiled_partition|__launch_bounds__|atomic(?:Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)(?:_system|_block)?)\b")
SOURCE_SUFFIXES = (".cu", ".hip", ".cpp", ".cc", ".cuh", ".h", ".hpp")


def constructs_of(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*"):
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            found |= set(HIP_CONSTRUCT.findall(path.read_text(encoding="utf-8", errors="replace")))
    return found


def port_compiles(port: Path, includes: list[Path], timeout: float) -> tuple[bool, str]:
    """hipcc -c on every source of a human HIP port (its own folder and the program's on the include path)."""
    units = [p for p in port.rglob("*") if p.suffix in (".cu", ".hip", ".cpp", ".cc") and p.is_file()]
    if not units:
        return False, "no source files"
    env = dict(os.environ, HIP_PLATFORM="amd")
    with tempfile.TemporaryDirectory(prefix="xpiler-port-") as tmp:
        for unit in units:
            command = ["hipcc", "--offload-arch=gfx90a", "-std=c++17", "-c", "-x", "hip", f"-I{unit.parent}",
                       f"-I{port}", *(f"-I{i}" for i in includes), str(unit), "-o", str(Path(tmp) / (unit.stem + ".o"))]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                return False, f"{unit.name}: hipcc did not finish"
            if done.returncode != 0:
                errors = [line for line in done.stderr.splitlines() if "error" in line]
                return False, f"{unit.name}: {(errors or ['exit status ' + str(done.returncode)])[0][:160]}"
    return True, ""


def port_table(rows: list[Row], corpus: Path, timeout: float) -> str:
    programs = {str(p["id"]): p for p in tomllib.loads(PROGRAMS.read_text(encoding="utf-8"))["program"]}
    lines = ["| program | ours | human port compiles | only in ours | only in the human port |", "|---|---|---|---|---|"]
    compiled = total = 0
    for row in rows:
        port = corpus / "ports" / row.program / "hip"
        if row.target != "hip" or not port.is_dir():
            continue
        total += 1
        own = corpus / "programs" / row.program
        includes = [own, *(own / str(d) for d in programs.get(row.program, {}).get("include_dirs", []))]
        ok, why = port_compiles(port, includes, timeout)
        compiled += ok
        theirs, ours = constructs_of(port), set(row.constructs)
        lines.append(f"| {row.program} | {row.status} | {'yes' if ok else 'no: ' + why} | "
                     f"{', '.join(sorted(ours - theirs)[:8])} | {', '.join(sorted(theirs - ours)[:8])} |")
    lines.append(f"\nhuman HIP ports: {total}, compile with hipcc: {compiled}")
    return "\n".join(lines)


def prepare(corpus: Path, program: dict[str, object], work: Path) -> tuple[Path, bool]:
    source = corpus / "programs" / str(program["id"])
    shutil.copytree(source, work, dirs_exist_ok=True)
    main = work / str(program["main"])
    shrunk = False
    for old, new in program.get("shrink", []):  # type: ignore[attr-defined]
        text = main.read_text(encoding="utf-8", errors="replace")
        if old in text:
            main.write_text(text.replace(old, new), encoding="utf-8")
            shrunk = True
    return main, shrunk


def project_flags(program: dict[str, object], main: Path, work: Path) -> list[str]:
    """The program's own build flags, run arguments and other units, as xpiler's command line takes them."""
    command: list[str] = []
    for folder in program.get("include_dirs", []):  # type: ignore[attr-defined]
        command += ["-I", str(work / str(folder))]
    for define in program.get("defines", []):  # type: ignore[attr-defined]
        command += ["-D", str(define)]
    if program.get("std"):
        command += ["--std", str(program["std"])]
    for arg in program.get("args", []):  # type: ignore[attr-defined]
        command += [f"--arg={arg}"]
    units = [str(u) for u in program.get("units", [])]  # type: ignore[attr-defined]
    for unit in units[1:]:
        command += ["--unit", str(work / unit)]
    if main.suffix not in (".cu", ".cuh") and any(u.endswith(".cu") for u in units):
        command += ["--from", "cuda"]  # a C++ main: the program's GPU code is in its other units
    return command


def run_into(row: Row, command: list[str], work: Path, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run one xpiler command for ``row``: its time and whether it crashed go into the row (None: it timed out)."""
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=work)
    except subprocess.TimeoutExpired:
        row.seconds, row.timed_out, row.reason = time.monotonic() - started, True, f"xpiler did not finish in {timeout:.0f} s"
        return None
    row.seconds = time.monotonic() - started
    row.traceback = "Traceback (most recent call last)" in done.stderr
    return done


def probe_source(program: dict[str, object], main: Path, work: Path, timeout: float) -> Row:
    """Whether the source itself runs on the runtime (``xpiler run``), for programs no direction ran."""
    command = [sys.executable, "-m", "xpiler_core", "run", str(main), *project_flags(program, main, work)]
    row = Row(str(program["id"]), "source", "error")
    done = run_into(row, command, work, timeout)
    if done is None:
        return row
    last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
    row.source_runs = done.returncode == 0 and not row.traceback
    row.status = "runs" if row.source_runs else "does not run"
    row.reason = last[:300]
    return row


def translate(program: dict[str, object], main: Path, work: Path, target: str, timeout: float,
              reference: str = "runtime") -> Row:
    out = work / "xpiler-out"
    command = [sys.executable, "-m", "xpiler_core", "translate", str(main), "--to", target, "-o",
               str(out / (main.stem + (".hip" if target == "hip" else ".cpp"))), "--json", "--timeout", "120"]
    command += project_flags(program, main, work)
    if reference != "runtime":
        command += ["--reference", reference]
    row = Row(str(program["id"]), target, "error", units=len(program.get("units", [1])),  # type: ignore[arg-type]
              features=list(program.get("features", [])))  # type: ignore[call-overload]
    done = run_into(row, command, work, timeout)
    if done is None:
        return row
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        row.reason = (lines[-1] if lines else f"exit status {done.returncode}")[:300]
        return row
    manifest = result.get("manifest_data") or {}
    outcome = manifest.get("outcome") or {}
    row.status = str(result.get("status"))
    row.reason = str(result.get("reason") or "")[:300]
    program_run = outcome.get("program") or (manifest.get("facts") or {}).get("program")
    if program_run:
        row.source_runs = not program_run.get("source_failed", False)
    facts = manifest.get("facts") or {}
    row.tier = str(facts.get("tier") or "")
    row.structural_refusal = str(facts.get("structural_refusal") or "")[:200]
    compile_verdict = outcome.get("compile")
    row.compiled = None if compile_verdict is None else bool(compile_verdict.get("ok"))
    if target == "hip" and out.is_dir():
        row.constructs = sorted(constructs_of(out))
    return row


def source_runs_by_program(rows: list[Row]) -> dict[str, bool | None]:
    """Whether each program's source runs on the runtime, from any direction's whole-program run: the source
    run is the same in every direction, but a direction whose output did not build never got to run it."""
    known: dict[str, bool | None] = {}
    for row in rows:
        if row.source_runs is not None and known.get(row.program) is not True:
            known[row.program] = row.source_runs
        known.setdefault(row.program, None)
    return known


def table(rows: list[Row], targets: list[str]) -> str:
    source_runs = source_runs_by_program(rows)
    lines = ["| direction | programs | source runs | verified | compiled, not executed | unresolved | error | "
             "verified / source runs | output compiles | tracebacks | time-outs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for target in targets:
        mine = [r for r in rows if r.target == target]
        counts = Counter(r.status for r in mine)
        runs = sum(1 for r in mine if source_runs[r.program])
        verified = counts.get("verified", 0)
        # the goal's ratio: of the programs whose source runs, how many verified (a program verified by its
        # kernels' tests without a whole-program run is counted in `verified`, not here)
        verified_runs = sum(1 for r in mine if r.status == "verified" and source_runs[r.program])
        compiled = sum(1 for r in mine if r.compiled)
        rate = f"{verified_runs}/{runs} = {100 * verified_runs / runs:.0f} %" if runs else "-"
        lines.append(f"| cuda->{target} | {len(mine)} | {runs} | {verified} | {counts.get('compiled-not-executed', 0)} | "
                     f"{counts.get('unresolved', 0)} | {counts.get('error', 0)} | {rate} | {compiled}/{len(mine)} | "
                     f"{sum(r.traceback for r in mine)} | {sum(r.timed_out for r in mine)} |")
    return "\n".join(lines)


def refusal_class(reason: str) -> str:
    """A refusal without its file, line and names, so that refusals of one kind count together."""
    reason = re.sub(r"\([^()]*:\d+:\d+\)", "", reason)
    reason = re.sub(r"its line \d+: ", "", reason)
    reason = re.sub(r"'[^']*'", "'…'", reason)
    return reason.strip()[:110] or "?"


def report(rows: list[Row], targets: list[str], corpus: Path, ports: bool) -> None:
    print()
    print(table(rows, targets))
    print()
    source_runs = source_runs_by_program(rows)
    for target in targets:
        for row in rows:
            if row.target == target and row.status != "verified":
                print(f"- cuda->{target} {row.program} [{row.status}]"
                      + (" (source runs)" if source_runs[row.program] else "") + f": {row.reason}")
    cpu_rows = [r for r in rows if r.target == "cpu" and r.status == "verified"]
    if cpu_rows:
        tiers = Counter(r.tier or "?" for r in cpu_rows)
        print("\nCPU tiers of the verified programs: " + ", ".join(f"{k} {v}" for k, v in sorted(tiers.items())))
        reasons = Counter(refusal_class(r.structural_refusal) for r in rows
                          if r.target == "cpu" and r.tier == "portable")
        for reason, count in reasons.most_common():
            print(f"  {count:3d}  structural tier refused: {reason}")
    if ports and "hip" in targets:
        print()
        print(port_table(rows, corpus, 600.0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="the folder build_corpus.py wrote")
    parser.add_argument("--to", action="append", choices=["hip", "cpu"], help="directions (default: both)")
    parser.add_argument("--only", action="append", default=[], help="program ids to run (default: all)")
    parser.add_argument("--timeout", type=float, default=900.0, help="limit of one xpiler run (seconds)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--probe-sources", action="store_true",
                        help="run the source (xpiler run) of a program no direction ran, for the denominator")
    parser.add_argument("--ports", action="store_true", help="compare HIP outputs with the suites' human HIP ports")
    parser.add_argument("--reference", choices=["runtime", "gpu"], default="runtime",
                        help="where the sources run as the reference (gpu: this machine's CUDA GPU, built with nvcc)")
    parser.add_argument("--jobs", type=int, default=1, help="programs translated at once (default 1)")
    parser.add_argument("--report", type=Path, nargs="+",
                        help="print the tables of saved --json runs instead (later files' rows replace earlier ones)")
    args = parser.parse_args()
    targets = args.to or ["hip", "cpu"]
    programs = tomllib.loads(PROGRAMS.read_text(encoding="utf-8"))["program"]
    if args.only:
        programs = [p for p in programs if p["id"] in args.only]
    if args.report:
        # a later file's row replaces an earlier one of the same program and direction (a partial rerun)
        latest = {(row["program"], row["target"]): Row(**row) for path in args.report
                  for row in json.loads(path.read_text(encoding="utf-8"))}
        saved = list(latest.values())
        if args.probe_sources:  # the source runs of programs no saved direction ran
            unknown = {r.program for r in saved} - {r.program for r in saved if r.source_runs is not None}
            for program in programs:
                if program["id"] in unknown:
                    with tempfile.TemporaryDirectory(prefix="xpiler-corpus-") as tmp:
                        work = Path(tmp) / str(program["id"])
                        main_file, _ = prepare(args.corpus, program, work)
                        saved.append(probe_source(program, main_file, work, args.timeout))
                    print(f"{saved[-1].program:34s} (source: {saved[-1].status}) {saved[-1].reason}", flush=True)
            if args.json:
                args.json.write_text(json.dumps([asdict(r) for r in saved], indent=1))
        report(saved, [t for t in targets if any(r.target == t for r in saved)], args.corpus, args.ports)
        return 0
    rows: list[Row] = []

    def one(program: dict[str, object], target: str) -> Row:
        with tempfile.TemporaryDirectory(prefix="xpiler-corpus-") as tmp:
            work = Path(tmp) / str(program["id"])
            main_file, shrunk = prepare(args.corpus, program, work)
            row = translate(program, main_file, work, target, args.timeout, args.reference)
            row.shrunk = shrunk
        return row

    def probe(program: dict[str, object]) -> Row:
        with tempfile.TemporaryDirectory(prefix="xpiler-corpus-") as tmp:
            work = Path(tmp) / str(program["id"])
            main_file, _ = prepare(args.corpus, program, work)
            return probe_source(program, main_file, work, args.timeout)

    def record(row: Row, line: str) -> None:
        rows.append(row)
        print(line, flush=True)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))

    def program_rows(program: dict[str, object]) -> list[Row]:
        mine = [one(program, target) for target in targets]
        if args.probe_sources and all(r.source_runs is None for r in mine):
            mine.append(probe(program))
        return mine

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:  # each job is its own xpiler process
        for mine in pool.map(program_rows, programs):
            for row in mine:
                if row.target == "source":
                    record(row, f"{row.program:34s} (source: {row.status}) {row.reason}")
                    continue
                runs = {True: "source runs", False: "source does not run", None: "no program run"}[row.source_runs]
                record(row, f"{row.program:34s} {row.target:4s} {row.status:22s} {row.seconds:6.1f} s  {runs}"
                       + (f"  — {row.reason}" if row.status != "verified" else ""))
    report(rows, targets, args.corpus, args.ports)
    return 0


if __name__ == "__main__":
    sys.exit(main())
