"""Jobs on the local cores: ``jobs`` worker processes (``worker.py``), each in its own process group under
xpiler's limits, fed one job at a time. The cores are shared, not oversubscribed: each worker's runtime and
OpenMP use ``cores / jobs`` threads. A worker that dies takes only its current job with it (reported as an
environment failure, retried by the next run); Ctrl-C and SIGTERM stop every worker and what it started."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Protocol

from xpiler_core.migration.jobs import FileJob, FileOutcome
from xpiler_core.runtime import children

WORKER_MEMORY_BYTES = 32 * 1024**3


class Pool(Protocol):
    """Where a migration's jobs run: :class:`LocalPool`, or ``ray_pool.RayPool``."""

    def describe(self) -> str: ...

    def run(self, work: Iterable[FileJob],
            on_start: Callable[[FileJob], None] | None = None) -> Iterator[FileOutcome]: ...


class LocalPool:
    """Runs jobs on ``jobs`` local workers; :meth:`run` yields outcomes as they finish."""

    name = "local"

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)

    def describe(self) -> str:
        return f"{self.jobs} local worker(s)"

    def run(self, work: Iterable[FileJob], on_start: Callable[[FileJob], None] | None = None) -> Iterator[FileOutcome]:
        pending: queue.Queue[FileJob | None] = queue.Queue()
        for job in work:
            pending.put(job)
        count = pending.qsize()
        for _ in range(self.jobs):
            pending.put(None)
        done: queue.Queue[FileOutcome] = queue.Queue()
        cores = os.cpu_count() or 1
        threads = max(1, cores // self.jobs)
        # each worker's programs get its share of the cores, and the default time limit grows to match
        env = {**os.environ, "XPILER_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
               "XPILER_TIME_SCALE": f"{cores / threads:g}"}
        workers: list[children.Popen] = []
        stop = threading.Event()

        def feed(proc: children.Popen) -> None:
            stdin: IO[str] = proc.stdin  # type: ignore[assignment]
            stdout: IO[str] = proc.stdout  # type: ignore[assignment]
            while not stop.is_set():
                job = pending.get()
                if job is None:
                    break
                if on_start is not None:
                    on_start(job)
                try:
                    stdin.write(job.to_json() + "\n")
                    stdin.flush()
                    line = stdout.readline()
                except (BrokenPipeError, OSError, ValueError):
                    line = ""
                if not line:
                    if not stop.is_set():
                        done.put(FileOutcome(job.relative, "error", "the worker process died while translating it",
                                             digest=job.digest))
                    break
                done.put(FileOutcome.from_json(line))
            try:
                stdin.close()
            except OSError:
                pass

        feeders = []
        try:
            for _ in range(min(self.jobs, count)):
                proc = children.Popen([sys.executable, "-m", "xpiler_core.migration.worker"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env, memory_bytes=WORKER_MEMORY_BYTES,
                                      wall_seconds=7 * 24 * 3600.0)
                workers.append(proc)
                thread = threading.Thread(target=feed, args=(proc,), daemon=True)
                thread.start()
                feeders.append(thread)
            for _ in range(count):
                while True:
                    try:
                        outcome = done.get(timeout=0.5)
                        break
                    except queue.Empty:
                        if not any(t.is_alive() for t in feeders) and done.empty():
                            return  # every worker is gone (each reported its job)
                yield outcome
        finally:
            stop.set()
            for proc in workers:
                proc.kill()
                proc.wait()
