"""Slurm Prolog / PrologSlurmctld entry point: ``rankmap-prolog``.

A prolog that exits non-zero drains the node, so this one never does: every failure
(bad config, missing or corrupt profile, wrong rank count, no topology, the solver
over its budget, an unwritable directory, any exception) leaves the job with Slurm's
default placement, logs the reason, writes it into the job's report where it can, and
exits 0.

Flow: compute once per job — on the batch host (the allocation's first node, with
``PrologFlags=Alloc``; the other nodes return at once) or in PrologSlurmctld when the
site shares ``output_dir``.  Root creates ``OUTPUT_DIR/job.<id>`` owned by the job's
user; the computation runs in a child process that has dropped to the job's uid/gid
(so user-supplied profile files are read with the user's rights) and is killed when it
overruns the time budget plus a grace period.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from .config import Config, ConfigError, load_config
from .files import FILE_NAMES, write_files
from .hostlist import expand_hostlist
from .jobdir import create_job_dir, job_dir_path
from .request import MappingRequest, decide, wants_rules
from .slurmcli import SLURM_PATH

log = logging.getLogger("rankmap")


def setup_logging(cfg: Config | None) -> None:
    level = getattr(logging, (cfg.get("general", "log_level") if cfg else "info").upper())
    handler: logging.Handler = logging.StreamHandler(sys.stderr)
    path = cfg.get("general", "log_file") if cfg else ""
    if path:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path)
        except OSError:
            pass
    handler.setFormatter(logging.Formatter("%(asctime)s rankmap[%(process)d] %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(level)


def fallback_report(job_id: str | None, request: MappingRequest | None, reason: str) -> dict:
    text = (f"rankmap report for job {job_id}\n\n  profile    "
            f"{request.profile if request else '-'}\n\n  rankmap was NOT applied: {reason}\n"
            f"  The job runs with Slurm's default placement.\n")
    record = json.dumps({"job_id": job_id, "profile": request.profile if request else None,
                         "applied": False, "fallback_reason": reason}, indent=1) + "\n"
    return {"report": text, "record": record}


def _drop_privileges(uid: int | None, gid: int | None):
    if os.geteuid() != 0 or uid is None:
        return None

    def drop() -> None:
        os.setgroups([])
        os.setgid(gid if gid is not None else uid)
        os.setuid(uid)
    return drop


def run_worker(env: dict[str, str], job_dir: Path, request: MappingRequest, uid: int | None,
               gid: int | None, timeout: float) -> dict:
    """The computation in a child process; its status, or a fallback status."""
    child_env = {k: v for k, v in env.items() if k.startswith(("SLURM", "SPANK_", "RANKMAP_"))}
    child_env.update({
        "PATH": SLURM_PATH, "HOME": str(job_dir), "LC_ALL": "C",
        "RANKMAP_JOB_DIR": str(job_dir), "RANKMAP_PROFILE": request.profile,
        "RANKMAP_ALGORITHM": request.algorithm,
        "RANKMAP_TIME_LIMIT": repr(request.time_limit),
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    })
    if request.refusal:
        child_env["RANKMAP_REFUSAL"] = request.refusal
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "slurm_plugin.job_worker"],
                              env=child_env, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=_drop_privileges(uid, gid), cwd="/", check=False)
    except subprocess.TimeoutExpired:
        return {"applied": False,
                "reason": f"the computation did not finish within {timeout:g} s (time budget "
                          f"{request.time_limit:g} s plus start-up grace); stopped"}
    lines = proc.stdout.strip().splitlines()
    try:
        status = json.loads(lines[-1])
        status["from_worker"] = True
    except (IndexError, json.JSONDecodeError):
        status = {"applied": False,
                  "reason": f"the computation failed (exit {proc.returncode}): "
                            f"{proc.stderr.strip()[-300:]}"}
    status["wall_seconds"] = time.monotonic() - start
    return status


def handle_job(env: Mapping[str, str], cfg: Config) -> None:
    context = env.get("SLURM_SCRIPT_CONTEXT", "prolog_slurmd")
    job_id = env.get("SLURM_JOB_ID")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    in_ctld = context == "prolog_slurmctld"
    if in_ctld != (cfg.get("prolog", "compute_on") == "slurmctld"):
        return
    if not in_ctld:
        nodes = expand_hostlist(nodelist)
        if not nodes or env.get("SLURMD_NODENAME") != nodes[0]:
            return  # computed once, on the batch host
    partition = env.get("SLURM_JOB_PARTITION")
    account = job_name = None
    if wants_rules(cfg) and not env.get("SPANK_RANKMAP_COMM_PROFILE"):
        account, job_name = _account_and_name(job_id, env, cfg)
    request = decide(cfg, env, partition, account, job_name)
    if request is None:
        log.debug("job %s: no profile requested, placement untouched", job_id)
        return
    uid = _int(env.get("SLURM_JOB_UID"))
    gid = _int(env.get("SLURM_JOB_GID"))
    try:
        job_dir = create_job_dir(cfg.get("general", "output_dir"), job_id, uid, gid)
    except OSError as exc:
        reason = f"cannot use output directory: {exc}"
        log.warning("job %s: %s; default placement", job_id, reason)
        _write_fallback_elsewhere(cfg, job_id, request, reason, uid, gid)
        return
    timeout = request.time_limit + cfg.get("prolog", "grace_seconds")
    status = run_worker(dict(env), job_dir, request, uid, gid, timeout)
    for note in status.get("notes") or ():
        log.info("job %s: %s", job_id, note)
    if not status.get("applied"):
        # no launcher file may survive a failed computation
        for name in ("rankfile", "hostfile", "machinefile", "slurm_hostfile"):
            try:
                os.unlink(job_dir / FILE_NAMES[name])
            except FileNotFoundError:
                pass
        # a worker that was stopped or crashed may have left a report claiming success
        if not status.get("from_worker") or not (job_dir / FILE_NAMES["report"]).exists():
            write_files(job_dir, fallback_report(job_id, request, str(status.get("reason"))))
        log.warning("job %s: profile %s not applied: %s", job_id, request.profile,
                    status.get("reason"))
        if status.get("traceback"):
            log.warning("job %s: %s", job_id, status["traceback"])
    else:
        log.info("job %s: profile %s, %s: J=%g in %.3f s (%d ranks)", job_id,
                 request.profile, request.algorithm, status.get("objective") or 0,
                 status.get("seconds") or 0, status.get("n") or 0)


def _write_fallback_elsewhere(cfg: Config, job_id: str | None, request: MappingRequest,
                              reason: str, uid: int | None, gid: int | None) -> None:
    try:
        fallback = Path(cfg.get("prolog", "fallback_dir"))
        fallback.mkdir(mode=0o755, parents=True, exist_ok=True)
        job_dir = create_job_dir(fallback, job_id, uid, gid)
        write_files(job_dir, fallback_report(job_id, request, reason))
    except OSError as exc:
        log.warning("job %s: no report written either: %s", job_id, exc)


def _account_and_name(job_id: str | None, env: Mapping[str, str], cfg: Config
                      ) -> tuple[str | None, str | None]:
    """The job's account and name for site rules (the slurmd prolog is not told them)."""
    if env.get("SLURM_JOB_NAME") or env.get("SLURM_JOB_ACCOUNT"):
        return env.get("SLURM_JOB_ACCOUNT"), env.get("SLURM_JOB_NAME")
    from .allocation import parse_scontrol_job
    from .slurmcli import SlurmQueryError, run_slurm

    try:
        alloc = parse_scontrol_job(run_slurm(["scontrol", "show", "job", "-o", str(job_id)],
                                             cfg.get("slurm", "command_timeout"), dict(env)))
        return alloc.account, alloc.job_name
    except (SlurmQueryError, ValueError) as exc:
        log.warning("job %s: cannot read account and job name for site rules: %s", job_id, exc)
        return None, None


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v else None
    except ValueError:
        return None


