"""Background jobs end to end over stdio, on the real core: "Translate to HIP" lands a new .hip file through
workspace/applyEdit (never over an existing file) with progress begin/report/end, and hipcc compiles it;
cancel stops a job; hover shows the live job state while it streams; a result for an old version is not
applied; other requests are answered while a job runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from server_lsp_helpers import (
    code_actions,
    execute,
    open_doc,
    wait_for_version,
    wait_notification,
    wait_progress,
)

from xpiler_core import api as core_api
from xpiler_core.dialect import Dialect

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "benchmarks" / "suite"

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(Dialect.HIP not in core_api.available_targets(Dialect.CUDA), reason="no CUDA→HIP plan in the core yet"),
]


def copy_kernel(group: str, name: str, dest: Path) -> Path:
    """A suite kernel (source, spec, reference) copied into ``dest``; the source path.

    The copy's text is made unique so no compile or test cached by an earlier run lets a job finish before the
    test has cancelled it or edited the document: these tests must hold however fast the machine is."""
    shutil.copytree(SUITE / group / name, dest, dirs_exist_ok=True)
    source = next(p for p in dest.iterdir() if p.suffix == ".cu")
    source.write_text(f"// copy {time.time_ns()}\n" + source.read_text())
    return source


async def hover_text(client: LanguageClient, uri: str, position: types.Position) -> str:
    result = await asyncio.wait_for(
        client.text_document_hover_async(types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)),
        timeout=10,
    )
    assert result is not None
    return result.contents.value  # type: ignore[union-attr]


def created_files(client: LanguageClient, folder: Path) -> list[types.CreateFile]:
    """The CreateFile operations the server asked for inside ``folder`` (the client is shared per module)."""
    return [
        change
        for params in client.applied_edits  # type: ignore[attr-defined]
        for change in params.edit.document_changes or []
        if isinstance(change, types.CreateFile) and change.uri.startswith(folder.as_uri() + "/")
    ]


async def test_translate_to_hip_creates_a_new_file_with_progress(client: LanguageClient, tmp_path: Path) -> None:
    source = copy_kernel("activation", "relu", tmp_path)
    taken = source.with_suffix(".hip")
    taken.write_text("// someone's own file: must survive\n")
    uri = source.as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    open_doc(client, uri, source.read_text())
    await waiting
    actions = await code_actions(client, uri, 2, only=["source"])
    translate = next(a for a in actions if a.title == "Translate to HIP")
    assert translate.kind.startswith("source.")
    started = await execute(client, translate.command.command, *translate.command.arguments)
    job_id = started["jobId"]
    finished = await wait_notification(client, "xpiler/jobFinished", job_id)
    assert finished["state"] == "done", finished

    reports = client.progress_reports[job_id]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    middle = [r for r in reports if isinstance(r, types.WorkDoneProgressReport)]
    assert middle and all(r.message for r in middle)
    percentages = [r.percentage for r in middle if r.percentage is not None]
    assert percentages == sorted(percentages)

    [create] = created_files(client, tmp_path)
    out = Path(create.uri.removeprefix("file://"))
    assert out == tmp_path / "relu-2.hip", "an existing relu.hip must not be overwritten"
    assert create.options is not None and create.options.overwrite is False
    assert taken.read_text() == "// someone's own file: must survive\n"
    assert any(doc.uri == create.uri for doc in client.shown_documents)
    # Independent judge: the real HIP compiler accepts the created file.
    compiled = subprocess.run(
        ["hipcc", "--offload-arch=gfx90a", "-c", str(out), "-o", str(tmp_path / "relu.o")],
        env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True, timeout=180,
    )
    assert compiled.returncode == 0, compiled.stderr[-2000:]


async def test_cancel_stops_a_running_job(client: LanguageClient, tmp_path: Path) -> None:
    source = copy_kernel("normalization", "softmax", tmp_path / "a")
    uri = source.as_uri()
    open_doc(client, uri, source.read_text())
    started = await execute(client, "xpiler.verify", uri)
    job_id = started["jobId"]
    await wait_progress(client, job_id, types.WorkDoneProgressReport)
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=job_id))
    finished = await wait_notification(client, "xpiler/jobFinished", job_id, timeout=60)
    assert finished["state"] == "cancelled", finished
    assert isinstance(client.progress_reports[job_id][-1], types.WorkDoneProgressEnd)

    # The xpiler.cancel command stops a translation the same way, and nothing lands.
    started = await execute(client, "xpiler.translate", uri, "hip")
    job_id = started["jobId"]
    cancelled = await execute(client, "xpiler.cancel", job_id)
    assert cancelled["cancelled"] == [job_id]
    finished = await wait_notification(client, "xpiler/jobFinished", job_id, timeout=60)
    assert finished["state"] == "cancelled", finished
    assert created_files(client, tmp_path) == []


async def test_hover_follows_a_streaming_job_and_requests_are_answered(client: LanguageClient, tmp_path: Path) -> None:
    source = copy_kernel("elementwise", "add", tmp_path)
    text = source.read_text()
    uri = source.as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    open_doc(client, uri, text)
    await waiting
    kernel_line = next(i for i, line in enumerate(text.splitlines()) if "default_function_kernel(" in line)
    name_col = text.splitlines()[kernel_line].index("default_function_kernel(") + 3
    at_name = types.Position(line=kernel_line, character=name_col)
    before = await hover_text(client, uri, at_name)
    assert "verification" not in before

    started = await execute(client, "xpiler.verify", uri)
    job_id = started["jobId"]
    hovers: list[str] = []
    while True:
        hovers.append(await hover_text(client, uri, at_name))  # answered while the job runs
        done = any(m == "xpiler/jobFinished" and p.get("jobId") == job_id for m, p in client.custom_notifications)  # type: ignore[attr-defined]
        if done:
            break
        await asyncio.sleep(0.05)
    hovers.append(await hover_text(client, uri, at_name))
    distinct = list(dict.fromkeys(h for h in hovers if "verification" in h))
    assert len(distinct) >= 2, "hover should show the job's state changing"
    assert "running" in distinct[0] and "done" in distinct[-1]
    assert "cases passed" in distinct[-1]


async def test_result_for_an_old_version_is_not_applied(client: LanguageClient, tmp_path: Path) -> None:
    source = copy_kernel("activation", "sigmoid", tmp_path)
    uri = source.as_uri()
    open_doc(client, uri, source.read_text())
    started = await execute(client, "xpiler.translate", uri, "hip")
    at = types.Position(line=0, character=0)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text="// edited\n")],
        )
    )
    finished = await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    assert finished["stale"] is True
    assert created_files(client, tmp_path) == []
    await asyncio.sleep(0.2)
    [prompt] = [m for m in client.message_requests if "sigmoid.cu" in m.message]  # type: ignore[attr-defined]
    assert "older version" in prompt.message and [a.title for a in prompt.actions] == ["Apply anyway", "Run again"]
