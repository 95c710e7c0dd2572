"""``xpiler translate --proposer``: the default asks nobody; the ``--llm-*`` flags reach the endpoint.

The kernel and the scripted replies are those of ``test_end_to_end``; what is asserted comes from what
crossed the socket and from the harness's verdict against the numpy reference.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from xpiler_core.cli import main
from xpiler_core.cli import translate as translate_cli

from .conftest import ScriptedOpenAI
from .test_end_to_end import SOURCE, SPEC, correct_hip, fenced, needs_hipcc


def translate_argv(out_dir: Path, *extra: str) -> list[str]:
    return ["translate", str(SOURCE), "--to", "hip", "--spec", str(SPEC), "-o", str(out_dir / "add.hip"),
            "--manifest", str(out_dir / "manifest.json"), *extra]


@needs_hipcc
def test_the_cli_default_makes_no_network_call(network_refused: list[object], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # an endpoint configured in the environment is still never asked without --proposer
    monkeypatch.setenv("XPILER_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("XPILER_LLM_MODEL", "m")
    assert main(translate_argv(tmp_path)) == 0
    assert network_refused == []
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["outcome"]["status"] == "verified"
    assert manifest["options"]["proposer"] == "rules"
    assert "proposer" not in manifest


def test_the_cli_default_does_not_load_the_llm_code(tmp_path: Path) -> None:
    argv = translate_argv(tmp_path, "--no-verify")
    probe = (
        "import sys\n"
        "from xpiler_core.cli import main\n"
        f"assert main({argv!r}) == 3\n"  # unverified by choice: "unresolved"
        "print(sorted(m for m in ('openai', 'httpx', 'xpiler_core.llm', 'rank_bm25') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


@needs_hipcc
def test_the_llm_flags_override_the_environment(openai_server: ScriptedOpenAI, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # the environment names a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    monkeypatch.setenv("XPILER_LLM_BASE_URL", f"http://127.0.0.1:{dead_port}/v1")
    monkeypatch.setenv("XPILER_LLM_MODEL", "model-from-the-environment")
    monkeypatch.setenv("XPILER_LLM_RETRIES", "0")
    monkeypatch.setenv("XPILER_LLM_REPAIR_BUDGET", "0")
    monkeypatch.setenv("XPILER_CLI_TEST_KEY", "sk-cli-456")
    model = f"scripted-{uuid.uuid4().hex[:12]}"
    openai_server.queue(fenced(correct_hip()))
    argv = translate_argv(tmp_path, "--proposer", "llm", "--llm-base-url", openai_server.base_url,
                          "--llm-model", model, "--llm-api-key-env", "XPILER_CLI_TEST_KEY")
    assert main(argv) == 0
    [request] = openai_server.requests
    assert request["body"]["model"] == model
    assert request["authorization"] == "Bearer sk-cli-456"
    assert (tmp_path / "add.hip").read_text() == correct_hip()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["outcome"]["status"] == "verified"
    assert manifest["outcome"]["tests"]["passed"]  # the harness's verdict against numpy
    assert manifest["proposer"]["mode"] == "llm" and manifest["proposer"]["model"] == model
    assert manifest["proposer"]["api_key_env"] == "XPILER_CLI_TEST_KEY"
    assert "sk-cli-456" not in json.dumps(manifest)  # the key itself is never recorded


def test_llm_flags_without_an_llm_proposer_are_a_usage_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(translate_argv(tmp_path, "--llm-model", "m", "--llm-base-url", "http://127.0.0.1:9/v1")) == 2
    err = capsys.readouterr().err
    assert "--llm-base-url, --llm-model only apply with --proposer llm or rules-then-llm" in err
    assert not (tmp_path / "add.hip").exists()


def test_an_unknown_proposer_is_refused_by_the_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(translate_argv(tmp_path, "--proposer", "gpt"))
    assert exited.value.code == 2
    assert "invalid choice: 'gpt'" in capsys.readouterr().err


def test_the_cli_offers_exactly_the_pipelines_proposers() -> None:
    from xpiler_core.llm.hook import PROPOSERS

    assert translate_cli.PROPOSERS == PROPOSERS


@needs_hipcc
def test_replay_of_an_llm_run_needs_the_users_consent_and_endpoint(openai_server: ScriptedOpenAI, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XPILER_NO_CACHE", raising=False)
    for name in ("XPILER_LLM_BASE_URL", "XPILER_LLM_MODEL", "XPILER_LLM_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XPILER_LLM_RETRIES", "0")
    monkeypatch.setenv("XPILER_LLM_REPAIR_BUDGET", "0")
    # a reply the rules would not write: the replay reproduces it only through the recorded model
    reply = correct_hip().replace("\n", "\n// proposed by the LLM\n", 1)
    assert reply != correct_hip()
    openai_server.queue(fenced(reply))
    argv = translate_argv(tmp_path, "--proposer", "llm", "--llm-base-url", openai_server.base_url,
                          "--llm-model", f"scripted-{uuid.uuid4().hex[:12]}")
    assert main(argv) == 0
    assert (tmp_path / "add.hip").read_text() == reply
    # the manifest alone never sends the source anywhere (SECURITY.md)
    assert main(["replay", str(tmp_path / "manifest.json")]) == 1
    assert len(openai_server.requests) == 1
    # the user allows it and names the endpoint; the model is the recorded one
    assert main(["replay", str(tmp_path / "manifest.json"), "--allow-llm",
                 "--llm-base-url", openai_server.base_url]) == 0
    assert len(openai_server.requests) == 1  # the replay's reply came from the cache
