"""Shared-memory tiled kernels written by others (GEMMs, transposes, reductions): the CPU translation's speed
against numpy and PyTorch, at 1 and 2 threads, and the tool's verdict on each file as it ships.

    python benchmarks/bench_tiled.py [--mirrors DIR] [--clone-cache DIR] [--id ID ...] [--rounds 21]
                                     [--json OUT] [--workdir DIR] [--tune SECONDS]

The kernels are listed in ``benchmarks/corpus/tiled.toml`` (repository, commit, path, kernel; nothing of the
third-party code is kept here); each has a test spec and a numpy reference of what the kernel computes in
``benchmarks/tiled/<id>/`` (ours). Per kernel the runner

1. writes the file at the recorded commit (and the headers it includes) next to a copy of the spec;
2. runs ``xpiler translate FILE --to cpu --spec SPEC`` as a user would: the verdict and its time;
3. builds the tool's output (``--flags``: ``-O2`` by default, what the tool compiles its own check with, or
   ``-O3 -march=native``; with the project's -I/-D) and times its ``extern "C"`` entry at the kernel's large
   ``timing_case`` against numpy (float32: ``A @ B`` through its BLAS, ``ascontiguousarray(A.T)``,
   ``x.sum()``/per-block sums) and PyTorch on the same inputs, with the one timing method every benchmark
   shares (``benchmarks/timing.py``: one process, interleaved, min of thread CPU time at 1 thread — numpy's
   BLAS, OpenMP and PyTorch limited to one thread — and min of wall time at 2 threads);
4. checks the timed output against the numpy reference (a fast wrong answer is no result).

Run it from an older checkout of the tool (the same script) for the "before" column. ``--tune SECONDS``
measures the tuner instead (``xpiler tune --budget``, as a user runs it): its wall time against the budget,
and the tuned output against the untuned one at the timing case.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS: one thread (fixed when it loads)

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "corpus"))

from bench_cpu import _set_omp_threads  # noqa: E402
from build_corpus import git_dir, show  # noqa: E402
from timing import compare  # noqa: E402

from xpiler_core.ast import instance_symbol  # noqa: E402
from xpiler_core.verify.expr import evaluate_int  # noqa: E402
from xpiler_core.verify.harness import _load_reference, reference_outputs  # noqa: E402
from xpiler_core.verify.inputs import case_inputs  # noqa: E402
from xpiler_core.verify.spec import load_spec  # noqa: E402

torch: ModuleType | None
try:
    import torch as _torch

    torch = _torch
except ImportError:  # a benchmark-only dependency
    torch = None

CORPUS = ROOT / "corpus" / "tiled.toml"
SCALARS: dict[str, type[ctypes._SimpleCData[Any]]] = {
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double}
OPT_FLAGS = {"tool": ("-O2",), "native": ("-O3", "-march=native")}
SPECS = ROOT / "tiled"


def load_kernels(path: Path = CORPUS) -> list[dict[str, Any]]:
    return list(tomllib.loads(path.read_text(encoding="utf-8"))["kernel"])


def materialize(kernel: dict[str, Any], out: Path, mirrors: Path | None, clone_cache: Path) -> Path:
    """The file as it ships (and the files it includes) with a copy of our spec, reference and build settings;
    returns the spec's path."""
    folder = out / kernel["id"]
    folder.mkdir(parents=True, exist_ok=True)
    wanted = [(kernel["repo"], kernel["commit"], kernel["path"], "source.cu"),
              *((e["repo"], e["commit"], e["path"], e["to"]) for e in kernel.get("extra", []))]
    for repo, commit, rel, to in wanted:
        data = show(git_dir(repo, mirrors, clone_cache), commit, rel)
        if data is None:
            raise SystemExit(f"{kernel['id']}: {rel} not found at {commit} of {repo}")
        target = folder / to
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for name in ("spec.toml", "ref.py", "xpiler.toml"):
        if (SPECS / kernel["id"] / name).is_file():
            shutil.copy(SPECS / kernel["id"] / name, folder / name)
    return folder / "spec.toml"


