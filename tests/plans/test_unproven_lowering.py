"""A structural CPU lowering no test checked is emitted only where it is exact by construction. ``__activemask``
after lanes left early counts every lane of the warp in the structural lowering (convergence is not modelled):
with verification off, the translation is the portable tier instead, says why at file:line:col, and computes
what the source computes on the runtime (the source's own outputs are the reference)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xpiler_core.dialect import Dialect
from xpiler_core.pipeline import translate
from xpiler_core.project import build_settings
from xpiler_core.translation import TranslateOptions
from xpiler_core.verify import autospec
from xpiler_core.verify.spec import load_spec
from xpiler_core.verify.targets import CpuRunner

SOURCE = Path(__file__).resolve().parents[2] / "benchmarks" / "wave64" / "activemask_early_exit.cu"


def test_unverified_activemask_kernel_is_portable_and_right(tmp_path: Path) -> None:
    text = SOURCE.read_text(encoding="utf-8")
    src = tmp_path / SOURCE.name
    src.write_text(text, encoding="utf-8")
    built = autospec.build_spec(text, str(src), Dialect.CUDA, tmp_path / "spec")
    assert built.spec_path is not None, built.reason
    result = translate(text, str(src), TranslateOptions(target=Dialect.C, verify=False,
                                                         spec_path=str(built.spec_path)))
    notes = " ".join(result.manifest.get("notes", []))
    assert "portable tier: no test ran" in notes and f"{src}:7:" in notes, notes
    assert result.companions, "the portable tier ships its SIMT headers"
    spec = load_spec(str(built.spec_path))
    launcher = f"xp_launch_{spec.entry}"
    assert f'extern "C" void {launcher}(' in result.output_text
    spec = dataclasses.replace(spec, entry=launcher, kind="host", reference_entry=spec.entry, reference_kind="kernel")
    runner = CpuRunner(build=build_settings(None, str(tmp_path / "out.cpp"), result.output_text,
                                            dict(result.companions)))
    report = runner.run(spec, result.output_text, 3, None)
    assert report.passed and report.tested, report.summary()
