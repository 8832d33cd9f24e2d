"""A recording job's files → a profile in the user's store, after the job.

The job's recording directory (made by the TaskProlog,
:mod:`slurm_plugin.lifecycle.recording_setup`) holds ``recording.json`` (the profile name,
the job, its task count, when it started), the interposer's launches
(``mpi/run.<K>/rank.<R>``, :mod:`slurm_plugin.profiles.recording`) and Open MPI's
monitoring files (``ompi/prof.<R>.prof``, :mod:`slurm_plugin.profiles.ompi_monitoring`).

:func:`collect_recording` picks the job's application among them: a complete launch
whose world is the job's task count (the heaviest, when several are), every rank's file
present; Open MPI's monitoring files count the messages that crossed the PML (``E``:
the application's, ``I``: those the library sent for its collectives; ``C`` lines
restate collectives per peer and would count them twice).  The run becomes the profile
or one more sample of it (:func:`slurm_plugin.profiles.store_writer.store_recording`)
and the raw files are removed.  A recording with no usable launch (a rank missing, a
killed job, no MPI program under the recorder) is renamed ``<job>.incomplete`` with
``reason.txt`` and not used; ``rankmap profile list`` shows it.

Runs as the user (TaskEpilog, ``rankmap profile collect``).  O(files + edges).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from mapper import CommGraph
from mapper.errors import RankmapError
from mapper.io.regular_file import read_regular_file

from ..common.job_conventions import (
    INCOMPLETE_REASON,
    INCOMPLETE_SUFFIX,
    PROFILE_NAME,
    RECORDING_INTERPOSER_DIR,
    RECORDING_META,
    RECORDING_MONITORING_PREFIX,
)
from ..common.user_paths import set_aside
from .ompi_monitoring import MonitoringError, import_monitoring
from .pattern_match import match_generator
from .recording import IncompleteRecording, RecordingError, read_recording
from .store import ProfileError
from .store_writer import RunProvenance, StoredRecording, store_recording

#: the monitoring line kinds a recording counts (see the module docstring)
MONITORING_KINDS = ("E", "I")
META_MAX_BYTES = 64 << 10


@dataclass(frozen=True)
class RecordingMeta:
    """``recording.json``: what the TaskProlog wrote when the job started recording."""

    name: str
    job: str
    started: str
    ntasks: int      # 0: unknown (the job gave no task count)
    origin: str      # "option" (--rankmap-record) or "rule"

    def as_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True) + "\n"


def read_meta(directory: Path) -> RecordingMeta:
    path = directory / RECORDING_META
    try:
        data = json.loads(read_regular_file(path, META_MAX_BYTES, follow_symlinks=False))
        meta = RecordingMeta(**{k: data[k] for k in RecordingMeta.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecordingError(f"{path}: not a recording description ({exc})") from None
    if not PROFILE_NAME.match(meta.name) or not isinstance(meta.ntasks, int):
        raise RecordingError(f"{path}: bad name or task count")
    return meta


@dataclass(frozen=True)
class Launch:
    """One recorded launch that can become the profile."""

    graph: CommGraph
    mpi: str
    recorder: str
    where: Path


@dataclass(frozen=True)
class Collected:
    """What became of a job's recording: stored, or kept aside with the reason."""

    meta: RecordingMeta | None
    stored: StoredRecording | None = None
    reason: str | None = None
    notes: tuple[str, ...] = ()

    def sentence(self) -> str:
        if self.stored is not None:
            what = ("new profile" if self.stored.sample == 1
                    else f"sample {self.stored.sample}")
            by = (f"job {self.meta.job}" if self.meta.origin != "command"
                  else self.meta.job)
            return (f"profile {self.meta.name} recorded by {by}: {what} in "
                    f"{self.stored.toml}")
        name = self.meta.name if self.meta else "?"
        return f"profile {name} not recorded: {self.reason}"


def recorder_launches(runs: Path, ntasks: int, max_file_bytes: int
                      ) -> tuple[list[Launch], list[str]]:
    """The complete launches librankmap_record wrote in ``runs`` (its ``run.<K>``
    directories, or ``runs`` itself when it holds rank files) of ``ntasks`` ranks (0:
    any), and why the others are not used."""
    found: list[Launch] = []
    why: list[str] = []
    if not runs.is_dir() or runs.is_symlink():
        return found, why
    names = sorted((p for p in runs.iterdir() if p.name.startswith("run.") and p.is_dir()),
                   key=lambda p: (len(p.name), p.name))
    if not names and any(p.name.startswith("rank.") for p in runs.iterdir()):
        names = [runs]
    for run in names:
        try:
            rec = read_recording(run, max_file_bytes=max_file_bytes)
        except (IncompleteRecording, RecordingError) as exc:
            why.append(str(exc))
            continue
        if ntasks and rec.size != ntasks:
            why.append(f"{run}: a launch of {rec.size} ranks, the job has {ntasks} tasks")
            continue
        found.append(Launch(rec.graph, rec.mpi, "librankmap_record", run))
    return found, why


