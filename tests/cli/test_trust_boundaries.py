"""What a workspace may make the command line do (SECURITY.md): a manifest sends nothing anywhere, no write
goes through a symbolic link or outside the output folder, every failure is a message with an exit code,
and a run's limits hold. Each test here failed on the code before issue 30."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from process_marks import ctrl_c_as_in_a_terminal

from xpiler_core.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "vector_add.cu"


def xpiler(*args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xpiler_core", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=timeout)


class Recorder(BaseHTTPRequestHandler):
    """An HTTP endpoint that records every request it gets (and answers nothing useful)."""

    seen: list[dict[str, str | None]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        Recorder.seen.append({"path": self.path, "authorization": self.headers.get("Authorization")})
        self.send_response(500)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _planted_llm_manifest(tmp_path: Path, endpoint: str) -> Path:
    """A manifest as a cloned repository could carry it: an LLM run pointing at someone else's endpoint and
    naming a variable that holds one of the user's secrets."""
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    manifest = tmp_path / "run.json"
    assert main(["translate", str(source), "--to", "hip", "--no-verify", "-o", str(tmp_path / "out.hip"),
                 "--manifest", str(manifest)]) in (0, 3, 4)
    data = json.loads(manifest.read_text())
    data["options"]["proposer"] = "llm"
    data["options"]["verify"] = True  # an LLM proposal is asked for only when it can be verified
    data["proposer"] = {"base_url": endpoint, "model": "attacker-model", "api_key_env": "XPILER_TEST_SECRET"}
    manifest.write_text(json.dumps(data))
    return manifest


def test_a_manifest_cannot_send_a_secret_anywhere(tmp_path: Path, recorder: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("XPILER_LLM_BASE_URL", "XPILER_LLM_MODEL", "XPILER_LLM_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XPILER_TEST_SECRET", "s3cr3t-token")
    monkeypatch.setenv("XPILER_NO_CACHE", "1")
    manifest = _planted_llm_manifest(tmp_path, recorder)
    capsys.readouterr()
    assert main(["replay", str(manifest)]) == 1
    assert Recorder.seen == []
    assert "--allow-llm" in capsys.readouterr().err
    # allowed by the user, but with no endpoint of the user's own: still nothing is sent
    assert main(["replay", str(manifest), "--allow-llm"]) == 1
    assert Recorder.seen == []


def test_an_allowed_llm_replay_goes_to_the_users_endpoint_with_the_users_key(
        tmp_path: Path, recorder: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XPILER_TEST_SECRET", "s3cr3t-token")
    monkeypatch.setenv("MY_KEY", "users-own-key")
    monkeypatch.setenv("XPILER_NO_CACHE", "1")
    monkeypatch.setenv("XPILER_LLM_RETRIES", "0")
    manifest = _planted_llm_manifest(tmp_path, "http://192.0.2.1:9/v1")  # the recorded endpoint: never asked
    capsys.readouterr()
    main(["replay", str(manifest), "--allow-llm", "--llm-base-url", recorder, "--llm-api-key-env", "MY_KEY"])
    err = capsys.readouterr().err
    assert f"replay asks the LLM at {recorder}" in err and "192.0.2.1" in err  # shown before any call
    assert Recorder.seen, "the user's endpoint was asked"
    assert all(r["authorization"] == "Bearer users-own-key" for r in Recorder.seen)


def test_translate_never_writes_through_a_symlink(tmp_path: Path) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "vector_add.hip").symlink_to(victim)
    run = xpiler("translate", str(source), "--to", "hip", "--no-verify", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "symbolic link" in run.stderr and "Traceback" not in run.stderr
    assert victim.read_text() == "precious\n"


def test_a_planted_manifest_folder_link_is_not_followed(tmp_path: Path) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".xpiler").symlink_to(elsewhere, target_is_directory=True)
    run = xpiler("translate", str(source), "--to", "hip", "--no-verify", cwd=tmp_path)
    assert "symbolic link" in run.stderr
    assert list(elsewhere.iterdir()) == []


def test_tree_translation_does_not_follow_links(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(EXAMPLE, tree / "vector_add.cu")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not copy\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kernel.cu").write_text(EXAMPLE.read_text())
    (tree / "notes.txt").symlink_to(secret)
    (tree / "linked").symlink_to(outside, target_is_directory=True)
    out = tmp_path / "out"
    run = xpiler("translate", str(tree), "--to", "hip", "--no-verify", "-o", str(out), cwd=tmp_path)
    assert "Traceback" not in run.stderr
    assert (out / "vector_add.hip").is_file()
    assert not (out / "notes.txt").exists() and not (out / "linked").exists()
    assert "notes.txt: skipped" in run.stderr and "linked: skipped" in run.stderr
    assert "do not copy" not in "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def test_output_problems_are_refused_before_any_work(tmp_path: Path) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    # -o equal to the source: refused at once (the compile cache is off, so real work would take seconds)
    same = xpiler("translate", str(source), "--to", "hip", "-o", str(source), cwd=tmp_path,
                  env={"XPILER_NO_CACHE": "1"}, timeout=20)
    assert same.returncode == 1 and "over its source" in same.stderr and "passes applied" not in same.stdout
    # an output "folder" that is a file: refused before translating
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    run = xpiler("translate", str(source), "--to", "hip", "-o", str(plain / "out.hip"), cwd=tmp_path,
                 env={"XPILER_NO_CACHE": "1"}, timeout=20)
    assert run.returncode == 1 and "not a folder" in run.stderr and "passes applied" not in run.stdout


def test_an_unwritable_output_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root): the permission check cannot fail")
        run = xpiler("translate", str(source), "--to", "hip", "-o", str(locked / "out.hip"), cwd=tmp_path,
                     env={"XPILER_NO_CACHE": "1"}, timeout=20)
        assert run.returncode == 1 and "not writable" in run.stderr and "Traceback" not in run.stderr
        assert "passes applied" not in run.stdout
    finally:
        locked.chmod(0o700)


def test_a_failed_late_write_keeps_the_translation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    keep = tmp_path / "kept"
    monkeypatch.setenv("XPILER_KEEP_DIR", str(keep))
    import xpiler_core.pipeline as pipeline

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pipeline, "write_outputs", fail)
    assert main(["translate", str(source), "--to", "hip", "--no-verify"]) == 1
    captured = capsys.readouterr()
    assert "No space left on device" in captured.err and "kept in" in captured.err
    kept = list(keep.iterdir())
    assert len(kept) == 1 and kept[0].suffix == ".hip" and "vector_add" in kept[0].read_text()
    assert "cuda->hip" in captured.out  # the result is still printed


