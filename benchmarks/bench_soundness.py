"""Are unverified CPU translations right? Every kernel translated to CPU with ``--no-verify`` (the output a user
gets when no test runs), then judged on its own spec at several input seeds.

    python benchmarks/bench_soundness.py [--set suite --set styles ...] [--dir DIR ...] [--seeds 3] [--translator DIR]
                                         [--json OUT]

Kernels: the suite (a spec with a numpy reference each), the styles and wave64 kernels and the repair styles (a
spec beside the file, else the automatic spec built from the source, whose reference is the source on the
runtime), and ``benchmarks/soundness`` (kernels whose lowering once went wrong silently); ``--dir`` adds
folders of kernels written by others, each with its spec beside it (``bench_tiled.py --workdir`` prepares the
tiled corpus that way). The judge is
the CPU runner of this checkout (as a translation's own tests run it), whatever ``--translator`` names:
a folder holding another checkout's ``xpiler_core`` (a worktree of an older commit) translates instead, so the
same judge gives before → after. A kernel with no spec and none buildable is listed as "no judge".
Prints one row per kernel (right / wrong / no judge / translate failed) and the counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from xpiler_core.dialect import detect_dialect  # noqa: E402
from xpiler_core.plans.cuda_to_cpu import spec_with_launch_args  # noqa: E402
from xpiler_core.project import build_settings, load_project  # noqa: E402
from xpiler_core.verify import autospec  # noqa: E402
from xpiler_core.verify.spec import load_spec, spec_beside  # noqa: E402
from xpiler_core.verify.targets import CpuRunner  # noqa: E402

SETS = {
    "suite": HERE / "suite",
    "styles": HERE / "styles",
    "wave64": HERE / "wave64",
    "repair_styles": HERE / "repair_styles",
    "soundness": HERE / "soundness",
}
SUFFIXES = (".cu", ".hip")


def kernels(set_dir: Path) -> list[Path]:
    return sorted(p for p in set_dir.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def judge_spec(source: Path, scratch: Path) -> Path | None:
    """The spec beside the source, else one built from the code (the source on the runtime is its reference)."""
    beside = spec_beside(str(source))
    if beside is not None:
        return Path(beside)
    text = source.read_text(encoding="utf-8")
    built = autospec.build_spec(text, str(source), detect_dialect(text, str(source)), scratch, allow_shim=True)
    return built.spec_path


def run(command: list[str], env: dict[str, str] | None = None, timeout: float = 600.0,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False,
                              cwd=cwd)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"timed out after {timeout:g} s")


def sweep_one(source: Path, seeds: int, translator: Path | None, scratch: Path, root: Path = HERE) -> dict[str, str]:
    row = {"kernel": str(source.relative_to(root)), "verdict": "", "detail": ""}
    env = dict(os.environ)
    if translator is not None:
        env["PYTHONPATH"] = str(translator)
    spec = judge_spec(source, scratch / "spec")
    # translated where a user translates it: beside the source (a copy of its folder), so the headers it
    # includes and its project file (xpiler.toml: -I, -D) are found, by the translation and by its build
    folder = scratch / "src"
    shutil.copytree(source.parent, folder, symlinks=True, ignore=shutil.ignore_patterns("*.so", "*.o", "out.cpp"))
    source = folder / source.name
    out = folder / f"{source.stem}_soundness.cpp"
    # the spec goes to the translation too: a kernel's CPU output then has the extern "C" entry its tests call
    # (the launch shape is the spec's); it is not tested there (--no-verify)
    done = run([sys.executable, "-m", "xpiler_core", "translate", str(source.resolve()), "--to", "cpu", "--no-verify",
                *(["--spec", str(spec)] if spec is not None else []), "-o", str(out), "--json"], env=env,
               # not from a checkout: `python -m` puts the working folder first on the path, ahead of PYTHONPATH
               cwd=scratch)
    if not out.exists():
        row["verdict"], row["detail"] = "translate failed", (done.stderr.strip().splitlines() or ["?"])[-1][:160]
        return row
    if spec is None:
        row["verdict"] = "no judge"
        return row
    loaded = load_spec(str(spec))
    text = out.read_text(encoding="utf-8")
    tier = "portable" if "xpiler_simt/" in text else "structural"
    launcher = f"xp_launch_{loaded.entry}"
    if loaded.kind == "kernel" and f'extern "C" void {launcher}(' in text:
        # the portable tier: the kernel runs through its launcher, the reference stays the kernel
        loaded = dataclasses.replace(loaded, entry=launcher, kind="host",
                                     reference_entry=loaded.reference_entry or loaded.entry,
                                     reference_kind=loaded.reference_kind or loaded.kind)
    # a kernel whose grid the kernel's parameters do not give is wrapped with the grid as extra parameters
    # (as the plan's own tests call it)
    entry = re.search(rf'extern "C" void {re.escape(loaded.entry)}\(([^)]*)\)', text)
    grid_params = re.findall(r"\b(xp_grid_[xyz])\b", entry.group(1)) if entry else []
    if grid_params:
        loaded = spec_with_launch_args(loaded, ", ".join(grid_params), scratch / "launch")
    # headers the output ships beside it (the portable tier's SIMT headers) are part of its build
    companions = {str(h.relative_to(folder)): h.read_text(encoding="utf-8") for h in folder.rglob("*.h")}
    runner = CpuRunner(build=build_settings(load_project(str(out)), str(out), text, companions))
    for seed in range(seeds):
        report = runner.run(loaded, text, seed, None)
        if report.build_error:
            row["verdict"], row["detail"] = "wrong", "does not build: " + report.build_error.strip()[-120:]
            return row
        tested = report.tested
        if not tested:
            row["verdict"], row["detail"] = "no judge", "the reference ran on no case"
            return row
        if not report.passed:
            row["verdict"], row["detail"] = "wrong", f"seed {seed}: {report.first_failure(160)}"
            return row
    row["verdict"], row["detail"] = "right", tier
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", choices=sorted(SETS), help="kernel sets (default: all)")
    parser.add_argument("--seeds", type=int, default=3, help="input seeds each translation is judged at")
    parser.add_argument("--translator", type=Path, help="translate with the xpiler_core in this folder")
    parser.add_argument("--only", action="append", default=[], help="kernels whose path contains this")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--dir", action="append", type=Path, default=[],
                        help="also the kernels under this folder, each with its spec beside it (code by others, "
                             "e.g. the --workdir bench_tiled.py prepared); only these when no --set is given")
    args = parser.parse_args(argv)
    rows = []
    roots = [(SETS[name], HERE) for name in (args.set or ([] if args.dir else sorted(SETS)))]
    roots += [(folder.resolve(), folder.resolve().parent) for folder in args.dir]
    for folder, root in roots:
        for source in kernels(folder):
            if args.only and not any(o in str(source) for o in args.only):
                continue
            with tempfile.TemporaryDirectory(prefix="xpiler-soundness-") as tmp:
                row = sweep_one(source, args.seeds, args.translator, Path(tmp), root)
            rows.append(row)
            print(f"{row['kernel']:<58} {row['verdict']:<17} {row['detail']}", flush=True)
    counts = Counter(r["verdict"] for r in rows)
    print()
    print("| kernels | right | wrong | no judge | translate failed |")
    print("|---|---|---|---|---|")
    print(f"| {len(rows)} | {counts['right']} | {counts['wrong']} | {counts['no judge']} | {counts['translate failed']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
