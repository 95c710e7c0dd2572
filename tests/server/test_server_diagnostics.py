"""Diagnostics end to end over stdio: a broken kernel gets located syntax errors with code and source,
per version; fixing it clears them."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from server_lsp_helpers import wait_for_version, wait_until_diagnostics

pytestmark = pytest.mark.asyncio(loop_scope="module")

GOOD = """\
__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.0f * x[i];
}
"""

# line 2: a missing ')' before '{'
BAD = """\
__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n { x[i] = 2.0f * x[i]; }
}
"""


async def test_bad_kernel_gets_located_syntax_diagnostics(client: LanguageClient, tmp_path) -> None:
    uri = (tmp_path / "scale.cu").as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="cuda", version=1, text=BAD)))
    diagnostics = await waiting
    errors = [d for d in diagnostics if d.severity == types.DiagnosticSeverity.Error]
    assert errors, "a kernel with a missing ')' must get an error"
    assert all(d.code and d.source for d in diagnostics)
    assert {d.range.start.line for d in errors} == {2}, [(d.range, d.message) for d in errors]


async def test_incremental_fix_clears_diagnostics(client: LanguageClient, tmp_path) -> None:
    uri = (tmp_path / "scale.cu").as_uri()
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 1))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="cuda", version=1, text=BAD)))
    assert await waiting
    # Insert the missing ')' after "i < n" (line 2, column 13) as an incremental change.
    waiting = asyncio.ensure_future(wait_for_version(client, uri, 2))
    at = types.Position(line=2, character=13)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=")")]))
    first = await waiting
    # the syntax errors are gone at once; target diagnostics of version 1 (when its phase 2 ran before the edit,
    # as on a loaded machine) ride along until version 2's own phase 2 recomputes them
    assert [d for d in first if d.severity == types.DiagnosticSeverity.Error and d.code and "syntax" in str(d.code)] == []
    await wait_until_diagnostics(
        client, uri, lambda ds: not [d for d in ds if d.severity == types.DiagnosticSeverity.Error], timeout=45)
