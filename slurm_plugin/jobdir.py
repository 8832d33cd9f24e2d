"""Per-job output directories, created and removed by root without trusting users.

The prolog runs as root; the directory it makes belongs to the job's user, who can
write into it (and, in a sticky world-writable output directory, rename it away and put
a symlink in its place) while the job runs.  Root therefore never acts by path inside a
directory a user controls: every create, unlink, rename and removal goes through a
directory file descriptor opened with ``O_NOFOLLOW | O_DIRECTORY`` and checked with
``fstat`` after opening (type, owner, the inode that was listed).  Removal is
iterative and bounded (see :func:`remove_entry`); see "Threat model" in the README.

Standard library only: the prolog and the TaskProlog import this.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from mapper.errors import RankmapError

from .files import write_files_at
from .names import COMPUTED_FILES, FILE_NAMES, JOB_DIR_PREFIX, valid_job_id


class JobDirError(RankmapError, OSError):
    """The output directory cannot be used safely; the message says why."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: removal bounds: open directory levels at once, and entries looked at per removal
MAX_DEPTH = 64
MAX_ENTRIES = 100_000

JOB_DIR_MODE = 0o700
OUTPUT_DIR_MODE = 0o755


def job_dir_name(job_id: str) -> str:
    if not valid_job_id(job_id):
        raise JobDirError(f"job id {job_id!r} is not a Slurm job id")
    return f"{JOB_DIR_PREFIX}{job_id}"


def job_dir_path(output_dir: str | os.PathLike, job_id: str) -> Path:
    """Where a job's files live: ``OUTPUT_DIR/job.<JOBID>``."""
    return Path(output_dir) / job_dir_name(job_id)


# -- trusted directories (output_dir, fallback_dir and their parents) -----------------

def _trusted_owner(uid: int) -> bool:
    return uid == 0 or uid == os.geteuid()


def _check_trusted(st: os.stat_result, path: str | os.PathLike, what: str) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise JobDirError(f"{what} {path} is not a directory")
    if not _trusted_owner(st.st_uid):
        raise JobDirError(f"{what} {path} is owned by uid {st.st_uid}, not by root")
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise JobDirError(f"{what} {path} is world-writable without the sticky bit")


