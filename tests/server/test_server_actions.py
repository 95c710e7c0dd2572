"""Code actions, commands and settings end to end: "Run pass: <name>" for every pass of the core on the
kernel under the cursor, applied as a versioned edit equal to the core's own pass output; the manifest of
the last translation; workspace/configuration switching the target changes the warp-size diagnostics; rapid
edits while a job runs."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from server_lsp_helpers import (
    apply_text_edits,
    code_actions,
    execute,
    open_doc,
    wait_for_version,
    wait_notification,
    wait_until_diagnostics,
)

from xpiler_core import api as core_api
from xpiler_core.dialect import Dialect
from xpiler_core.passes import all_passes
from xpiler_core.pipeline import run_pass

REPO = Path(__file__).resolve().parents[2]
SOFTMAX = REPO / "examples" / "softmax_warp.cu"

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(Dialect.HIP not in core_api.available_targets(Dialect.CUDA), reason="no CUDA→HIP plan in the core yet"),
]


async def test_run_pass_actions_for_every_pass_apply_the_pass_output(client: LanguageClient, tmp_path: Path) -> None:
    source = tmp_path / "softmax_warp.cu"
    shutil.copy(SOFTMAX, source)
    text = source.read_text()
    uri = source.as_uri()
    open_doc(client, uri, text)
    kernel_line = next(i for i, line in enumerate(text.splitlines()) if "__global__" in line) + 3
    actions = await code_actions(client, uri, kernel_line, only=["refactor"])
    assert {a.title for a in actions} == {f"Run pass: {name}" for name in all_passes()}
    outside = await code_actions(client, uri, 0, only=["refactor"])
    assert outside == [], "no pass actions outside a kernel"

    warp = next(a for a in actions if a.title == "Run pass: warp_size")
    started = await execute(client, warp.command.command, *warp.command.arguments)
    finished = await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    assert finished["state"] == "done" and finished["message"] == "applied", finished
    [edit] = [
        change
        for params in client.applied_edits  # type: ignore[attr-defined]
        for change in params.edit.document_changes or []
        if isinstance(change, types.TextDocumentEdit) and change.text_document.uri == uri
    ]
    assert edit.text_document.uri == uri and edit.text_document.version == 1
    expected = run_pass("warp_size", text, str(source), {}, Dialect.HIP).text
    assert expected != text
    assert apply_text_edits(text, list(edit.edits)) == expected


async def test_manifest_describes_the_last_translation(client: LanguageClient, tmp_path: Path) -> None:
    source = tmp_path / "softmax_warp.cu"
    shutil.copy(SOFTMAX, source)
    uri = source.as_uri()
    open_doc(client, uri, source.read_text())
    with pytest.raises(Exception, match="no translation"):
        await execute(client, "xpiler.showManifest", uri)
    started = await execute(client, "xpiler.translate", uri, "hip")
    await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    shown = await execute(client, "xpiler.showManifest", uri)
    manifest_path = Path(shown["uri"].removeprefix("file://"))
    assert manifest_path.is_file() and manifest_path.parent.name == ".xpiler"
    assert hashlib.sha256(source.read_bytes()).hexdigest() in manifest_path.read_text()
    assert any(doc.uri == shown["uri"] for doc in client.shown_documents)


async def test_configuration_target_switches_warp_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    source = tmp_path / "softmax_warp.cu"
    shutil.copy(SOFTMAX, source)
    uri = source.as_uri()
    open_doc(client, uri, source.read_text())

    def has_hazards(diagnostics: list[types.Diagnostic]) -> bool:
        return any(str(d.code).startswith("warp_size") for d in diagnostics)

    # Default target HIP: the kernel's 32-lane assumptions are reported.
    await wait_until_diagnostics(client, uri, has_hazards)
    client.set_configuration({"target": "cpu"}, section="xpiler")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_until_diagnostics(client, uri, lambda diagnostics: not has_hazards(diagnostics))
    # Back to the defaults for the other tests of this module (they share the server).
    client.set_configuration({}, section="xpiler")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_until_diagnostics(client, uri, has_hazards)


async def test_rapid_edits_during_a_job(client: LanguageClient, tmp_path: Path) -> None:
    source = tmp_path / "softmax_warp.cu"
    # Unique text: no compile or test cached by an earlier test lets the job finish before the edits arrive.
    text = f"// rapid edits {time.time_ns()}\n" + SOFTMAX.read_text()
    source.write_text(text)
    uri = source.as_uri()
    open_doc(client, uri, text)
    started = await execute(client, "xpiler.translate", uri, "hip")
    version = 1
    for i in range(60):  # a burst of keystrokes at the top of the file while the job runs
        version += 1
        at = types.Position(line=0, character=i % 5)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text="/")],
            )
        )
    final = await wait_for_version(client, uri, version, timeout=30)
    assert all(d.range.start.line < len(text.splitlines()) + 1 for d in final)
    finished = await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    assert finished["stale"] is True


async def test_translate_actions_follow_the_plans_on_disk(client: LanguageClient, tmp_path: Path) -> None:
    """Each "Translate to …" source action corresponds to a plan module of the core, for CUDA and HIP files."""
    labels = {"hip": "HIP", "c": "CPU (C/OpenMP)", "cpu": "CPU (C/OpenMP)", "cuda": "CUDA", "bang": "BANG C"}
    plans = REPO / "xpiler_core" / "plans"
    for example, source_name in (("softmax_warp.cu", "cuda"), ("relu.hip", "hip")):
        path = tmp_path / example
        shutil.copy(REPO / "examples" / example, path)
        open_doc(client, path.as_uri(), path.read_text(), language_id=source_name)
        expected = {
            f"Translate to {labels[plan.stem.split('_to_')[1]]}" for plan in plans.glob(f"{source_name}_to_*.py")
        }
        offered = {a.title for a in await code_actions(client, path.as_uri(), 0, only=["source"])}
        assert offered == expected and expected


