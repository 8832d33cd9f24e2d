"""Writing a recorded run into a user's own profile store, as that user.

A recording becomes a profile ``NAME`` (``NAME.toml`` beside ``NAME.mtx``) or, when
``NAME`` exists in that store, one more sample of it (``NAME.s<K>.mtx`` appended to
``samples``), and its provenance one more ``[[runs]]`` table (file, job, date, MPI,
recorder, ranks, volume), so ``rankmap profile list`` can say where each sample came
from and the plan keeps checking a placement under every run
(:mod:`slurm_plugin.profiles.samples`).

Only ever run as the store's owner (the TaskEpilog, ``rankmap profile collect``), never
as root: the store directory is opened without following a link and must be the
user's (:func:`slurm_plugin.common.user_paths.own_directory`), every file is written
under a temporary name relative to that open directory and renamed into place, so a
link planted in the store cannot redirect a write and a reader never sees half a file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import tomllib

from mapper import CommGraph
from mapper.io.mtx_file import mtx_text

from ..common.user_paths import UserPathError, own_directory
from .store import NAME, ProfileError, ProfileStore, toml_string


@dataclass(frozen=True)
class RunProvenance:
    """Where one recorded sample came from."""

    job: str
    date: str       # ISO 8601, when the job started recording
    mpi: str        # the MPI library's version string, as the recorder read it
    recorder: str   # "librankmap_record" or "Open MPI monitoring"


@dataclass(frozen=True)
class StoredRecording:
    toml: Path
    sample: int        # 1 for a new profile, K+1 for its K-th added sample
    matrix: str        # the file name written


def toml_value(value: object) -> str:
    """A TOML value of the few types a profile entry holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "0.0"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def entry_text(entry: Mapping[str, object], runs: Sequence[Mapping[str, object]]) -> str:
    """A profile entry's .toml text: its keys, then one ``[[runs]]`` table per run."""
    lines = [f"{key} = {toml_value(value)}" for key, value in entry.items()]
    for run in runs:
        lines.append("")
        lines.append("[[runs]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in run.items()]
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # what is written must read back
    return text


def _write_at(dir_fd: int, name: str, text: str) -> None:
    """``name`` in the open directory, through a temporary name and a rename."""
    tmp = f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _exists_at(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def store_recording(store: Path, uid: int, name: str, graph: CommGraph,
                    run: RunProvenance, description: str = "",
                    generator: str | None = None,
                    max_bytes: int | None = None) -> StoredRecording:
    """Add ``graph`` (one recorded run) to profile ``name`` in the user's ``store``.

    A new name makes ``name.toml`` and ``name.mtx``; an existing graph profile of the
    same rank count gets ``name.s<K>.mtx`` as one more sample; any other existing entry
    (a mesh, another rank count, a broken file) is refused with the reason, and nothing
    is written.  ``generator`` (the size-free spec this run matches,
    :func:`slurm_plugin.profiles.pattern_match.match_generator`) is kept on the entry
    only while every sample matches it: a new entry gets it, an existing one keeps its
    own only when this run matches the same.  O(m) for the graph's m edges."""
    if not NAME.match(name):
        raise ProfileError(f"profile name {name!r} is not allowed")
    try:
        dir_fd = own_directory(store, uid)
    except UserPathError as exc:
        raise ProfileError(f"profile store {exc}") from None
    try:
        volume = float(graph.total_volume)
        row = {"job": run.job, "date": run.date, "mpi": run.mpi, "recorder": run.recorder,
               "ranks": graph.n, "volume": volume}
        if not _exists_at(dir_fd, f"{name}.toml"):
            matrix = f"{name}.mtx"
            entry: dict[str, object] = {
                "ranks": graph.n, "units": "bytes",
                "description": description or f"recorded by job {run.job}",
                "source": f"{run.recorder}, job {run.job}, {run.date}", "file": matrix,
                **({"generator": generator} if generator else {})}
            _write_at(dir_fd, matrix, mtx_text(graph, f"recorded by job {run.job}"))
            _write_at(dir_fd, f"{name}.toml", entry_text(entry, [{"file": matrix, **row}]))
            return StoredRecording(store / f"{name}.toml", 1, matrix)
        info = ProfileStore([store], max_bytes).find(name)
        if info.is_mesh:
            raise ProfileError(f"{info.path}: is a mesh entry; a recording is not added "
                               f"to it (record under another name)")
        if info.ranks != graph.n:
            raise ProfileError(f"{info.path}: profile {name!r} has {info.ranks} ranks, this "
                               f"recording {graph.n}: record under another name (e.g. "
                               f"{name}-{graph.n})")
        samples = [p.name for p in info.samples] or [info.file.name]
        k = 1
        while f"{name}.s{k}.mtx" in samples or _exists_at(dir_fd, f"{name}.s{k}.mtx"):
            k += 1
        matrix = f"{name}.s{k}.mtx"
        with open(info.path, "rb") as fh:  # the entry as it is, to keep every key
            data = tomllib.loads(fh.read().decode("utf-8"))
        runs = list(data.pop("runs", []))
        if not runs:  # the first sample's origin, as far as the entry says
            runs = [{"file": info.file.name, "recorder": info.source or "unknown",
                     "ranks": info.ranks}]
        data["samples"] = [*samples, matrix]
        if data.get("generator") != generator:
            data.pop("generator", None)  # this run does not follow the earlier pattern
        _write_at(dir_fd, matrix, mtx_text(graph, f"recorded by job {run.job}"))
        _write_at(dir_fd, f"{name}.toml", entry_text(data, [*runs, {"file": matrix, **row}]))
        return StoredRecording(store / f"{name}.toml", len(samples) + 1, matrix)
    except OSError as exc:
        raise ProfileError(f"profile store {store}: cannot write: {exc.strerror or exc}"
                           ) from None
    finally:
        os.close(dir_fd)