def open_trusted_dir(path: str | os.PathLike, what: str = "output directory") -> int:
    """An fd of ``path``, a directory owned by root (or this process's user) that is not
    world-writable without the sticky bit; its last component must not be a symlink."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        raise JobDirError(f"{what} {path} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise JobDirError(f"{what} {path} is not a directory (or is a symlink)") from None
        raise JobDirError(f"{what} {path}: {exc.strerror}") from None
    try:
        _check_trusted(os.fstat(fd), path, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


def ensure_output_dir(path: str | os.PathLike) -> bool:
    """Create ``path`` (mode 0755, owned by this process) when it is missing; True if
    created.

    Only inside an existing parent owned by root that is not world-writable without the
    sticky bit (``/run``, which is emptied at boot, qualifies); created with mkdir
    relative to the parent's descriptor and checked with fstat, never following a
    symlink.  An existing ``path`` is left alone (:func:`open_trusted_dir` checks it).
    """
    path = Path(path)
    try:
        os.lstat(path)
        return False
    except FileNotFoundError:
        pass
    parent_fd = open_trusted_dir(path.parent, "parent of the output directory")
    try:
        try:
            os.mkdir(path.name, OUTPUT_DIR_MODE, dir_fd=parent_fd)
        except FileExistsError:
            return False  # created meanwhile; checked when opened
        fd = os.open(path.name, _DIR_FLAGS, dir_fd=parent_fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                raise JobDirError(f"output directory {path} changed while being created")
            os.fchmod(fd, OUTPUT_DIR_MODE)
        finally:
            os.close(fd)
    finally:
        os.close(parent_fd)
    return True


# -- bounded, iterative removal through directory descriptors --------------------------

class _Limit(JobDirError):
    pass


def _open_child_dir(parent_fd: int, name: str, st: os.stat_result, dev: int) -> int:
    """Open the directory ``name`` that was lstat'ed as ``st``; refuse anything else, and
    a mount point (another file system than ``dev``: never crossed)."""
    if st.st_dev != dev:
        raise JobDirError(f"{name!r} is a mount point; not crossed")
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    cst = os.fstat(fd)
    if (cst.st_dev, cst.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISDIR(cst.st_mode):
        os.close(fd)
        raise JobDirError(f"{name!r} changed while being removed")
    return fd


def _empty_dir(root_fd: int, max_depth: int, max_entries: int) -> int:
    """Remove everything inside the directory open as ``root_fd``; the count removed.

    An explicit stack of directory fds, never recursion; links are unlinked, never
    followed; mount points are not crossed.  At most ``max_depth`` directories are open
    at once: a directory deeper than that is moved (renameat, fd-relative) up into
    ``root_fd`` and removed from there, so a tree of any depth goes without deep
    recursion or thousands of open fds.
    At most ``max_entries`` entries are looked at; beyond, :class:`_Limit`.
    """
    seen = removed = 0
    dev = os.fstat(root_fd).st_dev
    # frames: [fd, name in the parent, names still to look at (None: list again)]
    stack: list[list] = [[root_fd, None, None]]
    try:
        while stack:
            frame = stack[-1]
            fd = frame[0]
            if not frame[2]:
                names = os.listdir(fd)
                if not names:  # empty: remove it from its parent (the root stays)
                    stack.pop()
                    if stack:
                        os.close(fd)
                        try:
                            os.rmdir(frame[1], dir_fd=stack[-1][0])
                            removed += 1
                        except OSError as exc:  # refilled meanwhile: listed again
                            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST,
                                                 errno.ENOENT):
                                raise
                    continue
                seen += len(names)
                if seen > max_entries:
                    raise _Limit(f"more than {max_entries} entries")
                frame[2] = names
            name = frame[2].pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                try:
                    os.unlink(name, dir_fd=fd)
                    removed += 1
                except FileNotFoundError:
                    pass
                except (IsADirectoryError, PermissionError):
                    pass  # swapped for a directory meanwhile: seen at the next listing
                continue
            if len(stack) >= max_depth:
                os.rename(name, f".rankmap-deep.{secrets.token_hex(8)}", src_dir_fd=fd,
                          dst_dir_fd=root_fd)
                continue
            stack.append([_open_child_dir(fd, name, st, dev), name, None])
    finally:
        for frame in stack[1:]:
            os.close(frame[0])
    return removed


def remove_entry(parent_fd: int, name: str, max_depth: int | None = None,
                 max_entries: int | None = None) -> int:
    """Remove ``name`` in the directory open as ``parent_fd`` — a file, a symlink (the
    link itself) or a whole tree (:func:`_empty_dir`); the count of entries removed, 0
    when there was nothing.  Raises :class:`JobDirError` when a bound is reached."""
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=parent_fd)
        except FileNotFoundError:
            return 0
        return 1
    fd = _open_child_dir(parent_fd, name, st, os.fstat(parent_fd).st_dev)
    try:
        removed = _empty_dir(fd, max_depth, max_entries)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)
    return removed + 1


def _move_aside(parent_fd: int, name: str) -> str:
    aside = f".stale.{name}.{secrets.token_hex(6)}"
    os.rename(name, aside, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    return aside


def _clear(parent_fd: int, output_dir: str | os.PathLike, name: str,
           max_depth: int | None = None, max_entries: int | None = None
           ) -> tuple[int, str | None]:
    """Remove ``name`` in the output directory, or rename it aside when it cannot be
    removed within the bounds: the count removed, and a note saying what was left where
    (None when nothing was)."""
    try:
        return remove_entry(parent_fd, name, max_depth, max_entries), None
    except OSError as exc:
        try:
            aside = _move_aside(parent_fd, name)
        except FileNotFoundError:
            return 0, None  # gone meanwhile
        except OSError as exc2:
            return 0, (f"could not remove {Path(output_dir) / name} ({exc}) nor move it "
                       f"aside ({exc2.strerror}); left in place")
        return 0, (f"could not remove {Path(output_dir) / name} ({exc}); the rest was left "
                   f"in {Path(output_dir) / aside}")


# -- the job directory ----------------------------------------------------------------

class JobDir:
    """An open job directory: every operation relative to its descriptor, so a user who
    renames ``job.<id>`` away and plants a symlink in its place makes root act on the
    real directory, never on the symlink's target."""

    def __init__(self, path: Path, fd: int, uid: int | None = None, gid: int | None = None,
                 notes: tuple[str, ...] = ()) -> None:
        self.path = path
        self.fd = fd
        self.uid = uid
        self.gid = gid
        self.notes = notes

    def __repr__(self) -> str:
        return f"JobDir({str(self.path)!r}, fd={self.fd})"

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> JobDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _owner(self) -> tuple[int, int] | None:
        if os.geteuid() != 0 or self.uid is None:
            return None
        return (self.uid, self.gid if self.gid is not None else -1)

    def write(self, files: dict[str, str]) -> dict[str, Path]:
        """Write ``{name: text}`` (FILE_NAMES) 0600, owned by the job's user when root."""
        for name in files:
            fname = FILE_NAMES[name]
            st = self.lstat(fname)
            if st is not None and stat.S_ISDIR(st.st_mode):  # a planted directory
                remove_entry(self.fd, fname)
        names = write_files_at(self.fd, files, self._owner())
        return {k: self.path / v for k, v in names.items()}

    def remove(self, *names: str) -> None:
        """Remove entries (FILE_NAMES keys or file names) of the directory."""
        for name in names:
            remove_entry(self.fd, FILE_NAMES.get(name, name))

    def remove_launcher_files(self) -> None:
        """Remove every file a computation writes besides the report (launcher files,
        the SUMMA arrangement): none may outlive a failed computation."""
        self.remove(*COMPUTED_FILES)

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def is_file(self, name: str) -> bool:
        st = self.lstat(FILE_NAMES.get(name, name))
        return st is not None and stat.S_ISREG(st.st_mode)


