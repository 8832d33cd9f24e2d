"""Per-job output directories, created and removed by root without trusting users.

The prolog runs as root; the directory it makes belongs to the job's user, who can
write into it while the job runs.  Every step here therefore works on file
descriptors and refuses symlinks, so that a user cannot redirect root's writes or
deletions elsewhere (see "Threat model" in the README).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path


class JobDirError(OSError):
    """The output directory cannot be used safely; the message says why."""


_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")


def job_dir_path(output_dir: str | os.PathLike, job_id: str) -> Path:
    """Where a job's files live: ``OUTPUT_DIR/job.<JOBID>``."""
    if not _JOB_ID.match(str(job_id)):
        raise JobDirError(f"job id {job_id!r} is not a Slurm job id")
    return Path(output_dir) / f"job.{job_id}"


def _check_parent(parent: Path) -> None:
    try:
        st = os.lstat(parent)
    except FileNotFoundError:
        raise JobDirError(f"output directory {parent} does not exist") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise JobDirError(f"output directory {parent} is not a directory (or is a symlink)")
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise JobDirError(f"output directory {parent} is world-writable without the sticky bit")


def create_job_dir(output_dir: str | os.PathLike, job_id: str, uid: int | None = None,
                   gid: int | None = None) -> Path:
    """Create ``OUTPUT_DIR/job.<JOBID>`` (mode 0755) owned by the job's user.

    A leftover directory of the same job (a requeued job) is emptied and reused; any
    other kind of file in its place, a symlink included, is an error.
    """
    parent = Path(output_dir)
    _check_parent(parent)
    path = job_dir_path(parent, job_id)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        remove_job_dir(parent, job_id)
        os.mkdir(path, 0o755)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if uid is not None and os.geteuid() == 0:
            os.fchown(fd, uid, gid if gid is not None else -1)
        os.fchmod(fd, 0o755)
    finally:
        os.close(fd)
    return path


def remove_job_dir(output_dir: str | os.PathLike, job_id: str) -> bool:
    """Remove a job's directory if it exists; True when something was removed.

    ``shutil.rmtree`` works on directory file descriptors on Linux, so symlinks a user
    planted inside are removed as links, never followed.  A symlink in place of the
    directory itself is removed as a link.
    """
    path = job_dir_path(output_dir, job_id)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux has it
            raise JobDirError("this platform cannot remove directories safely")
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return True
