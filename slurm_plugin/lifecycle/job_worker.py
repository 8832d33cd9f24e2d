"""The per-job computation, run by the prolog in a child process as the job's user.

Reads the allocation and topology from Slurm, loads the profile, computes the launcher
files and the report, and sends them with its status to the prolog on stdout
(:mod:`slurm_plugin.lifecycle.worker_protocol`): the job directory is root's, and the prolog
writes them there.  Every failure becomes a fallback status; the exit status is 0
unless even that could not be sent.  The prolog enforces the time budget from outside
by ending this process and everything it started.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import BinaryIO

from mapper.errors import RankmapError

from ..common.hostlist import expand_hostlist
from ..common.job_conventions import SUMMA_MODE
from ..machine.distribution import parse_distribution
from ..machine.hwloc import CoreGroups, parse_hwloc_xml
from ..machine.layout import Layout, build_layout
from ..machine.network_source import load_network
from ..machine.speeds import config_node_speeds
from ..modes.plan import make_plan
from ..modes.reorder_job import reorder_files
from ..profiles.store import ProfileError, ProfileStore, bundled_store, resolve_profile
from ..site.config import Config, load_config
from ..site.request import is_mesh_profile
from ..slurm.backends import (
    read_allocation,
    read_node_features,
    read_node_shapes,
    read_topology,
    resolve_backend,
)
from ..slurm.slurm_commands import with_bin_dir
from ..slurm.topology import SwitchTree
from .limits import apply_worker_limits
from .worker_protocol import WorkerStatus, write_stream

#: input and environment problems (a fallback report with the reason); anything else is a
#: bug: still a fallback, with the traceback in the log
USER_FACING = (RankmapError, OSError)


def profile_units(spec: str, stores: Sequence[str], max_bytes: int | None) -> str:
    """The unit of a store profile's volumes (its TOML's ``units``); ``bytes`` for
    generators and ``file:`` profiles, which do not say.  Called after the profile
    resolved, so a lookup failure here means the name was a generator's."""
    if spec.startswith("file:") or ":" in spec:
        return "bytes"
    try:
        return ProfileStore(stores, max_bytes).find(spec.strip()).units
    except ProfileError:
        return "bytes"


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


def read_core_groups(files: dict[str, str], nodes: tuple[str, ...]) -> dict[str, CoreGroups]:
    """hwloc cache groups of the job's nodes from the configured XML files."""
    parsed: dict[str, CoreGroups] = {}
    out: dict[str, CoreGroups] = {}
    for hosts, path in files.items():
        members = set(expand_hostlist(hosts)) & set(nodes)
        if not members:
            continue
        if path not in parsed:
            with open(path, encoding="utf-8") as fh:
                parsed[path] = parse_hwloc_xml(fh.read(), path)
        for node in members:
            out.setdefault(node, parsed[path])
    return out


@dataclass
class WorkerOutput:
    """The job's files (FILE_NAMES key → text, in the order they are to be written:
    launcher files first, the report last, so a report saying "applied" implies the
    files) and the computation's status."""

    status: WorkerStatus
    files: dict[str, str] = field(default_factory=dict)
    #: for callers in this process (``rankmap plan``), not sent to the prolog: the
    #: plan computed (JobPlan, SummaPlan or MeshPlan) and wall seconds by phase
    #: (``profile``: reading the profile, mesh or speeds; a mapping plan's own phases)
    plan: object | None = None
    phases: dict[str, float] = field(default_factory=dict)


def compute(env: dict[str, str]) -> WorkerOutput:
    with log_notes() as notes:
        out = _compute(env)
    out.status = replace(out.status, notes=(*notes, *out.status.notes))
    return out


def _compute(env: dict[str, str]) -> WorkerOutput:
    cfg = load_config(env=env)
    job_id = env.get("SLURM_JOB_ID")
    timeout = cfg.get("slurm", "command_timeout")
    env = with_bin_dir(env, cfg.get("slurm", "bin_dir"))
    backend = resolve_backend(cfg.get("slurm", "backend"), env)
    alloc = read_allocation(job_id, env, backend, timeout)
    shapes = read_node_shapes(alloc.nodes, env, backend, timeout)
    tree = read_topology(cfg.get("slurm", "topology"), timeout, env, backend)
    layout = build_layout(alloc, shapes, tree, cfg.get("solver", "level_distances"),
                          read_core_groups(cfg.get("hwloc", "files"), alloc.nodes),
                          cfg.get("hwloc", "cache_distance"),
                          oversubscribe=cfg.get("solver", "oversubscribe") == "allow")
    out = compute_job(layout, tree, cfg, env["RANKMAP_PROFILE"], env["RANKMAP_ALGORITHM"],
                      lambda: float(env["RANKMAP_TIME_LIMIT"]),
                      stores=cfg.get("profiles", "stores") + [str(bundled_store())],
                      allow_user_files=cfg.get("profiles", "allow_user_files"),
                      distribution=alloc.distribution, job_id=job_id,
                      refusal=env.get("RANKMAP_REFUSAL") or None,
                      node_features=lambda nodes: read_node_features(nodes, env, timeout))
    out.status = replace(out.status, notes=(f"Slurm backend: {backend}", *out.status.notes))
    return out


