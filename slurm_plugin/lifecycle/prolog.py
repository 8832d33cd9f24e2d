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
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path

from ..common.hostlist import expand_hostlist
from ..common.job_budget import JobBudget, cpu_limit
from ..common.job_conventions import SPANK_PROFILE
from ..common.jobdir import (
    JobDir,
    create_job_dir,
    ensure_output_dir,
    job_dir_path,
    open_trusted_dir,
    remove_job_dir,
    sweep_stale,
    valid_job_id,
)
from ..common.safe_text import escape_controls, safe_text
from ..site.config import DEFAULTS, Config, ConfigError, load_config, parse_config
from ..site.request import MappingRequest, decide, wants_rules
from ..slurm.slurm_commands import SLURM_PATH
from .limits import DEFAULT_MEMORY
from .worker_process import run_worker_process
from .worker_protocol import ProtocolError, WorkerRequest, WorkerStatus
from .worker_slots import NoWorkerSlot, slot_count, worker_slot

log = logging.getLogger("rankmap")

LOG_MODE = 0o640
REASON_LIMIT = 2000  # characters of a reason in the log and the report


class _OneLineFormatter(logging.Formatter):
    """Every record on one line whatever it holds (tracebacks, a caller that forgot to
    escape): control characters become visible escapes."""

    def format(self, record: logging.LogRecord) -> str:
        return escape_controls(super().format(record))


class _LogHandler(logging.StreamHandler):
    """A stream handler that closes the log file it owns (not stderr) when replaced."""

    def __init__(self, stream, owned: bool) -> None:
        super().__init__(stream)
        self.owned = owned

    def close(self) -> None:
        try:
            if self.owned and self.stream is not None:
                self.stream.close()
        finally:
            super().close()


def _open_log(path: str):
    """The log file for appending; created 0640 (an existing file keeps the mode its
    administrator gave it), never through a symlink; None when it cannot be opened."""
    try:
        Path(path).parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, LOG_MODE)
            os.fchmod(fd, LOG_MODE)
        except FileExistsError:
            fd = os.open(path, flags)
        return os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")
    except OSError:
        return None


def setup_logging(cfg: Config | None) -> None:
    """Log to the configured file (stderr when it cannot be opened).  Without a usable
    configuration (``cfg`` None), to stderr, which slurmd captures, and to the default
    log file."""
    level = getattr(logging, (cfg.general.log_level if cfg else "info").upper())
    path = cfg.general.log_file if cfg else DEFAULTS["general"]["log_file"][0]
    handlers: list[logging.Handler] = []
    stream = _open_log(path) if path else None
    if stream is not None:
        handlers.append(_LogHandler(stream, owned=True))
    if cfg is None or stream is None:
        handlers.append(_LogHandler(sys.stderr, owned=False))
    formatter = _OneLineFormatter("%(asctime)s rankmap[%(process)d] %(message)s")
    for handler in handlers:
        handler.setFormatter(formatter)
    for old in log.handlers:
        old.close()
    log.handlers[:] = handlers
    log.setLevel(level)


def fallback_report(job_id: str | None, request: MappingRequest | None, reason: str) -> dict:
    """The report of a job rankmap did not map; every user-controlled string escaped."""
    job = safe_text(job_id)
    profile = safe_text(request.profile) if request else None
    why = safe_text(reason, REASON_LIMIT)
    text = (f"rankmap report for job {job}\n\n  profile    {profile or '-'}\n\n"
            f"  rankmap was NOT applied: {why}\n"
            f"  The job runs with Slurm's default placement.\n")
    record = json.dumps({"job_id": job_id if valid_job_id(job_id) else job,
                         "profile": profile, "applied": False, "fallback_reason": why},
                        indent=1) + "\n"
    return {"report": text, "report_json": record}


def _as_job_user(uid: int | None, gid: int | None) -> dict:
    """subprocess arguments that run the child as the job's user with no extra groups
    (root only; unprivileged callers such as tests run it as themselves)."""
    if os.geteuid() != 0 or uid is None:
        return {}
    return {"user": uid, "group": gid if gid is not None else uid, "extra_groups": []}


def worker_request(job_id: str | None, request: MappingRequest,
                   memory_bytes: int = DEFAULT_MEMORY, cpu_seconds: int = 0) -> WorkerRequest:
    """What the worker is asked: the job's request and the worker's limits (0: none)."""
    return WorkerRequest(job_id=job_id, profile=request.profile, mode=request.mode,
                         algorithm=request.algorithm, time_limit=request.time_limit,
                         refusal=request.refusal, memory_bytes=memory_bytes,
                         cpu_seconds=cpu_seconds)