def create_job_dir(output_dir: str | os.PathLike, job_id: str, uid: int | None = None,
                   gid: int | None = None) -> JobDir:
    """Create ``OUTPUT_DIR/job.<JOBID>`` (mode 0700, owned by the job's user when root)
    and return it open (:class:`JobDir`; close it, or use ``with``).

    Whatever is in its place (a requeued job's directory, a symlink, a planted tree) is
    removed first, through descriptors and within the bounds; what cannot be removed is
    renamed aside to ``.stale.job.<id>.<random>`` (noted in ``JobDir.notes``) so the
    job still gets its directory.
    """
    name = job_dir_name(job_id)
    out_fd = open_trusted_dir(output_dir)
    notes: list[str] = []
    try:
        for attempt in range(3):
            try:
                os.mkdir(name, JOB_DIR_MODE, dir_fd=out_fd)
                break
            except FileExistsError:
                if attempt == 2:
                    raise JobDirError(f"{Path(output_dir) / name} keeps reappearing") from None
                _, note = _clear(out_fd, output_dir, name)
                if note:
                    notes.append(note)
        fd = os.open(name, _DIR_FLAGS, dir_fd=out_fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                raise JobDirError(f"{Path(output_dir) / name} changed while being created")
            if uid is not None and os.geteuid() == 0:
                os.fchown(fd, uid, gid if gid is not None else -1)
            os.fchmod(fd, JOB_DIR_MODE)
        except BaseException:
            os.close(fd)
            raise
    finally:
        os.close(out_fd)
    return JobDir(Path(output_dir) / name, fd, uid, gid, tuple(notes))


def remove_job_dir(output_dir: str | os.PathLike, job_id: str, max_depth: int | None = None,
                   max_entries: int | None = None) -> bool:
    """Remove a job's directory if it exists; True when something was removed.

    Iterative and bounded (:func:`remove_entry`): links inside are unlinked, never
    followed; a symlink in place of the directory is removed as a link.  When a bound
    is reached, what is left is renamed aside to ``.stale.job.<id>.<random>`` (so the
    name is free again) and :class:`JobDirError` says so.  A missing output directory
    means nothing to remove.
    """
    name = job_dir_name(job_id)
    try:
        out_fd = open_trusted_dir(output_dir)
    except JobDirError:
        if not os.path.lexists(output_dir):
            return False
        raise
    try:
        removed, note = _clear(out_fd, output_dir, name, max_depth, max_entries)
    finally:
        os.close(out_fd)
    if note:
        raise JobDirError(note)
    return removed > 0
