"""Slurm TaskProlog entry point: ``rankmap-task-prolog``.

Runs once per task as the user, before the task; every ``export NAME=value`` line it
prints lands in the task's environment, ``print TEXT`` in the task's output.  It only
reads the job directory the prolog wrote (root's, mode 0750, the job's group; files
0600, the user's), so a plain ``mpirun ./app`` picks the placement up.  It trusts only a
job directory that the prolog of this very job made
(:func:`slurm_plugin.common.jobdir.open_job_dir_for_task`: root's, the job's group,
writable by no one else, with this job's record); another user's planted ``job.<id>``
is ignored, and said so in the batch step:

* ``OMPI_MCA_rmaps_rank_file_path`` (what Open MPI 4.1's mpirun reads) and
  ``OMPI_MCA_rmaps_rankfile_path`` in the batch step (where mpirun runs; its daemons'
  step inherits them from mpirun, or not when the script unset them), ``RANKMAP_HOSTFILE``,
  ``RANKMAP_MACHINEFILE``, ``RANKMAP_RANKFILE``, ``RANKMAP_REPORT``, for
  ``--rankmap=summa`` jobs ``RANKMAP_ARRANGEMENT`` and for ``--comm-profile=mesh:NAME``
  jobs ``RANKMAP_PARTITION`` (the mesh partition: line v, the rank owning vertex v)
  (names.EXPORTS), each only when the report says the computation was applied;
* for a job with several CPUs per task, ``OMP_PLACES=cores`` and
  ``OMP_PROC_BIND=close`` unless the user set them (:func:`openmp_exports`);
* with ``[render] export_slurm_hostfile = true``, ``SLURM_HOSTFILE`` and
  ``SLURM_DISTRIBUTION=arbitrary`` for ``srun`` (not together with mpirun, whose own
  srun call would inherit them).

Only the standard library and the config reader are imported: this runs per task.  With
an unreadable configuration it says so in the batch step of a job that gave a rankmap
option (the same ConfigError text ``rankmap config check`` prints) and looks where the
prolog then reported: the default directories.  Whatever it prints from the report is
escaped (one line per message).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config reader is imported when a task runs, in exports()
    from ..common.launcher_support import LauncherOffer
    from ..site.config import Config


def exports(env: dict[str, str]) -> list[str]:
    from ..common.job_conventions import EXPORTS, FILE_NAMES, valid_job_id
    from ..common.jobdir import JobDirError, open_job_dir_for_task
    from ..common.launcher_support import default_bind_library
    from ..common.reorder_steps import is_script_step, reorder_exports
    from ..common.safe_text import safe_text
    from ..site.config import DEFAULTS, ConfigError, load_config

    job_id = env.get("SLURM_JOB_ID", "")
    if not valid_job_id(job_id):
        return []
    script_step = is_script_step(env)
    lines: list[str] = []
    cfg: Config | None = None
    try:
        cfg = load_config(env=env)
        bases = (cfg.general.output_dir, cfg.prolog.fallback_dir)
        export_slurm_hostfile = cfg.render.export_slurm_hostfile
        supported = cfg.launchers.supported
        bind_library = cfg.launchers.bind_library or default_bind_library()
    except ConfigError as exc:  # the prolog then reported into the default directories
        bases = (DEFAULTS["general"]["output_dir"][0], DEFAULTS["prolog"]["fallback_dir"][0])
        export_slurm_hostfile = False
        supported, bind_library = [], ""
        if script_step and _asked_for_rankmap(env):
            lines.append(f"print rankmap: configuration error: {safe_text(exc, 2000)}; "
                         "looking for the job's report in the default directories")
    for base in bases:
        try:
            found = open_job_dir_for_task(base, job_id, os.getuid(), os.getgid())
        except (JobDirError, OSError) as exc:  # another user's, or not the prolog's
            if script_step:
                lines.append(f"print rankmap: {safe_text(exc, 2000)}")
            continue
        if found is None:
            continue
        job_dir, record = found
        lines.append(f"export RANKMAP_REPORT={job_dir / FILE_NAMES['report']}")
        if record.get("applied") is True:
            for name, var in EXPORTS.items():
                if _is_file(job_dir / FILE_NAMES[name]):
                    lines.append(f"export {var}={job_dir / FILE_NAMES[name]}")
            offer = job_offer(job_dir, supported, bind_library, export_slurm_hostfile)
            lines += launcher_exports(job_dir, env, script_step, offer, bind_library)
            lines += reorder_exports(job_dir, env, record.get("n"))
        if script_step:  # the batch step: tell the user once
            if record.get("summary"):  # the report's own sentence: applied, kept, or why not
                state = safe_text(record["summary"], 2000)
            elif record.get("applied") is True:
                state = "placement applied"
            else:
                state = f"placement NOT applied ({safe_text(record.get('fallback_reason'), 2000)})"
            lines.append(f"print rankmap: {state}; report: {job_dir / 'report.txt'}")
            if record.get("applied") is True and supported:
                from ..common.launcher_support import launcher_sentences

                lines.append("print rankmap: launchers: "
                             + "; ".join(launcher_sentences(offer)))
        break
    if cfg is not None:
        lines += recording_lines(env, cfg, job_id, script_step)
    return merge_preloads(lines)


def recording_lines(env: dict[str, str], cfg: Config, job_id: str,
                    script_step: bool) -> list[str]:
    """A recording job's exports (slurm_plugin.lifecycle.recording_setup): the batch step
    decides and makes the job's recording directory, later steps find it."""
    from ..common.job_conventions import RECORDING_META
    from ..common.safe_text import safe_text
    from ..common.user_paths import UserPathError
    from .recording_setup import (
        job_ntasks,
        recording_exports,
        recording_wish,
        recordings_dir,
        retire_stale,
        start_recording,
    )

    uid = os.getuid()
    try:
        base = recordings_dir(cfg, uid)
        if base is None:
            return []
        if not script_step:
            job = base / job_id
            meta = job / RECORDING_META
            if job.is_symlink() or not _is_file(meta):
                return []
            return recording_exports(job, env, cfg)
        wish, problem = recording_wish(env, cfg, uid)
        if wish is None:
            # this job does not record: a directory of its id is an earlier job's
            retire_stale(base, job_id)
            return [f"print rankmap: not recording: {safe_text(problem, 500)}"] if problem else []
        job = start_recording(base, job_id, wish, job_ntasks(env), uid)
    except (UserPathError, OSError) as exc:
        return [f"print rankmap: cannot record this job: {safe_text(exc, 500)}"]
    exports = recording_exports(job, env, cfg)
    why = "you asked" if wish.origin == "option" else "a site rule; it does not exist yet"
    said = [f"print rankmap: recording this job's communication as profile {wish.name} "
            f"({why}) in {job}; it is added to your profiles when the job ends"]
    if not any(line.startswith("export LD_PRELOAD=") for line in exports):
        said.append("print rankmap: the recorder (librankmap_record.so) is not installed "
                    "on this node: " + ("only Open MPI programs are recorded"
                                        if exports else "nothing is recorded"))
    return [*exports, *said]


