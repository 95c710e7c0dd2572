"""Every process xpiler starts, and every scratch folder, accounted for — and gone when xpiler is.

Children (compilers, test workers, programs under test) start through :class:`Popen` / :func:`run`: each in
its own process group under :func:`~xpiler_core.runtime.limits.child_limits`, registered while it lives, and
its whole group killed when it ends, times out or is abandoned (``subprocess.run`` kills only the direct
child; hipcc's clang processes outlived it).

``PR_SET_PDEATHSIG`` reaches direct children only, so a SIGKILLed xpiler would still orphan their children.
A small watchdog process (``watchdog.py``, started with the first child) holds the other end of a pipe and
the list of live process groups and scratch folders; when the pipe closes — xpiler exited, however it
died — it kills those groups and removes those folders. :func:`start_session` gives a command-line or
server process one scratch root that every temporary folder of the run (ours, and the compilers' own through
``TMPDIR``) lives in; a root whose owner died without its watchdog (both killed) is removed by the next
session's start, stale-lock style.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xpiler_core.runtime import stop_signals
from xpiler_core.runtime.limits import child_limits

WATCHDOG = Path(__file__).resolve().parent / "watchdog.py"
SESSION_PREFIX = "xpiler-session-"
# Defaults for children started without explicit limits (tool version queries, objdump).
DEFAULT_MEMORY_BYTES = 8 * 1024**3
DEFAULT_WALL_S = 600.0

_lock = threading.RLock()
_groups: set[int] = set()
_folders: set[str] = set()
_watchdog: subprocess.Popen[bytes] | None = None
_watchdog_pid_owner: int | None = None  # the pid that started the watchdog (a forked child must not share it)
_session_root: Path | None = None
_before_session: tuple[str | None, str | None] = (None, None)  # tempfile.tempdir and TMPDIR before it


def _tell_watchdog(line: str) -> None:
    """Send one line to the watchdog, starting it first when this process has none."""
    global _watchdog, _watchdog_pid_owner
    with _lock:
        if _watchdog is None or _watchdog_pid_owner != os.getpid() or _watchdog.poll() is not None:
            try:
                _watchdog = subprocess.Popen(
                    [sys.executable, "-S", "-E", str(WATCHDOG)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, close_fds=True,
                    # its own session: a Ctrl-C to the terminal's process group must not kill it before it cleans
                    start_new_session=True)
            except OSError:
                _watchdog = None
                return
            _watchdog_pid_owner = os.getpid()
            # what was registered before (re)starting it
            for group in _groups:
                _write(f"g {group}\n")
            for folder in _folders:
                _write(f"d {folder}\n")
        _write(line)


def _write(line: str) -> None:
    if _watchdog is None or _watchdog.stdin is None:
        return
    try:
        _watchdog.stdin.write(line.encode("utf-8", "surrogateescape"))
        _watchdog.stdin.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group ``pgid`` (gone already: nothing to do)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _register_group(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)
        _tell_watchdog(f"g {pgid}\n")


def _release_group(pgid: int) -> None:
    kill_group(pgid)  # whatever the child left running in its group ends with it
    with _lock:
        if pgid in _groups:
            _groups.discard(pgid)
            _tell_watchdog(f"u {pgid}\n")


def track_folder(path: str | Path) -> None:
    """Remove ``path`` if this process dies before :func:`untrack_folder` (SIGKILL included)."""
    with _lock:
        _folders.add(str(path))
        _tell_watchdog(f"d {path}\n")


def untrack_folder(path: str | Path) -> None:
    with _lock:
        if str(path) in _folders:
            _folders.discard(str(path))
            _tell_watchdog(f"r {path}\n")


class Popen(subprocess.Popen):
    """``subprocess.Popen`` in a new process group with xpiler's limits, registered until it is reaped; its
    whole group is killed when it ends or is killed."""

    def __init__(self, args: Sequence[str] | str, *, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                 wall_seconds: float = DEFAULT_WALL_S, **kwargs: Any) -> None:
        if "preexec_fn" in kwargs or "start_new_session" in kwargs:
            raise TypeError("children.Popen sets the process group and limits itself")
        self._released = False
        # a stop raised inside the fork's at-fork handlers would be swallowed there (stop_signals.py); the
        # group is registered before a held stop is raised, so the session's end kills it
        with stop_signals.held():
            super().__init__(args, preexec_fn=child_limits(memory_bytes, wall_seconds), **kwargs)
            _register_group(self.pid)

    def _release(self) -> None:
        if not self._released and self.returncode is not None:
            self._released = True
            _release_group(self.pid)

    def poll(self) -> int | None:
        code = super().poll()
        self._release()
        return code

    def wait(self, timeout: float | None = None) -> int:
        code = super().wait(timeout)
        self._release()
        return code

    def kill(self) -> None:
        kill_group(self.pid)

    def terminate(self) -> None:
        kill_group(self.pid)


def run(args: Sequence[str], *, input: bytes | str | None = None, timeout: float | None = None,  # noqa: A002
        capture_output: bool = False, memory_bytes: int = DEFAULT_MEMORY_BYTES,
        wall_seconds: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` for a limited child: on a timeout or any exception (Ctrl-C, SIGTERM turned into an
    exception) the child's whole process group is killed before this returns or raises."""
    if capture_output:
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    wall = wall_seconds if wall_seconds is not None else (timeout if timeout is not None else DEFAULT_WALL_S)
    deadline = None if timeout is None else time.monotonic() + timeout
    with Popen(args, memory_bytes=memory_bytes, wall_seconds=wall, **kwargs) as proc:
        pending = input
        try:
            while True:
                step = 0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic()))
                try:
                    stdout, stderr = proc.communicate(pending, timeout=step)
                    break
                except subprocess.TimeoutExpired:
                    pending = None  # sent already; communicate resumes where it stopped
                    # The child has ended but something it left in its group holds the pipes open:
                    # poll() released (killed) the group, so the pipes close now.
                    if proc.poll() is not None:
                        continue
                    if deadline is not None and time.monotonic() >= deadline:
                        proc.kill()
                        stdout, stderr = proc.communicate()
                        raise subprocess.TimeoutExpired(args, timeout or 0.0, stdout, stderr) from None
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def kill_all() -> None:
    """Kill every registered child group (at exit, on SIGTERM, on Ctrl-C)."""
    with _lock:
        groups = list(_groups)
    for group in groups:
        kill_group(group)