@pytest.mark.parametrize(("field", "value"), [("target", "bogus"), ("seed", "abc"), ("source_dialect", 7),
                                              ("passes", "api_map"), ("warp_size", 48)])
def test_a_malformed_manifest_is_a_message(tmp_path: Path, field: str, value: object,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    manifest = tmp_path / "run.json"
    assert main(["translate", str(source), "--to", "hip", "--no-verify", "--manifest", str(manifest)]) in (0, 3, 4)
    data = json.loads(manifest.read_text())
    data["options"][field] = value
    manifest.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["replay", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert f"options.{field}" in err and "Traceback" not in err


def test_an_unexpected_exception_is_reported_as_our_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    import xpiler_core.pipeline as pipeline

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(pipeline, "translate", broken)
    assert main(["translate", str(source), "--to", "hip"]) == 5
    err = capsys.readouterr().err
    assert "this is a bug in xpiler" in err and "Traceback" not in err
    logs = list((tmp_path / "state" / "xpiler" / "crashes").iterdir())
    assert len(logs) == 1 and "ZeroDivisionError: injected" in logs[0].read_text()


def test_syntax_errors_stop_the_translation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* x, int n) {\n  int i = threadIdx.x;\n  if (i < n) x[i] = x[i] * 2 +;\n}\n")
    run = xpiler("translate", str(bad), "--to", "hip", cwd=tmp_path)
    assert run.returncode == 1
    assert f"{bad}:3:" in run.stderr and "nothing was translated" in run.stderr
    assert not (tmp_path / "bad.hip").exists()
    going = xpiler("translate", str(bad), "--to", "hip", "--no-verify", "--keep-going", cwd=tmp_path)
    assert (tmp_path / "bad.hip").exists(), going.stderr


def test_what_the_grammar_misreads_but_the_compiler_accepts_is_translated(tmp_path: Path) -> None:
    # qualifier and type macros (common in real code) are syntax errors to the grammar, not to nvcc
    src = tmp_path / "ok.cu"
    src.write_text("#define DEVICE_INLINE __device__ __forceinline__\n#define RESTRICT __restrict__\n"
                   "DEVICE_INLINE float twice(float v) { return 2.0f * v; }\n"
                   "__global__ void k(float* RESTRICT x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) x[i] = twice(x[i]);\n}\n")
    from xpiler_core.dialect import Dialect
    from xpiler_core.frontend.source import parse_text, syntax_diagnostics

    assert syntax_diagnostics(parse_text(src.read_text(), str(src), Dialect.CUDA).tree, str(src))
    run = xpiler("translate", str(src), "--to", "hip", "--no-verify", cwd=tmp_path)
    assert (tmp_path / "ok.hip").exists(), run.stderr


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.cu"
    empty.write_text("\n")
    run = xpiler("translate", str(empty), "--to", "hip", cwd=tmp_path, env={"XPILER_NO_CACHE": "1"}, timeout=20)
    assert run.returncode == 1 and "empty" in run.stderr
    assert not (tmp_path / "empty.hip").exists()


def test_a_malformed_spec_is_reported_where_the_parser_says(tmp_path: Path) -> None:
    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    spec = tmp_path / "bad.toml"
    spec.write_text('name = "v"\nsource = "vector_add.cu"\nentry = = "x"\n')
    run = xpiler("translate", str(source), "--to", "hip", "--spec", str(spec), cwd=tmp_path)
    assert f"{spec}:3:" in run.stderr and "Traceback" not in run.stderr


def test_timeout_bounds_every_test_run(tmp_path: Path) -> None:
    # a kernel that never ends, with a host entry: the automatic test's case runs are bounded by --timeout
    source = tmp_path / "spin.cu"
    source.write_text(EXAMPLE.read_text().replace(
        "c[i] = a[i] + b[i];", "volatile const float* va = a;\n        while (va[i] == va[i]) { }\n        c[i] = 0;"))
    run = xpiler("translate", str(source), "--to", "cpu", "--timeout", "2", cwd=tmp_path,
                 env={"XPILER_NO_CACHE": "1"}, timeout=600)
    assert run.returncode in (3, 4), run.stdout + run.stderr
    manifest = json.loads((tmp_path / ".xpiler" / "spin.cpp.json").read_text())
    text = json.dumps(manifest)
    assert "timeout after 2 s" in text and "timeout after 60 s" not in text, text[:3000]


def test_help_loads_no_translation_code() -> None:
    probe = ("import sys\nfrom xpiler_core.cli import build_parser\nbuild_parser()\n"
             "heavy = ('xpiler_core.pipeline', 'xpiler_core.frontend', 'xpiler_core.passes', 'numpy', 'lsprotocol',"
             " 'pygls', 'z3', 'tree_sitter')\n"
             "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "[]", run.stdout + run.stderr


def test_ctrl_c_while_starting_is_a_message(tmp_path: Path) -> None:
    # from the first of our code on (Python's own start-up, ~30 ms, is not ours), at any point of loading and
    # of the first steps: one line, no traceback
    import signal
    import time

    source = tmp_path / "vector_add.cu"
    shutil.copy(EXAMPLE, source)
    # Python's start-up, as long as it takes on this machine now (a loaded machine takes several times 30 ms)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import runpy"], check=True)
    startup = time.perf_counter() - started
    for step in range(6):
        run = subprocess.Popen([sys.executable, "-m", "xpiler_core", "translate", str(source), "--to", "hip",
                                "-o", str(tmp_path / "out.hip")], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "XPILER_NO_CACHE": "1"},
                               preexec_fn=ctrl_c_as_in_a_terminal)
        time.sleep(max(0.1, 2 * startup) + 0.1 * step)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
        # a traceback through none of our files is Python's own start-up, interrupted before our first line
        assert "Traceback" not in err or "xpiler_core" not in err, err
        assert run.returncode in (0, 130, -signal.SIGINT), (run.returncode, err)


def test_a_compiler_failing_elsewhere_does_not_confirm_the_grammars_errors(tmp_path: Path) -> None:
    # an `if` whose condition sits in a preprocessor branch (valid; the grammar misreads it) in a file whose
    # build fails on this machine for another reason: a library header that is not installed
    src = tmp_path / "prog.cu"
    src.write_text("#include <a_library_not_installed_here.h>\n"
                   "__global__ void k(float* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "#if defined(EXTRA_CHECK)\n"
                   "  if (n > 0)\n"
                   "#endif\n"
                   "  { if (i < n) x[i] = 2.0f * x[i]; }\n}\n")
    from xpiler_core.dialect import Dialect
    from xpiler_core.frontend.source import parse_text, syntax_diagnostics

    assert syntax_diagnostics(parse_text(src.read_text(), str(src), Dialect.CUDA).tree, str(src))
    run = xpiler("translate", str(src), "--to", "hip", "--no-verify", cwd=tmp_path)
    assert "nothing was translated" not in run.stderr, run.stderr
    assert (tmp_path / "prog.hip").exists()
