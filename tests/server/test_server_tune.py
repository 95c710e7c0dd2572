"""Tuning in the editor (CPU target, real measured trials): hover on the kernel shows the live tuning figures
changing while the job streams, ``xpiler/tuningProgress`` notifications arrive, cancel stops it; a finished
run lands the tuned code as a new file that g++ compiles."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from server_lsp_helpers import (
    SERVER_ENV,
    execute,
    initialize,
    make_editor_client,
    open_doc,
    server_command,
    wait_notification,
)

REPO = Path(__file__).resolve().parents[2]
RELU = REPO / "benchmarks" / "suite" / "activation" / "relu"

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
]


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=server_command(), client_factory=make_editor_client, server_env=SERVER_ENV)
)
async def tuning_client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await initialize(lsp_client, {"tuning": {"trials": 6, "budgetSeconds": 60}, "diagnostics": {"debounceMs": 10}})
    yield
    await lsp_client.shutdown_session()


async def open_relu(client: LanguageClient, folder: Path, *, fresh: bool = False) -> tuple[str, types.Position]:
    """Open a copy of the relu suite kernel; ``fresh`` makes its text unique so no earlier tuning record resumes."""
    shutil.copytree(RELU, folder)
    text = (folder / "relu.cu").read_text()
    if fresh:
        text = f"// tuning test {time.time_ns()}\n" + text
        (folder / "relu.cu").write_text(text)
    open_doc(client, (folder / "relu.cu").as_uri(), text)
    line = next(i for i, row in enumerate(text.splitlines()) if "default_function_kernel(" in row)
    return (folder / "relu.cu").as_uri(), types.Position(line=line, character=text.splitlines()[line].index("default_function_kernel") + 2)


async def hover_text(client: LanguageClient, uri: str, position: types.Position) -> str:
    result = await asyncio.wait_for(
        client.text_document_hover_async(types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)), 10
    )
    assert result is not None
    return result.contents.value  # type: ignore[union-attr]


def trials_in(hover: str) -> int | None:
    match = re.search(r"trials: (\d+)", hover)
    return int(match.group(1)) if match else None


async def test_hover_shows_live_tuning_figures_and_cancel_stops_it(tuning_client: LanguageClient, tmp_path: Path) -> None:
    client = tuning_client
    # A budget far beyond what runs before the cancel, however fast the machine: the cancel must be what stops it.
    client.set_configuration({"tuning": {"trials": 400, "budgetSeconds": 600}, "diagnostics": {"debounceMs": 10}}, section="xpiler")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    uri, at_name = await open_relu(client, tmp_path / "k", fresh=True)
    job_id = (await execute(client, "xpiler.tune", uri))["jobId"]
    seen: list[int] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        count = trials_in(await hover_text(client, uri, at_name))
        if count is not None and (not seen or count != seen[-1]):
            seen.append(count)
        if len([c for c in seen if c > 0]) >= 2:
            break
        await asyncio.sleep(0.1)
    assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] > seen[0], f"hover trial counts: {seen}"
    hover = await hover_text(client, uri, at_name)
    assert "speedup:" in hover and "best config:" in hover

    streamed = [p for m, p in client.custom_notifications if m == "xpiler/tuningProgress" and p["jobId"] == job_id]  # type: ignore[attr-defined]
    assert len(streamed) >= 2 and streamed[-1]["live"]["trials"] >= seen[-1] - 1

    at_cancel = [p for m, p in client.custom_notifications if m == "xpiler/tuningProgress" and p["jobId"] == job_id][-1]  # type: ignore[attr-defined]
    cancelled = await execute(client, "xpiler.cancel", job_id)
    assert cancelled["cancelled"] == [job_id]
    finished = await wait_notification(client, "xpiler/jobFinished", job_id, timeout=60)
    client.set_configuration({"tuning": {"trials": 6, "budgetSeconds": 60}, "diagnostics": {"debounceMs": 10}}, section="xpiler")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert finished["state"] == "cancelled", finished
    # Only trials already in flight when the cancel arrived may still finish.
    assert finished["live"]["trials"] <= at_cancel["live"]["trials"] + 2 < 400
    assert not list((tmp_path / "k").glob("*.tuned.*")), "a cancelled run lands nothing"


@pytest.mark.slow  # a full 6-trial run: ~20 s of measured trials
async def test_finished_tuning_lands_code_that_compiles(tuning_client: LanguageClient, tmp_path: Path) -> None:
    client = tuning_client
    uri, _ = await open_relu(client, tmp_path / "k")
    job_id = (await execute(client, "xpiler.tune", uri))["jobId"]
    finished = await wait_notification(client, "xpiler/jobFinished", job_id, timeout=240)
    assert finished["state"] == "done", finished
    tuned = Path(finished["live"]["output"])
    assert tuned.name == "relu.tuned.cpp" and tuned.exists()
    # The CPU target's code is C++-flavoured C (<cmath>, a namespace), which the core builds with g++.
    compiled = subprocess.run(
        ["g++", "-O2", "-fopenmp", "-c", str(tuned), "-o", str(tmp_path / "tuned.o")],
        capture_output=True, text=True, timeout=120, env=os.environ.copy(),
    )
    assert compiled.returncode == 0, compiled.stderr[-2000:]