def launches(directory: Path, ntasks: int, max_file_bytes: int
             ) -> tuple[list[Launch], list[str]]:
    """The complete launches of the job's size in ``directory``, and why the others
    are not used."""
    found, why = recorder_launches(directory / RECORDING_INTERPOSER_DIR, ntasks,
                                   max_file_bytes)
    prefix = directory / RECORDING_MONITORING_PREFIX
    prof = sorted(prefix.parent.glob(prefix.name + ".*.prof")) if prefix.parent.is_dir() else []
    big = [p for p in prof if p.is_symlink() or not p.is_file()
           or p.stat().st_size > max_file_bytes]
    if big:
        why.append(f"Open MPI monitoring: {big[0]} is not a regular file of at most "
                   f"{max_file_bytes} bytes")
    elif prof:
        try:
            graph = import_monitoring(prefix, MONITORING_KINDS)
        except MonitoringError as exc:
            why.append(f"Open MPI monitoring: {exc}")
        else:
            if ntasks and graph.n != ntasks:
                why.append(f"{prefix}.*.prof: {graph.n} ranks, the job has {ntasks} tasks")
            else:
                found.append(Launch(graph, "Open MPI", "Open MPI monitoring", prefix.parent))
    return found, why


def collect_recording(directory: Path, store: Path, uid: int, *,
                      max_file_bytes: int, max_profile_bytes: int | None = None
                      ) -> Collected:
    """Store the job's recording in ``directory`` as profile or sample in ``store``
    (the user's), or keep it aside as ``<directory>.incomplete`` with the reason.  A run
    that matches a generator (:func:`slurm_plugin.profiles.pattern_match.match_generator`)
    stores its size-free spec too, so jobs of other task counts are mapped."""
    try:
        meta = read_meta(directory)
    except RecordingError as exc:
        return _aside(directory, None, str(exc))
    found, why = launches(directory, meta.ntasks, max_file_bytes)
    if not found:
        reason = "; ".join(why) or ("no MPI program of the job reached MPI_Finalize under "
                                    "the recorder (a killed job, or no MPI program)")
        return _aside(directory, meta, reason)
    done = store_heaviest(found, why, meta, store, uid, max_profile_bytes)
    if done.stored is None:
        return _aside(directory, meta, done.reason or "not stored")
    shutil.rmtree(directory, ignore_errors=True)
    return done


def store_heaviest(found: list[Launch], why: list[str], meta: RecordingMeta, store: Path,
                   uid: int, max_profile_bytes: int | None,
                   description: str = "") -> Collected:
    """The heaviest of the complete launches ``found`` stored as profile ``meta.name``
    (or one more sample of it) in ``store``, a new entry described by ``description``
    (default: the job's); the others, and ``why`` the rest were not used, become notes.
    Nothing is removed or set aside."""
    if not found:
        return Collected(meta, None, "; ".join(why) or "no complete launch")
    best = max(found, key=lambda launch: launch.graph.total_volume)
    notes = tuple(why) + tuple(f"{launch.where}: a lighter launch, not used"
                               for launch in found if launch is not best)
    match = match_generator(best.graph)
    if match is not None:
        notes += (match.describe(),)
    try:
        stored = store_recording(
            store, uid, meta.name, best.graph,
            RunProvenance(meta.job, meta.started, best.mpi, best.recorder),
            description=description, generator=match.spec if match else None,
            max_bytes=max_profile_bytes)
    except (ProfileError, RankmapError) as exc:
        return Collected(meta, None, str(exc), notes)
    return Collected(meta, stored, None, notes)


def collect_directory(runs: Path, name: str, store: Path, uid: int, *, job: str,
                      started: str, max_file_bytes: int,
                      max_profile_bytes: int | None = None) -> Collected:
    """A recording made outside a rankmap job (``RANKMAP_RECORD_DIR=runs``, or
    ``rankmap record``) stored as profile ``name`` in ``store``: its heaviest complete
    launch, of any size.  ``job`` says who recorded it ("job 123", "HOST (outside
    Slurm)", "directory D").  The files in ``runs`` are left as they are."""
    if not PROFILE_NAME.match(name):
        return Collected(None, None, f"profile name {name!r} is not allowed")
    meta = RecordingMeta(name, job, started, 0, "command")
    if not runs.is_dir():
        return Collected(meta, None, f"{runs}: no such directory")
    found, why = recorder_launches(runs, 0, max_file_bytes)
    if not found and not why:
        why = [f"{runs}: no launch (run.<K>) and no rank file: the program did not reach "
               f"MPI_Finalize under librankmap_record, or was not an MPI program"]
    return store_heaviest(found, why, meta, store, uid, max_profile_bytes,
                          description=f"recorded by {job}")


def _aside(directory: Path, meta: RecordingMeta | None, reason: str) -> Collected:
    """The recording set aside with ``reason`` (:func:`set_aside`), as the result."""
    try:
        set_aside(directory, reason)
    except OSError:
        pass  # the reason is still returned, and the TaskEpilog logs it
    return Collected(meta, None, reason)


def incomplete_recordings(base: Path) -> list[tuple[str, str]]:
    """``(job, reason)`` of the recordings kept aside under ``base``."""
    out = []
    if not base.is_dir():
        return out
    for d in sorted(base.glob("*" + INCOMPLETE_SUFFIX)):
        try:
            reason = read_regular_file(d / INCOMPLETE_REASON, 4096,
                                       follow_symlinks=False).decode("utf-8", "replace")
        except OSError:
            reason = "(no reason file)"
        out.append((d.name[:-len(INCOMPLETE_SUFFIX)], reason.strip()))
    return out