def tool_verdict(spec_path: Path, timeout: float) -> dict[str, Any]:
    """``xpiler translate`` as a user runs it (the spec gives the tests; the file is the one that ships)."""
    started = time.monotonic()
    out = spec_path.parent / "out.cpp"
    try:
        done = subprocess.run([sys.executable, "-m", "xpiler_core", "translate", str(spec_path.parent / "source.cu"),
                               "--to", "cpu", "--spec", str(spec_path), "-o", str(out), "--json"],
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT.parent)
    except subprocess.TimeoutExpired:
        return {"status": "time-out", "seconds": timeout}
    try:
        doc, _ = json.JSONDecoder().raw_decode(done.stdout.lstrip())
        status, reason = doc.get("status"), doc.get("reason", "")
    except (json.JSONDecodeError, AttributeError):
        status, reason = "crash", (done.stderr or done.stdout)[-300:]
    manifest = spec_path.parent / ".xpiler" / "out.cpp.json"
    applied: list[str] = []
    if manifest.is_file():
        applied = [p["name"] for p in json.loads(manifest.read_text()).get("passes", []) if p.get("changed")]
    return {"status": status, "reason": reason, "seconds": time.monotonic() - started, "passes": applied}


def _baselines(kind: str, inputs: dict[str, Any], operands: list[str]) -> dict[str, Callable[[], Any]]:
    """float32 numpy and PyTorch implementations of what the kernel computes (the library's own spelling)."""
    xs = [np.ascontiguousarray(inputs[n]) for n in operands]
    out: dict[str, Callable[[], Any]] = {}
    if kind == "gemm":
        out["numpy"] = functools.partial(np.matmul, xs[0], xs[1])
    elif kind == "transpose":
        out["numpy"] = lambda: np.ascontiguousarray(xs[0].T)
    else:
        out["numpy"] = functools.partial(np.sum, xs[0])
    if torch is not None:
        ts = [torch.from_numpy(x) for x in xs]
        if kind == "gemm":
            out["torch"] = functools.partial(torch.mm, ts[0], ts[1])
        elif kind == "transpose":
            out["torch"] = lambda: ts[0].t().contiguous()
        else:
            out["torch"] = functools.partial(torch.sum, ts[0])
    return out


def build_flags(folder: Path, opt: tuple[str, ...]) -> list[str]:
    """The compiler flags a user builds the output with: ``opt``, OpenMP, and the project's own settings."""
    flags = [*opt, "-fopenmp", "-shared", "-fPIC", "-w"]
    settings = folder / "xpiler.toml"
    if settings.is_file():
        build = tomllib.loads(settings.read_text(encoding="utf-8")).get("build", {})
        flags += [f"-I{folder / d}" for d in build.get("include_dirs", [])]
        flags += [f"-D{d}" for d in build.get("defines", [])]
    return flags


