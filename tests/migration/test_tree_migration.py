"""Migrating a tree (``xpiler translate DIR -o OUT``): the files run on every core with the same per-file
results as one at a time, a re-run redoes only what changed or did not finish (a killed run resumes), and
the report holds every file's outcome (its HTML is opened in a real browser in ``test_report_browser.py``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
COMPACT = REPO / "tests" / "migration" / "data" / "compact.cu"


def make_tree(root: Path) -> Path:
    tree = root / "tree"
    (tree / "sub").mkdir(parents=True)
    for name in ("vector_add.cu", "softmax_warp.cu", "softmax_warp.toml", "examples_ref.py", "relu.hip"):
        shutil.copy(EXAMPLES / name, tree / name)
    shutil.copy(COMPACT, tree / "sub" / "compact.cu")
    (tree / "sub" / "notes.txt").write_text("kept as it is\n")
    return tree


def migrate(tree: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    run = subprocess.run([sys.executable, "-m", "xpiler_core", "translate", str(tree), "--to", "cpu", "-o", str(out),
                          "--json", *extra], capture_output=True, text=True, timeout=900,
                         env={**os.environ, **(env or {})})
    assert run.returncode in (0, 3, 4), run.stderr
    return json.loads(run.stdout)


def outputs(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*.cpp"))}


def test_two_jobs_give_the_same_results_as_one(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    one = migrate(tree, tmp_path / "one", "--jobs", "1")
    two = migrate(tree, tmp_path / "two", "--jobs", "2")
    assert [(f["file"], f["status"]) for f in one["files"]] == [(f["file"], f["status"]) for f in two["files"]]
    assert len(one["files"]) == 4 and {f["status"] for f in one["files"]} == {"verified"}
    assert outputs(tmp_path / "one") == outputs(tmp_path / "two")
    assert (tmp_path / "two" / "sub" / "notes.txt").read_text() == "kept as it is\n"
    report = json.loads((tmp_path / "two" / "xpiler-report.json").read_text())
    assert report["summary"]["by_status"] == {"verified": 4}
    assert {f["relative"] for f in report["files"]} == {f["file"] for f in two["files"]}
    assert all(f["diff"].startswith("--- ") for f in report["files"])


def test_a_rerun_redoes_only_what_changed(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    out = tmp_path / "out"
    first = migrate(tree, out, "--jobs", "2")
    assert not any(f["reused"] for f in first["files"])
    again = migrate(tree, out, "--jobs", "2")
    assert all(f["reused"] for f in again["files"])
    # a changed source, and a changed spec beside a file: those two are redone, nothing else
    (tree / "vector_add.cu").write_text((tree / "vector_add.cu").read_text() + "\n// edited\n")
    spec = tree / "softmax_warp.toml"
    spec.write_text(spec.read_text().replace("cols = 33", "cols = 35"))
    third = migrate(tree, out, "--jobs", "2")
    redone = sorted(f["file"] for f in third["files"] if not f["reused"])
    assert redone == ["softmax_warp.cu", "vector_add.cu"]
    assert migrate(tree, out, "--fresh")["files"][0]["reused"] is False


def test_a_killed_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    out = tmp_path / "out"
    record = out / ".xpiler" / "run.json"
    run = subprocess.Popen([sys.executable, "-m", "xpiler_core", "translate", str(tree), "--to", "cpu", "-o", str(out),
                            "--jobs", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "XPILER_NO_CACHE": "1"})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # kill it once one file is recorded and at least one is not
        if record.is_file() and 1 <= len(json.loads(record.read_text())["files"]) < 4:
            break
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=60)
    finished = set(json.loads(record.read_text())["files"])
    assert 1 <= len(finished) < 4
    resumed = migrate(tree, out, "--jobs", "2")
    assert {f["file"] for f in resumed["files"] if f["reused"]} == finished
    assert len(resumed["files"]) == 4 and {f["status"] for f in resumed["files"]} == {"verified"}


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_a_bad_job_count_is_a_usage_error(tmp_path: Path, jobs: str) -> None:
    run = subprocess.run([sys.executable, "-m", "xpiler_core", "translate", str(make_tree(tmp_path)), "--to", "cpu",
                          "-o", str(tmp_path / "out"), "--jobs", jobs], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "--jobs must be at least 1" in run.stderr
