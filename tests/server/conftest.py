"""pytest-lsp fixture: the real server over stdio with an editor-like client."""

from __future__ import annotations

import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient
from server_lsp_helpers import SERVER_ENV, initialize, make_editor_client, server_command


# One server per test module (each start costs seconds of imports); tests keep to their own files and jobs.
@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=server_command(), client_factory=make_editor_client, server_env=SERVER_ENV),
)
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()
