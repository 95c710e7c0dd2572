"""Runs the VS Code extension's unit tests (TypeScript, node's test runner) as part of the Python suite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "vscode-client"


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_extension_unit_tests_pass() -> None:
    if not (CLIENT / "node_modules").is_dir():
        pytest.skip("vscode-client/node_modules missing: run scripts/test.sh (it runs npm ci)")
    result = subprocess.run(
        ["npm", "test", "--silent"], cwd=CLIENT, capture_output=True, text=True, timeout=300, check=False
    )
    summary = [line for line in result.stdout.splitlines() if line.startswith(("# pass", "# fail", "not ok"))]
    assert result.returncode == 0, "\n".join(summary) + "\n" + result.stdout[-4000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout, "\n".join(summary)