def _load_output(output: Path, folder: Path, opt: tuple[str, ...], spec: Any, case: dict[str, int],
                 inputs: dict[str, Any]) -> tuple[Callable[[], Any] | None, str]:
    """The ``extern "C"`` entry of a written output built with ``opt`` (and the flags its first line asks for,
    a tuned output's), bound to ``inputs`` at ``case``; or None and why."""
    library = output.with_suffix(".so")
    asked = re.match(r"// xpiler tune: compile with g\+\+ (.*)", output.read_text().split("\n", 1)[0])
    tuned_flags = [f for f in asked.group(1).split() if f not in ("-fopenmp", "-shared", "-fPIC")] if asked else []
    done = subprocess.run(["g++", *build_flags(folder, opt), *tuned_flags, "-o", str(library), str(output), "-lm"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return None, "build failed: " + done.stderr[-200:]
    lib = ctypes.CDLL(str(library))
    # an output kept on the portable tier: the kernel behind a launcher (a template instance's name sanitized)
    launcher = "xp_launch_" + re.sub(r"\W+", "_", spec.entry).strip("_")
    name = launcher if hasattr(lib, launcher) else instance_symbol(spec.entry)
    if not hasattr(lib, name):
        return None, f"the output has no entry named {spec.entry}"
    entry = getattr(lib, name)
    args: list[Any] = []
    for a in spec.args:
        if a.is_buffer:
            args.append(inputs[a.name].ctypes.data_as(ctypes.c_void_p))
        else:
            args.append(SCALARS[a.dtype](inputs[a.name]))
    # trailing launch parameters: a portable launcher's grid, or the grid extents a structural output takes
    # when the grid is no function of the kernel's parameters (``xp_grid_x``, ...; the tool's note says so)
    signature = re.search(rf'extern "C" void {re.escape(name)}\(([^)]*)\)', output.read_text())
    extra = len(re.findall(r"\bxp_grid_[xyz]\b", signature.group(1))) if signature else 0
    if name == launcher:
        extra = len(spec.grid)
    args += [ctypes.c_int(evaluate_int(str(g), case)) for g in spec.grid[:extra]]
    return functools.partial(entry, *args), ""


def _timing_inputs(spec: Any, case: dict[str, int]) -> dict[str, Any]:
    inputs = case_inputs(spec, case, 0, 0)
    for a in spec.args:
        if a.is_buffer:
            inputs[a.name] = np.ascontiguousarray(inputs[a.name])
    return inputs


def _correct(spec: Any, inputs: dict[str, Any], before: dict[str, Any]) -> bool:
    expected = reference_outputs(_load_reference(spec), spec, before)
    return all(np.allclose(np.ravel(inputs[n])[: np.size(v)], np.ravel(v), rtol=1e-3,
                           atol=1e-3 * max(1.0, float(np.sqrt(np.size(v))))) for n, v in expected.items())


def _rounds_for(call: Callable[[], Any], rounds: int) -> int:
    once = time.perf_counter()
    call()
    once = time.perf_counter() - once
    return min(rounds, max(3, int(2.0 / max(once, 1e-9))))  # a seconds-long call: fewer rounds, said in the row


def time_kernel(kernel: dict[str, Any], spec_path: Path, rounds: int, opt: tuple[str, ...]) -> dict[str, Any]:
    """The tool's output file (as written by ``xpiler translate``, its ``extern "C"`` entry named like the
    kernel) built with ``opt``, checked against the reference and timed against the baselines."""
    spec = load_spec(spec_path)
    folder = spec_path.parent
    output = folder / "out.cpp"
    if not output.is_file():
        return {"error": "no output written"}
    case = dict(kernel["timing_case"])
    inputs = _timing_inputs(spec, case)
    ours, why = _load_output(output, folder, opt, spec, case, inputs)
    if ours is None:
        return {"error": why}
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    row: dict[str, Any] = {}
    _set_omp_threads(1)
    ours()
    row["correct"] = _correct(spec, inputs, before)
    rounds = row["rounds"] = _rounds_for(ours, rounds)
    operands = kernel.get("operands") or [a.name for a in spec.args if a.is_buffer and a.role == "in"]
    for name, base in _baselines(kernel["kind"], before, operands).items():
        for threads, clock in ((1, "cpu"), (2, "wall")):
            _set_omp_threads(threads)
            if torch is not None:
                torch.set_num_threads(threads)
            got = compare(base, ours, names=(name, "ours"), rounds=rounds, clock=clock)
            row[f"vs_{name}_{threads}t"] = got.ratio
            row[f"vs_{name}_{threads}t_interval"] = got.interval
            row[f"ours_{threads}t_s"] = got.b.cpu_min if clock == "cpu" else got.b.wall_min
            row[f"{name}_{threads}t_s"] = got.a.cpu_min if clock == "cpu" else got.a.wall_min
            row["busy"] = bool(row.get("busy")) or got.busy
    _set_omp_threads(1)
    return row


def tune_kernel(kernel: dict[str, Any], spec_path: Path, budget_s: float, rounds: int,
                opt: tuple[str, ...]) -> dict[str, Any]:
    """``xpiler tune`` as a user runs it (the file as it ships, our spec, ``--budget``): its wall time against the
    budget, and the tuned output timed against the untuned one (``out.cpp``) at the large timing case, both
    built with ``opt`` (the tuned one also with the flags it asks for), 1 thread, interleaved."""
    folder = spec_path.parent
    tuned = folder / "tuned.cpp"
    tuned.unlink(missing_ok=True)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "xpiler_core", "tune", str(folder / "source.cu"), "--to", "cpu",
                               "--spec", str(spec_path), "--budget", f"{budget_s:g}s", "-o", str(tuned), "--quiet"],
                              capture_output=True, text=True, timeout=max(120.0, 4 * budget_s), cwd=ROOT.parent)
    except subprocess.TimeoutExpired:
        return {"tune_status": "time-out", "tune_s": time.monotonic() - started}
    row: dict[str, Any] = {"tune_s": time.monotonic() - started}
    measured = re.search(r"(\d+) trials measured", done.stdout)
    row["tune_trials"] = int(measured.group(1)) if measured else None
    row["tune_status"] = ("confirmed" if "beats the untuned" in done.stdout else "kept untuned"
                          if "untuned one is kept" in done.stdout else "failed: " + (done.stderr or done.stdout)[-200:])
    said = re.search(r"^\s*1\s+\S+\s+([\d.]+)x", done.stdout, re.M)
    row["tune_said"] = float(said.group(1)) if said else None
    if not tuned.is_file() or not (folder / "out.cpp").is_file():
        return row
    spec = load_spec(spec_path)
    case = dict(kernel["timing_case"])
    inputs = _timing_inputs(spec, case)
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    untuned, why = _load_output(folder / "out.cpp", folder, opt, spec, case, inputs)
    best, why_best = _load_output(tuned, folder, opt, spec, case, inputs)
    if untuned is None or best is None:
        row["error"] = why or why_best
        return row
    _set_omp_threads(1)
    best()
    row["tuned_correct"] = _correct(spec, inputs, before)
    n = _rounds_for(untuned, rounds)
    # thread CPU time, and wall time too: a tuned thread count would hide from the calling thread's clock
    for clock in ("cpu", "wall"):
        got = compare(untuned, best, names=("untuned", "tuned"), rounds=n, clock=clock)
        row[f"tuned_gain_{clock}"], row[f"tuned_gain_{clock}_interval"] = got.ratio, got.interval
        row["busy"] = bool(row.get("busy")) or got.busy
    return row


