"""The jobs of a tree migration as tasks on a Ray cluster (``pip install xpiler[cluster]``).

Before any job is sent, one probe task pinned to each alive node reports which toolchains the node has; a
job goes only to nodes that can judge its target (hipcc for HIP, nvcc for CUDA, g++ for every target, since
the source always runs on the CPU runtime), pinned there so Ray never places it on a node without them. A job
whose node dies (or whose worker crashes) is sent again to another eligible node that is still alive; its
outcome says how many attempts it took and where it finally ran. Every node keeps its own compile cache
(``~/.cache/xpiler`` there): the verdicts in it depend on that node's toolchain versions (they are part of
every key, so a shared cache would be correct too, but the cache is SQLite-backed diskcache, which must not
live on a network file system). Nodes must have xpiler installed and the tree at the same path (a shared
file system, or the same checkout on every node). Timing (the tuner) never runs here.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect
from xpiler_core.migration.jobs import FileJob, FileOutcome

NEEDED = {Dialect.HIP: ("hipcc", "g++"), Dialect.CUDA: ("nvcc", "g++"), Dialect.C: ("g++",),
          Dialect.BANG: ("g++",)}
MAX_ATTEMPTS = 3


def probe() -> dict[str, Any]:
    """What a node can do (runs as a task on it)."""
    return {"host": socket.gethostname(), "cpus": os.cpu_count() or 1,
            "toolchains": sorted(t for t in ("hipcc", "nvcc", "g++", "gcc") if shutil.which(t))}


def run_serialized(job_json: str) -> str:
    """A job on a Ray worker: its scratch session lives as long as the worker process."""
    from xpiler_core.migration.jobs import run_job
    from xpiler_core.runtime import children

    children.start_session()
    # a task holds one CPU of its node: its programs run on one thread, with the time limit scaled to match
    os.environ.update({"XPILER_THREADS": "1", "OMP_NUM_THREADS": "1",
                       "XPILER_TIME_SCALE": f"{max(1, os.cpu_count() or 1):g}"})
    return run_job(FileJob.from_json(job_json), socket.gethostname()).to_json()


class RayPool:
    """Runs jobs as Ray tasks on the nodes that have the target's toolchains."""

    name = "ray"

    def __init__(self, address: str, target: Dialect) -> None:
        try:
            import ray
        except ImportError:
            raise XpilerError("--cluster needs Ray: pip install 'xpiler[cluster]'", "<command line>") from None
        self.ray = ray
        self.target = target
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.ERROR)
        self.nodes = self._eligible_nodes()
        if not self.nodes:
            raise XpilerError(f"no node of the Ray cluster at {address} has {' and '.join(NEEDED[target])}: "
                              f"nothing can judge a {target.value} translation there", "<command line>")

    def _eligible_nodes(self) -> dict[str, dict[str, Any]]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote_probe = self.ray.remote(num_cpus=0)(probe)
        alive = [n["NodeID"] for n in self.ray.nodes() if n.get("Alive")]
        refs = {node: remote_probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
                for node in alive}
        eligible: dict[str, dict[str, Any]] = {}
        for node, ref in refs.items():
            try:
                facts: dict[str, Any] = self.ray.get(ref, timeout=120)
            except Exception:  # noqa: BLE001 - a node that cannot answer a probe gets no work
                continue
            if all(t in facts["toolchains"] for t in NEEDED[self.target]):
                eligible[node] = facts
        return eligible

    def describe(self) -> str:
        hosts = ", ".join(sorted(f"{f['host']} ({node[:8]})" for node, f in self.nodes.items()))
        return f"a Ray cluster: {len(self.nodes)} eligible node(s): {hosts}"

    def run(self, work: Iterable[FileJob], on_start: Callable[[FileJob], None] | None = None) -> Iterator[FileOutcome]:
        # Ray's own processes write to the driver's file descriptor 1 (a dead raylet's log dump, 9 KB): while the
        # jobs run, descriptor 1 is the terminal's stderr, so the tool's standard output (--json) stays its own
        sys.stdout.flush()
        saved_stdout = os.dup(1)
        os.dup2(2, 1)
        try:
            yield from self._run(work, on_start)
        finally:
            sys.stdout.flush()
            os.dup2(saved_stdout, 1)
            os.close(saved_stdout)

    def _run(self, work: Iterable[FileJob], on_start: Callable[[FileJob], None] | None) -> Iterator[FileOutcome]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote_job = self.ray.remote(num_cpus=1, max_retries=0)(run_serialized)
        cursor = 0

        def submit(job: FileJob, avoid: set[str]) -> Any:
            nonlocal cursor
            alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
            choices = [n for n in self.nodes if n in alive and n not in avoid] or [n for n in self.nodes if n in alive]
            if not choices:
                return None
            node = choices[cursor % len(choices)]
            cursor += 1
            if on_start is not None:
                on_start(job)
            ref = remote_job.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
                job.to_json())
            pending[ref] = (job, node)
            return ref

        pending: dict[Any, tuple[FileJob, str]] = {}
        attempts: dict[str, int] = {}
        failed_on: dict[str, set[str]] = {}
        for job in work:
            attempts[job.relative] = 1
            submit(job, set())
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            job, node = pending.pop(ref)
            try:
                outcome = FileOutcome.from_json(self.ray.get(ref))
            except Exception as exc:  # noqa: BLE001 - a dead node or worker: the job goes elsewhere
                failed_on.setdefault(job.relative, set()).add(node)
                if attempts[job.relative] < MAX_ATTEMPTS and submit(job, failed_on[job.relative]) is not None:
                    attempts[job.relative] += 1
                    continue
                outcome = FileOutcome(job.relative, "error", f"the job failed on the cluster {attempts[job.relative]} "
                                      f"time(s): {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                                      digest=job.digest)
            outcome.attempts = attempts[job.relative]
            outcome.node = f"{outcome.node or self.nodes.get(node, {}).get('host', '?')} ({node[:8]})"
            if failed_on.get(job.relative):
                outcome.node += f"; re-run after node(s) {', '.join(n[:8] for n in sorted(failed_on[job.relative]))} failed"
            yield outcome
