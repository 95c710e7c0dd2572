"""Writes that never follow a symbolic link and never leave the folder they are confined to.

A workspace is untrusted input: a cloned repository can plant ``kernel.hip -> ~/.bashrc`` or a ``.xpiler``
folder that links elsewhere, and a plain ``open(path, "w")`` would write through it. Every file xpiler writes
(translations, translated headers, manifests, specs, tree copies) goes through :func:`write_confined`: each
component below the confining folder is opened with ``O_NOFOLLOW`` relative to its parent's descriptor (no
window in which a component can be swapped for a link between check and use), folders are created as needed,
and the file is written to a fresh temporary name and renamed into place, so a reader never sees half a file
and a hard link to another file is replaced, not written through. The confining folder itself is taken as the
user named it (a user may keep their projects behind a link).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from xpiler_core.diagnostics import XpilerError


class UnsafePath(XpilerError):
    """A write that would go through a symbolic link or outside its confining folder."""


def _open_dir(name: str, parent_fd: int | None, shown: Path, create: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    if create:
        try:
            os.mkdir(name, 0o777, dir_fd=parent_fd)
        except FileExistsError:
            pass
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = "a symbolic link" if _is_link(name, parent_fd) else "not a folder"
            raise UnsafePath(f"refusing to write below {shown}: it is {kind} (xpiler never writes through links)",
                             str(shown)) from None
        raise


def _is_link(name: str, parent_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=parent_fd).st_mode)
    except OSError:
        return False


def confined_parts(path: Path, root: Path) -> tuple[str, ...]:
    """``path``'s components below ``root`` (both made absolute, ``..`` resolved lexically); an error when
    ``path`` is not inside ``root``."""
    absolute = Path(os.path.normpath(os.path.abspath(path)))
    base = Path(os.path.normpath(os.path.abspath(root)))
    try:
        relative = absolute.relative_to(base)
    except ValueError:
        raise UnsafePath(f"refusing to write {absolute}: it is outside {base}", str(absolute)) from None
    if not relative.parts:
        raise UnsafePath(f"refusing to write over the folder {base}", str(absolute))
    return relative.parts


def write_confined(path: str | Path, data: str | bytes, root: str | Path | None = None) -> Path:
    """Write ``data`` to ``path`` (text as UTF-8), never through a symbolic link and never outside ``root``
    (default: ``path``'s own folder). Folders between ``root`` and the file are created. Returns the path."""
    target = Path(path)
    base = Path(root) if root is not None else Path(os.path.abspath(target)).parent
    parts = confined_parts(target, base)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    base_abs = Path(os.path.normpath(os.path.abspath(base)))
    base_abs.mkdir(parents=True, exist_ok=True)
    fd = os.open(base_abs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        shown = base_abs
        for part in parts[:-1]:
            shown = shown / part
            child = _open_dir(part, fd, shown, create=True)
            os.close(fd)
            fd = child
        name = parts[-1]
        shown = shown / name
        mode = 0o666
        try:
            info = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            info = None
        if info is not None:
            if stat.S_ISLNK(info.st_mode):
                raise UnsafePath(f"refusing to write {shown}: it is a symbolic link (xpiler never writes through "
                                 "links; remove it or choose another output with -o)", str(shown))
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePath(f"refusing to write {shown}: it is not a regular file", str(shown))
            mode = stat.S_IMODE(info.st_mode)
        temp = f".{name}.xpiler-{secrets.token_hex(4)}"
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as handle:
                if info is not None:
                    os.fchmod(handle.fileno(), mode)  # an existing file keeps its permissions
                handle.write(blob)
            os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=fd)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
    return target


def read_nofollow(path: str | Path) -> bytes:
    """The bytes of a regular file, refusing a symbolic link at the last component."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"refusing to read {path}: it is a symbolic link", str(path)) from None
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def writable_folder_problem(folder: str | Path) -> str | None:
    """Why files cannot be created in ``folder`` (or in the nearest existing folder above it), or None.

    Checked before any work so that a run never ends by losing its result to an unwritable output path."""
    current = Path(os.path.abspath(folder))
    while not current.exists():
        if current.parent == current:
            return f"{folder}: no existing folder above it"
        current = current.parent
    if not current.is_dir():
        return f"{current} is not a folder"
    if not os.access(current, os.W_OK | os.X_OK):
        return f"{current} is not writable"
    return None
