"""``rankmap plan``: everything the prolog computes, from explicit inputs, offline."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mapper import CommGraph, MappingResult
from mapper.io.graph_file import GRAPH_SUFFIXES

from ..common.files import write_files
from ..common.hostlist import expand_counts, expand_hostlist
from ..common.job_conventions import GRAPH_MODE
from ..lifecycle.job_worker import compute_job
from ..machine.hwloc import parse_hwloc_xml
from ..machine.layout import Layout, build_layout
from ..modes.base import Job, ModeSettings
from ..profiles.store import resolve_profile
from ..site.config import Config, load_config
from ..site.request import profile_mode, request_for
from ..slurm.allocation import Allocation
from ..slurm.topology import NodeShape, SwitchTree, TopologyError, parse_node_shape
from ..slurm.topology_yaml import read_topology_source
from .args import (
    CliError,
    add_algorithm_arguments,
    positive_float,
    positive_int,
    terminal_progress,
)
from .profile_cli import store_dirs

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "example"


def add_job_arguments(p: argparse.ArgumentParser, profile_help: str | None = None) -> None:
    """The job's inputs as ``rankmap plan`` takes them (``rankmap simulate`` too)."""
    p.add_argument("--nodes", default="n[1-4]", help="host list (default n[1-4])")
    p.add_argument("--tasks-per-node", default=None,
                   help="tasks per node, e.g. 16 or 16(x3),8 (default: one per core)")
    p.add_argument("--cpus-per-task", type=positive_int, default=1)
    p.add_argument("--node-info", default="Sockets=2 CoresPerSocket=4",
                   help="node shape as in slurm.conf (default 'Sockets=2 CoresPerSocket=4')")
    p.add_argument("--topology-conf", default=str(EXAMPLE / "topology.conf"),
                   help="topology.conf (tree or block) or Slurm 25.05+ topology.yaml "
                        "with the switch tree (default: the bundled example with two leaf "
                        "switches under a spine); 'none' for no switches")
    p.add_argument("--hwloc-xml", metavar="FILE",
                   help="hwloc XML (lstopo --of xml) of the nodes: adds a cache level")
    p.add_argument("--profile", default="lammps-3d",
                   help=profile_help or "store name, generator spec (stencil3d, npb-cg, ...) "
                                        "or a matrix file (default: the bundled lammps-3d)")
    p.add_argument("--distribution", default=None, metavar="DIST",
                   help="the job's Slurm --distribution, which gives the default placement "
                        "rankmap must beat (default block:cyclic, Slurm's default)")
    p.add_argument("--time-limit", type=positive_float, default=None,
                   help="solver budget, seconds")
    p.add_argument("--store", action="append", metavar="DIR")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--oversubscribe", action="store_true",
                   help="map more tasks per node than its cores hold (as a job submitted "
                        "with --overcommit at a site with [solver] oversubscribe = allow)")


@dataclass(frozen=True)
class JobInputs:
    """What ``add_job_arguments`` describe, read and checked."""

    alloc: Allocation
    shape: NodeShape
    tree: SwitchTree
    layout: Layout
    graph: CommGraph
    #: wall seconds spent reading the profile (``profile``) and building the machine
    #: from the allocation, node shape and switch tree (``layout``)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class JobMachine:
    """The allocation, node shape, switch tree and layout ``add_job_arguments`` give."""

    alloc: Allocation
    shape: NodeShape
    tree: SwitchTree
    layout: Layout
    seconds: float  # wall seconds spent reading and building them


def profile_path(spec: str) -> str | None:
    """The file a ``--profile`` value names, or None for a store name or a generator
    spec (and ``mesh:NAME``, ``summa-fpm[...]``).

    A path is said as a path: ``file:PATH``, a path starting with ``./``, ``../``,
    ``/`` or ``~/``, or a name ending in a graph file's suffix (``.mtx``, ``.graph``,
    ``.metis``, ``.csv``, ``.npz``).  Anything else is a name, looked up in the stores
    and among the generators as the prolog does, never in the current directory (in an
    application's build directory, ``rowred`` is the program, not the profile).
    """
    s = spec.strip()
    if s.startswith("file:"):
        return s[len("file:"):]
    if profile_mode(s) != GRAPH_MODE:
        return None
    if s.startswith(("./", "../", "/", "~/")) or Path(s).suffix.lower() in GRAPH_SUFFIXES:
        return s
    return None


