"""Editor end to end (pytest-lsp, the real server over stdio): a kernel with an injected index bug gets a
failing-test diagnostic, a background SMT repair job turns it into a quick-fix "Apply repair (verified): ...", and
applying that edit gives a document whose tests pass (checked by the harness, and by verifying again)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from server_lsp_helpers import (
    SERVER_ENV,
    apply_text_edits,
    execute,
    initialize,
    make_editor_client,
    open_doc,
    server_command,
    wait_for_version,
    wait_notification,
    wait_until_diagnostics,
)

from xpiler_core.verify.harness import run_spec
from xpiler_core.verify.spec import load_spec

ADD = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "elementwise" / "add"
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=server_command(), client_factory=make_editor_client, server_env=SERVER_ENV),
)
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def _open_failing(client: LanguageClient, folder: Path, old: str, new: str) -> tuple[Path, str, str, str]:
    """The suite's add kernel copied to ``folder`` with ``old`` replaced by ``new``, opened and verified (failing):
    (folder, original text, buggy text, uri)."""
    shutil.copytree(ADD, folder)
    source = folder / "add.cu"
    original = source.read_text()
    buggy = original.replace(old, new)
    assert buggy != original
    source.write_text(buggy)
    uri = source.as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    open_doc(client, uri, buggy)
    await waiting
    started = await execute(client, "xpiler.verify", uri)
    finished = await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    assert finished["message"].startswith("FAILED"), finished
    return folder, original, buggy, uri


def _has_fix(diagnostics: list[types.Diagnostic]) -> bool:
    return any(d.code == "test.failed" and isinstance(d.data, dict) and "fix" in d.data for d in diagnostics)


async def test_failing_test_gets_an_smt_repair_quick_fix_that_makes_the_tests_pass(
    client: LanguageClient, tmp_path: Path
) -> None:
    # index bug: the broadcast operand wraps one column early
    folder, original, buggy, uri = await _open_failing(client, tmp_path / "add", "& 63)", "& 62)")
    spec = load_spec(folder / "spec.toml")
    assert not run_spec(spec, candidate_text=buggy).passed
    diagnostics = await wait_until_diagnostics(client, uri, _has_fix, timeout=150)
    [failed] = [d for d in diagnostics if d.code == "test.failed"]
    assert "repair found and verified" in failed.message

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=failed.range,
            context=types.CodeActionContext(diagnostics=[failed], only=[types.CodeActionKind.QuickFix]),
        )
    )
    repairs = [a for a in actions or [] if isinstance(a, types.CodeAction) and a.title.startswith("Apply repair (verified)")]
    assert len(repairs) == 1, [getattr(a, "title", a) for a in actions or []]
    action = repairs[0]
    assert action.title == "Apply repair (verified): `62` → `63`"
    assert action.edit is not None and action.edit.document_changes
    [change] = action.edit.document_changes
    assert isinstance(change, types.TextDocumentEdit) and change.text_document.version == 1  # versioned: undoable
    repaired = apply_text_edits(buggy, list(change.edits))
    assert repaired == original
    assert run_spec(spec, candidate_text=repaired, seed=11).passed  # the harness, on other random inputs

    # The editor applies the edit; verifying the new version passes.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=repaired)],
        )
    )
    again = await execute(client, "xpiler.verify", uri)
    done = await wait_notification(client, "xpiler/jobFinished", again["jobId"])
    assert done["message"].startswith("verified"), done


async def test_a_refused_repair_says_why_on_the_failing_test(client: LanguageClient, tmp_path: Path) -> None:
    # a whole operand dropped: no single-expression change brings it back
    dropped = " + B[(((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) & 63)]"
    _, _, _, uri = await _open_failing(client, tmp_path / "add_refused", dropped, "")
    diagnostics = await wait_until_diagnostics(
        client, uri, lambda ds: any(d.code == "test.failed" and "no repair:" in d.message for d in ds), timeout=150)
    [failed] = [d for d in diagnostics if d.code == "test.failed"]
    assert "no single-expression repair" in failed.message and not (isinstance(failed.data, dict) and "fix" in failed.data)
