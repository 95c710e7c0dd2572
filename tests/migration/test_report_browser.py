"""The migration report opened in a real browser (Chromium through playwright-core, as the VS Code e2e does):
it loads from disk with no server, shows the totals, sorts by a column, filters by text and by status, and a
row opens its diff. Skipped where no browser is installed, except where ``XPILER_REQUIRE_BROWSER=1`` (CI runs
it that way after the VS Code e2e has installed Chromium and the driver)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_tree_migration import make_tree, migrate

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "vscode-client" / "e2e" / "migration_report.mjs"
CHROMIUM = os.environ.get("XPILER_E2E_CHROMIUM", "/usr/bin/chromium")

pytestmark = pytest.mark.e2e


def browser_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    if not (REPO / "vscode-client" / "e2e" / "node_modules" / "playwright-core").is_dir():
        return "vscode-client/e2e has no playwright-core (scripts/e2e_vscode.sh installs it)"
    return None


def test_the_report_works_in_a_browser(tmp_path: Path) -> None:
    missing = browser_missing()
    if missing:
        if os.environ.get("XPILER_REQUIRE_BROWSER") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    out = tmp_path / "out"
    migrate(make_tree(tmp_path), out, "--jobs", "2")
    shots = Path(os.environ.get("XPILER_E2E_SHOTS", str(tmp_path)))
    shots.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(["node", str(DRIVER), str(out / "xpiler-report.html")], capture_output=True, text=True,
                         timeout=180, cwd=DRIVER.parent, env={**os.environ, "XPILER_E2E_SHOTS": str(shots)})
    assert run.returncode == 0, run.stderr + run.stdout
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["errors"] == []
    assert "to cpu" in seen["title"] and "verified: 4" in seen["totals"]
    assert sorted(seen["rows"]) == ["relu.hip", "softmax_warp.cu", "sub/compact.cu", "vector_add.cu"]
    assert seen["sortState"] == "descending" and seen["sortedBySeconds"] == sorted(seen["sortedBySeconds"], reverse=True)
    assert seen["filtered"] == ["sub/compact.cu"]
    assert len(seen["verifiedOnly"]) == 4
    assert seen["diff"].startswith("---") and "\n+" in seen["diff"]
    assert (shots / "migration-report.png").is_file()
