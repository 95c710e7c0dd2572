"""Verification in the editor: a kernel with an injected bug gets a failing-test diagnostic on the statement
that writes the wrong output, with expected vs got; the correct kernel gets none."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from server_lsp_helpers import execute, open_doc, wait_for_version, wait_notification

REPO = Path(__file__).resolve().parents[2]
RELU = REPO / "benchmarks" / "suite" / "activation" / "relu"

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
]


async def verify(client: LanguageClient, folder: Path, text: str) -> tuple[list[types.Diagnostic], dict, list[str]]:
    shutil.copytree(RELU, folder)
    source = folder / "relu.cu"
    source.write_text(text)
    uri = source.as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    open_doc(client, uri, text)
    await waiting
    started = await execute(client, "xpiler.verify", uri)
    finished = await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    # The server publishes a job's diagnostics before it reports the job finished.
    return list(client.diagnostics[uri]), finished, text.splitlines()


async def test_failing_test_lands_on_the_store_with_expected_and_got(client: LanguageClient, tmp_path: Path) -> None:
    # The bug: relu clamps at 1 instead of 0, so every mismatching element reads 1.0.
    buggy = (RELU / "relu.cu").read_text().replace("0.000000e+00f", "1.000000e+00f")
    diagnostics, finished, lines = await verify(client, tmp_path / "bug", buggy)
    assert finished["state"] == "done" and finished["message"].startswith("FAILED"), finished
    [failed] = [d for d in diagnostics if d.code == "test.failed"]
    assert failed.source == "xpiler-test" and failed.severity == types.DiagnosticSeverity.Error
    assert lines[failed.range.start.line].strip().startswith("compute["), "placed on the store to the output"
    got = float(re.search(r" got (\S+);", failed.message).group(1))  # type: ignore[union-attr]
    assert got == 1.0
    assert "expected" in failed.message and "max abs err" in failed.message


async def test_correct_kernel_verifies_without_test_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    diagnostics, finished, _ = await verify(client, tmp_path / "ok", (RELU / "relu.cu").read_text())
    assert finished["state"] == "done" and finished["message"].startswith("verified"), finished
    assert [d for d in diagnostics if d.code == "test.failed"] == []


async def test_compile_errors_of_the_verification_land_on_their_lines(client: LanguageClient, tmp_path: Path) -> None:
    lines = (RELU / "relu.cu").read_text().splitlines()
    broken_line = next(i for i, line in enumerate(lines) if "compute[" in line)
    lines[broken_line] = lines[broken_line].replace("compute[", "undeclared_buffer[", 1)
    diagnostics, finished, _ = await verify(client, tmp_path / "cc", "\n".join(lines) + "\n")
    assert finished["state"] == "done" and finished["message"].startswith("does not compile"), finished
    errors = [d for d in diagnostics if str(d.code).startswith("compile.")]
    assert errors and all(d.source == "nvcc" for d in errors)
    assert {d.range.start.line for d in errors} == {broken_line}
    assert any("undeclared_buffer" in d.message for d in errors)
