"""Which files the language server acts on, and where it writes.

A command names its file by a URI the client sends, and a client is not always the editor the user is looking
at (a workspace's own tasks, an extension, anything that reaches ``serve --tcp``). So a command accepts a file
only when it is a document the client opened (the user sees it) or when its real path (links resolved) is
inside a workspace folder; anything else is refused, naming the path, before it is read, compiled or written
beside. Every file the server writes itself goes through ``xpiler_core.safe_io.write_confined`` below the
folder of its source (the workspace folder, or for an open document outside any workspace its own folder),
and a file the client is asked to create must lie below that folder too, reached through no link.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from xpiler_core.safe_io import UnsafePath, confined_parts


@dataclass(frozen=True)
class Source:
    """A file a command may act on: ``path`` to read it by, ``root`` the folder its outputs stay in."""

    uri: str
    path: str
    root: Path | None  # None: an editor buffer that is no file (``untitled:``): nothing is written for it
    open_in_editor: bool

    def write_root(self) -> Path:
        """``root``, or JsonRpcInvalidParams for a document that is no file on disk."""
        if self.root is None:
            raise JsonRpcInvalidParams(f"{self.uri} is not a file on disk: save it to create files beside it")
        return self.root


def workspace_folders(server: Any) -> list[str]:
    """The workspace folders' paths as the client named them (the root path when it sent no folders)."""
    try:
        workspace = server.workspace
    except RuntimeError:  # not initialized
        return []
    folders = [to_fs_path(folder.uri) or "" for folder in workspace.folders.values()]
    if not folders and workspace.root_path:
        folders = [workspace.root_path]
    return [folder for folder in folders if folder]


def accepted_source(server: Any, uri: str) -> Source:
    """The file ``uri`` names when the server may act on it; JsonRpcInvalidParams naming it otherwise."""
    doc = server.documents.get(uri)
    folders = workspace_folders(server)
    if doc is not None:
        on_disk = to_fs_path(uri) if uri.startswith("file:") else None
        return Source(uri, doc.path, _write_root(doc.path, folders) if on_disk else None, open_in_editor=True)
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if not path:
        raise JsonRpcInvalidParams(
            f"refused {uri}: not a file: URI, and no document with this URI is open in the editor"
        )
    real = os.path.realpath(path)
    for folder in folders:
        if _inside(real, os.path.realpath(folder)):
            # read and written beside by its real path: a link cannot carry the outputs elsewhere
            return Source(uri, real, _write_root(real, folders), open_in_editor=False)
    shown = path if real == os.path.abspath(path) else f"{path} (a link to {real})"
    where = f"the workspace folders ({', '.join(folders)})" if folders else "a workspace folder (none is open)"
    raise JsonRpcInvalidParams(
        f"refused {shown}: it is not inside {where} and not open in the editor; "
        "xpiler acts only on files of the workspace or documents open in the editor"
    )


def _write_root(path: str, folders: list[str]) -> Path:
    """The deepest workspace folder (as named, or its real path) holding ``path`` as spelled, else the file's
    own folder: a document open outside every workspace gets its outputs beside it and nowhere else."""
    spelled = os.path.normpath(os.path.abspath(path))
    holders = [
        base for folder in folders for base in {folder, os.path.realpath(folder)}
        if _inside(spelled, os.path.normpath(os.path.abspath(base)))
    ]
    if holders:
        return Path(max(holders, key=len))
    return Path(spelled).parent


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def output_problem(path: Path, root: Path) -> str | None:
    """Why ``path`` may not be created for a source whose outputs stay below ``root`` (outside it, or reached
    through a link, or already a link), or None. For files the client creates; the server's own writes are
    checked again as they happen by ``write_confined``."""
    try:
        parts = confined_parts(path, root)
    except UnsafePath as exc:
        return exc.message
    current = Path(os.path.normpath(os.path.abspath(root)))
    for part in parts:
        current = current / part
        if os.path.islink(current):
            return f"refusing to write {path}: {current} is a symbolic link (xpiler never writes through links)"
    return None
