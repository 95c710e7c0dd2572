"""``xpiler translate --to cpu --tier portable``: the portable tier alone, verified against the spec's numpy
reference like any translation, recorded in the manifest so that replay reproduces it; refused where a tier
means nothing (another target, no verification)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpiler_core.cli import main

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "elementwise" / "add"


def test_portable_tier_on_request_is_verified_and_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "add.cpp"
    code = main(["translate", str(SUITE / "add.cu"), "--to", "cpu", "--tier", "portable", "-o", str(out),
                 "--spec", str(SUITE / "spec.toml"), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "verified"
    assert result["manifest_data"]["facts"]["tier"] == "portable"
    assert result["manifest_data"]["options"]["cpu_tier"] == "portable"
    assert (tmp_path / "xpiler_simt" / "cuda_runtime.h").is_file()  # the header set lands beside the output
    assert main(["replay", result["manifest"]]) == 0
    assert "reproduced" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [["--to", "hip"], ["--to", "cpu", "--no-verify"]])
def test_portable_tier_is_refused_where_it_means_nothing(tmp_path: Path, extra: list[str]) -> None:
    assert main(["translate", str(SUITE / "add.cu"), *extra, "--tier", "portable", "-o", str(tmp_path / "o")]) == 2