# ------------------------------------------------------------------------------------------------ sessions


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/PID/stat`` field 22), or None when it is not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return "?"
        return "?"
    return stat.rsplit(")", 1)[1].split()[19]


def sweep_stale_sessions(base: Path | None = None) -> list[Path]:
    """Remove session roots whose owning process is gone (killed with its watchdog); returns them."""
    folder = Path(base or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(folder.glob(SESSION_PREFIX + "*"))
    except OSError:
        return removed
    for entry in entries:
        parts = entry.name[len(SESSION_PREFIX):].split("-")
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        started = _start_time(int(parts[0]))
        if started is not None and (started == "?" or started == parts[1]):
            continue  # its owner still runs
        try:
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
        except OSError:
            continue
    return removed


def start_session() -> Path:
    """Give this process one scratch root for all temporary folders (ours and the compilers'), removed at exit
    and by the watchdog if the process is killed; stale roots of dead processes are removed first."""
    global _session_root, _before_session
    with _lock:
        if _session_root is not None and _session_root.is_dir():
            return _session_root
        base = Path(tempfile.gettempdir())
        sweep_stale_sessions(base)
        me = os.getpid()
        root = Path(tempfile.mkdtemp(prefix=f"{SESSION_PREFIX}{me}-{_start_time(me) or 0}-", dir=base))
        _session_root = root
        _before_session = (tempfile.tempdir, os.environ.get("TMPDIR"))
        track_folder(root)
        tempfile.tempdir = str(root)
        os.environ["TMPDIR"] = str(root)
        atexit.register(end_session)
        return root


def end_session() -> None:
    """Kill what is left of this process's children and remove its scratch root."""
    global _session_root
    kill_all()
    with _lock:
        root = _session_root
        _session_root = None
    if root is None:
        return
    tempfile.tempdir, tmpdir = _before_session
    if tmpdir is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = tmpdir
    shutil.rmtree(root, ignore_errors=True)
    untrack_folder(root)