def job_profile(spec: str) -> str:
    """``--profile`` as a job's ``--comm-profile``: a path (:func:`profile_path`)
    becomes ``file:`` and its absolute path, the form the worker reads; anything else
    is unchanged.  The file is then read as the prolog reads one (regular, at most
    ``[profiles] max_file_bytes``, sizes checked against the task count before
    anything is allocated, errors naming file:line)."""
    path = profile_path(spec)
    if path is None:
        return spec.strip()
    if not path.strip():
        raise CliError(f"--profile {spec!r}: give the file's path after 'file:'")
    return "file:" + os.path.abspath(os.path.expanduser(path))


def read_topology_option(value: str) -> SwitchTree:
    """The switch tree of ``--topology-conf``: ``none``, a topology.conf (tree or
    block) or a Slurm 25.05+ topology.yaml (its ``cluster_default`` topology, or the
    first; the slurm.conf beside it is read as the prolog reads it), by
    :func:`slurm_plugin.slurm.topology_yaml.read_topology_source`; never ``scontrol``."""
    if value == "none":
        return SwitchTree()
    # a file named auto or scontrol is a file here: plan does not ask Slurm
    source = os.path.join(".", value) if value in ("auto", "scontrol") else value
    try:
        tree = read_topology_source(source, 0.0, {})
    except OSError as exc:
        raise TopologyError(f"--topology-conf {value}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TopologyError(f"--topology-conf {value}: not UTF-8 text (byte {exc.start})"
                            ) from None
    return tree if tree is not None else SwitchTree()


