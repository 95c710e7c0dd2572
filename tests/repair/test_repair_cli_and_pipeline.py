"""``xpiler repair`` prints the diff and leaves the candidate alone; the pipeline hook repairs a failing
translation, re-verifies it with the target compiler and the spec, and records the attempt in the manifest."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, translate
from xpiler_core.repair.hook import repair_translation, should_repair
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
AVGPOOL = REPO / "benchmarks" / "suite" / "pooling" / "avgpool2d"


def test_cli_prints_the_repair_diff_and_does_not_touch_the_candidate(tmp_path: Path) -> None:
    original = (AVGPOOL / "avgpool2d.cu").read_text()
    buggy = original.replace("ow >= OW", "ow < OW")
    candidate = tmp_path / "pool.cu"
    candidate.write_text(buggy)
    out_file = tmp_path / "fixed.cu"
    run = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "repair", str(candidate), "--spec", str(AVGPOOL / "spec.toml"),
         "--output", str(out_file)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "-  if (oh >= OH || ow < OW) return;" in run.stdout
    assert "+  if (oh >= OH || ow >= OW) return;" in run.stdout
    assert candidate.read_text() == buggy  # never modified without --write
    assert out_file.read_text() == original
    spec = load_spec(AVGPOOL / "spec.toml")
    assert run_spec(spec, candidate_text=out_file.read_text(), seed=4).passed


def test_cli_reports_a_missing_spec_as_a_located_error(tmp_path: Path) -> None:
    candidate = tmp_path / "k.cu"
    candidate.write_text("__global__ void k() {}\n")
    run = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "repair", str(candidate), "--spec", str(tmp_path / "none.toml")],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr


def test_pipeline_hook_repairs_a_failing_hip_translation_and_records_it(tmp_path: Path) -> None:
    spec_path = AVGPOOL / "spec.toml"
    source = (AVGPOOL / "avgpool2d.cu").read_text()
    options = TranslateOptions(target=Dialect.HIP, spec_path=str(spec_path), repair=False)
    good = translate(source, str(AVGPOOL / "avgpool2d.cu"), options)
    assert good.status == "verified", good.summary
    # A translation that went wrong in one guard: what the pipeline sees when a pass output fails its tests.
    bad_text = good.output_text.replace("ow >= OW", "ow < OW")
    assert bad_text != good.output_text
    spec = load_spec(spec_path)
    failing = run_spec(spec, candidate_text=bad_text, candidate_dialect=Dialect.HIP)
    assert not failing.passed
    bad = dataclasses.replace(good, output_text=bad_text, status="unresolved", tests=failing, summary="different results")
    assert should_repair(bad, options)
    fixed = repair_translation(bad, options)
    assert fixed.status == "verified" and fixed.output_text == good.output_text
    record = fixed.manifest["repair"]
    assert record["status"] == "repaired" and record["compile_ok"] is True
    assert record["edits"][0]["old"] == "ow < OW" and record["edits"][0]["new"] == "ow >= OW"
    assert record["model"]["op"] == ">=" and record["seconds"] > 0
    assert record["before_sha256"] != record["after_sha256"]
    assert fixed.manifest["outcome"]["status"] == "verified"
    assert run_spec(spec, candidate_text=fixed.output_text, candidate_dialect=Dialect.HIP, seed=9).passed
