"""Per-job output directories, created and removed by root without trusting users.

The prolog runs as root.  The job directory it makes belongs to root, with the job's
group and mode 0750: the job's user reads the files in it (each 0600 and owned by the
user) but cannot add, rename or remove anything, so a job directory holds only what
the prolog wrote, and it can prove to the TaskProlog that it is this job's
(:func:`open_job_dir_for_task`).  The output directory itself must not be writable by
anyone but its owner.  Root still never acts by path where a user could have had a
hand (directories of an older layout, trees a user left in a misconfigured output
directory): every create, unlink, rename and removal goes through a directory file
descriptor opened with ``O_NOFOLLOW | O_DIRECTORY`` and checked with ``fstat`` after
opening (type, owner, the inode that was listed).  Removal is iterative and bounded
(see :func:`remove_entry`); what a bound left behind is renamed aside and removed by
later calls, a bounded amount each (:func:`sweep_stale`).  See "Threat model" in the
README.

Standard library (and mapper.errors, mapper.io.regular_file) only: the prolog and the
TaskProlog import this.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import secrets
import stat
from pathlib import Path

from mapper.errors import RankmapError
from mapper.io.regular_file import FileTooLarge, NotARegularFile, read_regular_file

from .files import create_file_at, write_files_at
from .job_conventions import COMPUTED_FILES, FILE_NAMES, JOB_DIR_PREFIX, valid_job_id


class JobDirError(RankmapError, OSError):
    """The output directory cannot be used safely; the message says why."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: removal bounds: open directory levels at once, and entries looked at per removal
MAX_DEPTH = 64
MAX_ENTRIES = 100_000

JOB_DIR_MODE = 0o750
OUTPUT_DIR_MODE = 0o755
#: prefix of what a bound left behind (``.stale.job.<id>.<random>``), swept later
STALE_PREFIX = ".stale."
#: the largest report.json the TaskProlog reads
MAX_RECORD_BYTES = 1 << 20


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


def _check_trusted(st: os.stat_result, path: str | os.PathLike, what: str,
                   allow_sticky: bool = False) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise JobDirError(f"{what} {path} is not a directory")
    if not _trusted_owner(st.st_uid):
        raise JobDirError(f"{what} {path} is owned by uid {st.st_uid}, not by root")
    if allow_sticky:  # a parent such as /tmp: users cannot remove what root makes in it
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise JobDirError(f"{what} {path} is world-writable without the sticky bit")
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        # a user who can create entries here can plant job.<id> of a job to come
        raise JobDirError(f"{what} {path} is writable by "
                          f"{'everyone' if st.st_mode & stat.S_IWOTH else 'its group'} "
                          f"(mode {stat.S_IMODE(st.st_mode):04o}); make it 0755, owned by "
                          "root")