def merge_preloads(lines: list[str]) -> list[str]:
    """One ``export LD_PRELOAD``, first, joining every export's libraries in order, so
    that the binder and the recorder are both preloaded."""
    key = "export LD_PRELOAD="
    preloads = [line for line in lines if line.startswith(key)]
    if len(preloads) < 2:
        return lines
    libs: list[str] = []
    for line in preloads:
        for lib in line[len(key):].split(":"):
            if lib and lib not in libs:
                libs.append(lib)
    out = [line for line in lines if not line.startswith(key)]
    return [key + ":".join(libs), *out]


def job_offer(job_dir: Path, supported: list[str], bind_library: str,
              export_slurm_hostfile: bool) -> LauncherOffer:
    """What each launcher family gets in this job: the worker's own rule
    (:func:`slurm_plugin.common.launcher_support.planned_offer`) on the files the prolog
    left in the job directory (regular files only; the Hydra host file read for its
    hosts), so that what the report promised, what is exported and what the batch step
    says are one computation."""
    from ..common.job_conventions import FILE_NAMES
    from ..common.launcher_support import hydra_srun_path, planned_offer, prterun_wrapper_path

    present = {name: "" for name in ("rankfile", "bindings", "slurm_hostfile")
               if _is_file(job_dir / FILE_NAMES[name])}
    for name in ("hydra_hostfile", "hydra_rankmap"):
        if _is_file(job_dir / FILE_NAMES[name]):
            present[name] = _head(job_dir / FILE_NAMES[name])
    return planned_offer(supported, present, bind_library, prterun_wrapper_path(),
                         hydra_srun_path(), export_slurm_hostfile)


