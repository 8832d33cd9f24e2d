"""Reading a file someone else names: a regular file, opened once, at most N bytes.

Shared by the profile readers (:mod:`mapper.io.graph_file`) and the prolog's other input
files (SUMMA speeds): each caller turns the exceptions into its own message.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_CHUNK = 1 << 20


class NotARegularFile(ValueError):
    """The path is a directory, a device, a FIFO or a socket (``kind`` says which)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class FileTooLarge(ValueError):
    """More than the limit: ``stat_size`` is what fstat said; ``counted`` is True when
    the excess was found by reading (stat says 0 for /proc files, and a file can grow)."""

    def __init__(self, stat_size: int, counted: bool) -> None:
        super().__init__(stat_size)
        self.stat_size = stat_size
        self.counted = counted


def file_kind(mode: int) -> str:
    """What a non-regular file is, for messages."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str | os.PathLike, max_bytes: int | None, *,
                      dir_fd: int | None = None, follow_symlinks: bool = True) -> bytes:
    """The file's bytes: opened once, a regular file, at most ``max_bytes`` of them
    (None: no limit).  ``dir_fd`` opens ``path`` relative to that directory; with
    ``follow_symlinks`` False a symbolic link in its place is refused (``OSError``
    ELOOP), for names inside a directory someone else writes.

    ``O_NONBLOCK`` so that opening a FIFO does not wait for a writer; the descriptor is
    checked with ``fstat`` (not the path: it may change in between), and the limit is
    enforced on what is read, not only on the size stat reports.  Raises
    :class:`NotARegularFile`, :class:`FileTooLarge`, or the ``OSError`` of open/read.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = os.open(Path(path), flags, dir_fd=dir_fd)
    chunks: list[bytes] = []
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(file_kind(st.st_mode))
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileTooLarge(st.st_size, counted=False)
        os.set_blocking(fd, True)
        total, stop = 0, None if max_bytes is None else max_bytes + 1
        while stop is None or total < stop:
            chunk = os.read(fd, _CHUNK if stop is None else min(_CHUNK, stop - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise FileTooLarge(st.st_size, counted=True)
    finally:
        os.close(fd)
    return b"".join(chunks)
