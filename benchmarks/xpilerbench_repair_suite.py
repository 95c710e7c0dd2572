"""Build a repair suite from XpilerBench's CUDA (or HIP) files: code nobody here wrote, for ``bench_repair.py``.

For each operator, its smallest configuration (or ``--pick middle``) is copied as shipped (the benchmark's own
prelude of includes first, as ``bench_xpilerbench.py`` gives it to the tool), and the tests the tool
derives on its own (``verify.autospec.build_spec``: the host entry recorded on the runtime, sizes solved where
the kernels have their shape built in) become ``<op>/spec.toml`` with the source as the reference. Operators
whose tests cannot be derived are listed with the reason. The files stay outside this repository:

    python benchmarks/xpilerbench_repair_suite.py /work/bench_trees/xpiler-eval OUT
    python benchmarks/bench_repair.py --suite OUT --per-family 1 --json repair.json
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from bench_xpilerbench import load_configs, select, shipped_preludes

from xpiler_core.dialect import Dialect
from xpiler_core.verify.autospec import build_spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path, help="work tree of ShouyangDong/xpiler-eval")
    ap.add_argument("out", type=Path, help="folder to write <op>/spec.toml into (outside the repository)")
    ap.add_argument("--platform", choices=("cuda", "hip"), default="cuda")
    ap.add_argument("--pick", choices=("smallest", "middle"), default="smallest")
    ap.add_argument("--op", action="append", help="operator, repeatable (default: all)")
    ns = ap.parse_args(argv)
    dialect = Dialect.CUDA if ns.platform == "cuda" else Dialect.HIP
    configs = select(load_configs(ns.path, ns.platform), ns.op, 1 if ns.pick == "smallest" else None,
                     None if ns.pick == "smallest" else "middle")
    prelude = shipped_preludes(ns.path).get(ns.platform, "")
    written = 0
    for c in configs:
        if not c.path.is_file():
            print(f"{c.op:24s} skipped: {c.path.name} not in the tree")
            continue
        built = build_spec(prelude + c.path.read_text(), c.path.name, dialect, ns.out / c.op)
        if built.spec_path is None or built.sizes_origin == "guessed":
            print(f"{c.op:24s} skipped: {built.reason[:150]}")
            shutil.rmtree(ns.out / c.op, ignore_errors=True)
            continue
        written += 1
        print(f"{c.op:24s} {c.path.name}: {built.reason[:120]}")
    print(f"{written} of {len(configs)} operators written to {ns.out}")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