def run_worker(env: dict[str, str], job_dir: JobDir, request: MappingRequest, uid: int | None,
               gid: int | None, timeout: float, memory_bytes: int = 4 << 30,
               max_output_bytes: int = 1 << 30) -> WorkerStatus:
    """The computation in a child process; its status, or a fallback status.

    The child runs as the job's user (uid, gid, no supplementary groups) in a session
    of its own, with the job's Slurm variables as its environment, and reads the job's
    :class:`WorkerRequest` on stdin, with an address-space limit of ``memory_bytes`` and
    a CPU limit of ``timeout`` seconds (slurm_plugin.lifecycle.limits), besides the
    wall-clock watchdog here.  It sends its files and status on stdout
    (slurm_plugin.lifecycle.worker_protocol); they are written into ``job_dir`` as they
    arrive, ``max_output_bytes`` at the most.  Whatever the outcome, nothing the child
    started is left running (slurm_plugin.lifecycle.worker_process).
    """
    child_env = {k: v for k, v in env.items() if k.startswith(("SLURM", "SPANK_", "RANKMAP_"))}
    child_env.update({
        "PATH": SLURM_PATH, "HOME": str(job_dir.path), "LC_ALL": "C",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    })
    try:
        asked = worker_request(env.get("SLURM_JOB_ID"), request, int(memory_bytes),
                               cpu_limit(timeout)).to_bytes()
    except ProtocolError as exc:
        return WorkerStatus(applied=False, reason=str(exc))
    status, why = run_worker_process([sys.executable, "-m", "slurm_plugin.lifecycle.job_worker"],
                                     child_env, job_dir, timeout, max_output_bytes,
                                     stdin_bytes=asked, cwd="/", **_as_job_user(uid, gid))
    if status is not None:
        return status
    if why.startswith("the computation did not finish"):
        why += (f" (time budget {request.time_limit:g} s plus start-up grace); stopped")
    return WorkerStatus(applied=False, reason=why)


def _computes_here(env: Mapping[str, str], cfg: Config) -> bool:
    """Once per job: on the batch host (the allocation's first node), or in
    PrologSlurmctld with ``compute_on = "slurmctld"``."""
    in_ctld = env.get("SLURM_SCRIPT_CONTEXT", "prolog_slurmd") == "prolog_slurmctld"
    if in_ctld != (cfg.prolog.compute_on == "slurmctld"):
        return False
    if in_ctld:
        return True
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    nodes = expand_hostlist(nodelist)
    return bool(nodes) and env.get("SLURMD_NODENAME") == nodes[0]


def handle_job(env: Mapping[str, str], cfg: Config) -> None:
    job_id = env.get("SLURM_JOB_ID")
    job = safe_text(job_id)
    if not _computes_here(env, cfg):
        return
    partition = env.get("SLURM_JOB_PARTITION")
    account = job_name = None
    if wants_rules(cfg) and not env.get(SPANK_PROFILE):
        account, job_name = _account_and_name(job_id, env, cfg)
    request = decide(cfg, env, partition, account, job_name)
    if request is None:
        log.debug("job %s: no profile requested, placement untouched", job)
        return
    uid = _int(env.get("SLURM_JOB_UID"))
    gid = _int(env.get("SLURM_JOB_GID"))
    try:
        job_dir = _open_job_dir(cfg.general.output_dir, job_id, uid, gid)
    except OSError as exc:
        reason = f"cannot use output directory: {exc}"
        log.warning("job %s: %s; default placement", job, safe_text(reason, REASON_LIMIT))
        _write_fallback_elsewhere(cfg, job_id, request, reason, uid, gid)
        return
    with job_dir:
        try:
            _compute(env, cfg, job_dir, request, uid, gid)
        except Exception as exc:  # still a report, in the job directory
            _report_failure(cfg, job_id, request, _internal_error(job_id, exc), uid, gid,
                            job_dir)


def _internal_error(job_id: str | None, exc: Exception) -> str:
    """Log a bug (with its traceback) that stopped the prolog's work; the reason for the
    job's report."""
    reason = f"internal error: {type(exc).__name__}: {exc}"
    log.error("job %s: %s; default placement", safe_text(job_id),
              safe_text(reason, REASON_LIMIT))
    log.error("job %s: %s", safe_text(job_id), safe_text(traceback.format_exc(), 4000))
    return reason


