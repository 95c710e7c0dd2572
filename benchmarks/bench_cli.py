"""What the benchmark runners that drive the ``xpiler`` CLI share: running a command with a time limit,
the CLI itself, one-line reasons, percentages, and the verdict of ``xpiler test``."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
XPILER = [sys.executable, "-m", "xpiler_core"]
# A CLI crash on one of these is an import of a module being edited while a long run goes on: not a result.
TRACEBACK_RETRY = ("ImportError", "NameError", "ModuleNotFoundError", "unexpected keyword argument", "AttributeError")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Run:
    rc: int
    out: str
    seconds: float


def run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None,
        stack_bytes: int | None = None) -> Run:
    """``cmd`` in ``cwd`` with a time limit (and a stack of ``stack_bytes`` where given); never raises."""

    def big_stack() -> None:
        if stack_bytes is not None:
            try:
                resource.setrlimit(resource.RLIMIT_STACK, (stack_bytes, resource.getrlimit(resource.RLIMIT_STACK)[1]))
            except (ValueError, OSError):
                pass

    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
                           errors="replace", preexec_fn=big_stack if stack_bytes is not None else None)
        return Run(r.returncode, r.stdout + r.stderr, time.monotonic() - t0)
    except subprocess.TimeoutExpired:
        return Run(124, f"timeout after {timeout:.0f} s", time.monotonic() - t0)
    except OSError as exc:
        return Run(127, f"cannot run {cmd[0]}: {exc}", time.monotonic() - t0)


def run_xpiler(args: list[str], cwd: Path, timeout: float, stack_bytes: int | None = None) -> Run:
    """The CLI of this checkout, rerun (twice at most, 30 s apart) when it crashes on an import (above)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))
    )
    r = run(XPILER + args, cwd, timeout, env, stack_bytes)
    for _ in range(2):
        crashed = "Traceback" in r.out or "xpiler: internal error:" in r.out  # the CLI's own crash report
        if crashed and any(t in r.out for t in TRACEBACK_RETRY):
            log("    (xpiler crashed on an import; rerunning in 30 s)")
            time.sleep(30)
            r = run(XPILER + args, cwd, timeout, env, stack_bytes)
    return r


def short(text: str, limit: int = 220) -> str:
    """The last two lines that say what went wrong (else the last two lines), on one line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    keep = [ln for ln in lines if re.search(r"mismatch|error|timeout|segmentation|deadlock|abort|refus|nan\b", ln, re.I)]
    return " | ".join((keep or lines)[-2:])[:limit]


def first_error(out: str) -> str:
    """A compiler's first error line (else the end of its output), for a one-line reason."""
    errs = [ln for ln in out.splitlines() if "error" in ln]
    return (errs[0] if errs else out.strip()[-200:])[:220]


def pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:5.1f}% ({n}/{d})" if d else "   n/a"


def test_verdict(r: Run) -> tuple[str, str]:
    """From ``xpiler test``: 'pass'; 'fail' (wrong values, crash, deadlock, time-out); 'build' (the program
    does not build on the CPU runtime / MLU model); 'error' (anything else) — and a one-line reason."""
    if r.rc == 0:
        return "pass", ""
    if r.rc == 124:
        return "fail", r.out
    if "MISMATCH" in r.out or re.search(r"ERROR: |segmentation|deadlock|timeout|\bnan\b", r.out, re.I):
        return "fail", short(r.out)
    if "build failed" in r.out or re.search(r":\d+:\d+: (fatal )?error:", r.out):
        return "build", short(r.out)
    return "error", short(r.out)
