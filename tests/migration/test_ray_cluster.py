"""The same migration on a Ray cluster (``--cluster``): a head and a worker node started with ``ray start`` on
this machine, every file run as a task on a node that has the target's toolchains; the per-file results are
those of the local run. Slow (starting Ray takes seconds) and skipped where Ray is not installed
(``pip install xpiler[cluster]``)."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_tree_migration import make_tree, migrate, outputs

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("ray") is None, reason="Ray is not installed")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    common = ["--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats"]
    subprocess.run(["ray", "start", "--head", f"--port={port}", "--include-dashboard=false", *common],
                   check=True, capture_output=True, timeout=120)
    try:
        subprocess.run(["ray", "start", f"--address=127.0.0.1:{port}", *common], check=True, capture_output=True,
                       timeout=120)
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run(["ray", "stop", "--force"], capture_output=True, timeout=120)


def test_a_cluster_run_gives_the_local_results(tmp_path: Path, cluster: str) -> None:
    tree = make_tree(tmp_path)
    local = migrate(tree, tmp_path / "local", "--jobs", "2")
    remote = migrate(tree, tmp_path / "ray", "--cluster", cluster)
    assert [(f["file"], f["status"]) for f in local["files"]] == [(f["file"], f["status"]) for f in remote["files"]]
    assert outputs(tmp_path / "local") == outputs(tmp_path / "ray")