def launcher_exports(job_dir: Path, env: dict[str, str], script_step: bool,
                     offer: LauncherOffer, bind_library: str) -> list[str]:
    """The variables that hand the placement to each family ``offer`` says gets it
    (each family's own lines: :class:`slurm_plugin.common.launcher_support.Launcher`;
    docs/users.md has the table), and in every step the binder (LD_PRELOAD, after the
    user's own preloads) with its bind file and, for hybrid ranks, their OpenMP places
    (:func:`openmp_exports`)."""
    from ..common.job_conventions import BIND_FILE_VAR, BIND_LAUNCHERS_VAR, FILE_NAMES
    from ..common.launcher_support import family_exports

    lines = family_exports(offer, str(job_dir), script_step, env)
    if offer.supported and offer.binder:
        preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split()
                   if p != bind_library]
        lines.append(f"export LD_PRELOAD={':'.join([*preload, bind_library])}")
        lines.append(f"export {BIND_FILE_VAR}={job_dir / FILE_NAMES['bindings']}")
        lines.append(f"export {BIND_LAUNCHERS_VAR}={','.join(offer.supported)}")
        lines += openmp_exports(env, script_step)
    return lines


def openmp_exports(env: dict[str, str], script_step: bool) -> list[str]:
    """For a job with several CPUs per task (``SLURM_CPUS_PER_TASK``), the OpenMP
    placement of each rank's threads over its cores
    (:data:`~slurm_plugin.common.job_conventions.OPENMP_EXPORTS`), each variable only
    when the user has not set it; once, in the batch step (or in a step's tasks when no
    batch step set them, under ``salloc``), so that a script that unsets them keeps its
    choice."""
    from ..common.job_conventions import OPENMP_EXPORTS, OPENMP_SET_VAR

    try:
        cpus = int(env.get("SLURM_CPUS_PER_TASK", "1"))
    except ValueError:
        return []
    if cpus < 2 or (not script_step and OPENMP_SET_VAR in env):
        return []
    ours = [name for name in OPENMP_EXPORTS if name not in env]
    if not ours:
        return []
    return [*(f"export {name}={OPENMP_EXPORTS[name]}" for name in ours),
            f"export {OPENMP_SET_VAR}={','.join(ours)}"]


def _head(path: Path, limit: int = 1 << 20) -> str:
    """At most ``limit`` bytes of a regular file of the job directory ("" otherwise)."""
    if not _is_file(path):
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""


def _is_file(path: Path) -> bool:
    """A regular file, not a symlink (the job directory is root's: only the prolog put
    anything there, but a launcher is never pointed at a link)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _asked_for_rankmap(env: dict[str, str]) -> bool:
    """The job gave a rankmap option (tasks see the SPANK options as SLURM_SPANK_*);
    a job that did not is not told about rankmap's configuration."""
    from ..common.job_conventions import SPANK_PROFILE, SPANK_RANKMAP, SPANK_TIME

    return any(env.get(f"SLURM_{name}") for name in (SPANK_PROFILE, SPANK_RANKMAP, SPANK_TIME))


def _escape(text: str) -> str:
    from ..common.safe_text import safe_text

    return safe_text(text, 500)


def main() -> int:
    try:
        for line in exports(dict(os.environ)):
            print(line)
    except Exception as exc:  # never break the user's task
        print(f"print rankmap: task prolog error ignored: {_escape(repr(exc))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
