"""The TaskProlog's side of recording a job's communication profile (issue 32).

A batch job records when it asks (``--rankmap-record=NAME``, which tasks see as
``SLURM_SPANK_RANKMAP_RECORD``) or when a site rule with ``record = true`` matches it
and its profile (the job's ``--comm-profile``, else the rule's) exists in no store yet,
and the site has not switched recording off (``[record] enabled``).  The batch step
decides, once: it makes the job's recording directory ``[record] dir``/``<job id>``
(as the user, in a directory of the user's own: never through a link) with
``recording.json``; every later step of the job sees that directory and records too.

Every step of a recording job gets (:func:`recording_exports`):

* ``LD_PRELOAD`` += librankmap_record.so and ``RANKMAP_RECORD_DIR`` (its ``mpi/``): the
  interposer records MPICH, Intel MPI and any other MPI, whatever the launcher;
* Open MPI's monitoring components (``OMPI_MCA_pml_monitoring_enable=2``, output to
  ``ompi/prof.<rank>.prof``) with ``RANKMAP_RECORD_OPENMPI=monitoring``, so that the
  interposer leaves Open MPI programs to them; with ``[record] openmpi = "interposer"``
  neither, and the interposer records Open MPI too.

After the job the TaskEpilog (:mod:`slurm_plugin.lifecycle.task_epilog`) turns the files
into the profile.  Standard library, common and site only: this runs in every task.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..common.job_conventions import (
    OMPI_MONITORING_FILE_VAR,
    OMPI_MONITORING_VARS,
    PROFILE_NAME,
    RECORD_DIR_VAR,
    RECORD_OPENMPI_VAR,
    RECORDING_INTERPOSER_DIR,
    RECORDING_META,
    RECORDING_MONITORING_PREFIX,
    SPANK_PROFILE,
    SPANK_RECORD,
)
from ..common.user_paths import UserPathError, expand_user_path, own_directory, set_aside
from ..site.config import Config


@dataclass(frozen=True)
class RecordingWish:
    """This job records its communication as profile ``name``."""

    name: str
    origin: str  # "option" (--rankmap-record) or "rule"


def default_record_library() -> str:
    """Where deploy/install.sh puts librankmap_record.so: PREFIX/lib of this installation."""
    return os.path.join(sys.prefix, "lib", "librankmap_record.so")


def user_store(cfg: Config, uid: int) -> Path | None:
    """The user's own profile store (``[profiles] user_store``), None when off."""
    return expand_user_path(cfg.profiles.user_store, uid)


def recordings_dir(cfg: Config, uid: int) -> Path | None:
    """Where the user's recording jobs write (``[record] dir``), None when off."""
    return expand_user_path(cfg.record.dir, uid)


def profile_exists(name: str, stores: list[Path]) -> bool:
    """A store entry ``name.toml`` exists in one of ``stores`` (what the prolog's
    worker would find)."""
    return any((store / f"{name}.toml").is_file() for store in stores)


def recording_wish(env: Mapping[str, str], cfg: Config, uid: int
                   ) -> tuple[RecordingWish | None, str | None]:
    """Whether this job records, and what to tell the user when it asked but cannot."""
    asked = env.get(f"SLURM_{SPANK_RECORD}", "")
    if not cfg.record.enabled:
        return None, ("recording is switched off on this cluster ([record] enabled)"
                      if asked else None)
    if asked:
        if not PROFILE_NAME.match(asked):
            return None, f"--rankmap-record={asked[:200]!r} is not a profile name"
        return RecordingWish(asked, "option"), None
    rule = cfg.rule_for(env.get("SLURM_JOB_PARTITION"), env.get("SLURM_JOB_ACCOUNT"),
                        env.get("SLURM_JOB_NAME"))
    if rule is None or not rule.record:
        return None, None
    name = env.get(f"SLURM_{SPANK_PROFILE}") or rule.profile or ""
    if not PROFILE_NAME.match(name):
        return None, None
    stores = [Path(d) for d in cfg.profiles.stores]
    own = user_store(cfg, uid)
    if profile_exists(name, stores + ([own] if own else [])):
        return None, None
    return RecordingWish(name, "rule"), None


def retire_stale(base: Path, job_id: str) -> bool:
    """Set aside a recording directory this job id left earlier (a requeued job, or an
    older job of the same id after the controller's ids restarted), as
    ``<id>.incomplete`` with the reason, so that no step of this job writes into it
    and no epilog merges it under this job.  True when there was one."""
    job = base / job_id
    if job.is_symlink() or not job.is_dir():
        return False
    set_aside(job, f"set aside when job id {job_id} started again: an earlier run of this "
                   f"id (a requeued job, or an older job) left it unmerged")
    return True


def start_recording(base: Path, job_id: str, wish: RecordingWish, ntasks: int,
                    uid: int) -> Path:
    """Make the job's recording directory under ``base`` (the user's; a link or another
    owner's directory is refused) with its description; returns it.  A directory an
    earlier run of the same job id left is set aside first (:func:`retire_stale`)."""
    fd = own_directory(base, uid)
    try:
        retire_stale(base, job_id)
        os.mkdir(job_id, 0o700, dir_fd=fd)
        job = base / job_id
        if job.is_symlink() or not job.is_dir():
            raise UserPathError(f"{job}: not a directory of its own")
        for sub in (RECORDING_INTERPOSER_DIR, Path(RECORDING_MONITORING_PREFIX).parent):
            (job / sub).mkdir(mode=0o700, exist_ok=True)
        meta = {"name": wish.name, "job": job_id, "ntasks": ntasks, "origin": wish.origin,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        tmp = job / f".{RECORDING_META}.tmp"
        tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        tmp.replace(job / RECORDING_META)
        return job
    finally:
        os.close(fd)


def recording_exports(job: Path, env: Mapping[str, str], cfg: Config) -> list[str]:
    """The variables that make every MPI program of the step record into ``job``."""
    lines = []
    library = cfg.record.library or default_record_library()
    if os.path.isfile(library):
        preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split()
                   if p != library]
        lines.append(f"export LD_PRELOAD={':'.join([*preload, library])}")
        lines.append(f"export {RECORD_DIR_VAR}={job / RECORDING_INTERPOSER_DIR}")
    if cfg.record.openmpi == "monitoring":
        lines.append(f"export {RECORD_OPENMPI_VAR}=monitoring")
        lines += [f"export {k}={v}" for k, v in OMPI_MONITORING_VARS.items()]
        lines.append(f"export {OMPI_MONITORING_FILE_VAR}={job / RECORDING_MONITORING_PREFIX}")
    return lines


def job_ntasks(env: Mapping[str, str]) -> int:
    try:
        return max(0, int(env.get("SLURM_NTASKS", "0")))
    except ValueError:
        return 0
