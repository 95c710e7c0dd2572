"""A real editor as the client: headless Neovim (Debian 0.7.2) opens a .cu, gets diagnostics, runs the
"Translate to HIP" code action through its own code-action flow, and the .hip file the server created via
``workspace/applyEdit`` compiles with hipcc."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xpiler_core import api as core_api
from xpiler_core.dialect import Dialect

HERE = Path(__file__).parent
REPO = HERE.parents[1]
SCRIPT = HERE / "nvim" / "translate_to_hip.lua"
EXAMPLE = REPO / "examples" / "softmax_warp.cu"  # warp-shuffle softmax with a `/ 32` warp index

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,  # ~25 s: starts Neovim, the server and hipcc; run with -m slow
    pytest.mark.skipif(shutil.which("nvim") is None, reason="neovim is not installed (apt-get install neovim)"),
    pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc is not installed"),
    pytest.mark.skipif(
        Dialect.HIP not in core_api.available_targets(Dialect.CUDA), reason="no CUDA→HIP plan in the core yet"
    ),
]


def run_neovim(source: Path, home: Path) -> dict:
    report = home / "report.json"
    env = {
        **os.environ,
        "XPILER_PYTHON": sys.executable,
        "XPILER_SOURCE": str(source),
        "XPILER_REPORT": str(report),
        "XPILER_EXPECT_CODE": "warp_size",
        "PYTHONPATH": str(REPO),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    subprocess.run(
        ["nvim", "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {SCRIPT}"],
        env=env, cwd=source.parent, timeout=240, check=False, stdin=subprocess.DEVNULL, capture_output=True,
    )
    assert report.exists(), "neovim wrote no report"
    return json.loads(report.read_text())


def test_neovim_translates_to_hip_and_hipcc_compiles_it(tmp_path: Path) -> None:
    source = tmp_path / "ws" / EXAMPLE.name
    source.parent.mkdir()
    shutil.copy(EXAMPLE, source)
    original = source.read_text()
    report = run_neovim(source, tmp_path / "home")
    assert report["ok"], report.get("error")
    # Diagnostics reached Neovim with their codes and ranges: the 32-lane warp index is flagged where it is.
    lines = original.splitlines()
    flagged = [d for d in report["diagnostics"] if d["code"].startswith("warp_size")]
    assert flagged and all(re.search(r"/\s*32|>>\s*5", lines[d["range"]["start"]["line"]]) for d in flagged)
    assert "Translate to HIP" in report["actions"]
    assert report["job"]["state"] == "done", report["job"]
    hip = Path(report["hip_path"])
    assert hip.suffix == ".hip" and hip.parent == source.parent
    assert source.read_text() == original, "the source must not change"
    compiled = subprocess.run(
        ["hipcc", "--offload-arch=gfx90a", "-c", str(hip), "-o", str(tmp_path / "softmax.o")],
        env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True, timeout=180,
    )
    assert compiled.returncode == 0, compiled.stderr[-2000:]
