"""Background jobs (translate, verify, run a pass, tune): off the event loop, with work-done progress and
real cancellation.

A job runs in the job thread pool and receives a ``ProgressFn`` and a ``CancelToken``; the core checks the
token between steps. Progress is mirrored three ways: ``$/progress`` (begin/report/end with percentage and
stage message), the job's live state (read by hover and code lens at request time) and an
``xpiler/jobProgress`` notification. Cancellation comes from ``window/workDoneProgress/cancel`` on the
job's token or from the ``xpiler.cancel`` command; ``$/cancelRequest`` cannot stop it (the command that
started the job has already answered).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from lsprotocol import types

from xpiler_core.progress import Cancelled, CancelToken

log = logging.getLogger(__name__)

JobState = Literal["running", "done", "failed", "cancelled"]
JOB_PROGRESS_NOTIFICATION = "xpiler/jobProgress"
JOB_FINISHED_NOTIFICATION = "xpiler/jobFinished"
# $/progress reports are throttled: a stage message change always goes out, percentages at most this often.
REPORT_INTERVAL_S = 0.05


@dataclass
class Job:
    id: str
    kind: str
    uri: str
    version: int
    title: str
    cancel: CancelToken = field(default_factory=CancelToken)
    state: JobState = "running"
    fraction: float = 0.0
    message: str = "starting"
    started: float = field(default_factory=time.time)
    finished: float | None = None
    # Kind-specific data the job updates while it runs (verification steps, tuning best so far…).
    live: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None
    stale: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "jobId": self.id,
                "kind": self.kind,
                "uri": self.uri,
                "version": self.version,
                "title": self.title,
                "state": self.state,
                "percentage": round(self.fraction * 100),
                "message": self.message,
                "stale": self.stale,
                "error": self.error,
                "elapsed": round((self.finished or time.time()) - self.started, 3),
                "live": _jsonable(self.live),
            }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


Work = Callable[[Job, Callable[[float, str], None]], Any]
OnDone = Callable[[Job], Awaitable[None]]


class JobManager:
    """Starts, tracks and cancels jobs for one server."""

    def __init__(self, server: Any, max_workers: int = 2, keep_finished: int = 50) -> None:
        self.server = server
        # Our own pool: pygls reads stdin on its thread pool, and a pool full of jobs would stop it reading.
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="xpiler-job")
        self.jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)
        self._keep_finished = keep_finished
        self.listeners: list[Callable[[Job], None]] = []

    def find(self, key: str) -> list[Job]:
        """Jobs matching an id, a progress token or a document URI."""
        if key in self.jobs:
            return [self.jobs[key]]
        return [job for job in self.jobs.values() if job.uri == key]

    def running(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.state == "running"]

    def latest(self, uri: str, kind: str) -> Job | None:
        matching = [job for job in self.jobs.values() if job.uri == uri and job.kind == kind]
        return max(matching, key=lambda j: j.started) if matching else None

    def cancel(self, key: str | None = None) -> list[str]:
        """Cancel the running jobs matching ``key`` (all running jobs when None); their ids."""
        targets = self.running() if key is None else [j for j in self.find(key) if j.state == "running"]
        for job in targets:
            job.cancel.cancel()
            with job.lock:
                job.message = "cancelling"
        return [job.id for job in targets]

    async def start(self, kind: str, uri: str, version: int, title: str, work: Work, on_done: OnDone) -> Job:
        job = Job(f"xpiler-{kind}-{next(self._ids)}", kind, uri, version, title)
        self.jobs[job.id] = job
        self._forget_old()
        progress_ok = await self._begin_progress(job)
        loop = asyncio.get_running_loop()
        last_time = [0.0]
        last_message = [""]

        def progress(fraction: float, message: str) -> None:
            # Called on the job thread: update the live state, then hop to the loop to notify.
            job.cancel.check()
            with job.lock:
                job.fraction = min(1.0, max(job.fraction, fraction))
                job.message = message
            now = time.monotonic()
            if message == last_message[0] and now - last_time[0] < REPORT_INTERVAL_S:
                return
            last_time[0], last_message[0] = now, message
            loop.call_soon_threadsafe(self._report, job, progress_ok)

        def run() -> Any:
            return work(job, progress)

        future = loop.run_in_executor(self.executor, run)
        asyncio.ensure_future(self._finish(job, future, progress_ok, on_done))
        return job

    async def _begin_progress(self, job: Job) -> bool:
        caps = self.server.client_capabilities
        window = getattr(caps, "window", None)
        if not getattr(window, "work_done_progress", False):
            return False
        try:
            await asyncio.wait_for(self.server.work_done_progress.create_async(job.id), timeout=5)
        except Exception:
            log.warning("client did not accept progress token %s", job.id, exc_info=True)
            return False
        self.server.work_done_progress.begin(
            job.id,
            types.WorkDoneProgressBegin(title=job.title, message="starting", percentage=0, cancellable=True),
        )
        return True

    def _report(self, job: Job, progress_ok: bool) -> None:
        snap = job.snapshot()
        if job.state != "running":
            return
        if progress_ok:
            self.server.work_done_progress.report(
                job.id, types.WorkDoneProgressReport(message=snap["message"], percentage=snap["percentage"])
            )
        self.server.protocol.notify(JOB_PROGRESS_NOTIFICATION, snap)
        for listener in self.listeners:
            try:
                listener(job)
            except Exception:
                log.exception("job listener failed")

    async def _finish(self, job: Job, future: asyncio.Future[Any], progress_ok: bool, on_done: OnDone) -> None:
        try:
            job.result = await future
            job.state = "done"
        except Cancelled:
            job.state = "cancelled"
        except Exception as exc:
            job.state = "failed"
            job.error = _user_message(exc)
            if not _is_user_error(exc):
                log.exception("job %s failed", job.id)
        job.finished = time.time()
        with job.lock:
            job.message = {"done": "finished", "cancelled": "cancelled", "failed": f"failed: {job.error}"}[job.state]
            if job.state == "done":
                job.fraction = 1.0
        try:
            await on_done(job)
        except Exception as exc:
            log.exception("finishing job %s failed", job.id)
            job.state, job.error = "failed", _user_message(exc)
        if progress_ok:
            self.server.work_done_progress.end(job.id, types.WorkDoneProgressEnd(message=job.message))
            self.server.work_done_progress.tokens.pop(job.id, None)
        self.server.protocol.notify(JOB_FINISHED_NOTIFICATION, job.snapshot())
        for listener in self.listeners:
            try:
                listener(job)
            except Exception:
                log.exception("job listener failed")

    def _forget_old(self) -> None:
        finished = sorted((j for j in self.jobs.values() if j.state != "running"), key=lambda j: j.started)
        for job in finished[: max(0, len(finished) - self._keep_finished)]:
            del self.jobs[job.id]


def _is_user_error(exc: BaseException) -> bool:
    from xpiler_core.diagnostics import XpilerError

    return isinstance(exc, XpilerError)


def _user_message(exc: BaseException) -> str:
    from xpiler_core.diagnostics import XpilerError

    if isinstance(exc, XpilerError):
        return exc.format()
    return str(exc) or type(exc).__name__