def _open_job_dir(output_dir: str, job_id: str | None, uid: int | None, gid: int | None
                  ) -> JobDir:
    """``output_dir`` (created when missing, see ``ensure_output_dir``) and the job's
    directory in it, open; logs what it had to do."""
    if ensure_output_dir(output_dir):
        log.info("created the output directory %s (mode 0755)", safe_text(output_dir))
    job_dir = create_job_dir(output_dir, job_id, uid, gid)
    for note in job_dir.notes:
        log.warning("job %s: %s", safe_text(job_id), safe_text(note, REASON_LIMIT))
    return job_dir


def _compute(env: Mapping[str, str], cfg: Config, job_dir: JobDir, request: MappingRequest,
             uid: int | None, gid: int | None) -> None:
    job_id = env.get("SLURM_JOB_ID")
    job = safe_text(job_id)
    timeout = JobBudget(request.time_limit, cfg.prolog.grace_seconds).watchdog_seconds
    out_fd = open_trusted_dir(job_dir.path.parent)  # where the node's slots are
    try:
        slots = slot_count(cfg.prolog.max_workers,
                           cfg.prolog.worker_memory_bytes)
        with worker_slot(out_fd, slots, timeout) as waited:
            if waited >= 1.0:
                log.info("job %s: waited %.1f s for a worker slot ([prolog] max_workers)",
                         job, waited)
            status = run_worker(dict(env), job_dir, request, uid, gid, timeout,
                                cfg.prolog.worker_memory_bytes,
                                cfg.prolog.max_output_bytes)
    except NoWorkerSlot as exc:
        status = WorkerStatus(applied=False, reason=str(exc))
    finally:
        os.close(out_fd)
    if status.applied and not job_dir.is_file("report"):
        status = WorkerStatus(applied=False, reason="the computation sent no report")
    for note in status.notes:
        log.info("job %s: %s", job, safe_text(note, REASON_LIMIT))
    if status.kept_default:
        # nothing beat Slurm's default placement: the job keeps it, as the report says
        log.info("job %s: profile %s, %s: %s", job, safe_text(request.profile),
                 safe_text(request.algorithm), safe_text(status.reason, REASON_LIMIT))
    elif not status.applied:
        reason = str(status.reason)
        # no launcher file may survive a failed computation
        job_dir.remove_launcher_files()
        # a worker that was stopped or broke its stream may have sent a report
        # claiming success before it did
        if not status.from_worker or not job_dir.is_file("report"):
            job_dir.write(fallback_report(job_id, request, reason))
        log.warning("job %s: profile %s not applied: %s", job, safe_text(request.profile),
                    safe_text(reason, REASON_LIMIT))
        if status.traceback:
            log.warning("job %s: %s", job, safe_text(status.traceback, 4000))
    else:
        log.info("job %s: profile %s, %s: J=%g in %.3f s (%d ranks)", job,
                 safe_text(request.profile), safe_text(request.algorithm),
                 status.objective or 0.0, status.seconds or 0.0, status.n or 0)


def _report_failure(cfg: Config, job_id: str | None, request: MappingRequest | None,
                    reason: str, uid: int | None, gid: int | None,
                    job_dir: JobDir | None = None) -> None:
    """The fallback report: in ``job_dir`` when given (its launcher files removed), else
    in ``output_dir/job.<id>``, else in ``fallback_dir``.  Never raises."""
    job = safe_text(job_id)
    try:
        if job_dir is not None:
            job_dir.remove_launcher_files()
            job_dir.write(fallback_report(job_id, request, reason))
        else:
            with _open_job_dir(cfg.general.output_dir, job_id, uid, gid) as jd:
                jd.write(fallback_report(job_id, request, reason))
        return
    except Exception as exc:
        log.warning("job %s: cannot write the report into the output directory: %s", job,
                    safe_text(exc, REASON_LIMIT))
    _write_fallback_elsewhere(cfg, job_id, request, reason, uid, gid)


def _write_fallback_elsewhere(cfg: Config, job_id: str | None,
                              request: MappingRequest | None, reason: str, uid: int | None,
                              gid: int | None) -> None:
    job = safe_text(job_id)
    try:
        with _open_job_dir(cfg.prolog.fallback_dir, job_id, uid, gid) as job_dir:
            job_dir.write(fallback_report(job_id, request, reason))
        log.info("job %s: report written to %s", job, safe_text(job_dir.path))
    except Exception as exc:
        log.warning("job %s: no report written either: %s", job, safe_text(exc, REASON_LIMIT))


