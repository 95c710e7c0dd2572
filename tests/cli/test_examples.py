"""A first try that works: every file in examples/ verifies, as shipped and with no flags, in every direction
examples/README.md lists for it (its spec, where it needs one, lies beside it)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from xpiler_core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SUFFIX = {"hip": ".hip", "cuda": ".cu", "cpu": ".cpp", "bang": ".mlu"}


def listed() -> list[tuple[str, str]]:
    rows = []
    for line in (EXAMPLES / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            rows += [(cells[0].strip("`"), target) for target in re.split(r",\s*", cells[2])]
    return rows


def test_the_readme_lists_every_example() -> None:
    sources = {p.name for p in EXAMPLES.iterdir() if p.suffix in (".cu", ".hip", ".c", ".mlu")}
    assert {name for name, _ in listed()} == sources


@pytest.mark.parametrize(("name", "target"), listed(), ids=[f"{n}->{t}" for n, t in listed()])
def test_the_example_verifies_as_shipped(tmp_path: Path, name: str, target: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    if target in ("hip", "cuda") and shutil.which({"hip": "hipcc", "cuda": "nvcc"}[target]) is None:
        pytest.skip(f"the {target} compiler is not installed")
    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work)
    code = main(["translate", str(work / name), "--to", target,
                 "-o", str(tmp_path / "out" / (Path(name).stem + SUFFIX[target]))])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
