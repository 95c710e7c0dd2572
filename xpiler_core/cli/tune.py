"""``xpiler tune FILE --to cpu [--budget 60s] [--trials N] [--seed N] [--spec SPEC] [--top K] [-o OUT]``.

Tunes the CPU translation of a CUDA file (loop binding parameters, then pass sequences by MCTS), every
candidate verified against the spec before its time counts, and prints the best candidates as a table.
``-o`` writes the best candidate's C++ (never over FILE). GPU targets are refused: nothing here can time them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from xpiler_core.cli.translate import add_project_flags, project_from_args
from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect

TARGETS = {"cpu": Dialect.C, "c": Dialect.C, "cuda": Dialect.CUDA, "hip": Dialect.HIP, "bang": Dialect.BANG}


def parse_seconds(text: str) -> float:
    """``60``, ``60s``, ``2m``, ``1.5min`` → seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min)?\s*", text)
    if not match:
        raise XpilerError(f"--budget expects seconds like 60s or 2m, got {text!r}")
    value = float(match.group(1))
    return value * 60 if match.group(2) in ("m", "min") else value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tune", help="auto-tune the CPU translation of a CUDA file (measured, verified)")
    parser.add_argument("file", help="CUDA source file")
    parser.add_argument("--to", default="cpu", choices=sorted(TARGETS), help="target (only cpu is measured here)")
    parser.add_argument("--budget", default="60s", help="wall-clock budget, e.g. 60s or 2m (default 60s)")
    parser.add_argument("--trials", type=int, default=None, help="most measured trials (default 48)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")
    parser.add_argument("--spec", default=None, help="kernel test spec (default: the one next to FILE)")
    parser.add_argument("--top", type=int, default=5, help="rows of the table (default 5)")
    parser.add_argument("-o", "--output", default=None, help="write the best candidate here")
    parser.add_argument("--quiet", action="store_true", help="no per-trial lines on stderr")
    add_project_flags(parser, programs=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from xpiler_core.tune import TuneEvent, TuneOptions, tune
    from xpiler_core.tune.tuner import DEFAULT_TRIALS

    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise XpilerError(f"cannot read file: {exc.strerror}", str(path)) from None
    options = TuneOptions(target=TARGETS[args.to], spec_path=args.spec, budget_s=parse_seconds(args.budget),
                          max_trials=args.trials or DEFAULT_TRIALS, seed=args.seed, project=project_from_args(args))

    def show(event: TuneEvent) -> None:
        if not args.quiet and event.kind in ("start", "best", "phase", "done"):
            print(f"[{event.elapsed_s:6.1f}s, {event.trials} trials] {event.message}", file=sys.stderr, flush=True)

    result = tune(text, str(path), options, on_event=show)
    base = result.baseline_latency_s
    print(f"{path}: tuned for cpu on {result.machine}")
    print(f"case {result.case}; untuned latency {base * 1e6:.1f} us; {result.trials_measured} trials measured, "
          f"{result.trials_resumed} resumed from records; {result.seconds:.1f} s")
    print(f"{'rank':>4}  {'latency':>11}  {'speedup':>8}  config")
    rows = [result.best, *[c for c in result.candidates if c.text_sha256 != result.best.text_sha256]][: args.top]
    for rank, cand in enumerate(rows, 1):
        latency = f"{cand.latency_s * 1e6:9.1f}us" if cand.latency_s else "        n/a"
        print(f"{rank:>4}  {latency:>11}  {cand.speedup:7.2f}x  {cand.description}")
    verdict = "beats the untuned translation beyond the noise (re-timed)" if result.confirmed else \
        "no candidate beat the untuned translation beyond the noise; the untuned one is kept"
    print(f"best: {verdict}. Rows after the first are from single trial timings.")
    interval = f"; 90 % interval of the speedup [{result.best_interval[0]:.2f}, {result.best_interval[1]:.2f}]" \
        if result.best_interval else ""
    print(f"noise now: the untuned translation timed against itself differs by up to ±{result.noise * 100:.1f} % "
          f"(load average {result.load_average:.2f}){interval}")
    if result.loaded:
        print(f"warning: the machine was busy while re-timing ({result.load}): candidates that change the thread "
              "count or parallel threshold were not crowned; tune again on an idle machine to judge them")
    if result.flags:
        print(f"compile flags of the best candidate: {' '.join(result.flags)} (also in its first line)")
    if args.output:
        out = Path(args.output)
        if out.resolve() == path.resolve():
            raise XpilerError("refusing to overwrite the source file", str(out))
        from xpiler_core.safe_io import write_confined

        write_confined(out, result.best_text)
        print(f"wrote {out}")
    return 0
