"""The prolog's worker run in this process, for tests without a child process.

The real worker sends its files on a stream and the prolog writes them
(slurm_plugin.lifecycle.worker_protocol); here the files go straight into the test's job
directory, named by the test's own ``RANKMAP_JOB_DIR`` key.
"""

from __future__ import annotations

import dataclasses

from slurm_plugin.common.files import write_files
from slurm_plugin.lifecycle import job_worker
from slurm_plugin.lifecycle.worker_protocol import WorkerStatus


def compute_into(env: dict[str, str]) -> dict:
    """``job_worker.compute(env)`` with its files written into ``env["RANKMAP_JOB_DIR"]``;
    the status as a dict."""
    out = job_worker.compute(env)
    write_files(env["RANKMAP_JOB_DIR"], out.files)
    return dataclasses.asdict(out.status)


def in_process_worker(env, job_dir, request, uid, gid, timeout, *args) -> WorkerStatus:
    """A stand-in for ``prolog.run_worker`` that computes in this process and writes
    through the prolog's JobDir, as the prolog does with the worker's stream."""
    child = {**{k: v for k, v in env.items() if k.startswith(("SLURM", "RANKMAP_"))},
             "RANKMAP_PROFILE": request.profile, "RANKMAP_ALGORITHM": request.algorithm,
             "RANKMAP_TIME_LIMIT": repr(request.time_limit)}
    if request.refusal:
        child["RANKMAP_REFUSAL"] = request.refusal
    out = job_worker.compute(child)
    job_dir.write(out.files)
    return out.status.received()