def compute_job(layout: Layout, tree: SwitchTree | None, cfg: Config, profile: str,
                algorithm: str, time_limit: float | Callable[[], float], *,
                stores: Sequence[str], allow_user_files: bool,
                distribution: str | None = None, job_id: str | None = None,
                refusal: str | None = None,
                node_features: Callable[[Sequence[str]], Mapping[str, Sequence[str]]]
                | None = None,
                progress: Callable[[str], None] | None = None,
                strict: bool = False) -> WorkerOutput:
    """The job's files and status from inputs already read: the prolog's worker calls it
    after reading Slurm, ``rankmap plan`` after building the layout from its options,
    so both read the profile the same way and write the same files.

    ``profile`` is the job's ``--comm-profile``: ``mesh:NAME[,...]`` (mesh mode),
    ``summa-fpm[...]`` with ``algorithm`` ``summa`` (SUMMA mode), else a store name, a
    generator spec or ``file:/PATH`` (read under ``[profiles] max_file_bytes``, checked
    against the job's task count before anything of the declared size is allocated,
    errors naming file:line; :func:`resolve_profile`).  ``allow_user_files`` lets
    ``file:`` and ``summa-fpm:/PATH`` be read (the worker: ``[profiles]
    allow_user_files``).  ``time_limit``: seconds, or a function giving them when the
    solver needs them.  ``distribution``: the job's ``--distribution`` as Slurm spells
    it (None: Slurm's default, assumed).  ``refusal``: why the request may not be
    mapped (the prolog's); the job falls back with it.  ``node_features(nodes)``: the
    nodes' Slurm features, asked only for ``[speeds] features`` in mesh mode.

    An input error (the profile, a mesh, a speeds file, ``[network]``, ``[speeds]``)
    becomes a fallback report with the reason, unless ``strict`` (``rankmap plan``),
    when it is raised.  The result carries the plan and the input phase times
    (``profile``, and the mapping plan's) for callers in this process.
    """
    if is_mesh_profile(profile):
        return _compute_mesh(cfg, layout, distribution, tree, stores, profile, algorithm,
                             time_limit, job_id, refusal, node_features, strict)
    if algorithm == SUMMA_MODE:
        return _compute_summa(cfg, layout, distribution, stores, profile, job_id, refusal,
                              allow_user_files, strict)
    clock = time.perf_counter()
    graph, reason, units = None, refusal, "bytes"
    if reason is None:
        try:
            graph = resolve_profile(profile, layout.n, stores, allow_user_files,
                                    cfg.get("profiles", "max_file_bytes"))
            units = profile_units(profile, stores, cfg.get("profiles", "max_file_bytes"))
        except USER_FACING as exc:
            if strict:
                raise
            reason = str(exc)
    read = time.perf_counter() - clock
    network = None
    if reason is None:
        try:
            network = load_network(cfg)
        except USER_FACING as exc:
            if strict:
                raise
            reason = str(exc)
    plan = make_plan(layout, graph, algorithm=algorithm,
                     time_limit=_seconds(time_limit), seed=cfg.get("solver", "seed"),
                     files=cfg.get("render", "files"), job_id=job_id, profile=profile,
                     fallback_reason=reason,
                     templates_dir=cfg.get("render", "templates_dir") or None,
                     progress=progress,
                     distribution=parse_distribution(distribution),
                     distribution_assumed=distribution is None, units=units,
                     network=network)
    files = dict(plan.files)
    if plan.applied and plan.result is not None:  # srun, mpirun without the rankfile
        files.update(reorder_files(layout, plan.result.mapping, graph))
    files.update({"report": plan.report_text, "record": plan.report_json})
    result = status(plan.applied, plan.fallback_reason or
                    (plan.summary if plan.kept_default else None), layout,
                    plan.result.objective if plan.result else None,
                    plan.result.seconds if plan.result else None)
    return WorkerOutput(replace(result, notes=tuple(layout.notes),
                                kept_default=plan.kept_default), files, plan,
                        {"profile": read, **plan.phases})


def _seconds(time_limit: float | Callable[[], float]) -> float:
    return time_limit() if callable(time_limit) else float(time_limit)


