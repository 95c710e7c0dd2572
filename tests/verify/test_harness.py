"""run_spec / differential on small specs: pass, mismatch details, C candidates, HIP at warp 64."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.verify.harness import differential, run_spec
from xpiler_core.verify.spec import load_spec

CUDA = r"""
__global__ void saxpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
SPEC = """
name = "saxpy"
source = "saxpy.cu"
entry = "saxpy"
grid = ["ceil_div(n, 128)"]
block = [128]
reference = "ref.py:saxpy"
tolerance = { atol = 1e-5, rtol = 1e-5 }
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
init = "uniform(-1, 1)"
[[args]]
name = "y"
dtype = "float32"
shape = ["n"]
role = "inout"
[[args]]
name = "a"
dtype = "float32"
role = "scalar"
value = "2.5"
[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"
[[cases]]
n = 1000
[[cases]]
n = 128
"""
REF = "def saxpy(x, y, a, n):\n    return a * x + y\n"


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("spec")
    (d / "saxpy.cu").write_text(CUDA)
    (d / "ref.py").write_text(REF)
    (d / "saxpy.toml").write_text(SPEC)
    return d / "saxpy.toml"


def test_source_passes_against_numpy(spec_path: Path) -> None:
    report = run_spec(load_spec(spec_path))
    assert report.passed and report.build_error is None and report.warp_size == 32
    assert [c.sizes for c in report.cases] == [{"n": 1000}, {"n": 128}]


def test_wrong_candidate_reports_first_mismatch(spec_path: Path) -> None:
    wrong = CUDA.replace("if (i < n)", "if (i < n && i != 517)")
    report = run_spec(load_spec(spec_path), candidate_text=wrong, candidate_dialect=Dialect.CUDA, cases=[0])
    assert not report.passed
    (case,) = report.cases
    assert case.output_name == "y" and case.mismatches == 1 and case.first_mismatch == (517,)
    assert case.expected is not None and case.got is not None and case.expected != case.got


def test_c_host_candidate(spec_path: Path) -> None:
    c_text = (
        "void saxpy_cpu(const float* x, float* y, float a, int n) {\n"
        "  #pragma omp parallel for\n"
        "  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n"
        "}\n"
    )
    report = run_spec(
        load_spec(spec_path),
        candidate_text=c_text,
        candidate_dialect=Dialect.C,
        candidate_entry="saxpy_cpu",
        candidate_kind="host",
    )
    assert report.passed, report.summary()


def test_build_error_is_reported(spec_path: Path) -> None:
    report = run_spec(load_spec(spec_path), candidate_text=CUDA.replace("a * x[i]", "a * q[i]"))
    assert not report.passed and report.build_error is not None
    assert "candidate.cu:4:" in report.build_error and "'q' was not declared" in report.build_error


def test_differential_hip_port(spec_path: Path) -> None:
    hip = "#include <hip/hip_runtime.h>\n" + CUDA
    report = differential(
        load_spec(spec_path),
        a_text=CUDA,
        a_dialect=Dialect.CUDA,
        a_warp=32,
        b_text=hip,
        b_dialect=Dialect.HIP,
        b_warp=None,
    )
    assert report.passed and report.warp_size == 64
    off = hip.replace("a * x[i]", "a * x[i] + 1e-3f")
    bad = differential(
        load_spec(spec_path),
        a_text=CUDA,
        a_dialect=Dialect.CUDA,
        a_warp=32,
        b_text=off,
        b_dialect=Dialect.HIP,
        b_warp=None,
        cases=[1],
    )
    assert not bad.passed and bad.cases[0].mismatches > 0


def test_cli_test_command(spec_path: Path, tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "test", str(spec_path)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert "PASS: 2/2 cases" in ok.stdout
    cand = tmp_path / "cand.cu"
    cand.write_text(CUDA.replace("a * x[i]", "x[i]"))
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "xpiler_core",
            "test",
            str(spec_path),
            "--candidate",
            str(cand),
            "--warp-size",
            "64",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "MISMATCH in 'y'" in bad.stdout and "warp size 64" in bad.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "xpiler_core", "test", str(tmp_path / "nope.toml")],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "nope.toml:1:1: error: cannot read spec" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_kept_reference_outputs_give_the_same_verdicts(tmp_path: Path) -> None:
    """Repair screens many candidates against one spec keeping the reference's outputs: each verdict and its
    errors equal those of a run that asks the reference afresh (the source as reference: its plain, poisoned
    and reordered runs are kept)."""
    from xpiler_core.verify.autospec import build_spec
    from xpiler_core.verify.harness import ExpectationStore

    source = (Path(__file__).resolve().parents[1] / "repair" / "data" / "recorded_host" / "axpy.cu").read_text()
    built = build_spec(source, "axpy.cu", Dialect.CUDA, tmp_path)
    assert built.spec_path is not None, built.reason
    spec = load_spec(str(built.spec_path))
    store: ExpectationStore = {}
    for text in (source, source.replace("if (i < n)", "if (i < n - 1)"), source.replace("i % 3", "i % 2"), source):
        fresh, kept = run_spec(spec, candidate_text=text), run_spec(spec, candidate_text=text, expectations=store)
        assert kept.passed == fresh.passed
        assert [(c.passed, c.error, c.mismatches) for c in kept.cases] == \
            [(c.passed, c.error, c.mismatches) for c in fresh.cases]
    assert {tag for tag, _, _ in store} == {"plain", "poisoned", "schedule 0", "schedule 1"}