def _account_and_name(job_id: str | None, env: Mapping[str, str], cfg: Config
                      ) -> tuple[str | None, str | None]:
    """The job's account and name for site rules (the slurmd prolog is not told them)."""
    if env.get("SLURM_JOB_NAME") or env.get("SLURM_JOB_ACCOUNT"):
        return env.get("SLURM_JOB_ACCOUNT"), env.get("SLURM_JOB_NAME")
    from ..slurm.allocation import parse_scontrol_job
    from ..slurm.slurm_commands import SlurmQueryError, run_slurm

    try:
        alloc = parse_scontrol_job(run_slurm(["scontrol", "show", "job", "-o", str(job_id)],
                                             cfg.slurm.command_timeout, dict(env),
                                             bin_dir=cfg.slurm.bin_dir))
        return alloc.account, alloc.job_name
    except (SlurmQueryError, ValueError) as exc:
        log.warning("job %s: cannot read account and job name for site rules: %s",
                    safe_text(job_id), safe_text(exc, REASON_LIMIT))
        return None, None


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v else None
    except ValueError:
        return None


def defaults_config() -> Config:
    """The built-in defaults (``config.DEFAULTS``), for when the site file is unusable."""
    return parse_config("", "built-in defaults")


def _config_failure(env: Mapping[str, str], exc: Exception) -> None:
    """A configuration that cannot be read: log to stderr and the default log file, and
    report to a job that asked for rankmap, in the default output (or fallback) dir."""
    setup_logging(None)
    job_id = env.get("SLURM_JOB_ID")
    reason = f"configuration error: {exc}"
    log.error("job %s: %s; default placement", safe_text(job_id),
              safe_text(reason, REASON_LIMIT))
    cfg = defaults_config()
    if not _computes_here(env, cfg):
        return
    request = decide(cfg, env, env.get("SLURM_JOB_PARTITION"))
    if request is None:  # the job did not ask (site rules are unknown without the file)
        return
    _report_failure(cfg, job_id, request, reason, _int(env.get("SLURM_JOB_UID")),
                    _int(env.get("SLURM_JOB_GID")))


def main() -> int:
    """Entry point; always exits 0."""
    env = dict(os.environ)
    job_id = env.get("SLURM_JOB_ID")
    try:
        try:
            cfg = load_config(env=env)
        except Exception as exc:  # ConfigError, or anything unexpected while reading
            _config_failure(env, exc if isinstance(exc, ConfigError) else
                            ConfigError(f"cannot load the configuration: {exc!r}"))
            return 0
        setup_logging(cfg)
        try:
            handle_job(env, cfg)
        except Exception as exc:  # a prolog must never fail; the job still gets a report
            _report_failure(cfg, job_id, None, _internal_error(job_id, exc),
                            _int(env.get("SLURM_JOB_UID")), _int(env.get("SLURM_JOB_GID")))
    except Exception as exc:  # pragma: no cover - last resort (logging itself failed)
        print(f"rankmap-prolog: job {safe_text(job_id)}: {safe_text(repr(exc))}",
              file=sys.stderr)
    return 0


def _sweep(base: str, who: str) -> None:
    """Remove a bounded part of what earlier removals left aside in ``base``; log it."""
    try:
        removed, notes = sweep_stale(base)
    except OSError as exc:
        log.warning("%s: cleaning %s: %s", who, safe_text(base), safe_text(exc, REASON_LIMIT))
        return
    if removed:
        log.info("%s: removed %d entries left aside in %s", who, removed, safe_text(base))
    for note in notes:
        log.warning("%s: %s", who, safe_text(note, REASON_LIMIT))


def epilog_main() -> int:
    """``rankmap-epilog``: remove this node's per-job files; always exits 0."""
    env = dict(os.environ)
    job_id = env.get("SLURM_JOB_ID", "")
    job = safe_text(job_id)
    try:
        try:
            cfg = load_config(env=env)
            setup_logging(cfg)
        except Exception as exc:
            setup_logging(None)
            log.error("epilog for job %s: configuration error, cleaning the default "
                      "directories: %s", job, safe_text(exc, REASON_LIMIT))
            cfg = defaults_config()
        if not valid_job_id(job_id):
            log.warning("epilog: job id %s is not a Slurm job id; nothing removed", job)
            return 0
        for base in (cfg.general.output_dir, cfg.prolog.fallback_dir):
            try:
                if remove_job_dir(base, job_id):
                    log.debug("job %s: removed %s", job, safe_text(job_dir_path(base, job_id)))
            except OSError as exc:
                log.warning("epilog for job %s: %s", job, safe_text(exc, REASON_LIMIT))
            _sweep(base, f"epilog for job {job}")
    except Exception as exc:
        try:
            log.error("epilog for job %s: %s", job, safe_text(repr(exc), REASON_LIMIT))
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
