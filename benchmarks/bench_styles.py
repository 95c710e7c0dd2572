"""Kernels in the styles real code is written in (ballots with `continue`, multi-return warp helpers,
templates with static_assert and float4, cooperative groups, half2 with a scalar tail, uchar4 histograms,
warp-per-row softmax with early-exiting warps, wmma, 3-D grids), translated to every target as a user would.

    python benchmarks/bench_styles.py [--to cpu --to hip --to bang] [--rename-only] [--set styles|wave64]

Prints one row per kernel and target: the status, the CPU tier (structural or portable) and the reason.
``--rename-only`` adds a HIP column for a port that only renames APIs (the `api_map` pass alone, as HIPIFY does),
tested the same way at warp 64. ``--set wave64`` runs the warp-width styles instead (lane masks, per-warp slots and
broadcasts, warp indices and the shared arrays they size, votes around ``continue``, early-exiting lanes, a
warpSize-generic reduction); the HIP cell then says which width the port uses.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STYLES = HERE / "styles"


def translate(source: Path, target: str, out: Path, passes: str | None = None) -> dict[str, object]:
    command = [sys.executable, "-m", "xpiler_core", "translate", str(source), "--to", target, "-o", str(out), "--json"]
    if passes:
        command += ["--passes", passes]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"status": "error", "reason": (done.stderr.strip().splitlines() or ["?"])[-1]}
    manifest = result.get("manifest_data") or {}
    facts = manifest.get("facts") or {}
    warp = next((p.get("params", {}).get("strategy") for p in manifest.get("passes", []) if p.get("name") == "warp_size"
                 and (p.get("changed") or p.get("params", {}).get("strategy") == "native")), "")
    return {"status": result["status"], "reason": result.get("reason", ""), "tier": facts.get("tier", ""),
            "warp": {"native": "64 lanes", "lanes32": "32-lane groups"}.get(str(warp), "")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", action="append", choices=["cpu", "hip", "bang"])
    parser.add_argument("--rename-only", action="store_true")
    parser.add_argument("--set", choices=["styles", "wave64"], default="styles", help="which kernels (benchmarks/SET)")
    args = parser.parse_args()
    targets = args.to or ["cpu", "hip", "bang"]
    columns = [*targets, *(["hip (rename only)"] if args.rename_only else [])]
    print("| kernel | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    verified = dict.fromkeys(columns, 0)
    kernels = sorted((HERE / args.set).glob("*.cu"))
    reasons: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for source in kernels:
            cells = []
            for column in columns:
                target = column.split()[0]
                passes = "api_map" if column.endswith("(rename only)") else None
                row = translate(source, target, Path(tmp) / f"{source.stem}.{target}", passes)
                cell = str(row["status"]) + (f" ({row['tier']})" if row.get("tier") and target == "cpu" else "") + (
                    f" ({row['warp']})" if row.get("warp") and column == "hip" else "")
                verified[column] += row["status"] == "verified"
                if row["status"] != "verified":
                    reasons.append(f"- {source.stem} → {column}: {row['reason']}")
                cells.append(cell)
            print(f"| {source.stem} | " + " | ".join(cells) + " |", flush=True)
    print("| **verified** | " + " | ".join(f"{verified[c]}/{len(kernels)}" for c in columns) + " |")
    print()
    print("\n".join(reasons))
    return 0


if __name__ == "__main__":
    sys.exit(main())