def open_trusted_dir(path: str | os.PathLike, what: str = "output directory",
                     allow_sticky: bool = False) -> int:
    """An fd of ``path``, a directory owned by root (or this process's user) that no one
    else can write to (``allow_sticky``: world-writable with the sticky bit is fine, for
    parents such as /tmp); its last component must not be a symlink."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        raise JobDirError(f"{what} {path} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise JobDirError(f"{what} {path} is not a directory (or is a symlink)") from None
        raise JobDirError(f"{what} {path}: {exc.strerror}") from None
    try:
        _check_trusted(os.fstat(fd), path, what, allow_sticky)
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
    parent_fd = open_trusted_dir(path.parent, "parent of the output directory",
                                 allow_sticky=True)
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


def _list(fd: int, most: int) -> list[str]:
    """At most ``most`` names of the directory open as ``fd``."""
    with os.scandir(fd) as entries:
        return [e.name for e in itertools.islice(entries, max(most, 0))]


def _empty_dir(root_fd: int, max_depth: int, max_entries: int,
               counter: list[int] | None = None) -> int:
    """Remove everything inside the directory open as ``root_fd``; the count removed.

    An explicit stack of directory fds, never recursion; links are unlinked, never
    followed; mount points are not crossed.  At most ``max_depth`` directories are open
    at once: a directory deeper than that is moved (renameat, fd-relative) up into
    ``root_fd`` and removed from there, so a tree of any depth goes without deep
    recursion or thousands of open fds.
    At most ``max_entries`` entries are looked at (a listing reads no more names than
    that, so a directory of millions of entries costs bounded memory, and a call that
    reaches the bound has still removed what it looked at); beyond, :class:`_Limit`.
    ``counter[0]`` (when given) counts the removals as they happen, so a caller knows
    the progress of a call that raised.
    """
    counter = [0] if counter is None else counter
    seen = 0
    dev = os.fstat(root_fd).st_dev
    # frames: [fd, name in the parent, names still to look at (None: list again)]
    stack: list[list] = [[root_fd, None, None]]
    try:
        while stack:
            frame = stack[-1]
            fd = frame[0]
            if not frame[2]:
                names = _list(fd, max_entries - seen + 1)
                if not names:  # empty: remove it from its parent (the root stays)
                    stack.pop()
                    if stack:
                        os.close(fd)
                        try:
                            os.rmdir(frame[1], dir_fd=stack[-1][0])
                            counter[0] += 1
                        except OSError as exc:  # refilled meanwhile: listed again
                            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST,
                                                 errno.ENOENT):
                                raise
                    continue
                frame[2] = names
            seen += 1
            if seen > max_entries:
                raise _Limit(f"more than {max_entries} entries")
            name = frame[2].pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                try:
                    os.unlink(name, dir_fd=fd)
                    counter[0] += 1
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
    return counter[0]


def remove_entry(parent_fd: int, name: str, max_depth: int | None = None,
                 max_entries: int | None = None, counter: list[int] | None = None) -> int:
    """Remove ``name`` in the directory open as ``parent_fd`` — a file, a symlink (the
    link itself) or a whole tree (:func:`_empty_dir`); the count of entries removed, 0
    when there was nothing.  Raises :class:`JobDirError` when a bound is reached
    (``counter[0]``, when given, then holds what was removed)."""
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
        removed = _empty_dir(fd, max_depth, max_entries, counter)
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
            self._clear_directory(FILE_NAMES[name])
        names = write_files_at(self.fd, files, self._owner())
        return {k: self.path / v for k, v in names.items()}

    def create(self, name: str) -> int:
        """A new empty file for ``name`` (a FILE_NAMES key), 0600 and owned by the job's
        user when root, open for writing (the caller closes it)."""
        fname = FILE_NAMES[name]
        self._clear_directory(fname)
        return create_file_at(self.fd, fname, self._owner())

    def _clear_directory(self, fname: str) -> None:
        st = self.lstat(fname)
        if st is not None and stat.S_ISDIR(st.st_mode):  # a planted directory
            remove_entry(self.fd, fname)

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
    """Create ``OUTPUT_DIR/job.<JOBID>`` (mode 0750, owned by this process — root — with
    the job's group ``gid``) and return it open (:class:`JobDir`; close it, or use
    ``with``).  Files written through it belong to ``uid``.

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
            if gid is not None and os.geteuid() == 0:
                os.fchown(fd, -1, gid)  # the owner stays root: the user adds nothing
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


def sweep_stale(output_dir: str | os.PathLike, max_entries: int | None = None
                ) -> tuple[int, list[str]]:
    """Remove what earlier bounded removals left in ``output_dir`` (``.stale.*``
    entries), looking at no more than ``max_entries`` entries in all; ``(entries removed,
    notes)``, a note per tree left for a later call.

    Called by every epilog (and prolog) on the node, so a tree of any size goes in
    bounded steps; each step's progress is kept (removal is by entry).
    Complexity: O(max_entries) file system operations per call.
    """
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    try:
        out_fd = open_trusted_dir(output_dir)
    except JobDirError:
        return 0, []  # missing or unusable: the caller's own step says so
    removed, notes = 0, []
    try:
        names = sorted(n for n in os.listdir(out_fd) if n.startswith(STALE_PREFIX))
        for name in names:
            budget = max_entries - removed
            if budget <= 0:
                notes.append(f"{Path(output_dir) / name}: left for a later epilog "
                             f"(this one's bound of {max_entries} entries is spent)")
                continue
            counter = [0]
            try:
                removed += remove_entry(out_fd, name, max_entries=budget, counter=counter)
            except OSError as exc:
                removed += counter[0]
                notes.append(f"{Path(output_dir) / name}: {counter[0]} entries removed, "
                             f"the rest left for a later epilog ({exc})")
    finally:
        os.close(out_fd)
    return removed, notes


