"""Landing a job's output in the editor: a new file through ``workspace/applyEdit`` (CreateFile + content,
never over an existing file), then ``window/showDocument``."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from xpiler_server.confinement import output_problem

from xpiler_core.safe_io import UnsafePath, write_confined

log = logging.getLogger(__name__)
APPLY_EDIT_TIMEOUT_S = 60


def fresh_path(suggested: Path, taken: set[str]) -> Path:
    """``suggested`` if no file or open document has that name, else ``stem-2.ext``, ``stem-3.ext``…"""
    candidate = suggested
    counter = 2
    while os.path.lexists(candidate) or str(candidate) in taken:  # a dangling link is taken too
        candidate = suggested.with_name(f"{suggested.stem}-{counter}{suggested.suffix}")
        counter += 1
    return candidate


def client_can_create_files(caps: types.ClientCapabilities | None) -> bool:
    workspace = getattr(caps, "workspace", None)
    edit = getattr(workspace, "workspace_edit", None)
    ops = getattr(edit, "resource_operations", None) or []
    # Resource operations only exist inside documentChanges, so a client listing "create" handles them
    # (Neovim 0.7 lists it without declaring documentChanges, and applies them).
    return types.ResourceOperationKind.Create in ops


def client_can_show_documents(caps: types.ClientCapabilities | None) -> bool:
    window = getattr(caps, "window", None)
    show = getattr(window, "show_document", None)
    return bool(getattr(show, "support", False))


async def create_file(server: Any, path: Path, content: str, root: Path) -> tuple[bool, str]:
    """Create ``path`` (below ``root``) with ``content`` in the client; (applied, failure reason)."""
    return await create_files(server, {path: content}, root)


async def create_files(server: Any, files: dict[Path, str], root: Path) -> tuple[bool, str]:
    """Create every file (a translation and the headers translated with it) in one undoable edit, never over
    an existing file, never outside ``root`` (the source's workspace folder) and never through a link;
    (applied, failure reason)."""
    for path in files:
        problem = output_problem(path, root)
        if problem is not None:
            return False, problem
    if not client_can_create_files(server.client_capabilities):
        # The client cannot create files through an edit: create them here, never over an existing file.
        for path, content in files.items():
            if os.path.lexists(path):
                return False, f"cannot create {path}: it exists"
            try:
                write_confined(path, content, root)
            except UnsafePath as exc:
                return False, exc.message
            except OSError as exc:
                return False, f"cannot create {path}: {exc.strerror}"
        return True, ""
    changes: list[types.CreateFile | types.TextDocumentEdit] = []
    for path, content in files.items():
        uri = from_fs_path(str(path)) or path.as_uri()
        changes.append(types.CreateFile(uri=uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=False)))
        changes.append(types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
            edits=[types.TextEdit(range=types.Range(start=types.Position(line=0, character=0),
                                                    end=types.Position(line=0, character=0)), new_text=content)],
        ))
    path = next(iter(files))
    edit = types.WorkspaceEdit(document_changes=changes)
    try:
        response = await asyncio.wait_for(
            server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=f"xpiler: create {path.name}")),
            timeout=APPLY_EDIT_TIMEOUT_S,
        )
    except TimeoutError:
        return False, f"the client did not answer workspace/applyEdit within {APPLY_EDIT_TIMEOUT_S} s"
    if not getattr(response, "applied", False):
        return False, getattr(response, "failure_reason", None) or "the client did not apply the edit"
    return True, ""


async def show_file(server: Any, path: Path) -> None:
    uri = from_fs_path(str(path)) or path.as_uri()
    if client_can_show_documents(server.client_capabilities):
        try:
            await server.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=True))
            return
        except Exception:
            log.warning("showDocument failed for %s", uri, exc_info=True)
    server.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=f"xpiler: wrote {path}"))
