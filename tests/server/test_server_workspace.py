"""The server acts only inside its workspace: a command on a file outside every workspace folder (and not open
in the editor) is refused, naming the file, before anything is read, compiled or written beside it; so is a
link inside the workspace that points outside. Files of the workspace, and documents the editor opened, still
work, and what the server writes never goes through a link or outside the source's folder."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from server_lsp_helpers import (
    CAPABILITIES,
    SERVER_ENV,
    execute,
    make_editor_client,
    open_doc,
    server_command,
    wait_notification,
)
from xpiler_server import results

from xpiler_core import api as core_api
from xpiler_core.dialect import Dialect

pytestmark = pytest.mark.asyncio(loop_scope="module")

KERNEL = """__global__ void add(float *x, const float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}
"""
SPEC = """name = "add"
source = "secret.cu"
entry = "add"
grid = ["ceil_div(n, 128)"]
block = [128]
reference = "ref.py:add"

[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "inout"

[[args]]
name = "y"
dtype = "float32"
shape = ["n"]
role = "in"

[[args]]
name = "n"
dtype = "int32"
role = "scalar"
value = "n"

[[cases]]
n = 100
"""


@dataclass(frozen=True)
class Folders:
    workspace: Path
    outside: Path


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Folders:
    base = tmp_path_factory.mktemp("confinement")
    workspace, outside = base / "workspace", base / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.cu").write_text(KERNEL)
    (outside / "secret.toml").write_text(SPEC)
    (outside / "ref.py").write_text("def add(x, y, n):\n    return x + y\n")
    (workspace / "inside.cu").write_text(KERNEL)
    (workspace / "link.cu").symlink_to(outside / "secret.cu")
    (workspace / "linked_folder").symlink_to(outside, target_is_directory=True)
    return Folders(workspace, outside)


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=server_command(), client_factory=make_editor_client, server_env=SERVER_ENV),
)
async def client(lsp_client: LanguageClient, folders: Folders) -> AsyncIterator[None]:
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=CAPABILITIES,
            initialization_options={"diagnostics": {"debounceMs": 10}},
            root_uri=folders.workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=folders.workspace.as_uri(), name="workspace")],
        )
    )
    yield
    await lsp_client.shutdown_session()


def listing(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


COMMAND_ARGUMENTS = {
    "xpiler.translate": ["hip"],
    "xpiler.verify": [],
    "xpiler.runPass": ["warp_size"],
    "xpiler.showManifest": [],
    "xpiler.createSpec": [],
    "xpiler.tune": [],
}


@pytest.mark.parametrize("command", sorted(COMMAND_ARGUMENTS))
async def test_a_file_outside_the_workspace_is_refused_and_nothing_is_written(
    client: LanguageClient, folders: Folders, command: str
) -> None:
    before = listing(folders.outside)
    secret = folders.outside / "secret.cu"
    with pytest.raises(Exception, match=rf"refused {secret}.*not inside the workspace"):
        await execute(client, command, secret.as_uri(), *COMMAND_ARGUMENTS[command])
    await asyncio.sleep(1.0)  # a job started by mistake would have written by now
    assert listing(folders.outside) == before


async def test_a_system_file_is_refused_before_it_is_read(client: LanguageClient) -> None:
    with pytest.raises(Exception, match=r"refused /etc/passwd.*not inside the workspace"):
        await execute(client, "xpiler.translate", "file:///etc/passwd", "hip")
    with pytest.raises(Exception, match=r"refused /etc/passwd: not a file: URI"):
        await execute(client, "xpiler.translate", "/etc/passwd", "hip")


@pytest.mark.parametrize("name", ["link.cu", "linked_folder/secret.cu"])
async def test_a_link_inside_the_workspace_to_a_file_outside_is_refused(
    client: LanguageClient, folders: Folders, name: str
) -> None:
    before = listing(folders.outside)
    with pytest.raises(Exception, match=rf"refused {folders.workspace / name} \(a link to {folders.outside / 'secret.cu'}\)"):
        await execute(client, "xpiler.createSpec", (folders.workspace / name).as_uri())
    with pytest.raises(Exception, match="not inside the workspace"):
        await execute(client, "xpiler.translate", (folders.workspace / name).as_uri(), "hip")
    await asyncio.sleep(1.0)
    assert listing(folders.outside) == before


async def test_a_file_inside_the_workspace_still_works(client: LanguageClient, folders: Folders) -> None:
    answer = await execute(client, "xpiler.createSpec", (folders.workspace / "inside.cu").as_uri())
    assert answer["created"] is True and Path(answer["spec"]).parent == folders.workspace
    if Dialect.HIP not in core_api.available_targets(Dialect.CUDA):
        return
    started = await execute(client, "xpiler.translate", (folders.workspace / "inside.cu").as_uri(), "hip")
    finished = await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    assert finished["state"] == "done", finished
    assert (folders.workspace / "inside.hip").is_file()


async def test_a_document_open_in_the_editor_outside_the_workspace_works(client: LanguageClient, folders: Folders) -> None:
    opened = folders.outside / "opened" / "kernel.cu"
    opened.parent.mkdir()
    opened.write_text(KERNEL)
    open_doc(client, opened.as_uri(), KERNEL)
    answer = await execute(client, "xpiler.createSpec", opened.as_uri())
    assert answer["created"] is True and Path(answer["spec"]).parent == opened.parent


async def test_an_editor_buffer_that_is_no_file_gets_no_files_written(client: LanguageClient) -> None:
    uri = "untitled:Untitled-7"
    open_doc(client, uri, KERNEL)
    edits_before = len(client.applied_edits)  # type: ignore[attr-defined]
    for command, arguments in (("xpiler.createSpec", []), ("xpiler.translate", ["hip"]), ("xpiler.tune", [])):
        with pytest.raises(Exception, match="not a file on disk"):
            await execute(client, command, uri, *arguments)
    await asyncio.sleep(1.0)
    # no file was created for it (such a path is relative: the client would have created it at "/add.toml")
    assert len(client.applied_edits) == edits_before  # type: ignore[attr-defined]


async def test_manifest_is_never_written_through_a_link(client: LanguageClient, folders: Folders) -> None:
    if Dialect.HIP not in core_api.available_targets(Dialect.CUDA):
        pytest.skip("no CUDA→HIP plan in the core")
    source = folders.workspace / "project" / "scale.cu"
    source.parent.mkdir()
    source.write_text(KERNEL)
    open_doc(client, source.as_uri(), KERNEL)
    started = await execute(client, "xpiler.translate", source.as_uri(), "hip")
    await wait_notification(client, "xpiler/jobFinished", started["jobId"])
    target = folders.outside / "manifests"
    target.mkdir()
    (source.parent / ".xpiler").symlink_to(target, target_is_directory=True)
    with pytest.raises(Exception, match="symbolic link"):
        await execute(client, "xpiler.showManifest", source.as_uri())
    assert list(target.iterdir()) == []


# ------------------------------------------------------------------ the server's own writes (no client help)


def plain_client() -> SimpleNamespace:
    """A client that cannot create files through an edit: the server writes them itself."""
    return SimpleNamespace(client_capabilities=None)


async def test_own_writes_stay_below_the_root_and_never_follow_links(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    victim = elsewhere / "victim.txt"
    victim.write_text("keep me")

    (root / "out.hip").symlink_to(victim)
    applied, reason = await results.create_files(plain_client(), {root / "out.hip": "evil"}, root)
    assert not applied and "link" in reason
    (root / "sub").symlink_to(elsewhere, target_is_directory=True)
    applied, reason = await results.create_files(plain_client(), {root / "sub" / "new.hip": "evil"}, root)
    assert not applied and "link" in reason
    applied, reason = await results.create_files(plain_client(), {root / ".." / "elsewhere" / "new.hip": "evil"}, root)
    assert not applied and "outside" in reason
    assert victim.read_text() == "keep me" and sorted(os.listdir(elsewhere)) == ["victim.txt"]

    applied, reason = await results.create_files(plain_client(), {root / "made" / "good.hip": "fine"}, root)
    assert applied, reason
    assert (root / "made" / "good.hip").read_text() == "fine"
    applied, reason = await results.create_files(plain_client(), {root / "made" / "good.hip": "again"}, root)
    assert not applied and (root / "made" / "good.hip").read_text() == "fine"  # never over an existing file
