"""Writing the per-job files without following symlinks (standard library only, so the
prolog can use it without importing the solver stack)."""

from __future__ import annotations

import os
from pathlib import Path

from .job_conventions import FILE_NAMES

FILE_MODE = 0o600
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_ATTEMPTS = 3


def create_file_at(dir_fd: int, fname: str, owner: tuple[int, int] | None = None,
                   mode: int = FILE_MODE) -> int:
    """A new, empty file ``fname`` in the directory open as ``dir_fd``, open for writing.

    Created afresh with O_EXCL | O_NOFOLLOW after removing any previous entry of that
    name, so a planted symlink or hard link is replaced, never written through; a name
    that keeps reappearing between the unlink and the create is an error.  The mode is
    set on the descriptor (umask-independent); ``owner`` = ``(uid, gid)`` chowns it
    through its descriptor (root writing for a job's user).
    """
    for attempt in range(_ATTEMPTS):
        try:
            os.unlink(fname, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(fname, _CREATE, mode, dir_fd=dir_fd)
            break
        except FileExistsError:
            if attempt == _ATTEMPTS - 1:
                raise
    try:
        if owner is not None:
            os.fchown(fd, owner[0], owner[1])
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_files_at(dir_fd: int, files: dict[str, str], owner: tuple[int, int] | None = None,
                   mode: int = FILE_MODE) -> dict[str, str]:
    """Write ``{name: text}`` (names from FILE_NAMES) into the directory open as
    ``dir_fd``, each file made by :func:`create_file_at`.  Returns ``{name: file
    name}``.
    """
    out = {}
    for name, text in files.items():
        fname = FILE_NAMES[name]
        fd = create_file_at(dir_fd, fname, owner, mode)
        try:
            data = text.encode("utf-8", "backslashreplace")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        out[name] = fname
    return out


def write_files(directory: str | os.PathLike, files: dict[str, str],
                owner: tuple[int, int] | None = None, mode: int = FILE_MODE
                ) -> dict[str, Path]:
    """Write ``{name: text}`` into ``directory``, mode 0600 by default; see
    :func:`write_files_at`.  The path is opened with O_NOFOLLOW | O_DIRECTORY (its last
    component must not be a symlink).  Returns ``{name: path}``.
    """
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        names = write_files_at(dir_fd, files, owner, mode)
    finally:
        os.close(dir_fd)
    return {k: Path(directory) / v for k, v in names.items()}
