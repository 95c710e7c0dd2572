"""CUDA → CPU and C → CUDA accuracy over the whole suite.

For every suite operator: translate CUDA → CPU with the default plan (spec-driven launch shape), take the
compiler's verdict (g++ -fopenmp, as the harness builds it) and run the spec's cases against the numpy
reference ("compute accuracy"); then translate that CPU output back to CUDA, take nvcc's verdict and run it
on the SIMT runtime at warp 32 against the same reference.

    python benchmarks/cpu_accuracy.py [--op NAME ...]
"""

from __future__ import annotations

import argparse
import glob
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from xpiler_core.dialect import Dialect  # noqa: E402
from xpiler_core.plans.c_to_cuda import translate_to_cuda  # noqa: E402
from xpiler_core.plans.cuda_to_cpu import (  # noqa: E402
    _launch_params_used,
    gcc_verdict,
    spec_with_launch_args,
    translate_to_cpu,
)
from xpiler_core.verify.harness import run_spec  # noqa: E402
from xpiler_core.verify.spec import load_spec  # noqa: E402
from xpiler_core.verify.toolchains import compile_check  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", action="append", default=[])
    args = parser.parse_args(argv)
    totals = {"ops": 0, "gcc": 0, "cpu_run": 0, "nvcc": 0, "cuda_run": 0}
    for spec_path in sorted(glob.glob(str(ROOT / "suite" / "*" / "*" / "spec.toml"))):
        spec = load_spec(spec_path)
        if args.op and spec.name not in args.op:
            continue
        totals["ops"] += 1
        cpu, records, _ctx = translate_to_cpu(spec.source.read_text(), str(spec.source), spec)
        row = {"gcc": "-", "cpu": "-", "nvcc": "-", "cuda": "-"}
        if cpu is not None:
            launch = _launch_params_used(records)
            with tempfile.TemporaryDirectory() as tmp:
                test_spec = spec_with_launch_args(spec, launch, Path(tmp)) if launch else spec
                gcc_ok = gcc_verdict(cpu).ok
                cpu_ok = run_spec(test_spec, candidate_text=cpu, candidate_dialect=Dialect.C,
                                  candidate_entry=spec.entry, candidate_kind="host").passed
                row.update(gcc="ok" if gcc_ok else "FAIL", cpu="pass" if cpu_ok else "FAIL")
                totals["gcc"] += gcc_ok
                totals["cpu_run"] += cpu_ok
                cuda, _c = translate_to_cuda(cpu, f"{spec.name}.cpp")
                if cuda is not None:
                    nvcc_ok = compile_check(cuda, Dialect.CUDA).ok
                    cuda_ok = run_spec(test_spec, candidate_text=cuda, candidate_dialect=Dialect.CUDA,
                                       candidate_entry=spec.entry, candidate_kind="host", warp_size=32).passed
                    row.update(nvcc="ok" if nvcc_ok else "FAIL", cuda="pass" if cuda_ok else "FAIL")
                    totals["nvcc"] += nvcc_ok
                    totals["cuda_run"] += cuda_ok
        print(f"{spec.group or Path(spec_path).parent.parent.name:14s} {spec.name:20s} cuda->cpu: gcc {row['gcc']:4s} "
              f"run {row['cpu']:4s} | c->cuda: nvcc {row['nvcc']:4s} run {row['cuda']}", flush=True)
    n = totals["ops"] or 1
    print(f"\nCUDA->CPU: compute {totals['cpu_run']}/{totals['ops']} ({100 * totals['cpu_run'] / n:.1f} %), "
          f"gcc compile {totals['gcc']}/{totals['ops']} ({100 * totals['gcc'] / n:.1f} %)")
    print(f"C->CUDA on the CPU outputs: runtime {totals['cuda_run']}/{totals['ops']} "
          f"({100 * totals['cuda_run'] / n:.1f} %), nvcc {totals['nvcc']}/{totals['ops']} ({100 * totals['nvcc'] / n:.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
