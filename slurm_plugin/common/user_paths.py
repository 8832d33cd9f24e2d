"""Per-user paths of the site configuration (``[profiles] user_store``, ``[record] dir``).

``~`` is the user's home as the password database says (not ``$HOME``, which a job
sets), ``%u`` the user's name.  Standard library only: the TaskProlog uses it.
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from .job_conventions import INCOMPLETE_REASON, INCOMPLETE_SUFFIX


class UserPathError(ValueError):
    """A per-user path that cannot be made for this user; the message says why."""


def expand_user_path(template: str, uid: int) -> Path | None:
    """``template`` for user ``uid``; None when the template is empty (feature off)."""
    if not template:
        return None
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        raise UserPathError(f"uid {uid} has no password database entry") from None
    text = template.replace("%u", entry.pw_name)
    if text == "~" or text.startswith("~/"):
        if not entry.pw_dir.startswith("/"):
            raise UserPathError(f"user {entry.pw_name} has no home directory for {template}")
        text = entry.pw_dir.rstrip("/") + text[1:]
    return Path(text)


def own_directory(path: Path, uid: int) -> int:
    """An open file descriptor of directory ``path``, created (0700, with missing
    parents) when absent; refused when ``path`` is a symbolic link, not a directory,
    or not owned by ``uid``: files are written there as the user, and a link could
    send them into a directory the user does not own.  The caller closes the fd."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        pass  # a link or a file: said below
    except OSError as exc:
        raise UserPathError(f"{path}: cannot create: {exc.strerror}") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise UserPathError(f"{path}: is a symbolic link (to {os.readlink(path)}); "
                                f"refused: give a directory of your own") from None
        raise UserPathError(f"{path}: not a directory ({exc.strerror})") from None
    st = os.fstat(fd)
    if st.st_uid != uid:
        os.close(fd)
        raise UserPathError(f"{path}: owned by uid {st.st_uid}, not by uid {uid}; refused")
    return fd


def set_aside(directory: Path, reason: str) -> Path:
    """Rename a user's recording ``directory`` to ``<name>.incomplete`` (replacing an
    older one of that name) with ``reason.txt``, so it is never used; its raw files stay
    for the user to look at.  Returns the new path; OSError when it cannot be done."""
    target = directory.with_name(directory.name + INCOMPLETE_SUFFIX)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, ignore_errors=True)
    os.rename(directory, target)
    fd = os.open(target / INCOMPLETE_REASON,
                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(reason.rstrip("\n") + "\n")
    return target