def main() -> int:
    """Entry point; always exits 0."""
    env = dict(os.environ)
    cfg = None
    try:
        cfg = load_config(env=env)
    except ConfigError as exc:
        setup_logging(None)
        log.error("job %s: configuration error, default placement: %s",
                  env.get("SLURM_JOB_ID"), exc)
        return 0
    except Exception as exc:  # pragma: no cover - defensive
        setup_logging(None)
        log.error("job %s: cannot load configuration: %r", env.get("SLURM_JOB_ID"), exc)
        return 0
    try:
        setup_logging(cfg)
        handle_job(env, cfg)
    except Exception as exc:  # a prolog must never fail
        log.exception("job %s: unexpected error, default placement: %r",
                      env.get("SLURM_JOB_ID"), exc)
    return 0


def epilog_main() -> int:
    """``rankmap-epilog``: remove this node's per-job files; always exits 0."""
    from .jobdir import remove_job_dir

    env = dict(os.environ)
    try:
        cfg = load_config(env=env)
        setup_logging(cfg)
        job_id = env.get("SLURM_JOB_ID", "")
        for base in (cfg.get("general", "output_dir"), cfg.get("prolog", "fallback_dir")):
            if Path(base).is_dir() and remove_job_dir(base, job_id):
                log.debug("job %s: removed %s", job_id, job_dir_path(base, job_id))
    except Exception as exc:
        try:
            log.error("epilog for job %s: %r", env.get("SLURM_JOB_ID"), exc)
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
