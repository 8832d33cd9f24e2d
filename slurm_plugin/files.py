"""Writing the per-job files without following symlinks (standard library only, so the
prolog can use it without importing the solver stack)."""

from __future__ import annotations

import os
from pathlib import Path

FILE_NAMES = {"rankfile": "rankfile", "hostfile": "hostfile", "machinefile": "machinefile",
              "slurm_hostfile": "slurm_hostfile", "report": "report.txt",
              "record": "report.json"}


def write_files(directory: str | os.PathLike, files: dict[str, str]) -> dict[str, Path]:
    """Write ``{name: text}`` into ``directory`` (names from FILE_NAMES), mode 0644.

    Each file is created afresh with O_EXCL | O_NOFOLLOW after removing any previous
    entry of that name, so a planted symlink is replaced, never written through.
    """
    out = {}
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name, text in files.items():
            fname = FILE_NAMES[name]
            try:
                os.unlink(fname, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            fd = os.open(fname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                         dir_fd=dir_fd)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            out[name] = Path(directory) / fname
    finally:
        os.close(dir_fd)
    return out
