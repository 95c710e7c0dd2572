"""The manuals travel with the package: a checkout reads ``manuals/`` through the ``xpiler_core/_manuals``
symlink, and a wheel (what ``pip install .`` installs) carries a copy of every manual."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from xpiler_core.llm.manuals import PACKAGED_MANUALS

from .conftest import REPO

MANUALS = sorted(p.relative_to(REPO / "manuals").as_posix() for p in (REPO / "manuals").rglob("*.md"))


def test_the_checkout_reads_the_repository_manuals_through_the_package() -> None:
    assert PACKAGED_MANUALS.is_symlink()
    assert PACKAGED_MANUALS.resolve() == (REPO / "manuals").resolve()


@pytest.mark.slow
def test_a_built_wheel_carries_every_manual_and_finds_them(tmp_path: Path) -> None:
    # Build from a copy: building in place would leave build/ and egg-info behind in the checkout.
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, tree / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("xpiler_core", "xpiler_server", "manuals"):
        shutil.copytree(REPO / name, tree / name, symlinks=True, ignore=ignore)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-q", "-w", str(wheels), str(tree)], check=True, capture_output=True, timeout=300)
    [wheel] = wheels.glob("xpiler-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for manual in MANUALS:
            member = f"xpiler_core/_manuals/{manual}"
            assert member in names, f"{manual} is missing from the wheel"
            assert archive.read(member) == (REPO / "manuals" / manual).read_bytes()
        site = tmp_path / "site"
        archive.extractall(site)
    # The unpacked wheel first on the path, as in a non-editable install, with no manuals override.
    env = {k: v for k, v in os.environ.items() if k != "XPILER_MANUALS_DIR"}
    env["PYTHONPATH"] = str(site)
    probe = ("from xpiler_core.llm.manuals import MANUALS_ROOT, load_chunks\n"
             "print(MANUALS_ROOT)\n"
             "print(len({c.file for c in load_chunks()}))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                         check=True, timeout=120)
    root, files = out.stdout.split()
    assert Path(root) == site / "xpiler_core" / "_manuals"
    with_sections = {m for m in MANUALS if "\n## " in "\n" + (REPO / "manuals" / m).read_text(encoding="utf-8")}
    assert int(files) == len(with_sections)
