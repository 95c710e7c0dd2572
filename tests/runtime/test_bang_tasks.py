"""Task coordinates for {x,y,z} launches of each task type, cluster/all barriers with real
concurrency, per-core NRAM, deadlock reports and launch checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:  # fixtures come from conftest.py; the class is only needed for annotations
    from tests.runtime.conftest import BangLib


BLOCK, UNION1, UNION2, UNION4 = 1, 4, 8, 16


def expected_ids(x: int, y: int, z: int, ktype: int) -> np.ndarray:
    """The coordinates manuals/bang/tasks.md defines, computed independently of the model."""
    rows = []
    total = x * y * z
    cores = 1 if ktype == BLOCK else 4
    for t in range(total):
        rows.append([t, t % x, (t // x) % y, t // (x * y), total, x, y, z, t // cores, total // cores, t % cores, cores])
    return np.array(rows, np.int32)


@pytest.mark.parametrize(
    "x,y,z,ktype",
    [(1, 1, 1, BLOCK), (3, 2, 2, BLOCK), (4, 1, 1, UNION1), (4, 4, 1, UNION1), (8, 2, 1, UNION2), (16, 1, 3, UNION4),
     (12, 1, 1, UNION1)],
)
def test_task_coordinates(bang: BangLib, x: int, y: int, z: int, ktype: int) -> None:
    total = x * y * z
    out = bang.ok("t_ids", np.full(total * 12, -7, np.int32), x, y, z, ktype).arrays[0].reshape(total, 12)
    np.testing.assert_array_equal(out, expected_ids(x, y, z, ktype))


@pytest.mark.parametrize("tasks", [4, 8, 32])
def test_sync_cluster_shares_sram_within_a_cluster(bang: BangLib, rng: np.random.Generator, tasks: int) -> None:
    values = rng.normal(size=tasks).astype(np.float32)
    out = bang.ok("t_cluster_sum", np.zeros(tasks // 4, np.float32), values, tasks).arrays[0]
    np.testing.assert_allclose(out, values.reshape(-1, 4).astype(np.float64).sum(axis=1), rtol=1e-6)


@pytest.mark.parametrize("tasks,ktype", [(1, BLOCK), (5, BLOCK), (8, UNION1), (16, UNION4)])
def test_sync_all_orders_every_task_and_keeps_nram_per_core(bang: BangLib, tasks: int, ktype: int) -> None:
    out = bang.ok("t_sync_all", np.zeros(tasks, np.float32), np.zeros(tasks, np.float32), tasks, ktype).arrays[0]
    ids = np.arange(tasks)
    np.testing.assert_array_equal(out, ((ids + 1) % tasks) * 10 + ids)


def test_deadlock_is_reported(bang: BangLib) -> None:
    r = bang.call("t_deadlock", np.zeros(4, np.float32))
    assert r.error is not None and "deadlock in kernel k_deadlock" in r.error and "__sync_cluster" in r.error


@pytest.mark.parametrize("x", [4, 6, 12])
def test_union2_needs_multiple_of_eight(bang: BangLib, x: int) -> None:
    r = bang.call("t_bad_union", np.zeros(12 * x, np.int32), x)
    assert r.error is not None and "multiple of 8" in r.error


def test_runaway_kernel_times_out_and_the_worker_recovers(bang: BangLib) -> None:
    from xpiler_core.runtime.bang.run import BangWorker

    with BangWorker(timeout_s=2) as worker:
        r = worker.call(bang.path, "t_spin", [np.zeros(1, np.int32)])
        assert r.error is not None and r.error.startswith("timeout: t_spin")
        after = worker.call(bang.path, "t_align", [np.zeros(4, np.float32), np.ones(4, np.float32), ("int", 4)])
        assert after.error is None and list(after.arrays[0]) == [1.0] * 4


def test_crash_is_reported_as_segmentation_fault(bang: BangLib) -> None:
    r = bang.call("t_crash", np.zeros(1, np.float32))
    assert r.error == "segmentation fault in t_crash"


def test_stack_overflow_hits_the_guard_page(bang: BangLib) -> None:
    assert bang.ok("t_deep", 10, np.ones(1, np.float32)).arrays[1][0] == 55.0  # sum of 10..1
    r = bang.call("t_deep", 100000, np.zeros(1, np.float32))  # ~400 MB of frames on a 1 MiB stack
    assert r.error == "segmentation fault in t_deep"


@pytest.mark.parametrize("tasks,n", [(4, 1), (8, 16), (16, 200)])
def test_atomic_add_accumulates_and_returns_old_values(bang: BangLib, tasks: int, n: int) -> None:
    res = bang.ok("t_atomic", np.zeros(n, np.int32), np.zeros(tasks * n, np.int32), n, tasks, 0)
    acc, seen = res.arrays[0], res.arrays[1].reshape(tasks, n)
    base = np.arange(1, n + 1)
    np.testing.assert_array_equal(acc, base * tasks * (tasks + 1) // 2)
    # Old values, in the order the tasks ran, are the running sums: each is the previous plus its adder.
    order = np.argsort(seen[:, 0], kind="stable")
    running = np.zeros(n, np.int64)
    for t in order:
        np.testing.assert_array_equal(seen[t], running)
        running += (t + 1) * base


def test_atomic_add_scalar_form(bang: BangLib) -> None:
    res = bang.ok("t_atomic", np.zeros(1, np.int32), np.zeros(8, np.int32), 1, 8, 1)
    seen = res.arrays[1]
    assert res.arrays[0][0] == sum(range(1, 9))
    running = 0
    for t in np.argsort(seen, kind="stable"):
        assert seen[t] == running
        running += t + 1
