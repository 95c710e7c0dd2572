"""Every child xpiler starts dies with its whole process group, and a killed xpiler leaves neither processes
nor scratch folders (``runtime/children.py``): checked by marking the processes with an environment variable
and looking for them in /proc, as an administrator would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from process_marks import marked, settle

from xpiler_core.runtime import children


def test_a_timeout_kills_the_whole_group() -> None:
    token = f"XPILER_TEST_{uuid.uuid4().hex}"
    with pytest.raises(subprocess.TimeoutExpired):
        children.run(["sh", "-c", "sleep 60 & sleep 60"], timeout=1, env={**os.environ, token: "1"},
                     capture_output=True)
    assert settle(token) == []


def test_what_a_finished_child_left_running_is_killed() -> None:
    token = f"XPILER_TEST_{uuid.uuid4().hex}"
    done = children.run(["sh", "-c", "sleep 60 & echo started"], timeout=30, env={**os.environ, token: "1"},
                        capture_output=True, text=True)
    assert done.stdout.strip() == "started"
    assert settle(token) == []


PARENT = """
import os, subprocess, sys, time
from pathlib import Path
from xpiler_core.runtime import children
root = children.start_session()
(root / "scratch").mkdir()
proc = children.Popen(["sh", "-c", "sleep 60 & sleep 60"], stdout=subprocess.DEVNULL)
print(root, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_parent_leaves_no_process_and_no_folder(tmp_path: Path, sig: signal.Signals) -> None:
    token = f"XPILER_TEST_{uuid.uuid4().hex}"
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, token: "1", "TMPDIR": str(tmp_path)})
    assert parent.stdout is not None
    root = Path(parent.stdout.readline().strip())
    assert root.is_dir() and root.parent == tmp_path
    deadline = time.monotonic() + 10
    while len(marked(token)) < 4 and time.monotonic() < deadline:  # parent, watchdog, sh, two sleeps
        time.sleep(0.1)
    parent.send_signal(sig)
    parent.wait(timeout=10)
    assert settle(token) == []
    assert not root.exists()


def test_stale_sessions_of_dead_processes_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{children.SESSION_PREFIX}{dead.pid}-1-abcd"
    (stale / "xpiler-cc-x").mkdir(parents=True)
    me = os.getpid()
    alive = tmp_path / f"{children.SESSION_PREFIX}{me}-{children._start_time(me)}-abcd"
    alive.mkdir()
    reused = tmp_path / f"{children.SESSION_PREFIX}{me}-1-abcd"  # our pid, another start time: a reused pid
    reused.mkdir()
    removed = children.sweep_stale_sessions(tmp_path)
    assert sorted(removed) == sorted([stale, reused])
    assert alive.is_dir()


# A stop that arrives while the main thread forks a child: Python runs the signal's handler among the at-fork
# handlers (logging's lock release is one), where its exception is printed as "Exception ignored" and lost.
STOP_IN_FORK = """
import functools, os, signal, sys
# the script starts one child that runs at-fork handlers
os.register_at_fork(after_in_parent=functools.partial(os.kill, os.getpid(), getattr(signal, sys.argv[1])))
import logging, threading
from xpiler_core.runtime import children, stop_signals
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (pytest-xdist's workers ignore it)
restore = stop_signals.install()
try:
    children.Popen(["sleep", "60"])
    print("not stopped")
except stop_signals.Terminated as exc:
    print("stopped by", exc)
except KeyboardInterrupt:
    print("interrupted")
children.kill_all()
# a thread that logs: it waits forever when the fork left logging's lock held
worker = threading.Thread(target=lambda: logging.getLogger("after").warning("logged"))
worker.start()
worker.join(10)
print("logging works" if not worker.is_alive() else "logging blocked")
os._exit(0)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stop_during_a_fork_is_raised_after_it(sig: str) -> None:
    done = subprocess.run([sys.executable, "-c", STOP_IN_FORK, sig], capture_output=True, text=True, timeout=60)
    expected = "stopped by SIGTERM" if sig == "SIGTERM" else "interrupted"
    assert done.stdout.splitlines() == [expected, "logging works"], done.stdout + done.stderr
    assert "Exception ignored" not in done.stderr
