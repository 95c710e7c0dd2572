"""A spec's Python reference is user code: it runs in a child process under the spec's time limit, never in
xpiler's own process (issue 30: an endless reference hung the CLI and the language server)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from test_harness import CUDA, SPEC

from xpiler_core.diagnostics import XpilerError
from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec


def _spec(tmp_path: Path, reference: str, timeout_s: int = 3) -> Path:
    (tmp_path / "saxpy.cu").write_text(CUDA)
    (tmp_path / "ref.py").write_text(reference)
    path = tmp_path / "saxpy.toml"
    path.write_text(f"timeout_s = {timeout_s}\n" + SPEC)
    return path


def test_an_endless_reference_is_stopped_at_the_spec_time_limit(tmp_path: Path) -> None:
    spec = load_spec(str(_spec(tmp_path, "def saxpy(x, y, a, n):\n    while True:\n        pass\n")))
    report = run_spec(spec)
    assert not report.passed
    assert all("did not return within 3 s" in (c.error or "") for c in report.cases), report.summary()


def test_the_reference_runs_in_another_process_and_may_print(tmp_path: Path) -> None:
    marker = tmp_path / "pid.txt"
    reference = ("import os\n"
                 f"def saxpy(x, y, a, n):\n    print('noise from the reference')\n"
                 f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n    return a * x + y\n")
    report = run_spec(load_spec(str(_spec(tmp_path, reference))))
    assert report.passed, report.summary()
    assert int(marker.read_text()) != os.getpid()


def test_scalars_arrive_as_python_numbers_and_tuples_come_back(tmp_path: Path) -> None:
    reference = ("import numpy as np\n"
                 "def saxpy(x, y, a, n):\n    assert isinstance(n, int) and isinstance(a, float), (type(n), type(a))\n"
                 "    assert x.dtype == np.float32 and x.shape == (n,)\n    return (a * x + y,)\n")
    report = run_spec(load_spec(str(_spec(tmp_path, reference))))
    assert report.passed, report.summary()
    assert np.isfinite(report.cases[0].max_abs_err)


def test_a_reference_that_does_not_import_is_reported(tmp_path: Path) -> None:
    spec = load_spec(str(_spec(tmp_path, "import not_a_module_anywhere\n")))
    with pytest.raises(XpilerError, match="not_a_module_anywhere"):
        run_spec(spec)