def job_machine(args: argparse.Namespace, cfg: Config) -> JobMachine:
    """Allocation, node shape, switch tree and layout from the arguments; files are
    read here (the CLI edge)."""
    clock = time.perf_counter()
    nodes = expand_hostlist(args.nodes)
    shape = parse_node_shape(args.node_info)
    if args.tasks_per_node is None:
        tasks = [shape.cores // args.cpus_per_task] * len(nodes)
    else:
        tasks = expand_counts(args.tasks_per_node)
        if len(tasks) == 1:
            tasks = tasks * len(nodes)
    if len(tasks) != len(nodes):
        raise CliError(f"--tasks-per-node gives {len(tasks)} counts for {len(nodes)} nodes")
    alloc = Allocation(job_id=None, nodes=tuple(nodes), tasks_per_node=tuple(tasks),
                       cpus_per_task=args.cpus_per_task)
    tree = read_topology_option(args.topology_conf)
    groups = None
    if args.hwloc_xml:
        xml = parse_hwloc_xml(Path(args.hwloc_xml).read_text(), args.hwloc_xml)
        groups = dict.fromkeys(nodes, xml)
    layout = build_layout(alloc, shape, tree, cfg.solver.level_distances, groups,
                          cfg.hwloc.cache_distance,
                          oversubscribe=(args.oversubscribe or
                                         cfg.solver.oversubscribe == "allow"))
    return JobMachine(alloc, shape, tree, layout, time.perf_counter() - clock)


def job_inputs(args: argparse.Namespace, cfg: Config) -> JobInputs:
    """Allocation, node shape, switch tree, layout and communication graph from the
    arguments (``rankmap simulate``); the profile is read as ``rankmap plan`` reads a
    mapping job's (:func:`job_profile`, :func:`resolve_profile` with the task count
    and ``[profiles] max_file_bytes``)."""
    machine = job_machine(args, cfg)
    clock = time.perf_counter()
    graph = resolve_profile(job_profile(args.profile), machine.layout.n, store_dirs(args),
                            allow_user_files=True,
                            max_bytes=cfg.profiles.max_file_bytes)
    timings = {"layout": machine.seconds, "profile": time.perf_counter() - clock}
    return JobInputs(machine.alloc, machine.shape, machine.tree, machine.layout, graph, timings)


def add_plan_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="compute and render a placement from explicit inputs",
                       description="Compute a placement the way the prolog does, from a "
                                   "node list, a node shape and a topology.conf or "
                                   "topology.yaml, and write the files the job would get "
                                   "and the report into --out.  --profile takes every "
                                   "form of --comm-profile (store name, generator spec, "
                                   "file:PATH, mesh:NAME[,...], summa-fpm[:FILE][,size=N]); "
                                   "a matrix file is given as a path (file:, ./, ../, / "
                                   "or a .mtx/.graph/.metis/.csv/.npz name).")
    add_job_arguments(p, profile_help="what --comm-profile takes: a store name, a generator "
                                      "spec (stencil3d, npb-cg, ...), mesh:NAME[,...], "
                                      "summa-fpm[:FILE][,size=N], or a matrix file given as "
                                      "a path (file:PATH, ./, ../, /, or ending in .mtx, "
                                      ".graph, .metis, .csv, .npz); a name is never read "
                                      "from the current directory (default: the bundled "
                                      "lammps-3d)")
    add_algorithm_arguments(p, "a preset or an algorithm such as topdown+n10, or summa "
                               "(the job's --rankmap; default: summa for a summa-fpm "
                               "profile, else the site's [solver] algorithm)")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary (decision, J, files, timings) on stdout "
                        "instead of the report")
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    """The prolog's computation (:func:`slurm_plugin.lifecycle.job_worker.compute_job`) on the
    machine the arguments describe, for the request the prolog would make
    (:func:`slurm_plugin.site.request.request_for`: ``--preset``/``--algorithm`` is the
    job's ``--rankmap``; ``auto`` or none: ``summa`` for a ``summa-fpm`` profile, else
    the site's ``[solver] algorithm``).  The invoking user reads their own files: a
    matrix file (``file:`` or a path) and ``summa-fpm:/PATH`` are read without the
    site's ``[profiles] allow_user_files`` gate, but under the same bounds as in a job.
    A refused request, and an input error the prolog would turn into a fallback report,
    are one error line here."""
    clock = time.perf_counter()
    cfg = load_config(args.config)
    machine = job_machine(args, cfg)
    layout = machine.layout
    request = request_for(job_profile(args.profile), args.preset or args.algorithm,
                          cfg.solver.algorithm,
                          args.time_limit or cfg.solver.time_limit)
    if request.refusal:
        raise CliError(request.refusal)
    job = Job(layout, machine.tree, ModeSettings.of(cfg), request.profile, request.algorithm,
              request.time_limit, stores=tuple(store_dirs(args)), allow_user_files=True,
              distribution=args.distribution, progress=terminal_progress())
    out = compute_job(job, request.mode, strict=True, launchers=cfg.launchers)
    plan = out.plan
    written_from = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = write_files(out_dir, out.files)
    timings = {"layout": machine.seconds, **out.timings,
               "write": time.perf_counter() - written_from}
    total = time.perf_counter() - clock
    # "other": configuration, argument handling, anything no phase names
    timings["other"] = max(0.0, total - sum(timings.values()))
    timings["total"] = total
    if args.json:
        # the solver's result: a graph job's (a mesh or SUMMA job names no algorithm)
        result = plan.result if isinstance(plan.result, MappingResult) else None
        print(json.dumps({
            "applied": out.status.applied, "kept_default": out.status.kept_default,
            "fallback_reason": plan.fallback_reason, "summary": plan.summary,
            "n": layout.n, "algorithm": result.algorithm if result else None,
            "objective": out.status.objective,
            "origin": result.origin if result else None,
            "solver_seconds": out.status.seconds,
            "files": {name: str(path) for name, path in written.items()},
            "timings": timings}))
        return 0
    sys.stdout.write(out.files["report"])
    print("\nwrote " + ", ".join(str(p) for p in written.values()))
    return 0
