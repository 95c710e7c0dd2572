"""The corpus programs' sources on a real CUDA GPU against the same sources on our SIMT runtime: how often the
runtime, which judges every translation, agrees with the hardware it stands in for.

    python benchmarks/bench_gpu_truth.py pack CORPUS PACK              # here: shrunk copies + manifest.json
    python benchmarks/bench_gpu_truth.py gpu PACK --json GPU.json      # on a machine with a CUDA GPU: nvcc + run
    python benchmarks/bench_gpu_truth.py compare PACK GPU.json [--json OUT] [--only ID ...]   # here: the runtime

``pack`` copies each program of ``corpus/programs.toml`` (as ``build_corpus.py`` wrote it to CORPUS) with the
shrink edits ``bench_programs.py`` applies, so both sides run the same inputs. ``gpu`` builds each program with
plain nvcc as its own build would (its units, include folders, macros, standard, extra flags and libraries; no
xpiler code involved) and runs it with its corpus arguments. ``compare`` runs the same source on the runtime
(``xpiler run``) and judges the runtime's run against the GPU's with the verifier's own comparison (exit status,
the program's PASS/FAIL verdict, then its output lines within tolerance, timing lines ignored). The table counts
programs whose GPU run succeeded: the runtime agrees, differs (the line), or fails to run what the GPU ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_programs import PROGRAMS, prepare, project_flags  # noqa: E402

OUTPUT_LIMIT = 200_000  # characters of a program's stdout kept
# CUDA 13 removed APIs that many older programs still call; the GPU build includes these spellings of the same
# calls so that such programs run there too (the table counts the programs that needed them)
COMPAT_HEADER = """#pragma once
#include <cuda_runtime.h>
#define cudaThreadSynchronize cudaDeviceSynchronize
#define deviceOverlap asyncEngineCount
#define __shfl(v, l, ...) __shfl_sync(0xffffffffu, v, l, ##__VA_ARGS__)
#define __shfl_up(v, d, ...) __shfl_up_sync(0xffffffffu, v, d, ##__VA_ARGS__)
#define __shfl_down(v, d, ...) __shfl_down_sync(0xffffffffu, v, d, ##__VA_ARGS__)
#define __shfl_xor(v, m, ...) __shfl_xor_sync(0xffffffffu, v, m, ##__VA_ARGS__)
"""


def pack(corpus: Path, out: Path, only: list[str]) -> int:
    programs = tomllib.loads(PROGRAMS.read_text(encoding="utf-8"))["program"]
    manifest = []
    for program in programs:
        if only and program["id"] not in only:
            continue
        if not (corpus / "programs" / str(program["id"])).is_dir():
            print(f"{program['id']}: not in {corpus}", file=sys.stderr)
            continue
        work = out / str(program["id"])
        if work.exists():
            shutil.rmtree(work)
        _, shrunk = prepare(corpus, program, work)
        manifest.append({**program, "shrunk": shrunk})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    print(f"packed {len(manifest)} programs into {out}")
    return 0


def nvcc_command(program: dict[str, object], work: Path, exe: Path, arch: str, compat: Path | None = None) -> list[str]:
    command = ["nvcc", f"-arch={arch}", "-O2", f"-I{work}", *(["-include", str(compat)] if compat else [])]
    for folder in program.get("include_dirs", []):  # type: ignore[attr-defined]
        command.append(f"-I{work / str(folder)}")
    for define in program.get("defines", []):  # type: ignore[attr-defined]
        command.append(f"-D{define}")
    if program.get("std"):
        command.append(f"-std={program['std']}")
    command += [str(f) for f in program.get("extra_flags", [])]  # type: ignore[attr-defined]
    command += [str(work / str(unit)) for unit in program.get("units", [program["main"]])]  # type: ignore[attr-defined]
    command += ["-o", str(exe)]
    command += [f"-l{lib}" for lib in program.get("libraries", []) if lib != "thrust"]  # type: ignore[attr-defined]
    return command


def gpu_one(program: dict[str, object], pack_dir: Path, arch: str, timeout: float) -> dict[str, object]:
    row: dict[str, object] = {"program": program["id"], "built": False}
    with tempfile.TemporaryDirectory(prefix="xpiler-gpu-truth-") as tmp:
        work = Path(tmp) / str(program["id"])
        shutil.copytree(pack_dir / str(program["id"]), work)
        exe = work / "xpiler_truth_prog"
        command = nvcc_command(program, work, exe, arch)
        started = time.monotonic()
        try:
            built = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=work)
            if built.returncode != 0:  # again with the removed APIs' spellings (see COMPAT_HEADER)
                compat = Path(tmp) / "xpiler_cuda13_compat.h"
                compat.write_text(COMPAT_HEADER, encoding="utf-8")
                again = subprocess.run(nvcc_command(program, work, exe, arch, compat), capture_output=True, text=True,
                                       timeout=600, cwd=work)
                if again.returncode == 0:
                    built, row["compat"] = again, True
        except subprocess.TimeoutExpired:
            row["build_log"] = "nvcc did not finish in 600 s"
            return row
        row["build_seconds"] = round(time.monotonic() - started, 2)
        if built.returncode != 0:
            row["build_log"] = built.stderr[-3000:]
            return row
        row["built"] = True
        started = time.monotonic()
        try:
            ran = subprocess.run([str(exe), *[str(a) for a in program.get("args", [])]],  # type: ignore[attr-defined]
                                 capture_output=True, text=True, timeout=timeout, cwd=work, stdin=subprocess.DEVNULL,
                                 errors="replace")
        except subprocess.TimeoutExpired:
            row.update(timed_out=True, seconds=timeout)
            return row
        row.update(exit_code=ran.returncode, stdout=ran.stdout[:OUTPUT_LIMIT], stderr=ran.stderr[-3000:],
                   seconds=round(time.monotonic() - started, 3), timed_out=False)
    return row


def gpu(pack_dir: Path, out: Path, jobs: int, arch: str, timeout: float, only: list[str]) -> int:
    manifest = json.loads((pack_dir / "manifest.json").read_text(encoding="utf-8"))
    if only:
        manifest = [p for p in manifest if p["id"] in only]
    smi = (subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()
           if shutil.which("nvidia-smi") else "no CUDA GPU (nvidia-smi is not on PATH)")
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    rows: list[dict[str, object]] = []

    def save() -> None:
        out.write_text(json.dumps({"device": smi, "nvcc": nvcc, "arch": arch, "rows": rows}, indent=1),
                       encoding="utf-8")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for row in pool.map(lambda p: gpu_one(p, pack_dir, arch, timeout), manifest):
            rows.append(row)
            state = ("build fails" if not row["built"] else "time-out" if row.get("timed_out")
                     else f"exit {row.get('exit_code')}")
            print(f"{row['program']:36s} {state}", flush=True)
            save()
    save()
    return 0


def runtime_run(program: dict[str, object], pack_dir: Path, timeout: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="xpiler-rt-truth-") as tmp:
        work = Path(tmp) / str(program["id"])
        shutil.copytree(pack_dir / str(program["id"]), work)
        main = work / str(program["main"])
        command = [sys.executable, "-m", "xpiler_core", "run", str(main), "--timeout", str(int(timeout)),
                   *project_flags(program, main, work)]
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 120, cwd=work,
                                  stdin=subprocess.DEVNULL, errors="replace")
        except subprocess.TimeoutExpired:
            return {"timed_out": True, "seconds": timeout}
        return {"exit_code": done.returncode, "stdout": done.stdout[:OUTPUT_LIMIT], "stderr": done.stderr[-3000:],
                "seconds": round(time.monotonic() - started, 2), "timed_out": False}


def verdict(gpu_row: dict[str, object], runtime: dict[str, object]) -> tuple[str, str]:
    from xpiler_core.verify.program import ProgramRun, compare_runs

    last = next((line for line in reversed(str(runtime.get("stderr", "")).splitlines()) if line.strip()), "")
    if runtime.get("timed_out") or "did not finish within the time limit" in last:
        return "runtime time-out", last[:200]
    if "xpiler run:" not in str(runtime.get("stderr", "")) or "could not" in last or "not supported" in last:
        return "runtime cannot run it", last[:200]
    source = ProgramRun(True, exit_code=int(gpu_row["exit_code"]), stdout=str(gpu_row["stdout"]))  # type: ignore[call-overload]
    candidate = ProgramRun(True, exit_code=int(runtime["exit_code"]), stdout=str(runtime["stdout"]))  # type: ignore[call-overload]
    report = compare_runs(source, candidate, None)
    if report.matched:
        return "agrees", report.summary()[:200]
    return "differs", report.reason[:300]


def compare(pack_dir: Path, gpu_json: Path, out: Path | None, timeout: float, only: list[str]) -> int:
    manifest = {p["id"]: p for p in json.loads((pack_dir / "manifest.json").read_text(encoding="utf-8"))}
    gpu_data = json.loads(gpu_json.read_text(encoding="utf-8"))
    rows: list[dict[str, object]] = []
    previous = {r["program"]: r for r in json.loads(out.read_text())} if out and out.exists() else {}
    for gpu_row in gpu_data["rows"]:
        pid = str(gpu_row["program"])
        if only and pid not in only:
            continue
        if not gpu_row["built"]:
            rows.append({"program": pid, "class": "GPU build fails", "detail": str(gpu_row.get("build_log", ""))[-200:]})
        elif gpu_row.get("timed_out"):
            rows.append({"program": pid, "class": "GPU time-out", "detail": ""})
        elif pid in previous and not only:
            rows.append(previous[pid])
        else:
            runtime = runtime_run(manifest[pid], pack_dir, timeout)
            kind, detail = verdict(gpu_row, runtime)
            rows.append({"program": pid, "class": kind, "detail": detail, "gpu_exit": gpu_row["exit_code"],
                         "runtime_exit": runtime.get("exit_code"), "runtime_seconds": runtime.get("seconds")})
        print(f"{pid:36s} {rows[-1]['class']:24s} {rows[-1]['detail']}", flush=True)
        if out:
            out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    compat = sum(1 for r in gpu_data["rows"] if r.get("compat") and (not only or r["program"] in only))
    counts = Counter(str(r["class"]) for r in rows)
    ran = sum(v for k, v in counts.items() if not k.startswith("GPU"))
    print(f"\nGPU: {gpu_data['device']} ({' '.join(gpu_data['nvcc'])}, -arch={gpu_data['arch']}); {compat} program(s) "
          "built with the CUDA 13 spellings of removed APIs")
    print("| programs | GPU build fails | GPU time-out | GPU ran | runtime agrees | differs | cannot run | runtime time-out |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {len(rows)} | {counts['GPU build fails']} | {counts['GPU time-out']} | {ran} | {counts['agrees']} | "
          f"{counts['differs']} | {counts['runtime cannot run it']} | {counts['runtime time-out']} |")
    for row in rows:
        if row["class"] not in ("agrees",):
            print(f"- {row['program']} [{row['class']}]: {row['detail']}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("pack")
    p.add_argument("corpus", type=Path)
    p.add_argument("pack", type=Path)
    p.add_argument("--only", action="append", default=[])
    g = sub.add_parser("gpu")
    g.add_argument("pack", type=Path)
    g.add_argument("--json", type=Path, required=True)
    g.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    g.add_argument("--arch", default="native")
    g.add_argument("--timeout", type=float, default=60.0)
    g.add_argument("--only", action="append", default=[])
    c = sub.add_parser("compare")
    c.add_argument("pack", type=Path)
    c.add_argument("gpu_json", type=Path)
    c.add_argument("--json", type=Path)
    c.add_argument("--timeout", type=float, default=300.0)
    c.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    if args.step == "pack":
        return pack(args.corpus, args.pack, args.only)
    if args.step == "gpu":
        return gpu(args.pack, args.json, args.jobs, args.arch, args.timeout, args.only)
    return compare(args.pack, args.gpu_json, args.json, args.timeout, args.only)


if __name__ == "__main__":
    sys.exit(main())
