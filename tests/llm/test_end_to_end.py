"""LLM proposals end to end: the real ``openai`` client against a scripted server on loopback.

The kernel is the suite's broadcast add (CUDA → HIP) with its numpy reference; the replies are a correct
HIP translation, a wrong one (subtracts), and malformed answers. What is asserted comes from the harness's
verdict against numpy and from what crossed the socket, never from the proposer's own opinion.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import uuid
from pathlib import Path

import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.llm import LLMConfig, LLMUnavailable, ProposerConfig, propose
from xpiler_core.llm.client import complete
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.pipeline import TranslateOptions, translate

from .conftest import REPO, Raw, ScriptedOpenAI

# Verification compiles with the real hipcc; without it only the protocol-level tests can run.
needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")

SPEC = REPO / "benchmarks" / "suite" / "elementwise" / "add" / "spec.toml"
SOURCE = SPEC.with_name("add.cu")


def source_text() -> str:
    return SOURCE.read_text(encoding="utf-8")


def correct_hip() -> str:
    return "#include <hip/hip_runtime.h>\n" + source_text()


def wrong_hip() -> str:
    wrong = correct_hip().replace("] + B[", "] - B[")
    assert wrong != correct_hip()
    return wrong


def fenced(code: str) -> str:
    return f"Step 1: T_add[i, j] = A[i, j] + B[j].\nStep 2: nothing warp-specific.\n```cpp\n{code}```\n"


def config_for(server: ScriptedOpenAI, **extra: object) -> LLMConfig:
    # A fresh model name per test: replies cached by another test can never answer this one.
    settings: dict[str, object] = {"timeout_s": 30.0, "max_retries": 0, **extra}
    return LLMConfig(base_url=server.base_url, model=f"scripted-{uuid.uuid4().hex[:12]}",
                     **settings)  # type: ignore[arg-type]


def context() -> PassContext:
    return PassContext(source_dialect=Dialect.CUDA, target=Dialect.HIP, warp_size=64, file=str(SOURCE))


def unit() -> SourceUnit:
    return SourceUnit(source_text(), Dialect.CUDA, str(SOURCE))


@pytest.fixture(autouse=True)
def caching_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XPILER_NO_CACHE", raising=False)


@needs_hipcc
def test_a_correct_reply_verifies_and_the_second_ask_comes_from_the_cache(openai_server: ScriptedOpenAI) -> None:
    reply = fenced(correct_hip())
    openai_server.queue(reply)
    config = ProposerConfig(llm=config_for(openai_server), spec_path=str(SPEC), repair_budget_s=0)
    proposals = propose("translate", unit(), context(), config)
    assert len(proposals) == 1
    proposal = proposals[0]
    assert proposal.text == correct_hip()
    tests, verdict = proposal.verification.tests, proposal.verification.compile
    assert tests is not None and verdict is not None
    assert tests.passed and len(tests.cases) == 3  # the harness's verdict against the numpy reference
    assert verdict.ok
    assert proposal.reply_sha256 == hashlib.sha256(reply.encode()).hexdigest()
    assert not proposal.cached
    # what the client sent: the model, a system + user message with the source and retrieved chunk ids
    assert len(openai_server.requests) == 1
    sent = openai_server.requests[0]["body"]
    assert sent["model"] == config.llm.model
    user = sent["messages"][-1]["content"]
    assert "default_function_kernel" in user and "Step 1" in user
    assert proposal.prompt.chunk_ids and all(f"[{cid}]" in user for cid in proposal.prompt.chunk_ids)
    # same model + prompt: answered by diskcache, no second request reaches the server
    again = propose("translate", unit(), context(), ProposerConfig(llm=config.llm, spec_path=str(SPEC)))
    assert len(openai_server.requests) == 1
    assert again and again[0].cached and again[0].text == correct_hip()


@needs_hipcc
def test_a_wrong_reply_is_rejected_by_the_tests(openai_server: ScriptedOpenAI) -> None:
    openai_server.queue(fenced(wrong_hip()))
    config = ProposerConfig(llm=config_for(openai_server), spec_path=str(SPEC), repair_budget_s=0)
    ctx = context()
    assert propose("translate", unit(), ctx, config) == []
    [attempt] = config.attempts
    assert attempt["verdict"] == "rejected"
    assert "computes different results" in attempt["reason"]
    assert attempt["tests"]["failed"] >= 1
    assert any(d.code == "llm.rejected" for d in ctx.diagnostics)


@needs_hipcc
def test_a_reply_that_does_not_compile_is_rejected(openai_server: ScriptedOpenAI) -> None:
    broken = correct_hip().replace("int m) {", "int m) { undeclared_thing = 1;")
    openai_server.queue(fenced(broken))
    config = ProposerConfig(llm=config_for(openai_server), spec_path=str(SPEC), repair_budget_s=0)
    assert propose("translate", unit(), context(), config) == []
    assert "toolchain rejects it" in config.attempts[0]["reason"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would translate it like the source, just with hip headers.", "no fenced code block"),
        (Raw(200, b'{"choices": [ this is not json'), "malformed reply"),
        (Raw(200, b'{"object": "chat.completion", "choices": []}'), "malformed reply"),
        (Raw(500, b'{"error": {"message": "model crashed"}}'), "HTTP 500"),
    ],
)
def test_malformed_replies_are_discarded(openai_server: ScriptedOpenAI, reply: str | Raw, reason: str) -> None:
    openai_server.queue(reply)
    config = ProposerConfig(llm=config_for(openai_server), spec_path=str(SPEC), repair_budget_s=0)
    assert propose("translate", unit(), context(), config) == []
    assert config.attempts[0]["verdict"] == "rejected"
    assert reason in config.attempts[0]["reason"]


def test_retries_reach_the_second_answer(openai_server: ScriptedOpenAI) -> None:
    openai_server.queue(Raw(503, b'{"error": {"message": "busy"}}'), "```c\nint x;\n```")
    config = config_for(openai_server, max_retries=1)
    reply = complete(config, [{"role": "user", "content": "hello"}])
    assert reply.text.startswith("```c")
    assert len(openai_server.requests) == 2


def test_the_api_key_comes_from_the_named_variable(openai_server: ScriptedOpenAI,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XPILER_TEST_KEY", "sk-test-123")
    openai_server.queue("```c\nint x;\n```")
    complete(config_for(openai_server, api_key_env="XPILER_TEST_KEY"), [{"role": "user", "content": "k"}])
    assert openai_server.requests[0]["authorization"] == "Bearer sk-test-123"


def test_an_unreachable_endpoint_is_a_clear_error() -> None:
    with socket.socket() as probe:  # a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(LLMUnavailable) as caught:
        complete(LLMConfig(base_url=url, model="m", max_retries=0, timeout_s=5), [{"role": "user", "content": "x"}])
    assert caught.value.url == url
    assert url in caught.value.format() and "unavailable" in caught.value.format()


def test_an_unconfigured_endpoint_says_what_to_set() -> None:
    with pytest.raises(LLMUnavailable, match="XPILER_LLM_BASE_URL"):
        complete(LLMConfig(), [{"role": "user", "content": "x"}])


def _pipeline_options(server: ScriptedOpenAI, monkeypatch: pytest.MonkeyPatch, proposer: str) -> TranslateOptions:
    monkeypatch.setenv("XPILER_LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("XPILER_LLM_MODEL", f"scripted-{uuid.uuid4().hex[:12]}")
    monkeypatch.setenv("XPILER_LLM_RETRIES", "0")
    monkeypatch.setenv("XPILER_LLM_REPAIR_BUDGET", "0")  # repair is tested on its own below
    return TranslateOptions(target=Dialect.HIP, spec_path=str(SPEC), proposer=proposer)


@needs_hipcc
def test_pipeline_llm_proposer_adopts_only_a_verified_reply(openai_server: ScriptedOpenAI,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    reply = fenced(correct_hip())
    openai_server.queue(reply)
    result = translate(source_text(), str(SOURCE), _pipeline_options(openai_server, monkeypatch, "llm"))
    assert result.status == "verified"
    assert result.output_text == correct_hip()
    assert result.tests is not None and result.tests.passed
    record = result.manifest["proposer"]
    assert record["mode"] == "llm" and record["accepted"]["reply_sha256"] == hashlib.sha256(reply.encode()).hexdigest()
    assert record["accepted"]["chunk_ids"] and "default_function_kernel" in record["accepted"]["prompt"]
    assert record["model"].startswith("scripted-")


@needs_hipcc
def test_pipeline_llm_proposer_falls_back_to_the_rules_on_a_wrong_reply(openai_server: ScriptedOpenAI,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server.queue(fenced(wrong_hip()))
    result = translate(source_text(), str(SOURCE), _pipeline_options(openai_server, monkeypatch, "llm"))
    assert "] - B[" not in result.output_text  # the wrong reply is never the result
    assert result.manifest["proposer"]["accepted"] is None
    assert result.manifest["proposer"]["attempts"][0]["verdict"] == "rejected"
    assert any(d.code == "llm.rejected" for d in result.diagnostics)
    assert len(openai_server.requests) == 1


@needs_hipcc
def test_pipeline_survives_an_unreachable_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("XPILER_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("XPILER_LLM_MODEL", "m")
    monkeypatch.setenv("XPILER_LLM_RETRIES", "0")
    options = TranslateOptions(target=Dialect.HIP, spec_path=str(SPEC), proposer="llm")
    result = translate(source_text(), str(SOURCE), options)
    [warning] = [d for d in result.diagnostics if d.code == "llm.unavailable"]
    assert f"127.0.0.1:{port}" in warning.message
    assert result.status == "verified"  # the rules' translation, verified on its own evidence


@needs_hipcc
def test_the_default_path_makes_no_network_call(network_refused: list[object],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # even with an endpoint configured, "rules" (the default) never asks it
    monkeypatch.setenv("XPILER_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("XPILER_LLM_MODEL", "m")
    options = TranslateOptions(target=Dialect.HIP, spec_path=str(SPEC))
    assert options.proposer == "rules"
    result = translate(source_text(), str(SOURCE), options)
    assert result.status == "verified"
    assert network_refused == []
    assert "proposer" not in result.manifest


PTX = Path(__file__).with_name("data") / "add_ptx"


@needs_hipcc
def test_rules_then_llm_asks_only_when_the_rules_do_not_verify(openai_server: ScriptedOpenAI,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    source = (PTX / "add_ptx.cu").read_text()
    portable = "#include <hip/hip_runtime.h>\n" + source.replace(
        'float r;\n        asm volatile("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a[i]), "f"(b[i]));\n        c[i] = r;',
        "c[i] = a[i] + b[i];")
    assert "asm volatile" not in portable
    openai_server.queue(fenced(portable))
    options = _pipeline_options(openai_server, monkeypatch, "rules-then-llm")
    options.spec_path = str(PTX / "spec.toml")
    result = translate(source, str(PTX / "add_ptx.cu"), options)
    assert result.status == "verified" and result.output_text == portable
    assert result.tests is not None and result.tests.passed
    user = openai_server.requests[0]["body"]["messages"][-1]["content"]
    assert "could not finish" in user and "asm volatile" in user  # the rules' reason and partial output
    # the add kernel verifies by rules alone: the LLM is not asked
    result = translate(source_text(), str(SOURCE), _pipeline_options(openai_server, monkeypatch, "rules-then-llm"))
    assert result.status == "verified" and len(openai_server.requests) == 1
    assert result.manifest["proposer"]["attempts"] == []


@needs_hipcc
def test_rules_then_llm_keeps_the_unverified_rules_output_when_the_reply_is_wrong(
        openai_server: ScriptedOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    source = (PTX / "add_ptx.cu").read_text()
    wrong = "#include <hip/hip_runtime.h>\n" + source.replace(
        'float r;\n        asm volatile("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a[i]), "f"(b[i]));\n        c[i] = r;',
        "c[i] = a[i] * b[i];")
    openai_server.queue(fenced(wrong))
    options = _pipeline_options(openai_server, monkeypatch, "rules-then-llm")
    options.spec_path = str(PTX / "spec.toml")
    result = translate(source, str(PTX / "add_ptx.cu"), options)
    assert result.status != "verified"
    assert "a[i] * b[i]" not in result.output_text
    assert result.manifest["proposer"]["attempts"][0]["verdict"] == "rejected"


@needs_hipcc
def test_server_settings_reach_the_proposer(openai_server: ScriptedOpenAI) -> None:
    """The editor's xpiler.llm.endpoint/model settings travel through the server's core API."""
    from xpiler_core import api as core_api
    from xpiler_core.progress import CancelToken

    openai_server.queue(fenced(correct_hip()))
    model = f"scripted-{uuid.uuid4().hex[:12]}"
    messages: list[str] = []
    result = core_api.translate(source_text(), str(SOURCE), Dialect.HIP, warp_size=None, spec_path=str(SPEC),
                                verify=True, proposer="llm", progress=lambda f, m: messages.append(m),
                                cancel=CancelToken(),
                                llm={"base_url": openai_server.base_url, "model": model, "api_key_env": "NO_SUCH_VAR"})
    assert openai_server.requests[0]["body"]["model"] == model
    assert result.status == "verified" and result.output_text == correct_hip()
    assert any("asking the LLM" in m for m in messages)


@needs_hipcc
def test_without_a_spec_the_tests_built_from_the_source_gate_the_reply(openai_server: ScriptedOpenAI) -> None:
    path = Path(__file__).with_name("data") / "scale" / "scale.cu"
    source = path.read_text()
    good = source.replace("#include <cuda_runtime.h>", "#include <hip/hip_runtime.h>")
    bad = good.replace("+ 1.0f", "- 1.0f")
    openai_server.queue(fenced(bad), fenced(good))
    config = ProposerConfig(llm=config_for(openai_server), spec_path=None, replies=2, repair_budget_s=0)
    ctx = PassContext(source_dialect=Dialect.CUDA, target=Dialect.HIP, warp_size=64, file=str(path))
    [proposal] = propose("translate", SourceUnit(source, Dialect.CUDA, str(path)), ctx, config)
    assert [a["verdict"] for a in config.attempts] == ["rejected", "verified"]
    assert "different results" in config.attempts[0]["reason"]
    assert proposal.text == good
    assert proposal.verification.spec_info is not None and proposal.verification.spec_info["auto"]
    # the second prompt differs (it says an earlier reply was rejected), so it is not a cache hit
    assert openai_server.requests[0]["body"]["messages"] != openai_server.requests[1]["body"]["messages"]


def test_an_unknown_proposer_is_a_clear_error() -> None:
    from xpiler_core.diagnostics import XpilerError

    with pytest.raises(XpilerError, match="unknown proposer 'gpt'"):
        translate(source_text(), str(SOURCE), TranslateOptions(target=Dialect.HIP, proposer="gpt", verify=False))


def test_settings_come_from_the_environment() -> None:
    config = LLMConfig.from_env({"XPILER_LLM_BASE_URL": "http://h:1/v1", "XPILER_LLM_MODEL": "coder",
                                 "XPILER_LLM_API_KEY_ENV": "MY_KEY", "XPILER_LLM_TIMEOUT": "7",
                                 "XPILER_LLM_RETRIES": "4", "XPILER_LLM_REPAIR_BUDGET": "0"})
    assert config == LLMConfig(base_url="http://h:1/v1", model="coder", api_key_env="MY_KEY", timeout_s=7.0,
                               max_retries=4, repair_budget_s=0.0)
    assert LLMConfig.from_env({}).missing() is not None and config.missing() is None


def test_the_default_path_does_not_even_load_the_llm_code() -> None:
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from xpiler_core.pipeline import translate, TranslateOptions\n"
        "from xpiler_core.dialect import Dialect\n"
        f"text = open({str(SOURCE)!r}).read()\n"
        f"translate(text, {str(SOURCE)!r}, TranslateOptions(target=Dialect.HIP, verify=False))\n"
        "print(sorted(m for m in ('openai', 'httpx', 'xpiler_core.llm', 'rank_bm25') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


@needs_hipcc
def test_a_wrong_reply_goes_to_smt_repair_and_stays_rejected_unless_repaired(openai_server: ScriptedOpenAI) -> None:
    pytest.importorskip("xpiler_core.repair.engine")
    openai_server.queue(fenced(wrong_hip()))
    config = ProposerConfig(llm=config_for(openai_server), spec_path=str(SPEC), repair_budget_s=2)
    proposals = propose("translate", unit(), context(), config)
    [attempt] = config.attempts
    assert "SMT repair" in attempt["reason"] or attempt["verdict"] == "verified after SMT repair"
    for proposal in proposals:  # only a repair that passed the numpy reference may come back
        assert proposal.text != wrong_hip()
        assert proposal.verification.tests is not None and proposal.verification.tests.passed