def _fmt(x: Any) -> str:
    return f"{x:.2f}x" if isinstance(x, float) else "-"


def selected(args: argparse.Namespace) -> Iterator[tuple[dict[str, Any], Path]]:
    """The kernels ``--id`` selects, each written out as it ships with our spec: (kernel, spec path)."""
    mirrors = args.mirrors if args.mirrors.is_dir() else None
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="xpiler-tiled-"))
    for kernel in load_kernels():
        if not args.id or kernel["id"] in args.id:
            yield kernel, materialize(kernel, workdir, mirrors, args.clone_cache)


def tune_main(args: argparse.Namespace) -> int:
    """The tuner on kernels it was not developed on: budget kept, gain found."""
    rows = []
    for kernel, spec_path in selected(args):
        row: dict[str, Any] = {"id": kernel["id"], "kind": kernel["kind"], "half": kernel.get("half", ""),
                               "case": kernel["timing_case"], "tool": tool_verdict(spec_path, args.timeout)}
        try:
            row.update(tune_kernel(kernel, spec_path, args.tune, args.rounds, OPT_FLAGS[args.flags]))
        except Exception as exc:  # a benchmark row, not a crash of the whole table
            row["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  {row['id']}: {row.get('tune_status')} {row.get('tune_s', 0):.1f}s {row.get('error', '')}",
              file=sys.stderr, flush=True)
        rows.append(row)
    print(f"xpiler tune --budget {args.tune:g}s on tiled kernels by others (none was used to develop the tuner); "
          f"gain = untuned time / tuned time at the large timing case, both built {' '.join(OPT_FLAGS[args.flags])} "
          f"(the tuned one also with the flags it asks for), 1 OpenMP thread, {args.rounds} interleaved rounds; "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'id':42} {'half':8} {'tune s':>7} {'/budget':>8} {'trials':>6} {'verdict':14} {'said':>6} "
          f"{'gain cpu':>9} {'gain wall':>9} {'right':6}")
    for r in rows:
        said = f"{r['tune_said']:.2f}x" if r.get("tune_said") else "-"
        print(f"{r['id']:42} {r['half']:8} {r.get('tune_s', 0):7.1f} {r.get('tune_s', 0) / args.tune:8.2f} "
              f"{str(r.get('tune_trials', '-')):>6} {str(r.get('tune_status', '-'))[:14]:14} {said:>6} "
              f"{_fmt(r.get('tuned_gain_cpu')):>9} {_fmt(r.get('tuned_gain_wall')):>9} "
              f"{str(r.get('tuned_correct', '-')):6}{'  ' + r['error'] if r.get('error') else ''}"
              + ("  (machine busy: not a result)" if r.get("busy") else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="bare git folders (owner+name)")
    ap.add_argument("--clone-cache", type=Path, default=Path(tempfile.gettempdir()) / "xpiler-clones")
    ap.add_argument("--id", action="append", help="kernel id, repeatable (default: all)")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--timeout", type=float, default=300.0, help="time limit of each translation (s)")
    ap.add_argument("--flags", choices=sorted(OPT_FLAGS), default="tool",
                    help="how the output is built for timing (tool: -O2, what the tool compiles its check with)")
    ap.add_argument("--tune", type=float, metavar="SECONDS",
                    help="only tune each kernel with this budget (xpiler tune) and time tuned vs untuned")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    if args.tune:
        return tune_main(args)
    rows = []
    for kernel, spec_path in selected(args):
        row: dict[str, Any] = {"id": kernel["id"], "kind": kernel["kind"], "repo": kernel["repo"],
                               "case": kernel["timing_case"], "half": kernel.get("half", "")}
        row["tool"] = tool_verdict(spec_path, args.timeout)
        try:
            row.update(time_kernel(kernel, spec_path, args.rounds, OPT_FLAGS[args.flags]))
        except Exception as exc:  # a benchmark row, not a crash of the whole table
            row["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  {row['id']}: {row['tool']['status']} {row.get('error', '')} numpy1t={_fmt(row.get('vs_numpy_1t'))} "
              f"torch1t={_fmt(row.get('vs_torch_1t'))}", file=sys.stderr, flush=True)
        rows.append(row)
    print(f"Tiled kernels by others, CPU translation (default plan) vs numpy / PyTorch float32; ratio = baseline time "
          f"/ our time (above 1: ours faster); 1 thread: min of thread CPU time, 2 threads: min of wall time; "
          f"{args.rounds} interleaved rounds (benchmarks/timing.py); load {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores")
    print(f"{'id':42} {'half':8} {'kind':10} {'tool':22} {'right':6} {'np 1t':>7} {'np 2t':>7} {'torch 1t':>9} {'torch 2t':>9} "
          f"{'ours 1t ms':>10}  passes")
    for r in rows:
        ours_ms = f"{r['ours_1t_s'] * 1e3:.3f}" if "ours_1t_s" in r else "-"
        print(f"{r['id']:42} {r['half']:8} {r['kind']:10} {str(r['tool']['status']):22} {str(r.get('correct', '-')):6} "
              f"{_fmt(r.get('vs_numpy_1t')):>7} {_fmt(r.get('vs_numpy_2t')):>7} {_fmt(r.get('vs_torch_1t')):>9} "
              f"{_fmt(r.get('vs_torch_2t')):>9} {ours_ms:>10}  {r.get('error') or ','.join(r['tool'].get('passes', [])) or '(portable tier)'}"
              + ("  (machine busy: not a result)" if r.get("busy") else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