def _compute_summa(cfg: Config, layout: Layout, distribution: str | None,
                   stores: Sequence[str], profile: str, job_id: str | None,
                   reason: str | None, allow_user_files: bool,
                   strict: bool) -> WorkerOutput:
    """``--rankmap=summa``: the arrangement file, the default placement written out and
    the report (slurm_plugin.modes.summa_job); a failure is a report without files."""
    # imported for this mode only: the prolog path of a plain mapping job stays short
    from ..modes.summa_job import load_summa_input, plan_summa

    clock, data = time.perf_counter(), None
    if reason is None:
        try:
            data = load_summa_input(profile, layout.n, stores, allow_user_files,
                                    cfg.get("profiles", "max_file_bytes"))
        except USER_FACING as exc:
            if strict:
                raise
            reason = str(exc)
    read = time.perf_counter() - clock
    plan = plan_summa(layout, data, job_id=job_id, profile=profile, fallback_reason=reason,
                      distribution=parse_distribution(distribution),
                      distribution_assumed=distribution is None,
                      files=cfg.get("render", "files"),
                      templates_dir=cfg.get("render", "templates_dir") or None,
                      level=summa_setting(cfg, "level", "auto"),
                      weighted=summa_setting(cfg, "weighted", False))
    arranged = plan.arrangement
    return _mode_output(plan, layout, layout.notes,
                        arranged.after.norm if arranged else None, None, read)


def _compute_mesh(cfg: Config, layout: Layout, distribution: str | None,
                  tree: SwitchTree | None, stores: Sequence[str], profile: str,
                  algorithm: str, time_limit: float | Callable[[], float],
                  job_id: str | None, reason: str | None,
                  node_features: Callable[[Sequence[str]], Mapping[str, Sequence[str]]]
                  | None, strict: bool) -> WorkerOutput:
    """``--comm-profile=mesh:NAME``: the partition file, the launcher files for its
    rank placement and the report (slurm_plugin.modes.mesh_job); a failure is a report
    without files."""
    # imported for this mode only: the mesh code pulls in scipy.sparse.csgraph and
    # scipy.linalg (0.2-0.5 s), which a plain mapping job's prolog never needs
    from ..modes.mesh_job import job_architecture, load_mesh_input, plan_mesh

    clock, data, arch = time.perf_counter(), None, None
    by_config = bool(cfg.get("speeds", "nodes") or cfg.get("speeds", "features"))
    if reason is None:
        try:
            data = load_mesh_input(profile, stores, cfg.get("profiles", "max_file_bytes"))
            nodes = layout.hosts()
            features = (node_features(nodes) if node_features and cfg.get("speeds", "features")
                        else None)
            arch = job_architecture(layout, config_node_speeds(cfg, nodes, features), tree)
        except USER_FACING as exc:
            if strict:
                raise
            reason = str(exc)
    read = time.perf_counter() - clock
    plan = plan_mesh(layout, data, arch, map_algorithm=algorithm,
                     time_limit=_seconds(time_limit), seed=cfg.get("solver", "seed"),
                     job_id=job_id, profile=profile, fallback_reason=reason,
                     distribution=parse_distribution(distribution),
                     distribution_assumed=distribution is None,
                     files=cfg.get("render", "files"),
                     templates_dir=cfg.get("render", "templates_dir") or None,
                     speeds_source=(f"[speeds] of {cfg.path}" if by_config
                                    else "equal speeds (no [speeds])"))
    chosen = plan.chosen
    return _mode_output(plan, layout, plan.notes,
                        chosen.metrics.max_el_time if chosen else None,
                        plan.decomposition.seconds.get("total") if plan.decomposition
                        else None, read)


def _mode_output(plan, layout: Layout, notes: Sequence[str], objective: float | None,
                 seconds: float | None, read: float) -> WorkerOutput:
    """The SUMMA and mesh modes' output: their files (launcher files, arrangement or
    partition) first, the report last as for other jobs, and the status."""
    result = status(plan.applied, plan.fallback_reason, layout, objective, seconds)
    notes = (*notes, *([plan.summary] if plan.applied else []))
    return WorkerOutput(replace(result, notes=notes),
                        {**plan.files, "report": plan.report_text, "record": plan.report_json},
                        plan, {"profile": read})


def summa_setting(cfg: Config, key: str, default: object) -> object:
    """``[summa] KEY`` once the site configuration has that section, else ``default``
    (the defaults documented in slurm_plugin.modes.summa_job)."""
    try:
        return cfg.get("summa", key)
    except KeyError:
        return default


def status(applied: bool, reason: str | None, layout: Layout | None = None,
           objective: float | None = None, seconds: float | None = None) -> WorkerStatus:
    return WorkerStatus(applied=applied, reason=reason, n=layout.n if layout else None,
                        objective=objective, seconds=seconds)


def run(stream: BinaryIO, env: dict[str, str]) -> None:
    """The worker's whole life: its limits first, then the computation, whose files and
    status (a fallback status for any failure) go to ``stream``."""
    apply_worker_limits(env)  # RANKMAP_WORKER_MEMORY / _CPU_SECONDS, set by the prolog
    try:
        out = compute(env)
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
    run(stream, dict(os.environ))
    stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
