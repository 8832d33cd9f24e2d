"""The prolog's worker run in this process, for tests without a child process.

The real worker reads its request on stdin and sends its files on a stream, which the
prolog writes (slurm_plugin.lifecycle.worker_protocol); here the request is handed over
as the :class:`WorkerRequest` the prolog would send, and the files go straight into the
test's job directory, named by the test's own ``RANKMAP_JOB_DIR`` key.
"""

from __future__ import annotations

import dataclasses

from slurm_plugin.common.files import write_files
from slurm_plugin.lifecycle import job_worker
from slurm_plugin.lifecycle.prolog import worker_request
from slurm_plugin.lifecycle.worker_protocol import WorkerRequest, WorkerStatus
from slurm_plugin.site.request import request_for


def job_request(profile: str, algorithm: str = "topdown+n10", time_limit: float = 5.0,
                job_id: str = "42") -> WorkerRequest:
    """The prolog's request to its worker for job ``job_id`` submitted with
    ``--comm-profile=profile --rankmap=algorithm``: its mode, and its refusal if the pair
    is one no mode serves, as the prolog decides them (site.request.request_for)."""
    return worker_request(job_id, request_for(profile, algorithm, algorithm, time_limit))


def compute_into(env: dict[str, str], request: WorkerRequest) -> dict:
    """``job_worker.compute(request, env)`` with its files written into
    ``env["RANKMAP_JOB_DIR"]``; the status as a dict."""
    out = job_worker.compute(request, env)
    write_files(env["RANKMAP_JOB_DIR"], out.files)
    return dataclasses.asdict(out.status)


def in_process_worker(env, job_dir, request, uid, gid, timeout, *args) -> WorkerStatus:
    """A stand-in for ``prolog.run_worker`` that computes in this process and writes
    through the prolog's JobDir, as the prolog does with the worker's stream."""
    child = {k: v for k, v in env.items() if k.startswith(("SLURM", "RANKMAP_"))}
    out = job_worker.compute(worker_request(env.get("SLURM_JOB_ID"), request), child)
    job_dir.write(out.files)
    return out.status.received()
