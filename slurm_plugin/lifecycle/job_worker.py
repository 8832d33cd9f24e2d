"""The per-job computation, run by the prolog in a child process as the job's user.

Reads its request on stdin (:class:`~slurm_plugin.lifecycle.worker_protocol.WorkerRequest`:
profile, mode, algorithm, budget, limits), sets its limits, reads the allocation and
topology from Slurm, runs the job's mode (:func:`compute_job`: the mode of
:mod:`slurm_plugin.modes.registry` loads its input or refuses, plans and renders), and sends
the files and the report with its status to the prolog on stdout
(:mod:`slurm_plugin.lifecycle.worker_protocol`): the job directory is root's, and the prolog
writes them there.  Every failure, a malformed request included, becomes a fallback
status; the exit status is 0 unless even that could not be sent.  The prolog enforces
the time budget from outside by ending this process and everything it started.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import BinaryIO, TypeVar

from mapper.errors import RankmapError

from ..common.hostlist import per_node
from ..common.launcher_support import (
    default_bind_library,
    hydra_srun_path,
    launcher_sentences,
    planned_offer,
    prterun_wrapper_path,
)
from ..common.user_paths import UserPathError
from ..machine.gpus import Gpu, gpu_bind_mask, job_gpus
from ..machine.hwloc import CoreGroups, HwlocError, parse_hwloc_gpus, parse_hwloc_xml
from ..machine.layout import build_layout
from ..modes.base import Job, JobPlan, ModeSettings
from ..modes.registry import job_mode
from ..profiles.store import bundled_store
from ..site.config import Config, LaunchersSettings, load_config
from ..slurm.allocation import Allocation
from ..slurm.backends import (
    read_allocation,
    read_node_features,
    read_node_shapes,
    read_topology,
    resolve_backend,
)
from ..slurm.gres import GresConf, parse_gres_conf
from ..slurm.slurm_commands import with_bin_dir
from .limits import apply_worker_limits
from .recording_setup import user_store
from .worker_protocol import (
    ProtocolError,
    WorkerRequest,
    WorkerStatus,
    read_request,
    write_stream,
)

T = TypeVar("T")

#: input and environment problems (a fallback report with the reason); anything else is a
#: bug: still a fallback, with the traceback in the log
USER_FACING = (RankmapError, OSError)


@contextmanager
def log_notes(level: int = logging.INFO) -> Iterator[list[str]]:
    """Messages of the ``rankmap.*`` loggers while the block runs (the pyslurm
    backend's fallbacks, the topology chosen): the worker's stderr is not kept, so they
    travel to the prolog's log as status notes."""
    notes: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notes.append(record.getMessage())

    logger = logging.getLogger("rankmap")
    handler, old_level = Collect(level), logger.level
    logger.addHandler(handler)
    logger.setLevel(min(level, old_level or level))
    try:
        yield notes
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def parsed_per_node(files: Mapping[str, str], nodes: Iterable[str],
                    parse: Callable[[str, str], T]) -> dict[str, T]:
    """``parse(text, path)`` of the file each of ``nodes`` has in ``files`` (host list →
    path, a site's per-node-type setting), each file read and parsed once."""
    paths = per_node(files, nodes)
    parsed: dict[str, T] = {}
    for path in dict.fromkeys(paths.values()):
        with open(path, encoding="utf-8") as fh:
            parsed[path] = parse(fh.read(), path)
    return {node: parsed[path] for node, path in paths.items()}


def read_core_groups(files: dict[str, str], nodes: tuple[str, ...]) -> dict[str, CoreGroups]:
    """hwloc cache groups of the job's nodes from the configured XML files."""
    return parsed_per_node(files, nodes, parse_hwloc_xml)


def read_gpus(cfg: Config, alloc: Allocation, env: dict[str, str]
              ) -> tuple[dict[str, tuple[Gpu, ...]], tuple[str, ...], int]:
    """The job's GPUs per node with their cores (gres.conf, else the [hwloc] XML), notes
    and the srun GPU mask (:func:`~slurm_plugin.machine.gpus.gpu_bind_mask`); nothing for
    a job without GPUs per task or when [gpus] is off.  A gres.conf
    or XML that cannot be read is a note, not a failure: the GPUs keep index order."""
    if not (cfg.gpus.enabled and alloc.gpus_per_task):
        return {}, (), 0
    if not alloc.gpus:
        return {}, ("GPUs: the Slurm backend gave no GPU indexes per node (the CLI "
                    "backend reads them from scontrol -d): ranks keep Slurm's GPUs",), 0
    notes: list[str] = []
    path = cfg.gpus.gres_conf or os.path.join(
        os.path.dirname(env.get("SLURM_CONF") or "/etc/slurm/slurm.conf"), "gres.conf")
    gres: GresConf | None = None
    try:
        with open(path, encoding="utf-8") as fh:
            gres = parse_gres_conf(fh.read(), path)
        notes += gres.notes
    except (OSError, RankmapError) as exc:
        notes.append(f"GPU cores: {exc}")
    xml: dict[str, tuple] = {}
    try:
        xml = parsed_per_node(cfg.hwloc.files, alloc.gpus, parse_hwloc_gpus)
    except (OSError, HwlocError) as exc:
        notes.append(f"GPU cores: {exc}")
    gpus, more = job_gpus(alloc, gres, xml)
    if not cfg.gpus.nics:
        gpus = {node: tuple(g._replace(nic="") for g in node_gpus)
                for node, node_gpus in gpus.items()}
    mask = gpu_bind_mask(alloc, gres)
    if not mask:
        notes.append("GPUs: some of the job's nodes have fewer GPUs than its highest GPU "
                     "index: srun steps keep Slurm's GPU per task")
    return gpus, (*notes, *more), mask


@dataclass
class WorkerOutput:
    """The job's files (FILE_NAMES key → text, in the order they are to be written:
    launcher files first, the report last, so a report saying "applied" implies the
    files) and the computation's status."""

    status: WorkerStatus
    files: dict[str, str] = field(default_factory=dict)
    #: for callers in this process (``rankmap plan``), not sent to the prolog: the
    #: mode's plan and wall seconds by phase (``profile``: reading the mode's inputs —
    #: the profile, mesh or speeds and the site's [network] or [speeds] —; a mapping
    #: plan's own timings)
    plan: JobPlan | None = None
    timings: dict[str, float] = field(default_factory=dict)


def compute(request: WorkerRequest, env: dict[str, str]) -> WorkerOutput:
    with log_notes() as notes:
        out = _compute(request, env)
    out.status = replace(out.status, notes=(*notes, *out.status.notes))
    return out


def _compute(request: WorkerRequest, env: dict[str, str]) -> WorkerOutput:
    """The request on the job Slurm describes: ``env`` is the job's (its ``SLURM_*``
    variables, ``RANKMAP_CONFIG``), which the configuration and the Slurm readers use."""
    cfg = load_config(env=env)
    timeout = cfg.slurm.command_timeout
    env = with_bin_dir(env, cfg.slurm.bin_dir)
    backend = resolve_backend(cfg.slurm.backend, env)
    alloc = read_allocation(request.job_id, env, backend, timeout)
    shapes = read_node_shapes(alloc.nodes, env, backend, timeout)
    tree = read_topology(cfg.slurm.topology, timeout, env, backend)
    gpus, gpu_notes, gpu_mask = read_gpus(cfg, alloc, env)
    layout = build_layout(alloc, shapes, tree, cfg.solver.level_distances,
                          read_core_groups(cfg.hwloc.files, alloc.nodes),
                          cfg.hwloc.cache_distance,
                          oversubscribe=cfg.solver.oversubscribe == "allow", gpus=gpus,
                          gpu_domains=per_node(cfg.gpus.domains, alloc.nodes))
    if gpus or gpu_notes:
        layout = replace(layout, notes=(*layout.notes, *gpu_notes), gpu_mask=gpu_mask)
    job = Job(layout, tree, ModeSettings.of(cfg), request.profile, request.algorithm,
              request.time_limit,
              stores=job_stores(cfg, os.getuid()),
              allow_user_files=cfg.profiles.allow_user_files,
              distribution=alloc.distribution, job_id=request.job_id,
              node_features=lambda nodes: read_node_features(nodes, env, timeout))
    out = compute_job(job, request.mode, request.refusal, launchers=cfg.launchers)
    out.status = replace(out.status, notes=(f"Slurm backend: {backend}", *out.status.notes))
    return out


def job_stores(cfg: Config, uid: int) -> tuple[str, ...]:
    """The stores a job of user ``uid`` reads, in order: the user's own
    (``[profiles] user_store``, read as the user: the worker runs as the job's user;
    left out when it cannot be made for this user), the site's, the bundled examples."""
    try:
        own = user_store(cfg, uid)
    except UserPathError:
        own = None
    return (*([str(own)] if own else []), *cfg.profiles.stores,
            str(bundled_store()))


def compute_job(job: Job, mode: str, refusal: str | None = None, *,
                strict: bool = False, launchers: LaunchersSettings | None = None
                ) -> WorkerOutput:
    """The job's files and status from inputs already read: the prolog's worker calls it
    after reading Slurm, ``rankmap plan`` after building the layout from its options,
    so both read the profile the same way and write the same files.

    One path for every mode (``mode``: the request's,
    :data:`~slurm_plugin.common.job_conventions.JOB_MODES`):
    the mode (:func:`slurm_plugin.modes.registry.job_mode`) loads its input and what the
    site adds to the machine, unless ``refusal`` (why the request may not be mapped:
    the prolog's) is set; an input error (the profile, a mesh, a speeds file,
    ``[network]``, ``[speeds]``) is the reason to refuse, unless ``strict`` (``rankmap
    plan``), when it is raised.  The mode then plans and renders: its files, the report
    last, and the status.  The result carries the plan and the timings (``profile``:
    loading, and the plan's) for callers in this process.
    """
    handler = job_mode(mode)
    clock = time.perf_counter()
    data = machine = None
    reason = refusal
    if reason is None:
        try:
            data = handler.load(job)
            machine = handler.machine(job)
        except USER_FACING as exc:
            if strict:
                raise
            reason = str(exc)
    read = time.perf_counter() - clock
    plan = handler.plan(job, data, machine, reason)
    if plan.applied:
        plan = with_launchers(plan, launchers or LaunchersSettings(),
                              job.settings.render.export_slurm_hostfile)
    result = WorkerStatus(applied=plan.applied,
                          reason=plan.fallback_reason or (plan.summary if plan.kept_default
                                                          else None),
                          n=job.layout.n, objective=plan.objective, seconds=plan.seconds,
                          kept_default=plan.kept_default, notes=plan.status_notes)
    return WorkerOutput(result, {**plan.files, "report": plan.report_text,
                                 "report_json": plan.report_json},
                        plan, {"profile": read, **plan.timings})


def with_launchers(plan: JobPlan, launchers: LaunchersSettings,
                   export_slurm_hostfile: bool) -> JobPlan:
    """The plan with its report saying what each launcher family the site supports gets
    (``Launchers:`` in report.txt, ``launchers`` in report.json), by the same rule as
    the batch step's line (:mod:`slurm_plugin.common.launcher_support`)."""
    supported = launchers.supported
    if not supported:
        return plan
    offer = planned_offer(supported, plan.files,
                          launchers.bind_library or default_bind_library(),
                          prterun_wrapper_path(), hydra_srun_path(), export_slurm_hostfile)
    sentences = launcher_sentences(offer)
    text = plan.report_text.rstrip("\n") + "\n\nLaunchers:\n" + "".join(
        f"  {line}\n" for line in sentences)
    return replace(plan, report_text=text,
                   report_record={**plan.report_record, "launchers": sentences})


def status(applied: bool, reason: str | None) -> WorkerStatus:
    return WorkerStatus(applied=applied, reason=reason)


def run(requests: BinaryIO, stream: BinaryIO, env: dict[str, str]) -> None:
    """The worker's whole life: its request from ``requests`` (a malformed one is a
    fallback status naming the field), its limits, then the computation, whose files and
    status (a fallback status for any failure) go to ``stream``."""
    try:
        request = read_request(requests)
    except ProtocolError as exc:
        write_stream(stream, {}, status(False, str(exc)))
        return
    apply_worker_limits(request.memory_bytes, request.cpu_seconds)
    try:
        out = compute(request, env)
    except USER_FACING as exc:
        out = WorkerOutput(status(False, f"{type(exc).__name__}: {exc}"))
    except Exception as exc:  # anything else: still a fallback, with the traceback logged
        out = WorkerOutput(replace(status(False, f"internal error: {type(exc).__name__}: {exc}"),
                                   traceback=traceback.format_exc(limit=8)))
    write_stream(stream, out.files, out.status)


def main() -> int:
    # the stream goes to the stdout the prolog reads; anything a library prints (numpy
    # warnings, a stray print) goes to stderr instead of breaking it
    stream = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    run(sys.stdin.buffer, stream, dict(os.environ))
    stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
