"""CUDA → BANG C over the suite on the MLU CPU model, and the BANG → CUDA round trip of each output.

For every ``benchmarks/suite/**/spec.toml``: translate the CUDA source with the default cuda->bang plan,
build it with the MLU model (on-chip capacity check of the generation) and run it on the spec's cases
against the numpy reference; list the intrinsics each translation calls. With ``--round-trip``, the BANG
output is translated back to CUDA (bang->cuda), compiled by nvcc -arch=sm_80 and run on the SIMT runtime at
warp size 32 against the same reference.

    python benchmarks/bench_bang.py [--group G ...] [--op NAME ...] [--round-trip] [--json OUT]

Figures: model compute accuracy = operators whose translation passes every case / operators;
capacity violations = builds rejected for NRAM/WRAM/SRAM capacity.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from xpiler_core.passes.base import PassRecord  # noqa: E402
from xpiler_core.plans.cuda_to_bang import intrinsics_used, translate_to_bang, verify_bang  # noqa: E402
from xpiler_core.verify.spec import load_spec  # noqa: E402


def round_trip(candidate: str, spec: Any, records: list[PassRecord] | None = None) -> dict[str, Any]:
    """BANG → CUDA on a translation, nvcc verdict and a run at warp 32 against the reference."""
    import tempfile

    from xpiler_core.dialect import Dialect
    from xpiler_core.plans.bang_to_cuda import translate_bang_to_cuda
    from xpiler_core.plans.cuda_to_bang import launch_params_used
    from xpiler_core.plans.cuda_to_cpu import spec_with_launch_args
    from xpiler_core.verify.harness import run_spec
    from xpiler_core.verify.toolchains import compile_check

    cuda, reason = translate_bang_to_cuda(candidate, "candidate.mlu")
    if cuda is None:
        return {"status": "unresolved", "reason": reason}
    verdict = compile_check(cuda, Dialect.CUDA)
    if not verdict.ok:
        return {"status": "nvcc-failed", "reason": verdict.stderr[-600:]}
    with tempfile.TemporaryDirectory(prefix="xpiler-rt-") as tmp:
        extra = launch_params_used(records or [])
        # a wrapper that takes the grid as trailing parameters is called with them (as in the forward check)
        test_spec = spec_with_launch_args(spec, extra, Path(tmp)) if extra else spec
        rep = run_spec(test_spec, candidate_text=cuda, candidate_dialect=Dialect.CUDA, warp_size=32)
    return {"status": "pass" if rep.passed else "fail", "reason": "" if rep.passed else rep.summary()[-600:]}


def run_one(spec_path: str, with_round_trip: bool) -> dict[str, Any]:
    spec = load_spec(spec_path)
    started = time.perf_counter()
    row: dict[str, Any] = {"op": spec.name, "group": spec.group, "spec": spec_path}
    candidate, records, ctx = translate_to_bang(spec.source_text(), str(spec.path.parent / spec.source), spec)
    if candidate is None:
        row.update(status="unresolved", reason=ctx.unresolved[-1].reason if ctx.unresolved else "", intrinsics=[],
                   violations=0, nram=0)
        return row
    report, _ = verify_bang(candidate, spec, records)
    nram = max((u.get("nram", 0) for u in report.onchip_usage.values()), default=0)
    tensorized = next((r for r in records if r["name"] == "bang_tensorize"), None)
    refused = tensorized["refused"] if tensorized is not None else None
    row.update(
        status="pass" if report.passed else ("build-failed" if report.build_error else "fail"),
        reason="" if report.passed else (report.build_error or report.summary())[-400:],
        intrinsics=intrinsics_used(candidate),
        violations=len(report.capacity_violations),
        nram=nram,
        tensorize=refused or "applied",
    )
    if with_round_trip:
        from xpiler_core.verify.spec import load_spec as _load

        row["round_trip"] = round_trip(candidate, _load(spec_path), records)
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--op", action="append", default=[])
    parser.add_argument("--round-trip", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    specs = sorted(glob.glob(str(ROOT / "suite" / "**" / "spec.toml"), recursive=True))
    rows = []
    for path in specs:
        parts = Path(path).parts
        if args.group and parts[-3] not in args.group:
            continue
        if args.op and parts[-2] not in args.op:
            continue
        row = run_one(path, args.round_trip)
        rows.append(row)
        rt = row.get("round_trip", {}).get("status", "-")
        print(f"{row['group']:<14} {row['op']:<20} {row['status']:<12} rt={rt:<12} nram={row.get('nram', 0):>7} "
              f"{', '.join(row['intrinsics']) or 'scalar (GDRAM)'}", flush=True)
    passed = sum(r["status"] == "pass" for r in rows)
    violations = sum(r.get("violations", 0) for r in rows)
    print(f"\nmodel compute accuracy: {passed}/{len(rows)} = {100.0 * passed / max(1, len(rows)):.1f} %")
    print(f"capacity violations: {violations}")
    if args.round_trip:
        rt_pass = sum(r.get("round_trip", {}).get("status") == "pass" for r in rows)
        print(f"BANG -> CUDA round trip (nvcc + SIMT runtime, warp 32): {rt_pass}/{len(rows)}")
    print("\n| operator | group | status | intrinsics |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['op']} | {r['group']} | {r['status']} | {', '.join(r['intrinsics']) or 'scalar loops on GDRAM'} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