def open_job_dir_for_task(base: str | os.PathLike, job_id: str, uid: int, gid: int
                          ) -> tuple[Path, dict] | None:
    """The job directory under ``base`` and its record (report.json), if the prolog of
    this very job made it; None when there is none.  For the TaskProlog, which runs as
    the job's user (``uid``, ``gid``) and must never hand a launcher another user's
    files.  Raises :class:`JobDirError` saying why a directory that is there is not
    trusted:

    * ``base`` is a directory (not a symlink) owned by root, or by ``uid`` itself where
      rankmap runs unprivileged, and writable by no one else (a sticky world-writable
      one is still accepted here: nobody but root can make what follows in it);
    * ``job.<id>`` is a directory (not a symlink) owned by that same owner, with the
      job's group when the owner is root, writable by no one else: only the prolog
      could have made it, and only for a job of this id;
    * its ``report.json`` is a regular file (not a symlink) of this user, at most
      1 MiB, a JSON object whose ``job_id`` is this job's.
    """
    name = job_dir_name(job_id)
    try:
        base_fd = os.open(base, _DIR_FLAGS)
    except OSError:
        return None  # no output directory here (or not a directory): nothing to trust
    try:
        bst = os.fstat(base_fd)
        if bst.st_uid not in (0, uid):
            raise JobDirError(f"{base} is owned by uid {bst.st_uid}, not by root")
        if bst.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not bst.st_mode & stat.S_ISVTX:
            raise JobDirError(f"{base} is writable by others without the sticky bit")
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=base_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise JobDirError(f"{Path(base) / name} is not a directory (or is a symlink): "
                              f"{exc.strerror}") from None
        try:
            record = _check_task_job_dir(fd, Path(base) / name, bst.st_uid, job_id, uid, gid)
        finally:
            os.close(fd)
    finally:
        os.close(base_fd)
    return (Path(base) / name, record) if record is not None else None


def _check_task_job_dir(fd: int, path: Path, owner: int, job_id: str, uid: int, gid: int
                        ) -> dict | None:
    st = os.fstat(fd)
    if st.st_uid != owner:
        raise JobDirError(f"{path} is owned by uid {st.st_uid}, not by "
                          f"{'root' if owner == 0 else f'uid {owner}'}: not made by the "
                          "prolog; ignored")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise JobDirError(f"{path} is writable by others (mode "
                          f"{stat.S_IMODE(st.st_mode):04o}); ignored")
    if owner == 0 and uid != 0 and st.st_gid != gid:
        raise JobDirError(f"{path} has group {st.st_gid}, not the job's {gid}; ignored")
    name = FILE_NAMES["report_json"]
    try:
        rst = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None  # the prolog is still writing, or made no report
    if rst.st_uid != uid:
        raise JobDirError(f"{path / name} is not a file of uid {uid}; ignored")
    try:
        data = read_regular_file(name, MAX_RECORD_BYTES, dir_fd=fd, follow_symlinks=False)
    except NotARegularFile:
        raise JobDirError(f"{path / name} is not a file of uid {uid}; ignored") from None
    except FileTooLarge:
        raise JobDirError(f"{path / name} is over {MAX_RECORD_BYTES} bytes") from None
    except OSError as exc:  # a symlink in its place (ELOOP), gone meanwhile
        raise JobDirError(f"{path / name}: {exc.strerror}") from None
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise JobDirError(f"{path / FILE_NAMES['report_json']} is not JSON: {exc}") from None
    if not isinstance(record, dict) or record.get("job_id") != job_id:
        raise JobDirError(f"{path / FILE_NAMES['report_json']} is not job {job_id}'s; ignored")
    return record
