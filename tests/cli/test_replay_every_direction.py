"""Every direction writes the one manifest schema and ``xpiler replay`` reproduces it (issue: one evidence
layer). Each example is translated by the CLI as a user would, then replayed from its manifest."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

DIRECTIONS = [
    ("vector_add.cu", "hip", "cuda->hip"),
    ("relu.hip", "cuda", "hip->cuda"),
    ("vector_add.cu", "cpu", "cuda->cpu"),
    ("relu.hip", "cpu", "hip->cpu"),
    ("saxpy.c", "cuda", "c->cuda"),
    ("vector_add.cu", "bang", "cuda->bang"),
    ("vector_add.mlu", "cuda", "bang->cuda"),
]


def xpiler(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xpiler_core", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd)


@pytest.mark.parametrize(("example", "target", "direction"), DIRECTIONS, ids=[d[2] for d in DIRECTIONS])
def test_translate_then_replay_reproduces(tmp_path: Path, example: str, target: str, direction: str) -> None:
    source = tmp_path / example
    shutil.copy(EXAMPLES / example, source)
    manifest = tmp_path / "run.json"
    run = xpiler("translate", str(source), "--to", target, "-o", str(tmp_path / "out" / f"out.{target}"),
                 "--manifest", str(manifest), cwd=tmp_path)
    assert run.returncode in (0, 4), run.stdout + run.stderr  # verified, or compiled and not executed
    data = json.loads(manifest.read_text())
    assert data["schema"] == 1 and data["direction"] == direction
    assert set(data) >= {"source", "options", "outcome", "passes", "candidate_sha256", "toolchains", "spec"}
    assert all(set(r) >= {"name", "params", "changed", "refused", "notes", "unresolved", "seconds"}
               for r in data["passes"])
    replay = xpiler("replay", str(manifest), cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "reproduced: same translation" in replay.stdout


def test_replay_refuses_a_changed_source(tmp_path: Path) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLES / "vector_add.cu", source)
    manifest = tmp_path / "run.json"
    assert xpiler("translate", str(source), "--to", "cpu", "--manifest", str(manifest), cwd=tmp_path).returncode == 0
    source.write_text(source.read_text() + "\n// edited\n")
    replay = xpiler("replay", str(manifest), cwd=tmp_path)
    assert replay.returncode == 1 and "the source changed" in replay.stderr


def test_replay_refuses_another_schema(tmp_path: Path) -> None:
    manifest = tmp_path / "old.json"
    manifest.write_text(json.dumps({"schema": 0, "direction": "cuda->cpu", "source": {}, "options": {}, "outcome": {},
                                    "candidate_sha256": ""}))
    replay = xpiler("replay", str(manifest), cwd=tmp_path)
    assert replay.returncode == 1 and "schema 0 is not supported" in replay.stderr and "Traceback" not in replay.stderr
