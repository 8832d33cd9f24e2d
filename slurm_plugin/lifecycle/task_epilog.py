"""Slurm TaskEpilog entry point: ``rankmap-task-epilog``.

Runs as the user after each task.  In the batch step of a job that recorded its
communication (slurm_plugin.lifecycle.recording_setup made ``[record] dir``/``<job>``),
it turns the recording into a profile of the user's store, or keeps it aside with the
reason (:func:`slurm_plugin.profiles.recorded_job.collect_recording`), and writes one
line to its standard error (slurmd's log).  Every other task returns at once, and no
failure is ever passed on to the job: the exit status is always 0.
"""

from __future__ import annotations

import os
import sys


def collect_job_recording(env: dict[str, str]) -> str | None:
    """The sentence saying what became of this job's recording; None when the job did
    not record (or this is not its batch step)."""
    from ..common.job_conventions import RECORDING_META, valid_job_id
    from ..common.reorder_steps import is_script_step
    from ..site.config import load_config
    from .recording_setup import recordings_dir, user_store

    job_id = env.get("SLURM_JOB_ID", "")
    if not valid_job_id(job_id) or not is_script_step(env):
        return None
    cfg = load_config(env=env)
    uid = os.getuid()
    base = recordings_dir(cfg, uid)
    if base is None or not (base / job_id / RECORDING_META).is_file():
        return None
    from ..profiles.recorded_job import collect_recording

    store = user_store(cfg, uid)
    if store is None:
        return "not recorded: this cluster has no user stores ([profiles] user_store)"
    done = collect_recording(base / job_id, store, uid,
                             max_file_bytes=cfg.record.max_file_bytes,
                             max_profile_bytes=cfg.profiles.max_file_bytes)
    return done.sentence()


def main() -> int:
    try:
        said = collect_job_recording(dict(os.environ))
        if said:
            print(f"rankmap: {said}", file=sys.stderr)
    except Exception as exc:  # never fail the job's epilog
        print(f"rankmap: task epilog error ignored: {type(exc).__name__}: {exc}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
