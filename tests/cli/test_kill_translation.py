"""Ctrl-C, SIGTERM and SIGKILL at random points of a real translation (hipcc compiling, the source and the
translation running): after 5 s no process the run started is left, and no scratch folder; a SIGKILLed run's
folders are gone too (its watchdog removes them; a run whose watchdog died as well is swept by the next run,
``tests/runtime/test_children.py``). The seeded points cover start-up, the passes, the compile and the tests."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from process_marks import ctrl_c_as_in_a_terminal, marked

REPO = Path(__file__).resolve().parents[2]


def kill_at(tmp_path: Path, sig: signal.Signals, delay: float) -> tuple[int | None, list[int], list[str], str]:
    token = f"XPILER_KILL_{uuid.uuid4().hex}"
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    work.mkdir(parents=True)
    scratch.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "vector_add.cu", work)
    env = {**os.environ, token: "1", "XPILER_NO_CACHE": "1", "TMPDIR": str(scratch)}
    run = subprocess.Popen([sys.executable, "-m", "xpiler_core", "translate", "vector_add.cu", "--to", "hip"],
                           cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=ctrl_c_as_in_a_terminal)
    time.sleep(delay)
    run.send_signal(sig)
    _, err = run.communicate(timeout=60)
    time.sleep(5)
    left = marked(token)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return run.returncode, left, sorted(p.name for p in scratch.iterdir()), err


# (signal, how many seeded points): the default run keeps to one point per signal
POINTS = [(signal.SIGINT, 1), (signal.SIGTERM, 1), (signal.SIGKILL, 1)]


@pytest.mark.parametrize(("sig", "count"), POINTS, ids=[s.name for s, _ in POINTS])
def test_a_stopped_translation_leaves_nothing(tmp_path: Path, sig: signal.Signals, count: int) -> None:
    if shutil.which("hipcc") is None:
        pytest.skip("hipcc is not installed")
    rng = random.Random(f"{sig.name}-30")
    for i in range(count):
        delay = rng.uniform(0.2, 4.0)
        code, left, folders, err = kill_at(tmp_path / str(i), sig, delay)
        where = f"{sig.name} at {delay:.2f} s"
        assert left == [], f"{where}: processes left {left}"
        assert folders == [], f"{where}: scratch folders left {folders}"
        assert "Traceback" not in err, f"{where}: {err}"
        if code is not None and code >= 0 and sig is not signal.SIGKILL:
            # stopped (130/143), or it had already finished when the signal came
            assert code in (0, 130, 143), f"{where}: exit {code}: {err}"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_many_stops_leave_nothing(tmp_path: Path, sig: signal.Signals) -> None:
    test_a_stopped_translation_leaves_nothing(tmp_path, sig, 8)
